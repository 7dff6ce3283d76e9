"""A guide and its family in one module: q(w) = Laplace(loc, scale) on the sites matching `laplace_sites`, mean
field elsewhere. It imports only `inference` (and below), so it works as a user's module outside the package
and, copied to ``inference/plugin_guide.py`` with one import line in ``inference/__init__.py``, inside it
(tests/zoo/test_extension.py does both)."""

from dataclasses import dataclass

import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

from inference.families import ParamSpec
from inference.mean_field import NormalFamily
from inference.registry import register_family, register_guide
from inference.site_guide import SiteGuide


@register_family
@dataclass(frozen=True)
class PluginLaplaceFamily:
    """q(w) = Laplace(loc, scale) elementwise; 2 parameters per weight."""

    init_scale: float = 1e-2
    name = "plugin_laplace"

    def params(self, site):
        return {"loc": ParamSpec(site.init_loc),
                "scale": ParamSpec(jnp.full(site.shape, self.init_scale), constraints.softplus_positive)}

    def distribution(self, site, values):
        return dist.Laplace(values["loc"], values["scale"]).to_event(len(site.shape))

    def num_params(self, site):
        return 2 * site.init_loc.size

    def config(self):
        return {"init_scale": self.init_scale}


@register_guide("plugin_laplace", example={"laplace_sites": ["*/w"]})  # suits every plain BNN (the default)
def plugin_laplace(model, *, laplace_sites: list, init_scale: float = 1e-2, prefix: str = "auto"):
    """Laplace on the sites matching `laplace_sites` (required), mean field elsewhere."""
    family = PluginLaplaceFamily(init_scale)
    return SiteGuide(model, {p: family for p in laplace_sites}, default=NormalFamily(init_scale), prefix=prefix,
                     config={"name": "plugin_laplace", "laplace_sites": list(laplace_sites), "init_scale": init_scale})
