"""Post-hoc rank-k truncation of a mean-field posterior's standard deviations (k-tied Normal paper, Tables 2,
3 and 5, Fig. 5 bottom, appendix A).

Every weight site's sigma is reshaped to its matrix A (`zoo.experiments.analysis.sigma_spectrum.site_matrix`), replaced by its
rank-k SVD approximation A_k = sum_{i <= k} gamma_i u_i v_iᵀ, "lower-bounded by zero" (appendix A: A_k may
hold negative values) and reshaped back; the means and every bias stay as they are. A standard deviation of
exactly 0 makes the Normal's KL to the prior infinite, so the clip is at a tiny positive `floor` (1e-6 by
default) instead: predictions are unaffected (a weight with sd 1e-6 is its mean), but each clipped entry adds
about log(sd_prior / floor) nats to the KL, so the ELBO of a truncation that clips entries depends on the
floor (`truncate_sigma` reports how many were clipped).

`truncation_scores` scores a posterior the paper's way: every metric per weight draw, then its mean and SEM
(sd / sqrt(S), ddof 1) over the S = 100 draws.
"""

from __future__ import annotations

from dataclasses import replace

import jax.numpy as jnp
import numpy as np

from zoo.experiments.analysis.elbo_draws import negative_elbo_draws
from evals.metrics import accuracy, brier, ece, nll
from zoo.experiments.analysis.sigma_spectrum import site_matrix
from inference.k_tied import k_tied
from inference.mean_field import NormalFamily, mean_field
from base.validation import check_positive_ints
from base.errors import InputError
from zoo.experiments.analysis.seed_summary import sem

__all__ = ["DEFAULT_FLOOR", "truncate_matrix", "truncate_sigma", "clipped_entries", "k_tied_param_count",
           "truncation_scores"]

DEFAULT_FLOOR = 1e-6


def truncate_matrix(matrix, k: int, floor: float = 0.0) -> np.ndarray:
    """The rank-k SVD approximation of `matrix` (m, n), clipped below at `floor`: (m, n). k >= min(m, n)
    reconstructs the matrix (up to rounding)."""
    a = np.asarray(matrix, np.float64)
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    return np.maximum((u[:, :k] * s[:k]) @ vt[:k], floor)


def _mean_field_scale_params(posterior) -> dict:
    """{site: scale param name} of the weight sites (ndim >= 2) of a mean-field SVI posterior."""
    guide = getattr(posterior, "guide", None)
    if guide is None or getattr(posterior, "kind", None) != "svi" or not hasattr(guide, "family_of"):
        raise InputError("posterior", f"<a {getattr(posterior, 'kind', type(posterior).__name__)!r} posterior>",
                         "an SVI Posterior of a mean-field guide (inference.mean_field)")
    out = {}
    for site, shape in guide.site_shapes().items():
        if len(shape) < 2:
            continue
        if not isinstance(guide.family_of(site), NormalFamily):
            raise InputError("posterior", f"<a posterior whose site {site!r} has family "
                             f"{type(guide.family_of(site)).__name__}>", "a mean-field posterior (NormalFamily "
                             "on every weight site): the truncation replaces its sigma matrices")
        out[site] = guide.param_name(site, "scale")
    return out


def truncate_sigma(posterior, k: int | None, floor: float = DEFAULT_FLOOR):
    """A copy of a mean-field SVI `posterior` whose sigma matrices are their rank-k SVD approximations,
    clipped below at `floor` (Table 2's procedure; see the module docstring).

    k: a positive integer, or None for no truncation. Sites whose matrix has min(m, n) <= k are kept
    exactly as they are (rank k already represents them); k None, or k >= min(m, n) for every site,
    returns `posterior` itself. The copy has no `unconstrained` parameters (they would be the old ones).
    Returns:
      a `Posterior` with the same guide, model and means.
    """
    if k is None:
        return posterior
    check_positive_ints(k=k)
    scales = _mean_field_scale_params(posterior)
    params = dict(posterior.params)
    changed = False
    for site, name in scales.items():
        sd = np.asarray(params[name])
        matrix = site_matrix(sd)
        if k >= min(matrix.shape):
            continue
        params[name] = jnp.asarray(truncate_matrix(matrix, k, floor).reshape(sd.shape), dtype=sd.dtype)
        changed = True
    if not changed:
        return posterior
    return replace(posterior, params=params, unconstrained=None)


def clipped_entries(posterior, k: int, floor: float = DEFAULT_FLOOR) -> tuple[int, int]:
    """(entries of the rank-k approximations below `floor` before clipping, weight entries in all)."""
    clipped = total = 0
    for name in _mean_field_scale_params(posterior).values():
        matrix = site_matrix(np.asarray(posterior.params[name]))
        total += matrix.size
        if k < min(matrix.shape):
            clipped += int((truncate_matrix(matrix, k, -np.inf) < floor).sum())
    return clipped, total


def k_tied_param_count(model, feature_shape, k: int | None) -> int:
    """Variational parameters of `model` (inputs of `feature_shape`) with the sigma matrices tied at rank k:
    sum over weight matrices (m x n) of mn + k(m + n), plus 2 per bias entry (Table 1; the k-tied guide's
    own formula, `inference.k_tied.KTiedFamily.num_params`); k None: mean field, 2 per entry."""
    if model.feature_shape is None:
        model.feature_shape = tuple(feature_shape)
    guide = mean_field(model) if k is None else k_tied(model, k=k)
    return guide.num_params_formula()


def _mean_sem(values) -> tuple[float, float]:
    v = np.asarray(values, np.float64)
    return float(v.mean()), sem(v)


def truncation_scores(posterior, data, n_train: int, num_samples: int = 100, seed: int = 0) -> dict:
    """The Table 2 / 3 scores of a classification SVI `posterior` on `data` (a `zoo.data.Dataset` or (x, y)).

    Each of -ELBO per example (`zoo.experiments.analysis.elbo_draws`, KL / `n_train`), accuracy, NLL (-mean log p(y | x, w_s)),
    Brier (mean of sum_c (p_c - onehot_c)^2; the paper's Table 3 prints TF's score, this minus 1) and ECE
    (15 bins) is computed per weight draw w_s, s = 1..`num_samples`, and given as ``{metric}`` (the mean over
    draws) and ``{metric}_sem`` (sd / sqrt(S), ddof 1), as the paper's "mean and SEM across 100 weights
    samples". Also the ensemble's (average of the S predictive distributions) ``ens_accuracy``, ``ens_nll``
    and ``ens_ece``.
    """
    x, y = (data.x, data.y) if hasattr(data, "x") else data
    y = np.asarray(y)
    log_p = np.asarray(posterior.log_predict(x, num_samples=num_samples, seed=seed), np.float64)  # (S, N, C)
    probs = np.exp(log_p)
    probs /= probs.sum(-1, keepdims=True)  # rounding only
    per_draw = {
        "neg_elbo": negative_elbo_draws(posterior, x, y, n_train, num_samples=num_samples, seed=seed),
        "accuracy": [accuracy(p, y) for p in probs],
        "nll": -log_p[:, np.arange(y.size), y].mean(1),
        "brier": [brier(p, y) for p in probs],
        "ece": [ece(p, y) for p in probs],
    }
    out = {}
    for name, values in per_draw.items():
        out[name], out[f"{name}_sem"] = _mean_sem(values)
    mean_probs = probs.mean(0)
    out.update(ens_accuracy=accuracy(mean_probs, y), ens_nll=nll(probs, y), ens_ece=ece(mean_probs, y))
    return out
