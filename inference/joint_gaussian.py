"""Correlated Gaussian guides: one Gaussian per block of sites (all weights, one layer, or one tensor).

The latent sites are grouped into blocks b (``blocks="all"``: every site together; ``"layer"``: the
sites of one Haiku module, e.g. ``linear_0/w`` and ``linear_0/b``; ``"site"``: every tensor alone). For
the ravelled unconstrained values z_b (n_b,) of block b (sites in model order)

    q(w) = prod_b N(z_b | mu_b, Sigma_b),

with Sigma_b = L_b L_bᵀ, L_b (n_b, n_b) lower triangular (``covariance="full"``), or
Sigma_b = diag(s) (F Fᵀ + I) diag(s), F (n_b, r), s > 0 (``covariance="low_rank"``, memory linear in
n_b). Like NumPyro's AutoContinuous guides, each block is an auxiliary site and every weight site a
Delta at its slice of it (with the Jacobian of the support's bijection as its log density).

* `full_covariance` = one full block (NumPyro's AutoMultivariateNormal): D + D(D+1)/2 parameters;
  refused beyond ``max_latent_dim`` with an error that names D and the memory.
* `low_rank` = one low-rank block (NumPyro's AutoLowRankMultivariateNormal): D + D r + D parameters.
* `block_diagonal` = a full block per site or layer: sum_b n_b + n_b(n_b+1)/2 parameters.

Parameter names: ``{prefix}_loc``, ``{prefix}_scale_tril`` (``_cov_factor``, ``_scale``) for one block
(NumPyro's names); ``{block}_{prefix}_...`` per block otherwise. The ELBO's KL of these guides is exact
against Normal priors (`site_moments` + the Gaussian's entropy, `inference.gaussian_kl`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import biject_to, constraints
from numpyro.distributions.util import sum_rightmost

from inference.families import positive_number
from inference.gaussian_kl import row_variances
from inference.guide_base import BNNGuide
from inference.registry import plain_model_under, register_guide
from models.bridge import constrain
from base.errors import InputError

BLOCKS = ("all", "layer", "site")
COVARIANCES = ("full", "low_rank")
DEFAULT_MAX_LATENT_DIM = 16_384  # 16,384² float32 = 1 GiB for the Cholesky factor


class JointGaussian(BNNGuide):
    """A Gaussian per block of sites (see the module docstring).

    Args:
      model: a `models.BNN`.
      blocks: "all", "layer" or "site".
      covariance: "full" (Cholesky factor) or "low_rank" (rank `rank` plus diagonal).
      rank: r >= 1 for "low_rank" (must not exceed a block's size).
      init_scale: the initial marginal standard deviation (the diagonal of L, or s; F starts at 0).
      max_latent_dim: largest block accepted by "full" (ValueError beyond it, naming n_b and the memory).
      prefix, config: as `BNNGuide`.
    """

    def __init__(self, model, *, blocks: str = "all", covariance: str = "full", rank: int | None = None,
                 init_scale: float = 1e-3, max_latent_dim: int = DEFAULT_MAX_LATENT_DIM, prefix: str = "auto",
                 config: dict):
        if blocks not in BLOCKS:
            raise InputError.worded("blocks", f"blocks: expected one of {BLOCKS}, got {blocks!r}")
        if covariance not in COVARIANCES:
            raise InputError.worded("covariance", f"covariance: expected one of {COVARIANCES}, got {covariance!r}")
        if covariance == "low_rank" and (isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1):
            raise InputError.worded("rank", f"rank: expected a positive integer, got {rank!r}")
        self.blocks = blocks
        self.covariance = covariance
        self.rank = None if rank is None else int(rank)
        self.init_scale = positive_number("init_scale", init_scale)
        self.max_latent_dim = check_max_latent_dim(max_latent_dim)
        super().__init__(model, prefix=prefix, config=config)
        self.block_sites: dict[str, list[str]] = {}  # {block: [site names]}, by `check_sites`
        self.finish()

    def __value_key__(self):
        """The guide's configuration, its equality (`BNNGuide`): blocks, covariance, rank, init_scale,
        max_latent_dim, its model's value key (`base.value_key`), prefix and site shapes; None (identity) for a
        subclass."""
        if type(self) is not JointGaussian:
            return None
        return (self.blocks, self.covariance, self.rank, self.init_scale, self.max_latent_dim, self.model_key())

    def grouped_sites(self) -> dict[str, list[str]]:
        """{block: [site names]}."""
        return self.block_sites

    def low_rank(self) -> int:
        """r, the rank of the low-rank covariances (``covariance="low_rank"``, whose rank __init__ requires)."""
        assert self.rank is not None
        return self.rank

    # ----- layout ----------------------------------------------------------------------------------
    def check_sites(self) -> None:
        """Group the sites into blocks and refuse blocks that are too large (full) or smaller than the rank."""
        groups: dict = {}
        for name in self.checked_sites():
            key = {"all": "", "site": name, "layer": name.rpartition("/")[0] or name}[self.blocks]
            groups.setdefault(key, []).append(name)
        self.block_sites = groups
        for block in groups:
            size = self.block_size(block)
            if self.covariance == "full":
                what = "full covariance" if block == "" else f"block {block!r} (full covariance)"
                check_covariance_size(size, self.max_latent_dim, what)
            elif self.low_rank() > size:
                raise InputError.worded("rank", f"rank: {self.rank} exceeds the {size} latent dimensions of "
                                 f"{'the model' if block == '' else f'block {block!r}'}; use rank <= {size} "
                                 f"(rank {size - 1} already represents any covariance)")

    def block_size(self, block: str) -> int:
        """n_b: the number of unconstrained entries of `block`."""
        sites = self.checked_sites()
        return sum(int(np.prod(sites[s].shape, dtype=int)) for s in self.grouped_sites()[block])

    def param_name(self, block: str, suffix: str) -> str:
        """``{prefix}_{suffix}`` for the one block of ``blocks="all"``, else ``{block}_{prefix}_{suffix}``."""
        return f"{self.prefix}_{suffix}" if block == "" else f"{block}_{self.prefix}_{suffix}"

    def latent_site(self, block: str) -> str:
        """The auxiliary sample site of `block`: ``_{prefix}_latent`` or ``_{prefix}_{block}_latent``."""
        return f"_{self.prefix}_latent" if block == "" else f"_{self.prefix}_{block}_latent"

    def unpack(self, block: str, z) -> dict:
        """{site: (*batch, *site shape)} slices of a block vector z (*batch, n_b)."""
        out, start = {}, 0
        sites = self.checked_sites()
        for name in self.grouped_sites()[block]:
            shape = sites[name].shape
            size = int(np.prod(shape, dtype=int))
            out[name] = z[..., start:start + size].reshape(jnp.shape(z)[:-1] + shape)
            start += size
        return out

    # ----- parameters and distributions ------------------------------------------------------------------
    def block_values(self, block: str, params: dict | None = None) -> dict:
        """{suffix: constrained value} of `block`: from `params`, or created with ``numpyro.param`` when None."""
        suffixes = ("loc", "scale_tril") if self.covariance == "full" else ("loc", "cov_factor", "scale")
        if params is not None:
            return {s: params[self.param_name(block, s)] for s in suffixes}
        sites = self.checked_sites()
        loc = jnp.concatenate([jnp.ravel(sites[s].init_loc) for s in self.grouped_sites()[block]])
        n = loc.shape[0]
        values = {"loc": numpyro.param(self.param_name(block, "loc"), loc)}
        if self.covariance == "full":
            values["scale_tril"] = numpyro.param(self.param_name(block, "scale_tril"), jnp.eye(n) * self.init_scale,
                                                 constraint=constraints.scaled_unit_lower_cholesky)
        else:
            values["cov_factor"] = numpyro.param(self.param_name(block, "cov_factor"), jnp.zeros((n, self.rank)))
            values["scale"] = numpyro.param(self.param_name(block, "scale"), jnp.full(n, self.init_scale),
                                            constraint=constraints.softplus_positive)
        return values

    def block_distribution(self, values: dict):
        """MultivariateNormal(loc, scale_tril) or LowRankMultivariateNormal(loc, s F, s²) of one block."""
        if self.covariance == "full":
            return dist.MultivariateNormal(values["loc"], scale_tril=values["scale_tril"])
        scale = values["scale"]
        return dist.LowRankMultivariateNormal(values["loc"], values["cov_factor"] * scale[..., None], scale * scale)

    def block_variances(self, values: dict):
        """diag(Sigma_b) (n_b,): sum_j L_ij² (full) or s² (1 + sum_j F_ij²) (low rank)."""
        if self.covariance == "full":
            return row_variances(values["scale_tril"])
        return values["scale"] ** 2 * (1.0 + jnp.sum(values["cov_factor"] ** 2, axis=-1))

    # ----- the NumPyro guide -------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """Per block an auxiliary Gaussian draw, per site a Delta at its slice; returns {site: value}."""
        self.check_same_sites(args[0] if args else kwargs["x"])
        result = {}
        for block in self.block_sites:
            z = numpyro.sample(self.latent_site(block), self.block_distribution(self.block_values(block)),
                               infer={"is_auxiliary": True})
            for name, unconstrained in self.unpack(block, z).items():
                site = self.sites[name]
                value, log_density = unconstrained, 0.0
                if not site.is_real:  # push through the support's bijection, with the Jacobian term
                    transform = biject_to(site.support)
                    value = transform(unconstrained)
                    log_density = -transform.log_abs_det_jacobian(unconstrained, value)
                    log_density = sum_rightmost(log_density, jnp.ndim(log_density) - jnp.ndim(value) + len(site.shape))
                result[name] = numpyro.sample(name, dist.Delta(value, log_density=log_density, event_dim=len(site.shape)))
        return result

    def sample_posterior(self, rng_key, params, *args, sample_shape=(), **kwargs):
        """{site: sample_shape + site shape} constrained draws, one independent key per block."""
        keys = jax.random.split(rng_key, len(self.block_sites))
        latent = {}
        for key, block in zip(keys, self.block_sites):
            z = self.block_distribution(self.block_values(block, params)).sample(key, sample_shape)
            latent.update(self.unpack(block, z))
        return constrain(self.sites, latent)

    def median(self, params):
        """{site: site shape}: mu_b unpacked and constrained."""
        latent = {}
        for block in self.block_sites:
            latent.update(self.unpack(block, self.block_values(block, params)["loc"]))
        return constrain(self.sites, latent)

    def quantiles(self, params, quantiles):
        """{site: (Q,) + site shape}: marginal quantiles N(mu_i, Sigma_ii) per entry, constrained."""
        q = jnp.asarray(quantiles)[..., None]
        latent = {}
        for block in self.block_sites:
            values = self.block_values(block, params)
            sd = jnp.sqrt(self.block_variances(values))
            latent.update(self.unpack(block, dist.Normal(values["loc"], sd).icdf(q)))
        return constrain(self.sites, latent)

    def site_moments(self, params: dict) -> dict:
        """{site: (mean, variance)} of the unconstrained site values, each of the site's shape ."""
        out = {}
        for block in self.grouped_sites():
            values = self.block_values(block, params)
            means, variances = self.unpack(block, values["loc"]), self.unpack(block, self.block_variances(values))
            out.update({name: (means[name], variances[name]) for name in means})
        return out

    # ----- parameter counts ------------------------------------------------------------------------------------
    def num_params_formula(self) -> int:
        """Sum over blocks of n_b + n_b(n_b+1)/2 (full) or n_b + n_b r + n_b (low rank)."""
        sizes = [self.block_size(b) for b in self.grouped_sites()]
        if self.covariance == "full":
            return sum(n + n * (n + 1) // 2 for n in sizes)
        rank = self.low_rank()
        return sum(n + n * rank + n for n in sizes)

    def num_free_params(self, params: dict) -> int:
        """Free parameters counted from `params`: a lower-triangular ``*_scale_tril`` (..., n, n) counts
        n(n+1)/2 (it is optimised in that unconstrained form), every other array its size."""
        total = 0
        for name, value in params.items():
            shape = np.shape(value)
            if name.endswith("_scale_tril"):
                total += int(np.prod(shape[:-2], dtype=int)) * shape[-1] * (shape[-1] + 1) // 2
            else:
                total += int(np.prod(shape, dtype=int))
        return total


def check_covariance_size(num_dims: int, max_latent_dim: int, what: str = "full covariance") -> None:
    """Raise ValueError if a dense (num_dims x num_dims) factor is over `max_latent_dim` dimensions.

    The message names the dimension count and the memory of the factor (in the current float dtype).
    """
    if num_dims <= max_latent_dim:
        return
    itemsize = np.dtype(jax.dtypes.canonicalize_dtype(np.float64)).itemsize
    raise InputError.worded("guide",
        f"guide: {what} over {num_dims:,} latent dimensions needs {_bytes(num_dims * num_dims * itemsize)} for the "
        f"{num_dims:,} x {num_dims:,} Cholesky factor ({8 * itemsize}-bit floats; about 4x that while training "
        f"with Adam), over max_latent_dim={max_latent_dim:,}; raise max_latent_dim if the memory is there, or use "
        "low_rank(model, rank=...) or block_diagonal(model)")


def _bytes(n: int) -> str:
    """A byte count in decimal units, e.g. "915.5 GB"."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n} bytes"


def check_max_latent_dim(max_latent_dim) -> int:
    """`max_latent_dim` validated as a positive integer."""
    if isinstance(max_latent_dim, bool) or not isinstance(max_latent_dim, (int, np.integer)) or max_latent_dim < 1:
        raise InputError.worded("max_latent_dim",
                                f"max_latent_dim: expected a positive integer, got {max_latent_dim!r}")
    return int(max_latent_dim)


@register_guide("full_covariance", suits=plain_model_under(DEFAULT_MAX_LATENT_DIM))
def full_covariance(model, *, init_scale: float = 1e-3, max_latent_dim: int = DEFAULT_MAX_LATENT_DIM,
                    prefix: str = "auto") -> JointGaussian:
    """One full-covariance Gaussian N(mu, L Lᵀ) over all D unconstrained weights (refused beyond `max_latent_dim`)."""
    return JointGaussian(model, blocks="all", covariance="full", init_scale=init_scale, max_latent_dim=max_latent_dim,
                         prefix=prefix, config={"name": "full_covariance", "init_scale": init_scale,
                                                "max_latent_dim": max_latent_dim})


@register_guide("low_rank")
def low_rank(model, *, rank: int = 2, init_scale: float = 1e-3, prefix: str = "auto") -> JointGaussian:
    """A rank-`rank` plus diagonal Gaussian over all D weights: covariance (s F)(s F)ᵀ + diag(s²); F starts at 0."""
    return JointGaussian(model, blocks="all", covariance="low_rank", rank=rank, init_scale=init_scale, prefix=prefix,
                         config={"name": "low_rank", "rank": rank, "init_scale": init_scale})


@register_guide("block_diagonal", suits=plain_model_under(DEFAULT_MAX_LATENT_DIM, per_site=True))
def block_diagonal(model, *, blocks: str = "site", init_scale: float = 1e-3,
                   max_latent_dim: int = DEFAULT_MAX_LATENT_DIM, prefix: str = "auto") -> JointGaussian:
    """A full-covariance Gaussian per weight tensor (``blocks="site"``) or per layer (``"layer"``)."""
    if blocks not in ("site", "layer"):
        raise InputError.worded("blocks", f"blocks: expected 'site' or 'layer', got {blocks!r}")
    return JointGaussian(model, blocks=blocks, covariance="full", init_scale=init_scale, max_latent_dim=max_latent_dim,
                         prefix=prefix, config={"name": "block_diagonal", "blocks": blocks, "init_scale": init_scale,
                                                "max_latent_dim": max_latent_dim})
