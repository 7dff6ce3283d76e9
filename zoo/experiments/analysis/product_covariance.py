"""Covariance of the product of mean-field layers (Liberty or Depth, section 2 and appendix A).

Convention (Haiku's ``y = x W``): the product matrix of layers W_1 (n_0, n_1), ..., W_L
(n_{L-1}, n_L) is ``M = W_1 W_2 ... W_L`` (n_0, n_L); in index form for two layers
``W^(2)_ab = sum_i A_ai B_ib`` (eq. 2) with A = W_1, B = W_2. Every layer is mean-field:
``Cov(A_ij, A_kl) = delta_ik delta_jl sigma^A_ij^2`` (eq. 3/7). Covariances are returned for
vec(M) in row-major order, entry (a, b) at index ``a * n_L + b``, so a (n_0 n_L, n_0 n_L) matrix.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
from base.errors import InputError

__all__ = [
    "ProductSimulation",
    "simulate_product_covariance",
    "sampled_product_covariance",
    "covariance_standard_error",
    "product_covariance_L2",
    "product_covariance_L3",
    "product_covariance",
    "closed_form_check",
    "posterior_product_covariance",
    "plot_covariance_heatmaps",
]


class ProductSimulation(NamedTuple):
    """Result of ``simulate_product_covariance``: cov (size^2, size^2), products (S, size^2)
    (draws of vec(M)), means and sds (L, size, size) of the mean-field layers."""

    cov: np.ndarray
    products: np.ndarray
    means: np.ndarray
    sds: np.ndarray


def _layers(means: Sequence, sds: Sequence, count: int | None) -> tuple[list, list]:
    means = [np.asarray(m, dtype=np.float64) for m in means]
    sds = [np.asarray(s, dtype=np.float64) for s in sds]
    if count is not None and len(means) != count:
        raise InputError.worded("means", f"means must hold {count} layer matrices, got {len(means)}")
    if len(sds) != len(means) or not means:
        raise InputError.worded("sds", f"sds must hold one matrix per layer like means ({len(means)}), got {len(sds)}")
    for index, (mean, sd) in enumerate(zip(means, sds)):
        if mean.ndim != 2 or sd.shape != mean.shape:
            raise InputError.worded(f"means[{index}]",
                f"means[{index}] must be a matrix and sds[{index}] of its shape, got "
                f"{mean.shape} and {sd.shape}"
            )
        if index and mean.shape[0] != means[index - 1].shape[1]:
            raise InputError.worded(f"means[{index}]",
                f"means[{index}] has {mean.shape[0]} rows but means[{index - 1}] has "
                f"{means[index - 1].shape[1]} columns"
            )
    return means, sds


def _as_matrix(cov4: np.ndarray) -> np.ndarray:
    """(a, b, c, d) covariance tensor -> (n_0 n_L, n_0 n_L) covariance of row-major vec(M)."""
    rows, cols = cov4.shape[:2]
    return cov4.reshape(rows * cols, rows * cols)


def sampled_product_covariance(weight_draws: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Empirical covariance of the product matrix from joint draws of its layers (section 2.2).

    Args:
      weight_draws: L arrays of shape (S, n_{l-1}, n_l), draw s of every layer belonging together
        (e.g. posterior draws of a deep linear network's weight matrices, in layer order).
    Returns:
      cov (n_0 n_L, n_0 n_L), the empirical covariance of row-major vec(M) for
      M = W_1 ... W_L, and products (S, n_0 n_L), the draws of vec(M).
    """
    product = np.asarray(weight_draws[0], dtype=np.float64)
    for index, layer in enumerate(weight_draws[1:], start=1):
        layer = np.asarray(layer, dtype=np.float64)
        if layer.ndim != 3 or layer.shape[0] != product.shape[0] or layer.shape[1] != product.shape[2]:
            raise InputError.worded(f"weight_draws[{index}]",
                f"weight_draws[{index}] must have shape ({product.shape[0]}, {product.shape[2]}, n), "
                f"got {layer.shape}"
            )
        product = product @ layer
    products = product.reshape(product.shape[0], -1)
    return np.cov(products, rowvar=False), products


def simulate_product_covariance(
    L: int,
    size: int = 4,
    num_draws: int = 10_000,
    mean_range: float = 0.1,
    sd: float = 0.5,
    seed: int = 0,
) -> ProductSimulation:
    """Simulated covariance of a product of L mean-field size x size layers (section 2.2, Fig. 1).

    Each layer's means are drawn once from U(-mean_range, mean_range); then ``num_draws``
    independent realizations of every layer are drawn with N(mean, sd^2) entries and multiplied.

    Args:
      L: number of layers (Fig. 1: 1, 5, 20).
      size: layers are size x size (paper: 4).
      num_draws: realizations of each layer (paper: 10,000).
      mean_range, sd: the layer means are U(-mean_range, mean_range), every sd is ``sd``.
      seed: NumPy seed.
    Returns:
      ProductSimulation(cov (size^2, size^2), products (num_draws, size^2),
      means (L, size, size), sds (L, size, size)).
    """
    if L < 1 or size < 1 or num_draws < 2:
        raise InputError.worded("L",
                                f"need L >= 1, size >= 1, num_draws >= 2; got L={L}, size={size}, num_draws={num_draws}")
    rng = np.random.default_rng(seed)
    means = rng.uniform(-mean_range, mean_range, size=(L, size, size))
    sds = np.full((L, size, size), float(sd))
    layers = [mean + scale * rng.standard_normal((num_draws, size, size)) for mean, scale in zip(means, sds)]
    cov, products = sampled_product_covariance(layers)
    return ProductSimulation(cov, products, means, sds)


