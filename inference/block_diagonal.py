"""Block-diagonal Gaussian guide: one full-covariance Gaussian per weight tensor or per layer.

The latent sites are grouped into blocks b (``blocks="site"``: every weight tensor alone;
``blocks="layer"``: the sites of one Haiku module together, e.g. ``linear_0/w`` and ``linear_0/b``).
For the ravelled unconstrained values z_b (n_b,) of block b

    q(w) = prod_b N(z_b | mu_b, L_b L_bᵀ),   L_b (n_b, n_b) lower triangular,

so weights are correlated within a block and independent across blocks. Like NumPyro's AutoContinuous
guides, each block is an auxiliary site ``_{prefix}_{block}_latent`` and every weight site a Delta at its
slice of it; the ELBO estimates log q - log p by Monte Carlo. Free parameters: sum_b n_b + n_b(n_b+1)/2.
A block over ``max_latent_dim`` dimensions is refused (`full_covariance.check_covariance_size`).
Draws use one independent key per block (not the shared key of ``AutoGuideList``,
reference/numpyro-facts.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import biject_to, constraints
from numpyro.distributions.util import sum_rightmost

from inference.full_covariance import (DEFAULT_MAX_LATENT_DIM, FormulaCount, check_covariance_size,
                                       check_max_latent_dim)
from inference.gaussian_kl import row_variances
from inference.guide_base import BNNGuide
from inference.per_site import _is_real

BLOCKS = ("site", "layer")


class BlockDiagonal(FormulaCount, BNNGuide):
    """A full-covariance Gaussian per block of sites (see the module docstring).

    Args:
      model: a `models.BNN`.
      blocks: "site" (one block per weight tensor) or "layer" (one per Haiku module path).
      init_scale: initial diagonal of every L_b (as mean field's initial sigma).
      max_latent_dim: largest block size n_b accepted.
    Parameters per block: ``{block}_{prefix}_loc`` (n_b,), ``{block}_{prefix}_scale_tril`` (n_b, n_b).
    """

    scale_tril_constraint = constraints.scaled_unit_lower_cholesky

    def __init__(self, model, *, blocks: str = "site", init_scale: float = 1e-3,
                 max_latent_dim: int = DEFAULT_MAX_LATENT_DIM, prefix: str = "auto"):
        if blocks not in BLOCKS:
            raise ValueError(f"blocks: expected one of {BLOCKS}, got {blocks!r}")
        if not init_scale > 0:
            raise ValueError(f"init_scale: expected a positive number, got {init_scale!r}")
        self.blocks = blocks
        self._init_scale = init_scale
        self.max_latent_dim = check_max_latent_dim(max_latent_dim)
        super().__init__(model, prefix=prefix)
        self.config = {"name": "block_diagonal", "blocks": blocks, "init_scale": init_scale,
                       "max_latent_dim": self.max_latent_dim, "prefix": prefix}

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        groups: dict = {}
        for name in self._init_locs:
            key = name if self.blocks == "site" else name.rpartition("/")[0] or name
            groups.setdefault(key, []).append(name)
        self.block_sites = groups
        for block in groups:
            check_covariance_size(self.block_size(block), self.max_latent_dim, f"block {block!r} (full covariance)")

    # ----- layout -------------------------------------------------------------------------------
    def block_size(self, block: str) -> int:
        """n_b: the number of unconstrained entries of `block` (after `setup`)."""
        return sum(int(jnp.size(self._init_locs[s])) for s in self.block_sites[block])

    def _unpack(self, block, z) -> dict:
        """{site: (*batch, *site shape)} slices of a block vector z (*batch, n_b)."""
        out, start = {}, 0
        for site in self.block_sites[block]:
            shape = jnp.shape(self._init_locs[site])
            size = int(jnp.size(self._init_locs[site]))
            out[site] = z[..., start:start + size].reshape(jnp.shape(z)[:-1] + shape)
            start += size
        return out

    def _block_params(self, block, params=None):
        name_loc, name_tril = f"{block}_{self.prefix}_loc", f"{block}_{self.prefix}_scale_tril"
        if params is not None:
            return params[name_loc], params[name_tril]
        init = jnp.concatenate([jnp.ravel(self._init_locs[s]) for s in self.block_sites[block]])
        loc = numpyro.param(name_loc, init)
        tril = numpyro.param(name_tril, jnp.eye(init.shape[0]) * self._init_scale,
                             constraint=self.scale_tril_constraint)
        return loc, tril

    # ----- NumPyro guide ----------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """The NumPyro guide: per block an auxiliary MVN draw, per site a Delta; returns {site: value}."""
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        result = {}
        for block in self.block_sites:
            loc, tril = self._block_params(block)
            z = numpyro.sample(f"_{self.prefix}_{block}_latent", dist.MultivariateNormal(loc, scale_tril=tril),
                               infer={"is_auxiliary": True})
            for site, unconstrained in self._unpack(block, z).items():
                fn = self.prototype_trace[site]["fn"]
                value, log_density = unconstrained, 0.0
                if not _is_real(fn.support):  # a constrained site: push through, with the Jacobian term
                    transform = biject_to(fn.support)
                    value = transform(unconstrained)
                    log_density = -transform.log_abs_det_jacobian(unconstrained, value)
                    log_density = sum_rightmost(log_density, jnp.ndim(log_density) - jnp.ndim(value) + fn.event_dim)
                result[site] = numpyro.sample(site, dist.Delta(value, log_density=log_density, event_dim=fn.event_dim))
        return result

    def sample_posterior(self, rng_key, params, *args, sample_shape=(), **kwargs):
        """{site: sample_shape + site shape} constrained draws, one independent key per block."""
        keys = jax.random.split(rng_key, len(self.block_sites))
        latent = {}
        for key, block in zip(keys, self.block_sites):
            loc, tril = self._block_params(block, params)
            latent.update(self._unpack(block, dist.MultivariateNormal(loc, scale_tril=tril).sample(key, sample_shape)))
        return self._postprocess_fn(latent)

    def median(self, params):
        """{site: site shape}: mu_b unpacked and constrained."""
        latent = {}
        for block in self.block_sites:
            latent.update(self._unpack(block, self._block_params(block, params)[0]))
        return self._postprocess_fn(latent)

    def quantiles(self, params, quantiles):
        """{site: (Q,) + site shape}: marginal quantiles N(mu_i, sum_j L_ij²) per entry, constrained."""
        q = jnp.asarray(quantiles)[..., None]
        latent = {}
        for block in self.block_sites:
            loc, tril = self._block_params(block, params)
            latent.update(self._unpack(block, dist.Normal(loc, jnp.linalg.norm(tril, axis=-1)).icdf(q)))
        return self._postprocess_fn(latent)

    def site_moments(self, params: dict) -> dict:
        """{site: (mean, variance)} of the unconstrained site values, each of the site's shape (after `setup`)."""
        out = {}
        for block in self.block_sites:
            loc, tril = self._block_params(block, params)
            means, variances = self._unpack(block, loc), self._unpack(block, row_variances(tril))
            out.update({site: (means[site], variances[site]) for site in means})
        return out

    def num_params_formula(self) -> int:
        """sum over blocks of n_b + n_b(n_b+1)/2, after `setup`."""
        return sum(n + n * (n + 1) // 2 for n in map(self.block_size, self.block_sites))


def block_diagonal(model, *, blocks: str = "site", init_scale: float = 1e-3,
                   max_latent_dim: int = DEFAULT_MAX_LATENT_DIM, prefix: str = "auto") -> BlockDiagonal:
    """A full-covariance Gaussian per weight tensor (``blocks="site"``) or per layer (``"layer"``) of `model`."""
    return BlockDiagonal(model, blocks=blocks, init_scale=init_scale, max_latent_dim=max_latent_dim, prefix=prefix)
