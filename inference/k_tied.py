"""The k-tied Normal guide (Swiatkowski et al., 2020; k-tied Normal paper eq. 8, section 3, appendix D.4).

For every weight site reshaped to a matrix W (m x n) -- dense: (in, out); conv: all axes but the last
flattened, x output channels --

    q(W) = N(mu, diag(vec((U Vᵀ)²))),  U (m x k) > 0, V (n x k) > 0          (eq. 8)

i.e. sigma = U Vᵀ elementwise. Biases and other 1-D (or scalar) sites stay mean-field (`NormalFamily`).
U and V live in the log domain (constraint ``positive``), initialised at 0.5 (log s0 - log k) +
N(0, noise²) so that sigma = U Vᵀ starts near s0 = ``init_scale``, where the mean-field guide starts
(appendix D.4 with s0 = 0.01 there). Parameters per matrix: mn + k(m + n) (Table 1).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

from inference.families import (DEFAULT_SCALE_CAP, ParamSpec, bias_limit_arg, capped, gaussian_local_rule,
                                positive_number, scale_cap_arg, scale_limit)
from models.local_reparam import KTiedRule
from inference.mean_field import NormalFamily
from inference.registry import register_family, register_guide
from inference.site_guide import SiteGuide
from base.errors import InputError


def matrix_shape(shape) -> tuple:
    """(m, n) = (prod(shape[:-1]), shape[-1]) for a weight of `shape` with ndim >= 2 (section 3)."""
    return math.prod(shape[:-1]), shape[-1]


def tied_scale(u, v, shape):
    """sigma = U Vᵀ reshaped to the weight's `shape`: u (m, k), v (n, k) -> `shape` with m n entries (eq. 8)."""
    return (u @ v.T).reshape(shape)


@register_family
@dataclass(frozen=True)
class KTiedFamily:
    """N(loc, (U Vᵀ)²) on sites with ndim >= 2 (eq. 8); `NormalFamily` (same init_scale) on the others.

    k: the rank of the tied standard-deviation matrix (k >= min(m, n) represents any positive
    mean-field sigma matrix); init_scale: s0, where sigma starts; init_noise: the log-domain noise of
    U and V at initialisation (paper: 0.1). Parameters: ``loc``, ``u`` (m, k), ``v`` (n, k) for matrices.
    `scale_cap` c: q's sd is ``capped(U Vᵀ, c / sqrt(m))`` (as `NormalFamily`'s; None: U Vᵀ itself); `bias_limit`
    as `NormalFamily`'s (it only concerns the vector sites).
    """

    k: int = 2
    init_scale: float = 1e-2
    init_noise: float = 0.1
    scale_cap: float | None = DEFAULT_SCALE_CAP
    bias_limit: str = "layer"
    name = "k_tied"

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise InputError.worded("k", f"k: expected a positive integer (the rank of sigma = U Vᵀ), got {self.k!r}")
        object.__setattr__(self, "init_scale", positive_number("init_scale", self.init_scale))
        if not self.init_noise >= 0:
            raise InputError.worded("init_noise",
                                    f"init_noise: expected a non-negative standard deviation, got {self.init_noise!r}")
        object.__setattr__(self, "scale_cap", scale_cap_arg(self.scale_cap))
        bias_limit_arg(self.bias_limit)

    def _vector_family(self) -> NormalFamily:
        return NormalFamily(self.init_scale, self.scale_cap, self.bias_limit)

    def sd(self, site, values):
        """q's standard deviation of a matrix site: U Vᵀ (eq. 8) limited by the cap, the site's shape."""
        return capped(tied_scale(values["u"], values["v"], site.shape), scale_limit(site, self.scale_cap))

    def _factor_init(self, rows: int):
        log_mean = 0.5 * (math.log(self.init_scale) - math.log(self.k))

        def init(key):
            return jnp.exp(log_mean + self.init_noise * jax.random.normal(key, (rows, self.k)))

        return init

    def params(self, site):
        """Matrices: {"loc", "u" (m, k), "v" (n, k)} (U, V positive); other sites: `NormalFamily`'s."""
        if len(site.shape) < 2:
            return self._vector_family().params(site)
        m, n = matrix_shape(site.shape)
        return {"loc": ParamSpec(site.init_loc),
                "u": ParamSpec(self._factor_init(m), constraints.positive),
                "v": ParamSpec(self._factor_init(n), constraints.positive)}

    def distribution(self, site, values):
        """N(loc, sd²) for matrices, sd = `sd` (U Vᵀ, eq. 8, under the cap), `NormalFamily`'s otherwise; event shape
        ``site.shape``."""
        if len(site.shape) < 2:
            return self._vector_family().distribution(site, values)
        return dist.Normal(values["loc"], self.sd(site, values)).to_event(len(site.shape))

    def moments(self, site, values):
        """(loc, sd²) for matrices (`sd`); `NormalFamily`'s moments otherwise."""
        if len(site.shape) < 2:
            return self._vector_family().moments(site, values)
        return values["loc"], self.sd(site, values) ** 2

    def local_rule(self, site, values):
        """The local estimator's rule: `KTiedRule` (the pre-activations' variance from U and V, no (in, out)
        matrix) for a dense weight without a scale cap (sd = U Vᵀ exactly), else
        `inference.families.gaussian_local_rule` of its `moments`."""
        if len(site.shape) == 2 and self.scale_cap is None:
            return KTiedRule(values["loc"], values["u"], values["v"])
        return gaussian_local_rule(site, *self.moments(site, values))

    def num_params(self, site) -> int:
        """mn + k(m + n) for matrices (Table 1); 2 per entry otherwise."""
        if len(site.shape) < 2:
            return self._vector_family().num_params(site)
        m, n = matrix_shape(site.shape)
        return m * n + self.k * (m + n)

    def config(self) -> dict:
        """{"k", "init_scale", "init_noise", "scale_cap", "bias_limit"}."""
        return {"k": self.k, "init_scale": self.init_scale, "init_noise": self.init_noise, "scale_cap": self.scale_cap,
                "bias_limit": self.bias_limit}


@register_guide("k_tied", saved_settings=("scale_cap", "bias_limit"))
def k_tied(model, *, k: int = 2, init_scale: float = 1e-2, init_noise: float = 0.1,
           scale_cap: float | None = DEFAULT_SCALE_CAP, bias_limit: str = "layer", prefix: str = "auto",
           rank: int | None = None) -> SiteGuide:
    """The k-tied Normal guide for `model` (eq. 8): `KTiedFamily` on every site; `scale_cap` and `bias_limit` as
    `mean_field`'s (scale_cap=None: the paper's U Vᵀ, unlimited).

    `rank` is a deprecated alias of `k` (``rank`` means the covariance rank r of `low_rank` elsewhere).
    """
    if rank is not None:
        warnings.warn("k_tied(rank=...) is deprecated: the tie count is called k (rank is low_rank's r)",
                      DeprecationWarning, stacklevel=2)
        k = rank
    family = KTiedFamily(k, init_scale, init_noise, scale_cap, bias_limit)
    return SiteGuide(model, {}, default=family, prefix=prefix, config={"name": "k_tied", **family.config()})