def covariance_standard_error(products) -> np.ndarray:
    """Monte Carlo standard error of each entry of the empirical covariance of ``products``.

    For the entry (p, q) the estimator averages z_s = (x_sp - mean_p)(x_sq - mean_q), so its
    standard error is std(z) / sqrt(S) (to first order; the products need not be Gaussian).

    Args:
      products: (S, P) draws.
    Returns:
      (P, P) standard errors.
    """
    products = np.asarray(products, dtype=np.float64)
    centred = products - products.mean(axis=0)
    z = centred[:, :, None] * centred[:, None, :]
    return z.std(axis=0, ddof=1) / np.sqrt(products.shape[0])


def product_covariance_L2(means: Sequence, sds: Sequence) -> np.ndarray:
    """Closed-form covariance of W^(2) = A B for mean-field A and B (eq. 14, appendix A).

    Cov(W_ab, W_cd) = sum_ij delta_ij ( delta_ac delta_bd sigma^A_ai^2 sigma^B_ib^2
                                        + mu^B_ib mu^B_jd delta_ac sigma^A_ai^2
                                        + mu^A_ai mu^A_cj delta_bd sigma^B_ib^2 ).
    Entries with a != c and b != d are exactly zero.

    Args:
      means: [mu^A (n_0, K), mu^B (K, n_2)]; sds: the matching standard deviations.
    Returns:
      (n_0 n_2, n_0 n_2) covariance of row-major vec(W^(2)).
    """
    (mu_a, mu_b), (sd_a, sd_b) = _layers(means, sds, 2)
    var_a, var_b = sd_a**2, sd_b**2
    rows, cols = np.eye(mu_a.shape[0]), np.eye(mu_b.shape[1])
    cov = (
        np.einsum("ac,bd,ai,ib->abcd", rows, cols, var_a, var_b)
        + np.einsum("ac,ib,id,ai->abcd", rows, mu_b, mu_b, var_a)
        + np.einsum("bd,ai,ci,ib->abcd", cols, mu_a, mu_a, var_b)
    )
    return _as_matrix(cov)


def _times_mean_field(mean_w: np.ndarray, cov_w: np.ndarray, mu_c: np.ndarray, var_c: np.ndarray) -> np.ndarray:
    """Covariance of W C for W independent of a mean-field C (eq. 15 with eq. 7 for C).

    Cov(W_ai C_ib, W_cj C_jd) summed over i, j, with Cov(C_ib, C_jd) = delta_ij delta_bd var^C_ib:
      = delta_bd sum_i Cov(W_ai, W_ci) var^C_ib          (Cov(W) Cov(C))
      + delta_bd sum_i E[W_ai] E[W_ci] var^C_ib          (E[W] E[W] Cov(C))
      + sum_ij mu^C_ib mu^C_jd Cov(W_ai, W_cj)           (E[C] E[C] Cov(W)).

    Args:
      mean_w: (n_0, K); cov_w: (n_0, K, n_0, K) tensor Cov(W_ai, W_cj); mu_c, var_c: (K, n).
    Returns:
      (n_0, n, n_0, n) tensor Cov((WC)_ab, (WC)_cd).
    """
    cols = np.eye(mu_c.shape[1])
    return (
        np.einsum("bd,aici,ib->abcd", cols, cov_w, var_c)
        + np.einsum("bd,ai,ci,ib->abcd", cols, mean_w, mean_w, var_c)
        + np.einsum("ib,jd,aicj->abcd", mu_c, mu_c, cov_w)
    )


def product_covariance_L3(means: Sequence, sds: Sequence) -> np.ndarray:
    """Closed-form covariance of W^(3) = A B C for mean-field A, B, C (eq. 16-17, appendix A).

    Eq. 15 with W = W^(2) = A B, whose covariance is eq. 14 and whose mean is
    E[W^(2)_ai] = sum_k mu^A_ak mu^B_ki:
      Cov(W^(3)_ab, W^(3)_cd) = delta_bd sum_i sigma^C_ib^2 (Cov(W^(2)_ai, W^(2)_ci) + E[W^(2)_ai] E[W^(2)_ci])
                              + sum_ij mu^C_ib mu^C_jd Cov(W^(2)_ai, W^(2)_cj).
    The last (the paper's red) term carries no delta on a, b, c, d, so with non-zero means every
    entry is non-zero.

    Args:
      means: [mu^A (n_0, K), mu^B (K, K'), mu^C (K', n_3)]; sds: the matching standard deviations.
    Returns:
      (n_0 n_3, n_0 n_3) covariance of row-major vec(W^(3)).
    """
    (mu_a, mu_b, mu_c), (sd_a, sd_b, sd_c) = _layers(means, sds, 3)
    cov_w2 = product_covariance_L2([mu_a, mu_b], [sd_a, sd_b])
    cov_w2 = cov_w2.reshape(mu_a.shape[0], mu_b.shape[1], mu_a.shape[0], mu_b.shape[1])
    return _as_matrix(_times_mean_field(mu_a @ mu_b, cov_w2, mu_c, sd_c**2))


