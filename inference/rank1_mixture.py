"""The rank-1 mixture guide and BatchEnsemble (Dusenberry et al., 2020; ``rank1-bnn.txt`` section 3).

For a model built from rank-1 layers (``models.rank1``: sites ``.../alpha`` (K, c_in) and
``.../gamma`` (K, c_out)), row k of each factor site is mixture component k:

    q(alpha_k) = N(loc_k, softplus(u_k)²)  or  Cauchy(loc_k, softplus(u_k))      (section 3.3)

with loc initialised by random signs (``random_sign_init``) and the scale from a dropout rate,
sigma = sqrt(p / (1 - p)) (section 3.5). Every other site (W, biases) is a point estimate (Delta), so
its Normal prior acts as L2. The ELBO's KL is then the SUM of per-component KLs, in closed form for
Normal and by the one-sample estimate log q - log p for Cauchy (rank1-facts). The mixture itself
comes from the batch tiling: component k's rows see alpha_k, gamma_k (``models.rank1``), and the
likelihood's objective (average per-component or log-mixture) is chosen in ``Rank1Likelihood``.

``family="delta"`` makes the factors point masses too: BatchEnsemble.
"""

from __future__ import annotations

import fnmatch
import math

import jax
import jax.numpy as jnp
import numpyro.distributions as dist

from inference.per_site import PerSiteGuide
from models.rank1 import RANK1_SITE_SUFFIXES, random_sign_init, scale_from_dropout

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


FAMILIES = {"normal": dist.Normal, "cauchy": RatioCauchy, "delta": None}
DEFAULT_FACTOR_SITES = tuple(f"*/{s}" for s in RANK1_SITE_SUFFIXES)


class Rank1Mixture(PerSiteGuide):
    """K-component Normal / Cauchy / Dirac posterior over rank-1 factors, Delta over the other sites.

    Args:
      model: a `models.BNN` containing rank-1 layers.
      family: "normal", "cauchy" or "delta" (BatchEnsemble).
      dropout_rate: p in (0, 1) giving the initial factor scale sqrt(p / (1 - p)) (default 1e-3).
      sign_init: v for `random_sign_init` of the factor locations (v > 0: ±1 with P(+1) = v; v <= 0: N(1, |v|)).
      factor_sites: shell patterns of the factor sites (default ``*/alpha``, ``*/gamma``).
    Parameters: ``{site}_{prefix}_loc`` for every site, plus ``_scale`` for factor sites (not for "delta").
    """

    def __init__(self, model, *, family: str = "normal", dropout_rate: float = 1e-3, sign_init: float = 0.5,
                 factor_sites=DEFAULT_FACTOR_SITES, prefix: str = "auto"):
        if family not in FAMILIES:
            raise ValueError(f"family: expected one of {sorted(FAMILIES)}, got {family!r}")
        super().__init__(model, init_scale=scale_from_dropout(dropout_rate), prefix=prefix)
        self.family = family
        self.sign_init = random_sign_init(sign_init)
        self.factor_sites = tuple(factor_sites)
        self.config = {"name": "rank1_mixture", "family": family,
                       "dropout_rate": dropout_rate, "sign_init": sign_init,
                       "factor_sites": list(self.factor_sites), "prefix": prefix}

    def is_factor(self, name: str) -> bool:
        """Whether site `name` is a rank-1 factor (matches one of `factor_sites`)."""
        return any(fnmatch.fnmatchcase(name, p) for p in self.factor_sites)

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        if not any(self.is_factor(name) for name in self.site_shapes()):
            raise ValueError(
                f"model: no site matches the rank-1 factor patterns {list(self.factor_sites)}; build the "
                f"network from models.rank1 layers (sites .../alpha, .../gamma). Sites: {list(self.site_shapes())[:6]}"
            )

    def site_distribution(self, name, shape, param):
        """Factor sites: Normal/Cauchy(loc, scale) or Delta(loc), (K, c); others Delta(loc). Event shape `shape`."""
        if not self.is_factor(name):
            return dist.Delta(param("loc", self.init_loc(name))).to_event(len(shape))
        loc = param("loc", lambda key: self.sign_init(key, shape))
        family = FAMILIES[self.family]
        if family is None:
            return dist.Delta(loc).to_event(len(shape))
        scale = param("scale", jnp.full(shape, self._init_scale), self.scale_constraint)
        return family(loc, scale).to_event(len(shape))

    def num_params_formula(self) -> int:
        """Point estimates: 1 per entry; each factor entry: 2 (loc, scale), or 1 for BatchEnsemble.

        A rank-1 dense layer (m -> n, K components, per-component bias) thus has
        mn + Kn + 2K(m + n) parameters (mn + Kn + K(m + n) for BatchEnsemble).
        """
        per_factor = 1 if self.family == "delta" else 2
        return sum(math.prod(shape) * (per_factor if self.is_factor(name) else 1)
                   for name, shape in self.site_shapes().items())


def rank1_mixture(model, *, family: str = "normal", dropout_rate: float = 1e-3, sign_init: float = 0.5,
                  factor_sites=DEFAULT_FACTOR_SITES, prefix: str = "auto") -> Rank1Mixture:
    """The rank-1 mixture guide (Normal or Cauchy components) for a model with rank-1 layers."""
    return Rank1Mixture(model, family=family, dropout_rate=dropout_rate, sign_init=sign_init,
                        factor_sites=factor_sites, prefix=prefix)


def batch_ensemble(model, *, sign_init: float = 0.5, factor_sites=DEFAULT_FACTOR_SITES, prefix: str = "auto") -> Rank1Mixture:
    """BatchEnsemble: the rank-1 mixture with point-mass (Dirac) components (rank-1 paper section 3.3)."""
    return Rank1Mixture(model, family="delta", sign_init=sign_init, factor_sites=factor_sites, prefix=prefix)
