"""The mean-field Gaussian guide: q(w) = prod_i N(w_i | mu_i, sigma_i^2), and its `NormalFamily`."""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

from inference.families import (DEFAULT_SCALE_CAP, ParamSpec, bias_limit_arg, capped, gaussian_local_rule,
                                positive_number, scale_cap_arg, scale_limit, site_size)
from inference.registry import register_family, register_guide
from inference.site_guide import SiteGuide


@register_family
@dataclass(frozen=True)
class NormalFamily:
    """q(w) = N(loc, scale^2) elementwise over the site's unconstrained value.

    Parameters: ``loc`` (site shape, from the site's initial location) and ``scale`` (site shape,
    softplus-positive, starting at `init_scale`): 2 per entry. `scale_cap` c: q's sd is
    ``capped(scale, c / sqrt(fan_in))`` (`inference.families.scale_limit`: c tanh-limits every weight's sd at
    c / sqrt(fan_in); `scale` itself below a sixth of that); None: the sd is ``scale``. `bias_limit`: "layer" (a
    bias gets its layer's kernel's limit) or "own" (`inference.families.scale_limit`).
    """

    init_scale: float = 1e-2
    scale_cap: float | None = DEFAULT_SCALE_CAP
    bias_limit: str = "layer"
    name = "mean_field"

    def __post_init__(self):
        object.__setattr__(self, "init_scale", positive_number("init_scale", self.init_scale))
        object.__setattr__(self, "scale_cap", scale_cap_arg(self.scale_cap))
        bias_limit_arg(self.bias_limit)

    def sd(self, site, scale):
        """q's standard deviation for the free parameter `scale` (site shape): `scale` limited by the cap."""
        return capped(scale, scale_limit(site, self.scale_cap, self.bias_limit))

    def params(self, site):
        """{"loc": site.init_loc, "scale": init_scale everywhere (softplus-positive)}."""
        return {"loc": ParamSpec(site.init_loc),
                "scale": ParamSpec(jnp.full(site.shape, self.init_scale), constraints.softplus_positive)}

    def distribution(self, site, values):
        """Normal(loc, sd) with event shape ``site.shape``, sd = `sd` of ``scale``."""
        return dist.Normal(values["loc"], self.sd(site, values["scale"])).to_event(len(site.shape))

    def moments(self, site, values):
        """(mean, variance) = (loc, sd^2), each of the site's shape."""
        return values["loc"], self.sd(site, values["scale"]) ** 2

    def local_rule(self, site, values):
        """`inference.families.gaussian_local_rule` of its `moments` (the local estimator's rule)."""
        return gaussian_local_rule(site, *self.moments(site, values))

    def num_params(self, site) -> int:
        """2 per entry (a location and a scale)."""
        return 2 * site_size(site)

    def config(self) -> dict:
        """{"init_scale": ..., "scale_cap": ..., "bias_limit": ...}."""
        return {"init_scale": self.init_scale, "scale_cap": self.scale_cap, "bias_limit": self.bias_limit}


@register_guide("mean_field", saved_settings=("scale_cap", "bias_limit"))
def mean_field(model, *, init_scale: float = 1e-2, scale_cap: float | None = DEFAULT_SCALE_CAP,
               bias_limit: str = "layer", prefix: str = "auto") -> SiteGuide:
    """The mean-field guide for `model` (a `models.BNN`): `NormalFamily` on every site.

    Locations start at the network's own (Haiku) initialisation, scales at `init_scale`. Per-weight
    sigmas get noisy gradients and Adam moves them slowly: on the digits MLP 64-64 (unit Normal prior)
    3000 steps at lr 1e-3 leave the loss near 4,000 and the net close to a point estimate (accuracy
    0.987, ECE 0.019 from sigma 1e-3), while the ELBO optimum (loss ~1,800 after 10,000 steps at lr 1e-2
    with cosine decay) is under-confident there (accuracy 0.973, ECE 0.058).
    Variational parameters: 2 per weight (``{site}_auto_loc``, ``{site}_auto_scale``).
    `scale_cap` c (default 1.5; None: none): every weight's sd stays below c / sqrt(fan_in) (`NormalFamily`),
    so that weights the data do not pin add bounded noise instead of their prior's; a bias counts as one more
    weight of its layer (`bias_limit="layer"`; "own": c itself, the earlier rule); docs/defaults.md.
    """
    family = NormalFamily(init_scale, scale_cap, bias_limit)
    return SiteGuide(model, {}, default=family, prefix=prefix, config={"name": "mean_field", **family.config()})
