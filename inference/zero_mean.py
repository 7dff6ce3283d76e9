"""Variance-network guides (Neklyudov et al., 2018; ``variance-networks.txt`` sections 4, 6.2, appendices A-C).

Chosen sites ("variance layers", shell patterns on site names) get

* `ZeroMean`: q(w) = N(0, sigma²) (eq. 12). The location is the constant 0, never a parameter, so it
  stays exactly 0; against the log-uniform prior (``models.variance.log_uniform_prior``) the KL is the
  constant ``ZERO_MEAN_KL`` (appendix C) and training maximises the expected log-likelihood (eq. 14).
* `VarianceLayers`: q(w) = N(mu, alpha mu²) with one alpha per layer, per output neuron or per weight
  (eq. 17-19); its KL to the log-uniform prior is eq. 10 (registered in ``models.variance``).
  The additive form N(mu, sigma²) (eq. 20) is the mean-field guide with the log-uniform prior.

All other sites are mean-field Normal. `predictions_by_procedure` gives the deterministic (weights at
their means, eq. 3), stochastic (one draw) and ensemble (eq. 2) predictions of Table 1.
"""

from __future__ import annotations

import fnmatch
import math
from abc import abstractmethod

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions import constraints

from inference.per_site import PerSiteGuide
from models.variance import log_alpha_shape, scale_from_log_alpha


class VarianceSiteGuide(PerSiteGuide):
    """Base of the variance-network guides: `variance_distribution` on `variance_sites`, mean field elsewhere.

    Args:
      model: a `models.BNN`.
      variance_sites: shell patterns of the variance layers' sites, e.g. ``["mlp/~/linear_0/w"]``.
      init_scale: initial sigma of the mean-field (non-variance) sites.
    """

    def __init__(self, model, *, variance_sites, init_scale: float = 1e-3, prefix: str = "auto"):
        if isinstance(variance_sites, str):
            variance_sites = [variance_sites]
        self.variance_sites = tuple(variance_sites)
        if not self.variance_sites:
            raise ValueError("variance_sites: expected at least one site name pattern, got none")
        super().__init__(model, init_scale=init_scale, prefix=prefix)

    def is_variance(self, name: str) -> bool:
        """Whether site `name` belongs to a variance layer (matches one of `variance_sites`)."""
        return any(fnmatch.fnmatchcase(name, p) for p in self.variance_sites)

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        unmatched = [p for p in self.variance_sites if not any(fnmatch.fnmatchcase(n, p) for n in self.site_shapes())]
        if unmatched:
            raise ValueError(f"variance_sites: patterns {unmatched} match no site of the model; sites are "
                             f"{list(self.site_shapes())}")

    @abstractmethod
    def variance_distribution(self, name, shape, param):
        """The variance-layer distribution of site `name` (batch shape `shape`, before ``to_event``)."""

    @abstractmethod
    def variance_num_params(self, shape) -> int:
        """Variational parameters of one variance site of `shape`."""

    def site_distribution(self, name, shape, param):
        """`variance_distribution` on variance sites, N(loc, scale²) (mean field) elsewhere; event `shape`."""
        if self.is_variance(name):
            return self.variance_distribution(name, shape, param).to_event(len(shape))
        loc = param("loc", self.init_loc(name))
        scale = param("scale", jnp.full(shape, self._init_scale), self.scale_constraint)
        return dist.Normal(loc, scale).to_event(len(shape))

    def num_params_formula(self) -> int:
        """Sum of `variance_num_params` over variance sites plus 2 per entry of the other sites."""
        return sum(self.variance_num_params(shape) if self.is_variance(name) else 2 * math.prod(shape)
                   for name, shape in self.site_shapes().items())


