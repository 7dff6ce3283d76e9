"""The point-estimate guide: q(w) = delta(w - w_hat), i.e. MAP training (the prior acts as L2), and its `DeltaFamily`."""

from __future__ import annotations

from dataclasses import dataclass

import numpyro.distributions as dist

from inference.families import ParamSpec, site_size
from inference.registry import register_family, register_guide
from inference.site_guide import SiteGuide


@register_family
@dataclass(frozen=True)
class DeltaFamily:
    """q(w) = delta(w - loc): a point mass at a learned (unconstrained) location. Parameters: ``loc``, 1 per entry."""

    name = "point_estimate"

    def params(self, site):
        """{"loc": site.init_loc}."""
        return {"loc": ParamSpec(site.init_loc)}

    def distribution(self, site, values):
        """Delta(loc) with event shape ``site.shape``."""
        return dist.Delta(values["loc"]).to_event(len(site.shape))

    def moments(self, site, values):
        """(mean, variance) = (loc, 0)."""
        return values["loc"], 0.0 * values["loc"]

    def num_params(self, site) -> int:
        """1 per entry."""
        return site_size(site)

    def config(self) -> dict:
        """{} (no options)."""
        return {}


@register_guide("point_estimate")
def point_estimate(model, *, prefix: str = "auto") -> SiteGuide:
    """The MAP / deterministic-network guide for `model`: `DeltaFamily` on every site.

    The ELBO then is log p(y | x, w_hat) + log p(w_hat): maximum a posteriori. Values start at the
    network's own initialisation. Parameters: 1 per weight (``{site}_auto_loc``).
    """
    return SiteGuide(model, {}, default=DeltaFamily(), prefix=prefix, config={"name": "point_estimate"})
