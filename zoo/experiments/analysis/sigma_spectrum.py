"""The singular-value spectrum of a Gaussian posterior's standard deviations and means, site by site
(k-tied Normal paper, section 2.3, Fig. 3, Fig. 5 top, Fig. 12, appendix A).

Every weight site is reshaped to a matrix (`site_matrix`: dense (in, out) as is; a convolution's kernel
(h, w, in, out) -> (h w in, out), so that one output filter is one column), and the fraction of variance
explained by its top-k singular values is (paper, section 2.3: "gamma_k^2 / sum_i' gamma_i'^2, where
gamma are the singular values")

    share_k(A) = sum_{i <= k} gamma_i^2 / sum_i gamma_i^2          (squares of the singular values)

The paper's observation: for the standard deviations A of a converged mean-field posterior the top 1-2
values hold nearly everything; for the means they do not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from base.errors import InputError

__all__ = ["site_matrix", "singular_value_shares", "variance_explained", "posterior_moments", "posterior_spectra"]


def site_matrix(array) -> np.ndarray:
    """A weight tensor as the paper's matrix: (..., out) -> (prod(...), out).

    array: a dense kernel (in, out) (returned as is) or a convolution's kernel (h, w, in, out)
    (-> (h w in, out)); ndim >= 2. A vector (bias) or a scalar has no matrix: InputError (callers skip
    such sites).
    """
    a = np.asarray(array)
    if a.ndim < 2:
        raise InputError("array", f"<an array of shape {a.shape}>", "a weight tensor with ndim >= 2 "
                         "(dense (in, out) or conv (..., out))", "biases and scalars have no matrix; skip them")
    return a.reshape(-1, a.shape[-1])


def singular_value_shares(matrix) -> np.ndarray:
    """gamma_i^2 / sum_j gamma_j^2 for every singular value gamma_i of `matrix` (m, n), largest first:
    (min(m, n),), summing to 1 (all zeros for a zero matrix: it has no variance to explain)."""
    m = site_matrix(matrix).astype(np.float64)
    s2 = np.linalg.svd(m, compute_uv=False) ** 2
    total = s2.sum()
    return s2 / total if total > 0 else np.zeros_like(s2)


def variance_explained(matrix, k: int) -> float:
    """Fraction of variance of `matrix` (m, n) explained by its top-`k` singular values: sum_{i<=k} gamma_i^2 /
    sum_i gamma_i^2 (the paper's Fig. 3 quantity, on the squared singular values). k >= min(m, n) gives 1."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError("k", k, "a positive integer (how many top singular values)")
    return float(singular_value_shares(matrix)[:k].sum())


def posterior_moments(posterior) -> dict:
    """{site: (mean, sd)} of every latent site of an SVI posterior whose guide is factorised per site
    (`inference.site_guide.SiteGuide`: mean field, k-tied, ...), each of the site's shape, from the guide's
    distributions of the (unconstrained) site values: mean and sqrt(variance) elementwise."""
    guide = getattr(posterior, "guide", None)
    if guide is None or getattr(posterior, "kind", None) != "svi" or not hasattr(guide, "distributions"):
        raise InputError("posterior", f"<a {getattr(posterior, 'kind', type(posterior).__name__)!r} posterior>",
                         "an SVI Posterior of a per-site guide (e.g. inference.mean_field, inference.k_tied.k_tied)")
    out = {}
    for name, fn in guide.distributions(posterior.params).items():
        out[name] = (np.asarray(fn.mean), np.sqrt(np.asarray(fn.variance)))
    return out


def sd_log_ratio(sd, init: float) -> float:
    """How far training moved a sd matrix from its common initial value: the median over its entries of
    |log(sd / init)| (0: untouched; log 2: half the entries moved by a factor of 2 or more)."""
    if not (isinstance(init, (int, float)) and np.isfinite(init) and init > 0):
        raise InputError("init", init, "a positive initial sd")
    return float(np.median(np.abs(np.log(np.maximum(np.ravel(np.asarray(sd, dtype=float)), 1e-30) / init))))


def posterior_spectra(posterior, top: int = 3, seed: int = 0, init: float | None = None) -> pd.DataFrame:
    """One row per weight site (ndim >= 2; biases are skipped) of a per-site SVI posterior (mean field: the
    paper's analysis; any `SiteGuide` works).

    Returns:
      a DataFrame with columns site, shape (the tensor's), matrix ("m x n"), and for i = 1..`top`:
      ``sigma_top{i}`` = `variance_explained` of the sd matrix with k = i, ``mean_top{i}`` the same for the
      means (a cumulative share in [0, 1]); a control: ``sigma_cv`` (sd / mean of the sd entries) and
      ``sigma_top1_shuffled``, the top-1 share of the same sd entries randomly permuted (NumPy seed `seed`):
      any positive matrix whose entries vary little is nearly rank 1, so the structure is in the gap between
      ``sigma_top1`` and this null; with ``init`` (the guide's initial sd), ``sd_log_ratio`` (`sd_log_ratio`).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for name, (mean, sd) in posterior_moments(posterior).items():
        if np.ndim(mean) < 2:
            continue
        m, n = site_matrix(sd).shape
        row = {"site": name, "shape": "x".join(map(str, np.shape(mean))), "matrix": f"{m} x {n}"}
        sd_shares, mean_shares = np.cumsum(singular_value_shares(sd)), np.cumsum(singular_value_shares(mean))
        for i in range(1, top + 1):
            row[f"sigma_top{i}"] = float(sd_shares[min(i, len(sd_shares)) - 1])
        for i in range(1, top + 1):
            row[f"mean_top{i}"] = float(mean_shares[min(i, len(mean_shares)) - 1])
        flat = np.ravel(sd)
        row["sigma_cv"] = float(flat.std() / flat.mean()) if flat.mean() > 0 else float("nan")
        row["sigma_top1_shuffled"] = variance_explained(rng.permutation(flat).reshape(m, n), 1)
        if init is not None:
            row["sd_log_ratio"] = sd_log_ratio(sd, init)
        rows.append(row)
    return pd.DataFrame(rows)
