"""A user's extension in one file: a guide (with its family), a network and a data set, registered with the
package's own mechanism and nothing else (tests/zoo/test_extension.py imports it and uses them the way a user
would). Nothing of the package is edited."""

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions import constraints

import inference
import models
import zoo
from inference.mean_field import NormalFamily
from models.networks.mlp import mlp


@inference.register_family
@dataclass(frozen=True)
class PluginLaplaceFamily:
    """q(w) = Laplace(loc, scale) elementwise; 2 parameters per weight."""

    init_scale: float = 1e-2
    name = "plugin_laplace"

    def params(self, site):
        return {"loc": inference.families.ParamSpec(site.init_loc),
                "scale": inference.families.ParamSpec(jnp.full(site.shape, self.init_scale), constraints.softplus_positive)}

    def distribution(self, site, values):
        return dist.Laplace(values["loc"], values["scale"]).to_event(len(site.shape))

    def num_params(self, site):
        return 2 * site.init_loc.size

    def config(self):
        return {"init_scale": self.init_scale}


@inference.register_guide("plugin_laplace", example={"laplace_sites": ["*/w"]})
def plugin_laplace(model, *, laplace_sites: list, init_scale: float = 1e-2, prefix: str = "auto"):
    """Laplace on the sites matching `laplace_sites` (required), mean field elsewhere."""
    family = PluginLaplaceFamily(init_scale)
    return inference.site_guide.SiteGuide(model, {p: family for p in laplace_sites}, default=NormalFamily(init_scale),
                               prefix=prefix, config={"name": "plugin_laplace", "laplace_sites": list(laplace_sites),
                                                      "init_scale": init_scale})


@zoo.register_data("plugin_blobs", feature_shape=(3,), num_classes=2)
def plugin_blobs(n: int = 120, seed: int = 0):
    """n points in 3 dimensions, labelled by the sign of the first; 3/4 train, 1/4 test."""
    r = np.random.default_rng(seed)
    x = r.normal(size=(n, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    cut = 3 * n // 4
    return (zoo.data.Dataset(x[:cut], y[:cut], 2, "plugin_blobs"), zoo.data.Dataset(x[cut:], y[cut:], 2, "plugin_blobs"))


@zoo.register("plugin_net", default_data="plugin_blobs",
              description="one hidden layer of `width` tanh units")
def build_plugin_net(train, width=4, prior_scale=1.0):
    return models.bnn(mlp((width,), train.num_classes, "tanh"), models.priors.normal(prior_scale),
                      models.likelihoods.categorical(), name="plugin_net")
