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
from numpyro.distributions.transforms import PowerTransform
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


NOISE_PRIORS = ("half_normal", "inverse_gamma")
"""The priors of a learned noise sd (`noise_prior`)."""


def noise_prior(kind: str, scale: float):
    """The prior of a learned noise sd sigma (a distribution on (0, inf)).

    "half_normal": sigma ~ HalfNormal(scale); its density stays finite at sigma = 0.
    "inverse_gamma": sigma^2 ~ InverseGamma(1, scale), i.e. the precision 1 / sigma^2 ~ Exponential(rate=scale)
      (the Gamma prior on the precision of PBP, Hernandez-Lobato & Adams 2015, with shape 1); density
      p(sigma) = 2 scale sigma^-3 exp(-scale / sigma^2), which vanishes faster than any power of sigma at 0, so
      a network with more weights than data points cannot drive sigma to 0 by interpolating its training rows
      (the posterior's funnel between sigma and the weights is cut off: docs/uci.md). With N residuals of sum of
      squares R, the conditional posterior of sigma^2 is InverseGamma(1 + N / 2, scale + R / 2).
    """
    if kind == "half_normal":
        return dist.HalfNormal(scale)
    if kind == "inverse_gamma":
        return dist.TransformedDistribution(dist.Exponential(scale), PowerTransform(-0.5))
    raise InputError("noise_prior", kind, f"one of {NOISE_PRIORS}")


class Normal:
    """y ~ Normal(output, noise); output (N, D) or (N, 1) for y of shape (N,).

    ``noise=None`` learns the noise as the latent site ``"likelihood/noise"`` with the prior `noise_prior`
    (`noise_prior` (kind, noise_prior_scale): HalfNormal(noise_prior_scale) by default).
    """

    classification = False

    def __init__(self, noise: float | None = 0.1, noise_prior_scale: float = 1.0,
                 noise_prior: str = "half_normal"):
        if noise is not None and not noise > 0:
            raise InputError.worded("noise", f"noise: expected a positive number or None (learned), got {noise!r}")
        if noise_prior not in NOISE_PRIORS:
            raise InputError("noise_prior", noise_prior, f"one of {NOISE_PRIORS}")
        try:
            positive = float(noise_prior_scale) > 0
        except (TypeError, ValueError):
            positive = False
        if not positive:
            raise InputError("noise_prior_scale", noise_prior_scale, "a positive number")
        self.noise = noise
        self.noise_prior_scale = noise_prior_scale
        self.noise_prior = noise_prior
        self.spec = {"kind": "normal", "noise": noise, "noise_prior_scale": noise_prior_scale}
        if noise_prior != "half_normal":  # the default stays out: specs saved before the option compare equal
            self.spec["noise_prior"] = noise_prior

    def latent_sites(self):
        if self.noise is not None:
            return {}
        return {"likelihood/noise": ((), noise_prior(self.noise_prior, self.noise_prior_scale))}

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


def normal(noise: float | None = 0.1, noise_prior_scale: float = 1.0, noise_prior: str = "half_normal") -> Normal:
    """Regression likelihood with fixed (`noise`) or learned (`noise=None`) observation noise (its prior:
    `noise_prior`)."""
    return Normal(noise, noise_prior_scale, noise_prior)


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
