"""Likelihoods: how a network's output explains the labels.

A likelihood has
  * ``latent_sites()`` -> {site name: (shape, prior distribution)} for its own parameters (e.g. a learned noise),
  * ``sample(output, y, params, scale)``: registers the observed site ``"y"`` inside a NumPyro model,
  * ``log_prob(output, y, params)`` -> (N,) pointwise log-likelihood,
  * ``predictive(output, params)`` -> class probabilities (N, C) or the predictive mean (N, ...).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers

from base.errors import InputError
from models.rank1 import rank1_likelihood


class Categorical:
    """y ~ Categorical(softmax(output)); output (N, C) logits, y int (N,)."""

    classification = True
    spec = {"kind": "categorical"}

    def latent_sites(self):
        return {}

    def distribution(self, output, params):
        return dist.Categorical(logits=output)

    def sample(self, output, y, params, scale=None):
        with numpyro.plate("data", output.shape[0]), handlers.scale(scale=1.0 if scale is None else scale):
            return numpyro.sample("y", self.distribution(output, params), obs=y)

    def log_prob(self, output, y, params):
        return jnp.take_along_axis(log_softmax(output), y[:, None].astype(jnp.int32), -1)[:, 0]

    def predictive(self, output, params):
        return jax.nn.softmax(output, -1)

    def log_predictive(self, output, params):
        """Log class probabilities (N, C) by `log_softmax`: exact where softmax underflows to 0, and to float32's
        relative precision near 0 for a confident class."""
        return log_softmax(output)


def log_softmax(logits):
    """log softmax over the last axis, (..., C) -> (..., C), accurate at both ends: z_c - z_max - log1p(sum of
    exp(z_k - z_max) over the classes k other than the (first) arg-max). The usual z - logsumexp(z) rounds the
    log-probability of a confident class, -sum_k exp(z_k - z_max) (e.g. -2e-9), to exactly 0 in float32, so
    every draw of a well-classified point gets log-likelihood 0 and PSIS-LOO (whose Pareto fit needs the
    draws' ratios to differ) returns NaN."""
    shifted = logits - jax.lax.stop_gradient(jnp.max(logits, -1, keepdims=True))
    top = jax.nn.one_hot(jnp.argmax(logits, -1), logits.shape[-1], dtype=bool)
    others = jnp.sum(jnp.where(top, 0.0, jnp.exp(shifted)), -1, keepdims=True)
    return shifted - jnp.log1p(others)


class Normal:
    """y ~ Normal(output, noise); output (N, D) or (N, 1) for y of shape (N,).

    ``noise=None`` learns the noise as the latent site ``"likelihood/noise"`` with a HalfNormal(noise_prior_scale) prior.
    """

    classification = False

    def __init__(self, noise: float | None = 0.1, noise_prior_scale: float = 1.0):
        if noise is not None and not noise > 0:
            raise InputError.worded("noise", f"noise: expected a positive number or None (learned), got {noise!r}")
        self.noise = noise
        self.noise_prior_scale = noise_prior_scale
        self.spec = {"kind": "normal", "noise": noise, "noise_prior_scale": noise_prior_scale}

    def latent_sites(self):
        if self.noise is not None:
            return {}
        return {"likelihood/noise": ((), dist.HalfNormal(self.noise_prior_scale))}

    def _sigma(self, params):
        return self.noise if self.noise is not None else params["likelihood/noise"]

    @staticmethod
    def _mean(output, y_ndim):
        return output[..., 0] if (y_ndim == 1 and output.shape[-1] == 1) else output

    def distribution(self, output, params, y_ndim=1):
        return dist.Normal(self._mean(output, y_ndim), self._sigma(params))

    def sample(self, output, y, params, scale=None):
        y_ndim = 1 if y is None else y.ndim
        d = self.distribution(output, params, y_ndim)
        d = d if d.batch_shape[1:] == () else d.to_event(len(d.batch_shape) - 1)
        with numpyro.plate("data", output.shape[0]), handlers.scale(scale=1.0 if scale is None else scale):
            return numpyro.sample("y", d, obs=y)

    def log_prob(self, output, y, params):
        lp = self.distribution(output, params, y.ndim).log_prob(y)
        return lp.reshape(lp.shape[0], -1).sum(-1)

    def predictive(self, output, params):
        return self._mean(output, 1)


def categorical() -> Categorical:
    """Classification likelihood over logits."""
    return Categorical()


def normal(noise: float | None = 0.1, noise_prior_scale: float = 1.0) -> Normal:
    """Regression likelihood with fixed (`noise`) or learned (`noise=None`) observation noise."""
    return Normal(noise, noise_prior_scale)


def from_spec(spec):
    """Rebuild a likelihood from its ``.spec`` dict."""
    spec = dict(spec)
    kind = spec.pop("kind")
    if kind == "categorical":
        return categorical()
    if kind == "normal":
        return normal(**spec)
    if kind == "rank1":
        return rank1_likelihood(from_spec(spec["base"]), spec["num_components"], spec["objective"])
    raise InputError.worded("likelihood",
                            f"likelihood: unknown kind {kind!r}; expected 'categorical', 'normal' or 'rank1'")
