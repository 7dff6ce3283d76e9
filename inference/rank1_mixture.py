"""The rank-1 mixture guide and BatchEnsemble (Dusenberry et al., 2020; rank-1 BNN paper section 3).

For a model built from rank-1 layers (``models.rank1``: sites ``.../alpha`` (K, c_in) and
``.../gamma`` (K, c_out)), row k of each factor site is mixture component k:

    q(alpha_k) = N(loc_k, softplus(u_k)²)  or  Cauchy(loc_k, softplus(u_k))      (section 3.3)

with loc initialised by random signs (``random_sign_init``) and the scale from a dropout rate,
sigma = sqrt(p / (1 - p)) (section 3.5). Every other site (W, biases) is a point estimate (Delta), so
its Normal prior acts as L2. The ELBO's KL is then the SUM of per-component KLs, in closed form for
Normal and by the one-sample estimate log q - log p for Cauchy (as the paper's reference code does). The mixture itself
comes from the batch tiling: component k's rows see alpha_k, gamma_k (``models.rank1``), and the
likelihood's objective (average per-component or log-mixture) is chosen in ``Rank1Likelihood``.

``family="delta"`` makes the factors point masses too: BatchEnsemble.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

from inference.families import ParamSpec, site_size
from inference.point_estimate import DeltaFamily
from inference.registry import has_rank1_factors, register_family, register_guide
from inference.site_guide import SiteGuide
from models.rank1 import RANK1_SITE_SUFFIXES, log_factor_init, random_sign_init, scale_from_dropout
from base.errors import InputError


class RatioCauchy(dist.Cauchy):
    """Cauchy(loc, scale) drawn as loc + scale * z1 / z2, z1, z2 ~ N(0, 1) iid (a standard Cauchy ratio).

    Same distribution, log density and reparameterisation as `numpyro.distributions.Cauchy`; only the
    sampler differs: inside a jitted rank-1 SVI step on CPU, JAX's tan-based Cauchy draw measured
    ~6x slower per step than a Normal guide, the ratio of normals ~1.3x (digits MLP 64-64, K = 4).
    """

    def sample(self, key, sample_shape=()):
        """Draws of shape sample_shape + batch_shape."""
        shape = tuple(sample_shape) + self.batch_shape
        key_num, key_den = jax.random.split(key)
        return self.loc + self.scale * jax.random.normal(key_num, shape) / jax.random.normal(key_den, shape)


COMPONENTS = {"normal": dist.Normal, "cauchy": RatioCauchy, "lognormal": dist.Normal, "delta": None}
"""Component families on the factors: real-valued Normal / Cauchy, positive-valued LogNormal (app. C.1, Fig. 9),
Dirac ("delta", BatchEnsemble). A guide family lives on the unconstrained value of its site, and `SiteGuide`
maps it through ``biject_to(prior support)``: under a positive-valued prior (``models.rank1.rank1_prior(
"lognormal")``) that is exp, so "lognormal" is Normal(loc, scale) on log alpha, i.e. LogNormal(loc, scale) on
alpha; it refuses a real-valued prior (where it would be a plain Normal)."""
DEFAULT_FACTOR_SITES = tuple(f"*/{s}" for s in RANK1_SITE_SUFFIXES)


@register_family
@dataclass(frozen=True)
class Rank1FactorFamily:
    """K-component Normal / Cauchy / Dirac factors on rank-1 factor sites, a point mass elsewhere.

    On a site matching `factor_sites` ((K, c): row k is component k), by `family`:
    Normal/Cauchy(loc, scale), LogNormal(loc, scale) (positive factors; loc from `models.rank1.log_factor_init`)
    or Delta(loc) (``family="delta"``: BatchEnsemble), loc from
    `models.rank1.random_sign_init` (`sign_init`), scale from the dropout rate p: sqrt(p / (1 - p))
    (section 3.5). Any other site (W, biases) gets `DeltaFamily`, so its Normal prior acts as L2.
    Parameters: ``loc`` (+ ``scale``, softplus-positive, unless "delta").
    """

    family: str = "normal"
    dropout_rate: float = 1e-3
    sign_init: float = 0.5
    factor_sites: tuple = DEFAULT_FACTOR_SITES
    name = "rank1_mixture"

    def __post_init__(self):
        if self.family not in COMPONENTS:
            raise InputError.worded("family", f"family: expected one of {sorted(COMPONENTS)}, got {self.family!r}")
        object.__setattr__(self, "factor_sites", tuple(self.factor_sites))
        scale_from_dropout(self.dropout_rate)  # validates p in (0, 1)
        random_sign_init(self.sign_init)  # validates v <= 1

    def is_factor(self, name: str) -> bool:
        """Whether site `name` is a rank-1 factor (matches one of `factor_sites`)."""
        return any(fnmatch.fnmatchcase(name, p) for p in self.factor_sites)

    def params(self, site):
        """Factor sites: {"loc": random signs, "scale"} ("loc" only for "delta"); others `DeltaFamily`'s."""
        if not self.is_factor(site.name):
            return DeltaFamily().params(site)
        init_sign = (log_factor_init if self.family == "lognormal" else random_sign_init)(self.sign_init)
        specs = {"loc": ParamSpec(lambda key: init_sign(key, site.shape))}
        if COMPONENTS[self.family] is not None:
            specs["scale"] = ParamSpec(jnp.full(site.shape, scale_from_dropout(self.dropout_rate)),
                                       constraints.softplus_positive)
        return specs

    def distribution(self, site, values):
        """Factor sites: Normal/Cauchy/LogNormal(loc, scale) or Delta(loc), (K, c); others Delta(loc). Event shape ``site.shape``."""
        component = COMPONENTS[self.family]
        if self.family == "lognormal" and self.is_factor(site.name) and site.is_real:
            raise InputError.worded("family",
                                    f"family='lognormal' needs a positive-valued prior on {site.name} (models.rank1."
                                    f"rank1_prior('lognormal')); its prior is real-valued")
        if not self.is_factor(site.name) or component is None:
            return DeltaFamily().distribution(site, values)
        return component(values["loc"], values["scale"]).to_event(len(site.shape))

    def num_params(self, site) -> int:
        """Factor entries: 2 (loc, scale), 1 for BatchEnsemble; other sites: 1 per entry.

        A rank-1 dense layer (m -> n, K components, per-component bias) thus has
        mn + Kn + 2K(m + n) parameters (mn + Kn + K(m + n) for BatchEnsemble).
        """
        per_entry = 2 if self.is_factor(site.name) and COMPONENTS[self.family] is not None else 1
        return per_entry * site_size(site)

    def config(self) -> dict:
        """{"family", "dropout_rate", "sign_init", "factor_sites"}."""
        return {"family": self.family, "dropout_rate": self.dropout_rate, "sign_init": self.sign_init,
                "factor_sites": list(self.factor_sites)}


