"""The log-uniform prior of variance networks and its KL divergences.

Variance networks (Neklyudov et al., 2018, "Variance Networks") pair a fully factorised
log-uniform prior p(w) ∝ 1/|w| (eq. 4) with Gaussian posteriors q(w) = N(mu, alpha mu²) (eq. 5, with
alpha per layer, per neuron or per weight, eq. 17-19), the additive form N(mu, sigma²) (eq. 20), or
the zero-mean form N(0, sigma²) (eq. 12).

Constants. The prior is improper, so every KL here is taken against the unnormalised density
1/|w| (``LogUniform.log_prob(w) = -log|w|``). With that convention

    KL(N(mu, alpha mu²) ‖ 1/|w|) = -½ log(2πe) - ½ log alpha + E_eps log|1 + sqrt(alpha) eps|,

which is eq. 9 plus the constant -½ log(2πe). As alpha -> inf it tends to the zero-mean constant of
appendix C, -½ log(2πe) + E log|eps| = -½ log(2πe) - ½(γ + log 2) (``ZERO_MEAN_KL``). Eq. 10
(Molchanov et al., 2017) is normalised to tend to 0 as alpha -> inf, so
``kl_normal_log_uniform = kl_log_uniform_approx + ZERO_MEAN_KL`` agrees with the exact value.

Reading of the OCR'd eq. 10: the paper prints ``KL ≈ k1 σ(k2 + k3 log α) - ½ log(1 + 1/α)``, which is
Molchanov et al.'s expression for the *negative* KL (without its constant C = -k1); the text right
below says the KL is strictly decreasing in alpha, which only holds for
``KL ≈ k1 - k1 σ(k2 + k3 log α) + ½ log(1 + 1/α)``. That is what is implemented.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import Distribution, Normal, constraints
from numpyro.distributions.kl import kl_divergence
from scipy import integrate
from base.errors import InputError

K1, K2, K3 = 0.63576, 1.87320, 1.48695
"""Constants of the eq. 10 approximation (Molchanov et al., 2017)."""

ZERO_MEAN_KL = -0.5 * math.log(2.0 * math.pi * math.e) - 0.5 * (np.euler_gamma + math.log(2.0))
"""KL(N(0, sigma²) ‖ 1/|w|) for every sigma (appendix C, eq. 28-31): -½ log 2πe + E log|eps| ≈ -2.0541."""

GRANULARITIES = ("layer", "neuron", "weight")


class LogUniform(Distribution):
    """The improper log-uniform prior p(w) ∝ 1/|w| (variance networks, eq. 4).

    IMPROPER: the density does not integrate, so ``log_prob(w) = -log|w|`` is an unnormalised log
    density and there is nothing to sample from: ``sample`` raises ``ValueError``. Use it as a prior
    with a guide that never asks the model to sample it (every guide here), never with
    ``Predictive(model)`` from the prior or an init strategy that draws from the prior.

    Args:
      batch_shape: shape of the weight tensor the prior covers, e.g. ``(in, out)``; ``()`` for one
        scalar (then ``.expand(shape)`` works as for any NumPyro distribution).

    ``kl_divergence(Normal(loc, scale), LogUniform())`` is registered with NumPyro (eq. 10 plus the
    constant of this module), so ``TraceMeanField_ELBO`` uses it for mean-field Normal guides.
    """

    support = constraints.real
    reparametrized_params: list[str] = []

    def __init__(self, batch_shape=(), *, validate_args=None):
        super().__init__(batch_shape=tuple(batch_shape), event_shape=(), validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        """Refused: the log-uniform prior is improper (eq. 4) and has no distribution to draw from."""
        raise InputError.worded("prior",
            "LogUniform is an improper prior p(w) ∝ 1/|w| and cannot be sampled; sample the "
            "weights from a guide (posterior) instead of from the prior"
        )

    def log_prob(self, value):
        """Unnormalised log density -log|w|, shape ``broadcast(value.shape, batch_shape)`` (eq. 4)."""
        value = jnp.asarray(value)
        return jnp.broadcast_to(-jnp.log(jnp.abs(value)), jnp.broadcast_shapes(value.shape, self.batch_shape))

    def tree_flatten(self):
        return (), self.batch_shape

    @classmethod
    def tree_unflatten(cls, aux_data, params):
        return cls(batch_shape=aux_data)


def log_uniform_prior():
    """Prior callable ``prior(site_name, shape) -> LogUniform(batch_shape=shape)`` (eq. 4).

    Follows the spine's prior protocol so it can be passed to ``models.bnn`` or to
    ``models.priors.by_pattern`` for the variance layers only.
    """

    def prior(site_name, shape):
        return LogUniform(batch_shape=tuple(shape))

    prior.spec = {"kind": "log_uniform"}
    return prior


def kl_log_uniform_approx(log_alpha):
    """Approximate KL(N(mu, alpha mu²) ‖ LogU), normalised to 0 at alpha -> inf (eq. 10).

    ``k1 - k1 sigmoid(k2 + k3 log alpha) + ½ log(1 + 1/alpha)`` with (k1, k2, k3) = (0.63576,
    1.87320, 1.48695); any shape in, same shape out (elementwise). Differs from the exact value
    (``kl_log_uniform_exact``) by the constant ``ZERO_MEAN_KL`` up to < 0.01 nats for log alpha in
    [-4, 8]. Strictly decreasing in alpha.
    """
    log_alpha = jnp.asarray(log_alpha)
    return K1 - K1 * jax.nn.sigmoid(K2 + K3 * log_alpha) + 0.5 * jax.nn.softplus(-log_alpha)


def kl_log_uniform_mc(log_alpha, key, num_samples=100_000):
    """Monte Carlo estimate of the exact KL(N(mu, alpha mu²) ‖ 1/|w|) (eq. 9 plus -½ log 2πe).

    ``-½ log(2πe) - ½ log alpha + mean_s log|1 + sqrt(alpha) eps_s|``, eps_s ~ N(0, 1) iid, the same
    draws for every alpha. ``log_alpha`` any shape A; returns shape A. Standard error ≈ 1.1/sqrt(S)
    nats for large alpha.
    """
    log_alpha = jnp.asarray(log_alpha, jnp.float32)
    eps = jax.random.normal(key, (num_samples,) + (1,) * log_alpha.ndim)
    expected = jnp.mean(jnp.log(jnp.abs(1.0 + jnp.exp(0.5 * log_alpha) * eps)), axis=0)
    return -0.5 * math.log(2.0 * math.pi * math.e) - 0.5 * log_alpha + expected


def kl_log_uniform_exact(log_alpha):
    """Exact KL(N(mu, alpha mu²) ‖ 1/|w|) by adaptive quadrature (eq. 9 plus -½ log 2πe), NumPy.

    The expectation E log|1 + sqrt(alpha) eps| is integrated on both sides of its (integrable)
    singularity at eps = -1/sqrt(alpha) with ``scipy.integrate.quad``. ``log_alpha`` scalar or array
    of any shape; returns a float64 array of that shape. For tests and tables, not for training.
    """

    def expected_log(la):
        root_alpha = math.exp(0.5 * la)
        pole = -1.0 / root_alpha

        def integrand(eps):
            return math.log(abs(1.0 + root_alpha * eps)) * math.exp(-0.5 * eps * eps) / math.sqrt(2.0 * math.pi)

        return sum(integrate.quad(integrand, lo, hi, limit=400)[0] for lo, hi in ((-np.inf, pole), (pole, np.inf)))

    log_alpha = np.asarray(log_alpha, np.float64)
    values = [-0.5 * math.log(2.0 * math.pi * math.e) - 0.5 * la + expected_log(la) for la in log_alpha.ravel()]
    return np.asarray(values, np.float64).reshape(log_alpha.shape)


def log_alpha_from_additive(loc, scale):
    """log alpha = log(sigma² / mu²) mapping the additive N(mu, sigma²) (eq. 20) to eq. 19.

    ``loc`` and ``scale`` broadcastable arrays; returns their broadcast shape. A zero ``loc`` gives
    +inf (the zero-mean limit) with a finite gradient in ``scale`` and none through ``loc``.
    """
    loc, scale = jnp.asarray(loc), jnp.asarray(scale)
    is_zero = loc == 0
    safe_loc = jnp.where(is_zero, 1.0, loc)
    log_alpha = 2.0 * (jnp.log(scale) - jnp.log(jnp.abs(safe_loc)))
    return jnp.where(is_zero, jnp.inf, log_alpha)


def scale_from_log_alpha(loc, log_alpha):
    """sigma = sqrt(alpha) |mu|, the standard deviation of N(mu, alpha mu²) (eq. 5, 17-19).

    ``log_alpha`` must broadcast against ``loc`` (use ``expand_log_alpha`` for layer/neuron
    granularity); returns the broadcast shape.
    """
    return jnp.exp(0.5 * jnp.asarray(log_alpha)) * jnp.abs(jnp.asarray(loc))


def log_alpha_shape(weight_shape, granularity):
    """Shape of the log alpha parameter for a weight of ``weight_shape`` (eq. 17-19).

    ``"layer"`` -> () (one alpha, eq. 17), ``"neuron"`` -> (out,) the last axis (eq. 18),
    ``"weight"`` -> ``weight_shape`` (eq. 19). Any such array broadcasts against the weight.
    """
    if granularity not in GRANULARITIES:
        raise InputError.worded("granularity", f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    weight_shape = tuple(weight_shape)
    return {"layer": (), "neuron": weight_shape[-1:], "weight": weight_shape}[granularity]


def kl_normal_log_uniform(loc, scale):
    """KL(N(loc, scale²) ‖ 1/|w|) elementwise via eq. 10: ``kl_log_uniform_approx(log alpha) + ZERO_MEAN_KL``.

    alpha = scale² / loc² (eq. 20 -> 19); a zero ``loc`` gives exactly ``ZERO_MEAN_KL`` (appendix C).
    ``loc``, ``scale`` broadcastable; returns their broadcast shape.
    """
    return kl_log_uniform_approx(log_alpha_from_additive(loc, scale)) + ZERO_MEAN_KL


@kl_divergence.register(Normal, LogUniform)
def _kl_normal_log_uniform(p, q):
    kl = kl_normal_log_uniform(p.loc, p.scale)
    return jnp.broadcast_to(kl, jnp.broadcast_shapes(kl.shape, q.batch_shape))
