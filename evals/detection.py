"""Out-of-distribution detection: how well a posterior's uncertainty tells inputs like its training data (in) from
inputs of another distribution (out). Not to be confused with `evals.ood`, which scores accuracy / NLL / ECE on
corrupted test sets; here the labels of the inputs play no part.

Every input x gets three uncertainty scores u(x), larger = "more likely out-of-distribution", from S predictive
draws p_s(y | x) (S, N, C) and their average p(y | x) = mean_s p_s:

  max_probability      u = 1 - max_c p(c | x)  (the baseline of Hendrycks and Gimpel 2017, "A baseline for
                       detecting misclassified and out-of-distribution examples")
  entropy              u = H[p(y | x)] = -sum_c p_c log p_c (nats), the total predictive uncertainty
  mutual_information   u = H[mean_s p_s] - mean_s H[p_s], the epistemic part (`evals.metrics.mutual_information`;
                       0 for a point estimate, whose draws are all alike: below `MI_ROUNDING` it counts as 0, so
                       such a posterior ties every input and scores AUROC 0.5 by it)

and each score gives four numbers (`detection_metrics`; Hendrycks and Gimpel 2017, Sec. 2; Liang et al. 2018,
"ODIN", Sec. 4.2), computed with scikit-learn's metrics (``roc_auc_score``, ``average_precision_score``,
``roc_curve``), the well-kept implementations these benchmarks use:

  auroc      area under the ROC curve with the OUT inputs as the positive class and u as the score (the same number
             with IN positive and -u): the probability that a random out input scores above a random in input,
             ties counting 1/2. 1 = perfect, 0.5 = chance, 0 = reversed.
  aupr_in    area under the precision-recall curve with the IN inputs as the positive class, scored by -u
             (scikit-learn's average precision: sum_k (R_k - R_{k-1}) P_k, no interpolation). Chance = the fraction
             of in inputs.
  aupr_out   the same with the OUT inputs positive, scored by u. Chance = the fraction of out inputs.
  fpr_at_95_tpr  with the IN inputs as the positive class (ODIN's convention): the fraction of out inputs taken
             for in-distribution at the threshold that keeps (at least) 95 % of the in inputs, i.e. the false
             positive rate at the first ROC point whose true positive rate reaches 0.95. 0 = perfect, 1 = worst.

`ood_detection(posterior, in_data, out_data)` (also `evals.ood_detection`) returns them as one table (pandas DataFrame: rows = score, columns
= metrics, plus n_in and n_out); `detection_scores` / `detection_table` are its two halves, for plots
(`plot_detection`) and for several out sets scored against one in set; `detection_frame` scores several
posteriors against several out sets (`auroc_grid`, `plot_auroc_grid`: one number per posterior, set and score).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from base.errors import InputError
from evals import metrics

__all__ = ["SCORES", "METRICS", "uncertainty_scores", "detection_metrics", "detection_scores", "detection_table",
           "ood_detection", "detection_frame", "auroc_grid", "plot_auroc_grid", "plot_detection"]

SCORES = ("max_probability", "entropy", "mutual_information")
METRICS = ("auroc", "aupr_in", "aupr_out", "fpr_at_95_tpr")
TPR_LEVEL = 0.95
MI_ROUNDING = 1e-10
"""Nats: a mutual information smaller than this in magnitude is 0 (draws that agree, e.g. a point estimate's,
leave float64 rounding of about 1e-16 in H[mean] - mean H, which would otherwise rank inputs at random)."""


def uncertainty_scores(member_probs) -> dict:
    """{score name: (N,) uncertainty u(x), larger = more likely out-of-distribution} for the `SCORES`, from
    member probabilities (S, N, C) (an (N, C) array is one draw). Checked by `evals.metrics.checked`."""
    probs = np.asarray(member_probs)
    probs = probs[None] if probs.ndim == 2 else probs
    member = metrics.checked(probs, member=True, arg="member_probs")[0]
    mean = member.mean(0)
    information = metrics.mutual_information(member)
    information = np.where(np.abs(information) < MI_ROUNDING, 0.0, information)
    return {"max_probability": 1.0 - mean.max(-1), "entropy": metrics.predictive_entropy(mean),
            "mutual_information": information}


def _scores_arg(values, arg: str) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1 or len(a) == 0:
        raise InputError(arg, f"<array of shape {a.shape}>", "a non-empty vector of scores (N,)")
    if not np.all(np.isfinite(a)):
        raise InputError(arg, f"<{int((~np.isfinite(a)).sum())} NaN/inf entries>", "finite scores")
    return a


def detection_metrics(score_in, score_out) -> dict:
    """{auroc, aupr_in, aupr_out, fpr_at_95_tpr} (module docstring) of uncertainty scores of the in inputs (N_in,)
    and of the out inputs (N_out,), larger = more likely out. Raises InputError naming the argument for an empty,
    non-vector or non-finite one."""
    from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

    u_in, u_out = _scores_arg(score_in, "score_in"), _scores_arg(score_out, "score_out")
    u = np.concatenate([u_in, u_out])
    is_out = np.concatenate([np.zeros(len(u_in), int), np.ones(len(u_out), int)])
    fpr, tpr, _ = roc_curve(1 - is_out, -u)  # IN positive, scored by -u
    first = int(np.searchsorted(tpr, TPR_LEVEL - 1e-12, side="left"))  # tpr is non-decreasing and ends at 1
    return {"auroc": float(roc_auc_score(is_out, u)),
            "aupr_in": float(average_precision_score(1 - is_out, -u)),
            "aupr_out": float(average_precision_score(is_out, u)),
            "fpr_at_95_tpr": float(fpr[first])}


def _inputs(data, arg: str) -> np.ndarray:
    x = data.x if hasattr(data, "x") else data[0] if isinstance(data, tuple) else data
    x = np.asarray(x)
    if x.ndim < 2 or len(x) == 0:
        raise InputError(arg, f"<inputs of shape {x.shape}>", "a Dataset, (x, y) or inputs x (N, ...) with N >= 1")
    return x


def detection_scores(posterior, data, *, num_samples: int = 100, seed: int = 0, preprocess=None, arg: str = "data"):
    """{score name: (N,) uncertainty} of `posterior`'s predictions on `data` (a `Dataset`, (x, y) or inputs x
    (N, ...)): `uncertainty_scores` of `num_samples` draws (`evals.scoring.member_predictions`; a posterior, an
    ensemble or a callable x -> (S, N, C) / (N, C)); `preprocess`: x -> x applied first (e.g. a standardisation)."""
    from evals.scoring import member_predictions

    x = _inputs(data, arg)
    x = preprocess(x) if preprocess is not None else x
    probs, _ = member_predictions(posterior, x, num_samples=num_samples, seed=seed)
    return uncertainty_scores(probs)


def detection_table(scores_in: dict, scores_out: dict) -> pd.DataFrame:
    """One row per score name of both dicts {name: (N,) uncertainty} (in `SCORES` order), columns `METRICS`, n_in
    and n_out (`detection_metrics`). Index named "score"."""
    names = [s for s in SCORES if s in scores_in and s in scores_out]
    names += [s for s in scores_in if s in scores_out and s not in names]
    if not names:
        raise InputError("scores_out", sorted(scores_out), f"a score of scores_in ({sorted(scores_in)})")
    rows = [{**detection_metrics(scores_in[s], scores_out[s]), "n_in": len(scores_in[s]),
             "n_out": len(scores_out[s])} for s in names]
    return pd.DataFrame(rows, index=pd.Index(names, name="score"))


def ood_detection(posterior, in_data, out_data, *, num_samples: int = 100, seed: int = 0,
                  preprocess=None) -> pd.DataFrame:
    """How well `posterior` tells `in_data` from `out_data` (module docstring): a DataFrame with one row per score
    (max_probability, entropy, mutual_information) and columns auroc, aupr_in, aupr_out, fpr_at_95_tpr, n_in,
    n_out. The OUT inputs are the positive class of auroc and aupr_out, the IN inputs that of aupr_in and
    fpr_at_95_tpr.

    Args:
      posterior: an `inference.Posterior` of a classifier (or an ensemble, or a callable x -> (S, N, C)).
      in_data, out_data: `Dataset`, (x, y) or inputs x (N, ...) of the posterior's input shape (labels unused).
      num_samples, seed: the predictive draws (both sets see the same draws).
      preprocess: x -> x applied to both sets before predicting.
    """
    kwargs = {"num_samples": num_samples, "seed": seed, "preprocess": preprocess}
    return detection_table(detection_scores(posterior, in_data, arg="in_data", **kwargs),
                           detection_scores(posterior, out_data, arg="out_data", **kwargs))


def detection_frame(predictors: dict, in_data, out_sets: dict, *, num_samples: int = 100, seed: int = 0,
                    preprocess=None) -> pd.DataFrame:
    """`ood_detection` of several predictors against several out sets: one row per (posterior, out_set, score),
    columns `METRICS`, n_in, n_out. predictors: {name: posterior or predictor}; in_data: as `ood_detection`'s;
    out_sets: {name: inputs (N, ...) or Dataset}. Each predictor's in-set scores are computed once."""
    if not isinstance(predictors, dict) or not predictors:
        raise InputError("predictors", type(predictors).__name__, "a non-empty dict {name: posterior}")
    if not isinstance(out_sets, dict) or not out_sets:
        raise InputError("out_sets", type(out_sets).__name__, "a non-empty dict {name: inputs}")
    kwargs = {"num_samples": num_samples, "seed": seed, "preprocess": preprocess}
    parts = {}
    for name, predictor in predictors.items():
        scores_in = detection_scores(predictor, in_data, arg="in_data", **kwargs)
        for set_name, x in out_sets.items():
            scores_out = detection_scores(predictor, x, arg=f"out_sets[{set_name!r}]", **kwargs)
            parts[(name, set_name)] = detection_table(scores_in, scores_out)
    return pd.concat(parts, names=["posterior", "out_set"])


