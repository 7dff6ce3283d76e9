"""Binary (MC) dropout as a guide: a point estimate whose chosen weight matrices lose whole input rows.

Gal & Ghahramani's reading of dropout: q(W) = M diag(z), z_i ~ Bernoulli(1 - rate) / (1 - rate) per input
unit i (a row of a dense (in, out) weight; for a conv weight (kh, kw, c_in, c_out), one mask entry per
(kh, kw, c_in)). Training with it maximises E_z[log p(D | W) + log p(W)] (a MAP objective under
dropout noise: the family has no entropy term, like `DeltaFamily`), prediction averages draws
(MC dropout, variance networks' "ensemble", eq. 2) or uses the mean M (the weight-scaling rule, the
"deterministic" procedure, eq. 3). One mask per weight draw, shared by the minibatch.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

from inference.families import ParamSpec, site_size
from models.local_reparam import DropoutRule
from inference.point_estimate import DeltaFamily
from inference.registry import register_family, register_guide
from inference.site_guide import SiteGuide
from inference.zero_mean import variance_site_patterns
from base.errors import InputError


class BinaryDropout(dist.Distribution):
    """W = loc * z / (1 - rate), z ~ Bernoulli(1 - rate) of shape ``loc.shape[:-1] + (1,)``.

    Elementwise batch shape ``loc.shape``; ``log_prob`` is 0 (a point-mass family: no entropy term in the
    ELBO); ``mean`` and every quantile (``icdf``) are ``loc``, so a guide's median gives the weight-scaling
    rule's deterministic network.
    """

    arg_constraints = {"loc": constraints.real}
    support = constraints.real
    reparametrized_params = ["loc"]

    def __init__(self, loc, rate: float, *, validate_args=None):
        self.loc, self.rate = jnp.asarray(loc), float(rate)
        super().__init__(batch_shape=self.loc.shape, event_shape=(), validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        """(sample_shape + loc.shape) draws: rows of ``loc`` kept with probability 1 - rate, rescaled."""
        shape = tuple(sample_shape) + self.loc.shape[:-1] + (1,)
        keep = jax.random.bernoulli(key, 1.0 - self.rate, shape)
        return self.loc * keep / (1.0 - self.rate)

    def log_prob(self, value):
        """0 for every value, shape ``broadcast(value.shape, batch_shape)`` (no entropy term)."""
        return jnp.zeros(jnp.broadcast_shapes(jnp.shape(value), self.batch_shape))

    @property
    def mean(self):
        return self.loc

    def icdf(self, q):
        """``loc`` for every q: the deterministic (weight-scaling) network."""
        return jnp.broadcast_to(self.loc, jnp.broadcast_shapes(jnp.shape(q), self.loc.shape))


@register_family
@dataclass(frozen=True)
class BinaryDropoutFamily:
    """`BinaryDropout` at a learned location ``loc`` (1 parameter per weight); ``rate`` in [0, 1)."""

    rate: float = 0.5
    name = "binary_dropout"

    def __post_init__(self):
        if not 0.0 <= float(self.rate) < 1.0:
            raise InputError.worded("rate", f"rate: expected a dropout rate in [0, 1), got {self.rate!r}")

    def params(self, site):
        """{"loc": site.init_loc}."""
        return {"loc": ParamSpec(site.init_loc)}

    def distribution(self, site, values):
        """BinaryDropout(loc, rate) with event shape ``site.shape``."""
        return BinaryDropout(values["loc"], self.rate).to_event(len(site.shape))

    def moments(self, site, values):
        """(loc, loc² rate / (1 - rate))."""
        return values["loc"], values["loc"] ** 2 * self.rate / (1.0 - self.rate)

    def local_rule(self, site, values):
        """The local estimator's rule: `DropoutRule` (a dropout mask on the layer's inputs per example) for a dense
        weight; None for a kernel (one draw per minibatch)."""
        return DropoutRule(values["loc"], self.rate) if len(site.shape) == 2 else None

    def num_params(self, site) -> int:
        """1 per weight."""
        return site_size(site)

    def config(self) -> dict:
        """{"rate"}."""
        return {"rate": self.rate}


@register_guide("binary_dropout", example={"dropout_sites": ["*/w"]})
def binary_dropout(model, *, dropout_sites, rate: float = 0.5, prefix: str = "auto") -> SiteGuide:
    """MC dropout: `BinaryDropoutFamily(rate)` on `dropout_sites` (shell patterns), point estimates elsewhere."""
    patterns = variance_site_patterns(dropout_sites)
    family = BinaryDropoutFamily(rate)
    return SiteGuide(model, {p: family for p in patterns}, default=DeltaFamily(), prefix=prefix,
                     patterns_arg="dropout_sites",
                     config={"name": "binary_dropout", "dropout_sites": patterns, "rate": rate})