class ZeroMean(VarianceSiteGuide):
    """q(w) = N(0, sigma²) on the variance layers (eq. 12), mean field elsewhere.

    Args (besides `VarianceSiteGuide`'s):
      variance_init_scale: initial sigma of the variance sites; None (default) uses, per site, the
        root mean square of the network's own initial weights (so signals start at their usual size).
    Parameters: ``{site}_{prefix}_sigma`` (positive, log domain) per variance site; 1 per entry.
    """

    def __init__(self, model, *, variance_sites, variance_init_scale: float | None = None,
                 init_scale: float = 1e-3, prefix: str = "auto"):
        if variance_init_scale is not None and not variance_init_scale > 0:
            raise ValueError(f"variance_init_scale: expected a positive number or None, got {variance_init_scale!r}")
        super().__init__(model, variance_sites=variance_sites, init_scale=init_scale, prefix=prefix)
        self.variance_init_scale = variance_init_scale
        self.config = {"name": "zero_mean", "variance_sites": list(self.variance_sites),
                       "variance_init_scale": variance_init_scale, "init_scale": init_scale, "prefix": prefix}

    def _sigma_init(self, name, shape):
        if self.variance_init_scale is not None:
            return jnp.full(shape, self.variance_init_scale)
        rms = jnp.sqrt(jnp.mean(jnp.square(self.init_loc(name))))
        return jnp.full(shape, jnp.where(rms > 0, rms, self._init_scale))

    def variance_distribution(self, name, shape, param):
        """N(0, sigma²), sigma (shape) > 0; the location is the constant 0 (eq. 12)."""
        sigma = param("sigma", self._sigma_init(name, shape), constraints.positive)
        return dist.Normal(jnp.zeros(shape), sigma)

    def variance_num_params(self, shape) -> int:
        """One sigma per weight."""
        return math.prod(shape)


class VarianceLayers(VarianceSiteGuide):
    """q(w) = N(mu, alpha mu²) on the variance layers (eq. 17-19), mean field elsewhere.

    Args (besides `VarianceSiteGuide`'s):
      granularity: "layer" (one alpha per site, eq. 17), "neuron" (one per output, the last axis,
        eq. 18) or "weight" (eq. 19).
      init_log_alpha: starting log alpha.
    Parameters per variance site: ``_loc`` (shape) and ``_log_alpha`` (``log_alpha_shape``).
    """

    def __init__(self, model, *, variance_sites, granularity: str = "layer", init_log_alpha: float = -4.0,
                 init_scale: float = 1e-3, prefix: str = "auto"):
        log_alpha_shape((1,), granularity)  # validates the name
        super().__init__(model, variance_sites=variance_sites, init_scale=init_scale, prefix=prefix)
        self.granularity = granularity
        self.init_log_alpha = float(init_log_alpha)
        self.config = {"name": "variance_layers", "variance_sites": list(self.variance_sites),
                       "granularity": granularity, "init_log_alpha": self.init_log_alpha,
                       "init_scale": init_scale, "prefix": prefix}

    def variance_distribution(self, name, shape, param):
        """N(mu, alpha mu²): scale = sqrt(alpha) |mu| with alpha broadcast per granularity (eq. 17-19)."""
        loc = param("loc", self.init_loc(name))
        log_alpha = param("log_alpha", jnp.full(log_alpha_shape(shape, self.granularity), self.init_log_alpha))
        return dist.Normal(loc, scale_from_log_alpha(loc, log_alpha))

    def variance_num_params(self, shape) -> int:
        """mu per weight plus the alphas: size + (1 | out | size)."""
        return math.prod(shape) + math.prod(log_alpha_shape(shape, self.granularity))


def zero_mean(model, *, variance_sites, variance_init_scale: float | None = None, init_scale: float = 1e-3,
              prefix: str = "auto") -> ZeroMean:
    """The zero-mean guide N(0, sigma²) on `variance_sites` (eq. 12), mean field elsewhere."""
    return ZeroMean(model, variance_sites=variance_sites, variance_init_scale=variance_init_scale,
                    init_scale=init_scale, prefix=prefix)


def variance_layers(model, *, variance_sites, granularity: str = "layer", init_log_alpha: float = -4.0,
                    init_scale: float = 1e-3, prefix: str = "auto") -> VarianceLayers:
    """The N(mu, alpha mu²) guide on `variance_sites` (eq. 17-19), mean field elsewhere."""
    return VarianceLayers(model, variance_sites=variance_sites, granularity=granularity,
                          init_log_alpha=init_log_alpha, init_scale=init_scale, prefix=prefix)


def predictions_by_procedure(posterior, x, num_samples: int = 100, seed: int = 0) -> dict:
    """Table 1's three inference procedures for a classification posterior; each value (N, C).

    "deterministic": the network at the posterior median = mean of a Gaussian guide (eq. 3);
    "stochastic": one posterior draw (K = 1 in eq. 2); "ensemble": the average of `num_samples` draws (eq. 2).
    """
    x = np.asarray(x, np.float32)
    members = posterior.predict(x, num_samples=num_samples, seed=seed)
    return {
        "deterministic": np.asarray(posterior.model.predictive(posterior.median(), x, state=posterior.state)),
        "stochastic": members[0],
        "ensemble": members.mean(axis=0),
    }
