"""Correlated Gaussian guides over all weights: full covariance and low rank plus diagonal.

Both put one Gaussian on the vector z (D,) of every latent site's unconstrained value, ravelled in model
order (NumPyro's ``AutoContinuous``: an auxiliary site ``_{prefix}_latent`` plus one Delta per site):

* `FullCovariance`: q(z) = N(mu, L Lᵀ), L (D, D) lower triangular (NumPyro's AutoMultivariateNormal).
  Free parameters D + D(D+1)/2. L needs D² floats, so beyond ``max_latent_dim`` (default 16,384:
  a 1 GiB float32 factor; training holds ~4x that for the gradient and Adam's two moments) the guide
  refuses with a ValueError that names D and the memory.
* `LowRank`: q(z) = N(mu, diag(s) (F Fᵀ + I) diag(s)), F (D, r), s (D,) > 0 (NumPyro's
  AutoLowRankMultivariateNormal: ``cov_factor`` = F, ``scale`` = s). Free parameters D + D r + D.
  Any covariance is reachable with r >= D - 1 (Sigma = lambda_min I + a PSD matrix of rank <= D - 1).

Neither gets a closed-form KL: the ELBO uses the Monte Carlo estimate log q(z) - log p(w)
(reference/numpyro-facts.md, AutoContinuous facts). Locations start at the network's own initialisation.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.autoguide import AutoLowRankMultivariateNormal, AutoMultivariateNormal

from inference.gaussian_kl import row_variances
from inference.guide_base import BNNGuide

DEFAULT_MAX_LATENT_DIM = 16_384  # 16,384² float32 = 1 GiB for the Cholesky factor


def check_covariance_size(num_dims: int, max_latent_dim: int, what: str = "full covariance") -> None:
    """Raise ValueError if a dense (num_dims x num_dims) factor is over `max_latent_dim` dimensions.

    The message names the dimension count and the memory of the factor (in the current float dtype).
    """
    if num_dims <= max_latent_dim:
        return
    itemsize = np.dtype(jax.dtypes.canonicalize_dtype(np.float64)).itemsize
    raise ValueError(
        f"{what} over {num_dims:,} latent dimensions needs {_bytes(num_dims * num_dims * itemsize)} for the {num_dims:,} x {num_dims:,} "
        f"Cholesky factor ({8 * itemsize}-bit floats; about 4x that while training with Adam), over "
        f"max_latent_dim={max_latent_dim:,}; raise max_latent_dim if the memory is there, or use "
        "low_rank(model, rank=...) or block_diagonal(model)")


def _bytes(n: int) -> str:
    """A byte count in decimal units, e.g. "915.5 GB"."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n} bytes"


def check_max_latent_dim(max_latent_dim) -> int:
    """`max_latent_dim` validated as a positive integer."""
    if not isinstance(max_latent_dim, (int, np.integer)) or max_latent_dim < 1:
        raise ValueError(f"max_latent_dim: expected a positive integer, got {max_latent_dim!r}")
    return int(max_latent_dim)


class FormulaCount:
    """Mixin: ``num_params()`` by the class's ``num_params_formula``, ``num_params(params)`` counted.

    A lower-triangular factor ``*_scale_tril`` of shape (..., n, n) is stored in full but has
    n(n+1)/2 free entries (it is optimised in that unconstrained form), so it counts as such.
    """

    def num_params(self, params: dict | None = None) -> int:
        """Free variational parameters: counted from constrained `params`, or by the formula when None."""
        if params is None:
            return int(self.num_params_formula())
        total = 0
        for name, value in params.items():
            shape = np.shape(value)
            if name.endswith("_scale_tril"):
                total += math.prod(shape[:-2]) * shape[-1] * (shape[-1] + 1) // 2
            else:
                total += math.prod(shape)
        return total


