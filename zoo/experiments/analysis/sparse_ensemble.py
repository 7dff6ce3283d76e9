"""Sparse ensembles of variance networks (Neklyudov et al., 2018, section 6.4, Fig. 5).

For a threshold t on kappa (eq. 16, `zoo.experiments.analysis.curvature`), every weight of the variance layer with kappa < t
is replaced in every posterior draw by its mean ("mean" curve) or by 0 ("zero" curve); the ensemble
(eq. 2) of the edited draws is scored. The paper zeroes about 98 % of LeNet-5's first dense layer with no
loss of accuracy. Threshold 0 edits nothing (kappa >= 0 is never < 0 here: |kappa| is used).
"""

from __future__ import annotations

import jax
import numpy as np
import pandas as pd

__all__ = ["ensemble_probs", "edited_draws", "sparse_ensemble_curve"]


def ensemble_probs(model, draws: dict, x, state=None):
    """Average predictive probabilities over draws: draws {site: (S, ...)} -> (N, C) NumPy (eq. 2)."""
    probs = jax.vmap(lambda p: model.predictive(p, x, state=state))(draws)
    return np.asarray(probs).mean(axis=0)


def edited_draws(draws: dict, site: str, below, replacement) -> dict:
    """``draws`` with ``site``'s entries where ``below`` (bool, site shape) set to ``replacement`` (site shape or
    scalar) in every draw; the other sites unchanged."""
    values = np.asarray(draws[site])
    return {**draws, site: np.where(np.asarray(below)[None], np.broadcast_to(replacement, values.shape[1:])[None],
                                    values)}


def sparse_ensemble_curve(posterior, site: str, kappa, log10_thresholds, x, y, num_samples: int = 10,
                          seed: int = 0) -> pd.DataFrame:
    """Fig. 5: ensemble accuracy when the weights of ``site`` with |kappa| < threshold are set to their mean
    or to zero, for each threshold (given as log10 values; -inf or any value <= log10 of the smallest kappa
    edits nothing; threshold 0 in kappa, i.e. log10 = -inf, is the full ensemble).

    kappa: (site shape) from `zoo.experiments.analysis.curvature.layer_kappa`; x (N, ...), y (N,); the same ``num_samples``
    draws for every threshold. Returns a DataFrame, one row per threshold: log10_threshold,
    fraction_below (of the layer's weights), compression (size / weights left nonzero in the zero curve),
    acc_mean (below -> mean), acc_zero (below -> 0), acc_full (no edit).
    """
    draws = {k: np.asarray(v) for k, v in posterior.draws(num_samples, seed=seed).items()}
    mean = np.asarray(posterior.median()[site])
    y = np.asarray(y)
    abs_kappa = np.abs(np.asarray(kappa, np.float64))

    def acc(d):
        return float(np.mean(ensemble_probs(posterior.model, d, x, posterior.state).argmax(-1) == y))

    full = acc(draws)
    rows = []
    for t in log10_thresholds:
        below = abs_kappa < 10.0 ** float(t)
        kept = int(abs_kappa.size - below.sum())
        rows.append({"log10_threshold": float(t), "fraction_below": float(below.mean()),
                     "compression": abs_kappa.size / max(kept, 1),
                     "acc_mean": acc(edited_draws(draws, site, below, mean)) if below.any() else full,
                     "acc_zero": acc(edited_draws(draws, site, below, 0.0)) if below.any() else full,
                     "acc_full": full})
    return pd.DataFrame(rows)
