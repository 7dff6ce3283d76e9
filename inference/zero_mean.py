"""Variance-network guides (Neklyudov et al., 2018; variance networks paper sections 4, 6.2, appendices A-C).

Chosen sites ("variance layers", shell patterns on site names) get

* `ZeroMeanFamily` (guide `zero_mean`): q(w) = N(0, sigma²) (eq. 12). The location is the constant 0, never a parameter, so it
  stays exactly 0; against the log-uniform prior (``models.variance.log_uniform_prior``) the KL is the
  constant ``ZERO_MEAN_KL`` (appendix C) and training maximises the expected log-likelihood (eq. 14).
* `VarianceLayerFamily` (guide `variance_layers`): q(w) = N(mu, alpha mu²) with one alpha per layer, per output neuron or per weight
  (eq. 17-19); its KL to the log-uniform prior is eq. 10 (registered in ``models.variance``).
  The additive form N(mu, sigma²) (eq. 20) is the mean-field guide with the log-uniform prior.

All other sites are mean-field Normal. `predictions_by_procedure` gives the deterministic (weights at
their means, eq. 3), stochastic (one draw) and ensemble (eq. 2) predictions of Table 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions import constraints

from inference.families import ParamSpec, gaussian_local_rule, positive_number, site_size
from inference.mean_field import NormalFamily
from inference.registry import register_family, register_guide
from inference.site_guide import SiteGuide
from models.variance import log_alpha_shape, scale_from_log_alpha
from base.errors import InputError


@register_family
@dataclass(frozen=True)
class ZeroMeanFamily:
    """q(w) = N(0, sigma²) (eq. 12): the location is the constant 0, never a parameter.

    variance_init_scale: where sigma starts; None (default) uses, per site, the root mean square of the
    network's own initial weights (so signals start at their usual size), or `init_scale` if those
    are all 0. Parameters: ``sigma`` (positive, log domain), 1 per entry.
    """

    variance_init_scale: float | None = None
    init_scale: float = 1e-3
    name = "zero_mean"

    def __post_init__(self):
        if self.variance_init_scale is not None:
            object.__setattr__(self, "variance_init_scale",
                               positive_number("variance_init_scale", self.variance_init_scale))
        object.__setattr__(self, "init_scale", positive_number("init_scale", self.init_scale))

    def params(self, site):
        """{"sigma": positive, site shape}."""
        if self.variance_init_scale is not None:
            init = jnp.full(site.shape, self.variance_init_scale)
        else:
            rms = jnp.sqrt(jnp.mean(jnp.square(site.init_loc)))
            init = jnp.full(site.shape, jnp.where(rms > 0, rms, self.init_scale))
        return {"sigma": ParamSpec(init, constraints.positive)}

    def distribution(self, site, values):
        """N(0, sigma²) with event shape ``site.shape`` (eq. 12)."""
        return dist.Normal(jnp.zeros(site.shape), values["sigma"]).to_event(len(site.shape))

    def moments(self, site, values):
        """(0, sigma²)."""
        return jnp.zeros(site.shape), values["sigma"] ** 2

    def local_rule(self, site, values):
        """`inference.families.gaussian_local_rule` of its `moments` (the local estimator's rule)."""
        return gaussian_local_rule(site, *self.moments(site, values))

    def num_params(self, site) -> int:
        """One sigma per weight."""
        return site_size(site)

    def config(self) -> dict:
        """{"variance_init_scale", "init_scale"}."""
        return {"variance_init_scale": self.variance_init_scale, "init_scale": self.init_scale}


@register_family
@dataclass(frozen=True)
class VarianceLayerFamily:
    """q(w) = N(mu, alpha mu²) with one alpha per layer, output neuron or weight (eq. 17-19).

    granularity: "layer" (eq. 17), "neuron" (one per output, the last axis, eq. 18) or "weight" (eq. 19);
    init_log_alpha: the starting log alpha. Parameters: ``loc`` (site shape), ``log_alpha``
    (`models.variance.log_alpha_shape`).
    """

    granularity: str = "layer"
    init_log_alpha: float = -4.0
    name = "variance_layers"

    def __post_init__(self):
        log_alpha_shape((1,), self.granularity)  # validates the name
        object.__setattr__(self, "init_log_alpha", float(self.init_log_alpha))

    def params(self, site):
        """{"loc": site.init_loc, "log_alpha": init_log_alpha in the granularity's shape}."""
        shape = log_alpha_shape(site.shape, self.granularity)
        return {"loc": ParamSpec(site.init_loc), "log_alpha": ParamSpec(jnp.full(shape, self.init_log_alpha))}

    def distribution(self, site, values):
        """N(mu, alpha mu²): scale sqrt(alpha) |mu|, alpha broadcast per granularity; event shape ``site.shape``."""
        scale = scale_from_log_alpha(values["loc"], values["log_alpha"])
        return dist.Normal(values["loc"], scale).to_event(len(site.shape))

    def moments(self, site, values):
        """(mu, alpha mu²)."""
        return values["loc"], scale_from_log_alpha(values["loc"], values["log_alpha"]) ** 2

    def local_rule(self, site, values):
        """`inference.families.gaussian_local_rule` of its `moments` (the local estimator's rule)."""
        return gaussian_local_rule(site, *self.moments(site, values))

    def num_params(self, site) -> int:
        """mu per weight plus the alphas: size + (1 | out | size)."""
        return site_size(site) + math.prod(log_alpha_shape(site.shape, self.granularity))

    def config(self) -> dict:
        """{"granularity", "init_log_alpha"}."""
        return {"granularity": self.granularity, "init_log_alpha": self.init_log_alpha}


def variance_site_patterns(variance_sites) -> list:
    """`variance_sites` (a pattern or a list of patterns) as a non-empty list of strings."""
    patterns = [variance_sites] if isinstance(variance_sites, str) else list(variance_sites or [])
    if not patterns or not all(isinstance(p, str) for p in patterns):
        raise InputError.worded("variance_sites",
                                f"variance_sites: expected at least one site name pattern, got {variance_sites!r}")
    return patterns


def variance_guide(model, family, variance_sites, init_scale, prefix, config) -> SiteGuide:
    """`family` on the sites matching `variance_sites`, `NormalFamily(init_scale)` elsewhere, without the sigma cap
    (the variance-networks paper's mean field)."""
    patterns = variance_site_patterns(variance_sites)
    return SiteGuide(model, {p: family for p in patterns}, default=NormalFamily(init_scale, None), prefix=prefix,
                     patterns_arg="variance_sites",
                     config={**config, "variance_sites": patterns, **family.config(), "init_scale": init_scale})


@register_guide("zero_mean", example={"variance_sites": ["*/linear_0/w"]})
def zero_mean(model, *, variance_sites, variance_init_scale: float | None = None, init_scale: float = 1e-3,
              prefix: str = "auto") -> SiteGuide:
    """The zero-mean guide: `ZeroMeanFamily` N(0, sigma²) on `variance_sites` (shell patterns, eq. 12),
    mean field (`NormalFamily`, `init_scale`) elsewhere."""
    family = ZeroMeanFamily(variance_init_scale, init_scale)
    return variance_guide(model, family, variance_sites, init_scale, prefix, {"name": "zero_mean"})


@register_guide("variance_layers", example={"variance_sites": ["*/linear_0/w"]})
def variance_layers(model, *, variance_sites, granularity: str = "layer", init_log_alpha: float = -4.0,
                    init_scale: float = 1e-3, prefix: str = "auto") -> SiteGuide:
    """`VarianceLayerFamily` N(mu, alpha mu²) on `variance_sites` (eq. 17-19), mean field elsewhere."""
    family = VarianceLayerFamily(granularity, init_log_alpha)
    return variance_guide(model, family, variance_sites, init_scale, prefix, {"name": "variance_layers"})


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