def product_covariance(means: Sequence, sds: Sequence) -> np.ndarray:
    """Closed-form covariance of W_1 ... W_L for any number L >= 1 of mean-field layers.

    Starts from the diagonal covariance of W_1 (eq. 7) and applies eq. 15 once per further layer,
    carrying the mean E[W_1 ... W_l] = mu_1 ... mu_l. For L = 2 and 3 it equals eq. 14 and 16-17.

    Args:
      means: L matrices, layer l of shape (n_{l-1}, n_l); sds: the matching standard deviations.
    Returns:
      (n_0 n_L, n_0 n_L) covariance of row-major vec(W_1 ... W_L).
    """
    means, sds = _layers(means, sds, None)
    mean_w = means[0]
    rows, cols = mean_w.shape
    cov_w = np.einsum("ac,bd,ab->abcd", np.eye(rows), np.eye(cols), sds[0] ** 2)
    for mu_c, sd_c in zip(means[1:], sds[1:]):
        cov_w = _times_mean_field(mean_w, cov_w, mu_c, sd_c**2)
        mean_w = mean_w @ mu_c
    return _as_matrix(cov_w)


def closed_form_check(L: int, size: int = 4, num_draws: int = 10_000, mean_range: float = 0.1,
                      sd: float = 0.5, seed: int = 0) -> dict:
    """Closed form (eq. 14 for L = 2, eq. 16-17 for L = 3, eq. 15 iterated otherwise) vs simulation.

    Returns:
      {"L", "max_abs_error": max |simulated - closed|, "max_se": largest Monte Carlo standard error,
       "max_abs_z": max |simulated - closed| / standard error, "mean_z2": mean squared z (about 1
       when the closed form is right), "min_abs_closed": smallest |entry| of the closed form,
       "max_abs_closed": largest}.
    """
    sim = simulate_product_covariance(L, size, num_draws, mean_range, sd, seed)
    closed_form = {2: product_covariance_L2, 3: product_covariance_L3}.get(L, product_covariance)
    closed = closed_form(list(sim.means), list(sim.sds))
    se = covariance_standard_error(sim.products)
    z = (sim.cov - closed) / se
    return {
        "L": L, "max_abs_error": float(np.max(np.abs(sim.cov - closed))), "max_se": float(se.max()),
        "max_abs_z": float(np.max(np.abs(z))), "mean_z2": float(np.mean(z**2)),
        "min_abs_closed": float(np.min(np.abs(closed))), "max_abs_closed": float(np.max(np.abs(closed))),
    }


def posterior_product_covariance(posterior, num_samples: int = 10_000, seed: int = 0,
                                 name: str = "deep_linear") -> tuple[np.ndarray, np.ndarray]:
    """Covariance of a deep linear network's product matrix under its posterior (blog figure).

    Args:
      posterior: an `inference.Posterior` of ``zoo.get("deep_linear", ...)`` (sites
        ``{name}/~/linear_{i}/w``); SVI: ``num_samples`` guide draws, MCMC: its draws.
      num_samples, seed: draws to use (the blog: 10,000).
    Returns:
      cov (D out, D out) of row-major vec(W_1 ... W_L) and products (S, D out).
    """
    from models.networks.mlp import product_matrix

    product = np.asarray(product_matrix(posterior.draws(num_samples, seed), name), dtype=np.float64)
    products = product.reshape(product.shape[0], -1)
    return np.cov(products, rowvar=False), products


def plot_covariance_heatmaps(covariances: dict, title: str = "", axes=None):
    """Fig. 1-style heatmaps of product-matrix covariances, one panel per entry.

    Each panel has its own symmetric colour scale (red positive, blue negative), since the scale
    grows with depth.

    Args:
      covariances: {panel title (e.g. "L = 5"): (P, P) covariance matrix}.
      title: figure title.
      axes: optional sequence of matplotlib Axes, one per panel.
    Returns:
      the matplotlib Figure.
    """
    from matplotlib.figure import Figure  # the object API: no pyplot, the backend is left alone

    if axes is None:
        axes = Figure(figsize=(4 * len(covariances), 3.6)).subplots(1, len(covariances), squeeze=False)[0]
    fig = axes[0].figure
    for ax, (name, cov) in zip(axes, covariances.items()):
        cov = np.asarray(cov)
        limit = float(np.max(np.abs(cov))) or 1.0
        image = ax.imshow(cov, cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest")
        ax.set_title(str(name))
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if title:
        fig.suptitle(title)
    return fig