def auroc_grid(table: pd.DataFrame, metric: str = "auroc") -> pd.DataFrame:
    """A `detection_frame` table as rows = posterior, columns = (out_set, score), values `metric`, in the order
    the table has them."""
    grid = table[metric].unstack(["out_set", "score"])
    columns = list(dict.fromkeys(table.index.droplevel("posterior")))
    return grid.reindex(index=list(dict.fromkeys(table.index.get_level_values("posterior"))), columns=columns)


def plot_auroc_grid(table: pd.DataFrame, path, metric: str = "auroc", title: str = "") -> str:
    """One panel per score: a heat map of `metric` (default AUROC) per posterior (rows) and out set (columns) of a
    `detection_frame` table, the value written in each cell (0.5 white: chance; 1 dark: perfect). Writes a PNG to
    `path` (a file name or a binary file object) and returns it."""
    from matplotlib.figure import Figure

    grid = auroc_grid(table, metric)
    scores = list(dict.fromkeys(grid.columns.get_level_values("score")))
    sets = list(dict.fromkeys(grid.columns.get_level_values("out_set")))
    rows = len(grid.index)
    fig = Figure(figsize=(1.2 + 1.1 * len(sets) * len(scores), 1.4 + 0.28 * rows))
    axes = fig.subplots(1, len(scores), squeeze=False)[0]
    for i, (ax, score) in enumerate(zip(axes, scores)):
        values = grid.xs(score, axis=1, level="score").reindex(columns=sets).to_numpy(dtype=float)
        ax.imshow(values, vmin=0.0, vmax=1.0, cmap="RdBu_r", aspect="auto")
        for (r, c), v in np.ndenumerate(values):
            ax.text(c, r, "" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=6,
                    color="white" if abs(v - 0.5) > 0.35 else "black")
        ax.set_xticks(range(len(sets)), sets, rotation=30, ha="right", fontsize=7)
        ax.set_yticks(range(rows), list(grid.index) if i == 0 else [""] * rows, fontsize=7)
        ax.set_title(f"{metric} by {score}", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(left=0.16, right=0.99, bottom=0.3, top=0.88 if title else 0.92, wspace=0.08)
    fig.savefig(path, format="png", dpi=100, bbox_inches="tight")
    return path


def plot_detection(scores_by_set: dict, scores_in: dict, path, title: str = "") -> str:
    """One panel per score: the histogram of the in inputs' uncertainty (filled) and of each out set's (outlines),
    each out set's AUROC in the legend. scores_by_set: {out set name: {score: (N_out,)}}; scores_in: {score:
    (N_in,)}. Writes a PNG to `path` (a file name or a binary file object) and returns it."""
    from matplotlib.figure import Figure

    from evals.plots import line_styles

    names = [s for s in SCORES if s in scores_in]
    styles = line_styles(len(scores_by_set))
    fig = Figure(figsize=(3.6 * len(names), 3.0))
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names):
        u_in = np.asarray(scores_in[name])
        hi = max([float(u_in.max())] + [float(np.max(s[name])) for s in scores_by_set.values()])
        bins = np.linspace(0.0, hi if hi > 0 else 1.0, 31)
        ax.hist(u_in, bins=bins, density=True, color="0.7", label="in (test)")
        for style, (set_name, scores_out) in zip(styles, scores_by_set.items()):
            auroc = detection_metrics(u_in, scores_out[name])["auroc"]
            ax.hist(np.asarray(scores_out[name]), bins=bins, density=True, histtype="step", lw=1.4,
                    color=style["color"], linestyle=style["linestyle"], label=f"{set_name} (AUROC {auroc:.2f})")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("uncertainty", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    if title:
        fig.suptitle(title)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.16, top=0.85 if title else 0.9, wspace=0.25)
    fig.savefig(path, format="png", dpi=100)
    return path