@register_guide("rank1_mixture", suits=has_rank1_factors)
def rank1_mixture(model, *, family: str = "normal", dropout_rate: float = 1e-3, sign_init: float = 0.5,
                  factor_sites=DEFAULT_FACTOR_SITES, prefix: str = "auto") -> SiteGuide:
    """The rank-1 mixture guide: `Rank1FactorFamily` (Normal, Cauchy or, with ``family="delta"``,
    BatchEnsemble's point masses) on the factor sites, `DeltaFamily` on W and the biases."""
    factors = Rank1FactorFamily(family, dropout_rate, sign_init, factor_sites)
    return SiteGuide(model, {p: factors for p in factors.factor_sites}, default=DeltaFamily(), prefix=prefix,
                     patterns_arg="factor_sites (build the network from models.rank1 layers, whose rank-1 "
                                  "factor sites are .../alpha and .../gamma)",
                     config={"name": "rank1_mixture", **factors.config()})


def batch_ensemble(model, *, sign_init: float = 0.5, factor_sites=DEFAULT_FACTOR_SITES, prefix: str = "auto") -> SiteGuide:
    """BatchEnsemble: the rank-1 mixture with point-mass (Dirac) components (rank-1 paper section 3.3)."""
    return rank1_mixture(model, family="delta", sign_init=sign_init, factor_sites=factor_sites, prefix=prefix)