class FullCovariance(FormulaCount, AutoMultivariateNormal, BNNGuide):
    """One full-covariance Gaussian over all D unconstrained weights (NumPyro's AutoMultivariateNormal).

    Args:
      model: a `models.BNN` (or a NumPyro model with global latents only).
      init_scale: the initial (diagonal) scale of L, as mean field's initial sigma.
      max_latent_dim: largest D accepted (ValueError beyond it, naming D and the memory).
    Parameters: ``{prefix}_loc`` (D,), ``{prefix}_scale_tril`` (D, D) lower triangular.
    """

    def __init__(self, model, *, init_scale: float = 1e-3, max_latent_dim: int = DEFAULT_MAX_LATENT_DIM,
                 prefix: str = "auto"):
        if not init_scale > 0:
            raise ValueError(f"init_scale: expected a positive number, got {init_scale!r}")
        self.max_latent_dim = check_max_latent_dim(max_latent_dim)
        super().__init__(model, init_scale=init_scale, prefix=prefix)
        self.config = {"name": "full_covariance", "init_scale": init_scale, "max_latent_dim": self.max_latent_dim,
                       "prefix": prefix}

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        check_covariance_size(int(self.latent_dim), self.max_latent_dim)

    def site_moments(self, params: dict) -> dict:
        """{site: (mean, variance)} of the unconstrained site values, each of the site's shape (after `setup`)."""
        p = self.prefix
        return _unpack_moments(self, params[f"{p}_loc"], row_variances(params[f"{p}_scale_tril"]))

    def num_params_formula(self) -> int:
        """D + D(D+1)/2 (mean and lower-triangular factor), after `setup`."""
        d = int(self.latent_dim)
        return d + d * (d + 1) // 2


class LowRank(FormulaCount, AutoLowRankMultivariateNormal, BNNGuide):
    """Low rank plus diagonal Gaussian over all D weights (NumPyro's AutoLowRankMultivariateNormal).

    Args:
      model: a `models.BNN`.
      rank: r >= 1, columns of the covariance factor F (D, r); must not exceed D. Memory is linear in D.
      init_scale: initial s (the diagonal scale); F starts at 0, so q starts as mean field.
    Parameters: ``{prefix}_loc`` (D,), ``{prefix}_cov_factor`` F (D, r), ``{prefix}_scale`` s (D,); the covariance
    is (s F)(s F)ᵀ + diag(s²) (NumPyro scales the factor by s).
    """

    def __init__(self, model, *, rank: int = 2, init_scale: float = 1e-3, prefix: str = "auto"):
        if not isinstance(rank, (int, np.integer)) or rank < 1:
            raise ValueError(f"rank: expected a positive integer, got {rank!r}")
        if not init_scale > 0:
            raise ValueError(f"init_scale: expected a positive number, got {init_scale!r}")
        super().__init__(model, rank=int(rank), init_scale=init_scale, prefix=prefix)
        self.config = {"name": "low_rank", "rank": int(rank), "init_scale": init_scale, "prefix": prefix}

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        if self.rank > self.latent_dim:
            raise ValueError(f"rank: {self.rank} exceeds the {int(self.latent_dim)} latent dimensions of the model; "
                             f"use rank <= {int(self.latent_dim)} (rank {int(self.latent_dim) - 1} already "
                             "represents any covariance)")

    def site_moments(self, params: dict) -> dict:
        """{site: (mean, variance)} of each site's shape (after `setup`). NumPyro's factor is relative to s
        (covariance (s F)(s F)ᵀ + diag(s²)), so the variance is s² (1 + sum_j F_ij²)."""
        p = self.prefix
        variance = params[f"{p}_scale"] ** 2 * (1.0 + jnp.sum(params[f"{p}_cov_factor"] ** 2, axis=-1))
        return _unpack_moments(self, params[f"{p}_loc"], variance)

    def num_params_formula(self) -> int:
        """D (loc) + D r (cov_factor) + D (scale), after `setup`."""
        d = int(self.latent_dim)
        return d + d * self.rank + d


def _unpack_moments(guide, mean, variance) -> dict:
    """Split the flat (D,) mean and variance vectors of an AutoContinuous guide into {site: (mean, var)}."""
    means, variances = guide._unpack_latent(mean), guide._unpack_latent(variance)
    return {name: (means[name], variances[name]) for name in means}


def full_covariance(model, *, init_scale: float = 1e-3, max_latent_dim: int = DEFAULT_MAX_LATENT_DIM,
                    prefix: str = "auto") -> FullCovariance:
    """A full-covariance Gaussian over all D weights of `model` (refused beyond `max_latent_dim`); see `FullCovariance`."""
    return FullCovariance(model, init_scale=init_scale, max_latent_dim=max_latent_dim, prefix=prefix)


def low_rank(model, *, rank: int = 2, init_scale: float = 1e-3, prefix: str = "auto") -> LowRank:
    """A rank-`rank` plus diagonal Gaussian over all D weights of `model`; see `LowRank`."""
    return LowRank(model, rank=rank, init_scale=init_scale, prefix=prefix)
