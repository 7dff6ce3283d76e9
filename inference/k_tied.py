"""The k-tied Normal guide (Swiatkowski et al., 2020; ``k-tied-normal.txt`` eq. 8, section 3, appendix D.4).

For every weight site reshaped to a matrix W (m x n) -- dense: (in, out); conv: all axes but the last
flattened, x output channels --

    q(W) = N(mu, diag(vec((U Vᵀ)²))),  U (m x k) > 0, V (n x k) > 0          (eq. 8)

i.e. sigma = U Vᵀ elementwise. Biases and other 1-D (or scalar) sites stay mean-field. U and V live in
the log domain (constraint ``positive``), initialised at 0.5 (log s0 - log k) + N(0, noise²) so that
sigma = U Vᵀ starts near s0 = ``init_scale``, where the mean-field guide starts (appendix D.4 with
s0 = 0.01 there). Parameters per matrix: mn + k(m + n) (Table 1).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

from inference.per_site import PerSiteGuide


def matrix_shape(shape) -> tuple:
    """(m, n) = (prod(shape[:-1]), shape[-1]) for a weight of `shape` with ndim >= 2 (section 3)."""
    return math.prod(shape[:-1]), shape[-1]


def tied_scale(u, v, shape):
    """sigma = U Vᵀ reshaped to the weight's `shape`: u (m, k), v (n, k) -> `shape` with m n entries (eq. 8)."""
    return (u @ v.T).reshape(shape)


class KTiedNormal(PerSiteGuide):
    """k-tied Normal over every site with ndim >= 2, mean-field Normal over the rest (eq. 8).

    Args:
      model: a `models.BNN`.
      rank: k >= 1, the rank of the tied standard deviation matrix. k >= min(m, n) can represent any
        (strictly positive) mean-field sigma matrix.
      init_scale: s0, where sigma starts (mean of U Vᵀ up to the noise), also the 1-D sites' scale.
      init_noise: standard deviation of the log-domain noise on U and V (paper: 0.1).
    Parameters: ``{site}_{prefix}_loc`` for every site; ``_u`` (m, k) and ``_v`` (n, k) for matrices;
    ``_scale`` for 1-D sites.
    """

    def __init__(self, model, *, rank: int = 2, init_scale: float = 1e-3, init_noise: float = 0.1, prefix: str = "auto"):
        if not isinstance(rank, int) or rank < 1:
            raise ValueError(f"rank: expected a positive integer k, got {rank!r}")
        if not init_noise >= 0:
            raise ValueError(f"init_noise: expected a non-negative standard deviation, got {init_noise!r}")
        super().__init__(model, init_scale=init_scale, prefix=prefix)
        self.rank = rank
        self.init_noise = init_noise
        self.config = {"name": "k_tied", "rank": rank, "init_scale": init_scale, "init_noise": init_noise,
                       "prefix": prefix}

    def _factor_init(self, rows):
        log_mean = 0.5 * (math.log(self._init_scale) - math.log(self.rank))

        def init(key):
            return jnp.exp(log_mean + self.init_noise * jax.random.normal(key, (rows, self.rank)))

        return init

    def site_distribution(self, name, shape, param):
        """N(loc, (U Vᵀ)²) for ndim >= 2 (eq. 8), N(loc, scale²) otherwise; event shape `shape`."""
        loc = param("loc", self.init_loc(name))
        if len(shape) < 2:
            scale = param("scale", jnp.full(shape, self._init_scale), self.scale_constraint)
        else:
            m, n = matrix_shape(shape)
            u = param("u", self._factor_init(m), constraints.positive)
            v = param("v", self._factor_init(n), constraints.positive)
            scale = tied_scale(u, v, shape)
        return dist.Normal(loc, scale).to_event(len(shape))

    def num_params_formula(self) -> int:
        """Sum over sites of mn + k(m + n) (matrices, Table 1) or 2 x size (1-D sites, mean field)."""
        total = 0
        for shape in self.site_shapes().values():
            if len(shape) < 2:
                total += 2 * math.prod(shape)
            else:
                m, n = matrix_shape(shape)
                total += m * n + self.rank * (m + n)
        return total


def k_tied(model, *, rank: int = 2, init_scale: float = 1e-3, init_noise: float = 0.1, prefix: str = "auto") -> KTiedNormal:
    """The k-tied Normal guide for `model` (eq. 8); see `KTiedNormal`."""
    return KTiedNormal(model, rank=rank, init_scale=init_scale, init_noise=init_noise, prefix=prefix)
