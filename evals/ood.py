"""Scoring posteriors on corrupted (out-of-distribution) test sets.

Every (corruption type, severity) pair is its own test set, scored with the metrics of
:mod:`evals.metrics` (NLL of the ensemble, accuracy, ECE with 15 bins, Brier, mean predictive
entropy, mean mutual information) plus ensemble diversity for predictors with several members.
Aggregates follow the CIFAR-10-C / ImageNet-C benchmark (Hendrycks and Dietterich, 2019) as the
uncertainty baselines aggregate it:

* per severity, the mean (and median) over types; cNLL / cA / cECE = mean over severities of those
  per-severity means (``*_median``: of the medians);
* CE_c = mean_s err_{c,s} / mean_s err^ref_{c,s} (the reference error of type c is the reference
  predictor's error averaged over the same severities); mCE = 100 x mean_c CE_c. The reference is
  a named row (default ``"point_estimate"``: the deterministic network of the same architecture),
  and tables say which. A reference with zero error on a type gives NaN there.
* unnormalised mean corruption error uCE = 100 x mean_c mean_s err_{c,s} (= 100 - cA in %).
* diversity (rank-1 paper, sec. 3.6): the fraction of points where two members' argmax differ,
  averaged over member pairs, divided by (1 - accuracy of the averaged prediction).

A predictor is a callable ``predict(x) -> (S, N, C)`` member probabilities (an (N, C) array counts
as one member) or an object with ``.predict(x, num_samples=..., seed=...)`` returning (S, N, C),
such as ``inference.Posterior``. The NLL columns come from per-draw log-likelihoods wherever the
predictor has them: in one pass from ``.log_predict(x, num_samples=..., seed=...) -> (S, N, C)``
log-probabilities (a classification ``inference.Posterior``, an ``ensemble`` of such members), else from
``.log_likelihood(x, y, ...) -> (S, N)`` with the draws of ``.predict`` (`evals.scoring.member_predictions`),
by ``evals.metrics.nll_from_log_likelihood``, exact however over-confident a wrong prediction is; a plain
callable gives probabilities only, and its NLL is ``evals.metrics.nll`` of them (no floor: +inf where
a label has probability 0). Tables are pandas DataFrames; ``summary_table`` has the layout of
Table 2 of the rank-1 paper (NLL, Acc, ECE, cNLL, cA, cECE, mCE, #params).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from evals import metrics
from evals.scoring import classification_row, member_predictions
from base.errors import ArgumentTypeError, InputError

METRICS = ("nll", "accuracy", "ece", "brier", "entropy", "mutual_info", "diversity")
CLEAN = "clean"


def as_scorer(predictor, num_samples=10, seed=0):
    """A function (x, y) -> (member probabilities (S, N, C) float64, per-draw log-likelihoods (S, N) or None)
    of one set of draws (`evals.scoring.member_predictions`: one pass through ``log_predict`` where the
    predictor has it), from a callable, a ``.predict`` object or one with ``.log_predict``."""
    if not (callable(predictor) or hasattr(predictor, "predict") or hasattr(predictor, "log_predict")):
        raise InputError.worded("predictors",
                                f"predictors: expected callables or objects with .predict, got {type(predictor).__name__}")

    def score(x, y):
        probs, log_lik = member_predictions(predictor, x, y, num_samples=num_samples, seed=seed)
        if probs.ndim != 3 or probs.shape[1] != len(x):
            raise InputError.worded("predictors",
                                    f"predictors: expected probabilities (S, {len(x)}, C), got shape {probs.shape}")
        return probs, log_lik

    return score


class Ensemble:
    """A deep ensemble (see `ensemble`): called on x, the members' probabilities concatenated over draws,
    (sum S_m, N, C). When every member has ``.log_predict`` (classification Posteriors), so has the ensemble:
    ``log_predict(x)`` -> (sum S_m, N, C), the members' log-probabilities in the same order (each member with
    the num_samples and seed `ensemble` was given, as for its probabilities)."""

    def __init__(self, members, num_samples=1, seed=0):
        self.members, self.num_samples, self.seed = list(members), num_samples, seed
        if self.members and all(callable(getattr(m, "log_predict", None)) for m in self.members):
            self.log_predict = self._log_predict  # only then: `member_predictions` looks for it

    def __call__(self, x):
        return np.concatenate([member_predictions(m, x, num_samples=self.num_samples, seed=self.seed)[0]
                               for m in self.members], axis=0)

    def _log_predict(self, x, **_settings):
        return np.concatenate([m.log_predict(x, num_samples=self.num_samples, seed=self.seed)
                               for m in self.members], axis=0)


def ensemble(members, num_samples=1, seed=0):
    """A deep ensemble: a predictor whose members are the draws of every predictor in ``members``
    (a list; e.g. point estimates trained from different seeds), concatenated: x -> (sum S_m, N, C).
    When every member has ``.log_predict`` (e.g. a classification `inference.Posterior`), so has the
    ensemble, and its NLL in the OOD tables is exact (see the module docstring)."""
    return Ensemble(members, num_samples, seed)


def pairwise_disagreement(member_probs):
    """Mean over points and member pairs of [argmax_s != argmax_t]: (S, N, C) -> float (NaN if S < 2).

    With n_c members voting class c at a point, the disagreeing pairs are (S^2 - sum_c n_c^2) / 2
    out of S (S - 1) / 2."""
    s, _, c = member_probs.shape
    if s < 2:
        return float("nan")
    votes = np.eye(c)[member_probs.argmax(-1)].sum(0)  # (N, C)
    return float(np.mean((s**2 - (votes**2).sum(-1)) / (s * (s - 1))))


def diversity(member_probs, y):
    """Disagreement normalised by the error: pairwise_disagreement / (1 - accuracy of the
    averaged probabilities) (rank-1 paper, 3.6). (S, N, C), (N,) -> float; NaN if S < 2 or no error."""
    error = 1 - metrics.accuracy(metrics.average(member_probs), y)
    return pairwise_disagreement(member_probs) / error if error > 0 else float("nan")


@dataclass
class OODResults:
    """Scores of several predictors on the same corrupted sets.

    table: one row per (method, type, severity) with n and the columns of ``METRICS``; the clean
      set, if scored, is type "clean", severity 0. probs: {method: {"clean": (N, C), "corrupted":
      (M, C)}} averaged probabilities (float32; corrupted sets pooled) with labels {"clean": (N,),
      "corrupted": (M,)} for reliability diagrams. num_params: {method: int} where known.
    """

    table: pd.DataFrame
    probs: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    num_params: dict = field(default_factory=dict)


def _score_group(scorers, group, rows, pools, labels):
    """Predict the concatenation of the sets in ``group`` [(type, severity, inputs, y)] once per
    predictor (probabilities and, where it has them, per-draw log-likelihoods: `as_scorer`), split
    it back, append one row per set and its pooled averaged probabilities."""
    inputs = np.concatenate([g[2] for g in group]) if len(group) > 1 else group[0][2]
    targets = np.concatenate([g[3] for g in group]) if len(group) > 1 else group[0][3]
    bounds = np.cumsum([0] + [len(g[3]) for g in group])
    for name, scorer in scorers.items():
        member, log_lik = scorer(inputs, targets)
        for (kind, severity, _, y), lo, hi in zip(group, bounds[:-1], bounds[1:]):
            part = member[:, lo:hi]
            row = {"method": name, "type": kind, "severity": severity, "n": len(y)}
            row.update(classification_row(part, y, None if log_lik is None else log_lik[:, lo:hi]))
            row["diversity"] = diversity(part, y)
            rows.append(row)
            pool = CLEAN if kind == CLEAN else "corrupted"
            pools.setdefault(name, {}).setdefault(pool, []).append(metrics.average(part).astype(np.float32))
    for kind, _, _, y in group:
        labels.setdefault(CLEAN if kind == CLEAN else "corrupted", []).append(np.asarray(y))


def score_sets(predictors, sets, *, clean=None, num_samples=10, seed=0, preprocess=None, num_params=None,
               max_rows=50_000):
    """Score every predictor on every set of ``sets``.

    predictors: {name: predictor} (see the module docstring). sets: iterable of
    (type, severity, x, y), e.g. ``evals.corruptions.corrupted(test)`` or CIFAR-10-C from TFDS
    (``zoo.data.cifar10_c.tfds_corrupted()``).
    clean: optional (x, y) or Dataset of the clean test set (rows of type "clean", severity 0).
    num_samples, seed: passed to ``.predict`` objects (the same seed for every set, so every set
    sees the same draws). preprocess: optional x -> x applied before predicting (e.g. the training
    standardisation of raw digits pixels). num_params: optional {name: parameter count}.
    max_rows: consecutive sets are predicted together, in one call per predictor, up to this many
    rows (fewer calls for small sets; the same numbers as one call per set when a predictor's
    draws depend only on its seed). Returns OODResults.
    """
    if not isinstance(predictors, dict) or not predictors:
        raise InputError.worded("predictors", "predictors: expected a non-empty dict {name: predictor}")
    scorers = {name: as_scorer(p, num_samples, seed) for name, p in predictors.items()}
    rows, pools, labels, group = [], {}, {}, []

    def all_sets():
        if clean is not None:
            x, y = (clean.x, clean.y) if hasattr(clean, "x") else clean
            yield CLEAN, 0, np.asarray(x), np.asarray(y)
        yield from sets

    for kind, severity, x, y in all_sets():
        group.append((kind, severity, preprocess(x) if preprocess is not None else x, np.asarray(y)))
        if sum(len(g[3]) for g in group) >= max_rows:
            _score_group(scorers, group, rows, pools, labels)
            group = []
    if group:
        _score_group(scorers, group, rows, pools, labels)
    counts = dict(num_params or {})
    for name, p in predictors.items():
        if name not in counts and getattr(p, "num_params", None) is not None:
            counts[name] = int(p.num_params)
    return OODResults(
        table=pd.DataFrame(rows),
        probs={name: {k: np.concatenate(v) for k, v in pooled.items()} for name, pooled in pools.items()},
        labels={k: np.concatenate(v) for k, v in labels.items()},
        num_params=counts,
    )


def merge(parts) -> OODResults:
    """One `OODResults` of several scored on the same sets with different predictors (e.g. in parallel
    processes): tables stacked in order, probabilities and parameter counts joined; a method in two parts or
    parts scored on different labels are refused. [OODResults] -> OODResults."""
    parts = list(parts)
    if not parts:
        raise InputError.worded("parts", "parts: expected at least one OODResults, got none")
    probs: dict[str, dict] = {}
    counts: dict[str, int] = {}
    for i, part in enumerate(parts):
        if not isinstance(part, OODResults):
            raise ArgumentTypeError.worded(f"parts[{i}]",
                                           f"parts[{i}]: expected an OODResults, got {type(part).__name__}")
        twice = sorted(set(probs) & set(part.probs))
        if twice:
            raise InputError.worded(f"parts[{i}]", f"parts[{i}]: methods {twice} were scored in an earlier part too")
        if part.labels.keys() != parts[0].labels.keys() or any(
                not np.array_equal(part.labels[k], parts[0].labels[k]) for k in part.labels):
            raise InputError.worded(f"parts[{i}]",
                                    f"parts[{i}]: scored on other sets than parts[0] (their labels differ)")
        probs.update(part.probs)
        counts.update(part.num_params)
    return OODResults(table=pd.concat([p.table for p in parts], ignore_index=True), probs=probs,
                      labels=dict(parts[0].labels), num_params=counts)


def score(predictors, test_set, *, types=None, severities=(1, 2, 3, 4, 5), corruption_seed=0, image_shape=None,
          include_clean=True, **kwargs):
    """Corrupt ``test_set`` (``evals.corruptions.corrupted``; raw images in [0, 1]) with every
    type x severity and score every predictor on the clean and corrupted sets: ``score_sets``
    with the same keyword arguments (num_samples, seed, preprocess, num_params). Returns OODResults."""
    from evals.corruptions import corrupted

    sets = corrupted(test_set, types=types, severities=severities, seed=corruption_seed, image_shape=image_shape)
    return score_sets(predictors, sets, clean=test_set if include_clean else None, **kwargs)


def _corrupted_rows(table):
    return table[table["type"] != CLEAN]


def by_severity(table, statistic="mean"):
    """Per method and severity, the ``statistic`` ('mean' or 'median') over types of every metric;
    the clean set is severity 0. table -> DataFrame indexed by (method, severity)."""
    cols = [m for m in METRICS if m in table]
    return table.groupby(["method", "severity"])[cols].agg(statistic)


def corruption_errors(table, reference):
    """CE_c x 100 per method (rows) and type (columns): 100 mean_s err_{c,s} / mean_s err^ref_{c,s}."""
    errors = 1 - _corrupted_rows(table).pivot_table(index="method", columns="type", values="accuracy", aggfunc="mean")
    if reference not in errors.index:
        raise InputError.worded("reference",
                                f"reference: {reference!r} is not a scored method; got {list(errors.index)}")
    ref = errors.loc[reference].where(errors.loc[reference] > 0)
    return 100 * errors / ref


def aggregate(table, reference="point_estimate"):
    """Per method: clean NLL / accuracy / ECE (if scored), cNLL / cA / cECE (means of per-severity
    means over types), their ``_median`` variants (means of per-severity medians), mCE against
    ``reference`` (NaN column if that method was not scored), uCE, and mean diversity over the
    corrupted sets. Returns a DataFrame indexed by method; ``.attrs['reference']`` names the reference."""
    corrupted = _corrupted_rows(table)
    means = by_severity(corrupted).groupby("method").mean()
    medians = by_severity(corrupted, "median").groupby("method").mean()
    out = pd.DataFrame(index=means.index)
    clean = table[table["type"] == CLEAN].set_index("method")
    for col in ("nll", "accuracy", "ece"):
        out[col] = clean[col] if len(clean) else np.nan
        out["c" + col] = means[col]
        out["c" + col + "_median"] = medians[col]
    has_ref = reference is not None and reference in out.index
    out["mce"] = corruption_errors(table, reference).mean(axis=1) if has_ref else np.nan
    out["uce"] = 100 * (1 - corrupted.groupby("method")["accuracy"].mean())
    out["diversity"] = corrupted.groupby("method")["diversity"].mean()
    out.attrs["reference"] = reference if has_ref else None
    return out


def summary_table(results, reference="point_estimate", num_params=None):
    """The rank-1 paper's Table 2 layout: rows = methods, columns NLL, Acc (%), ECE, cNLL, cA (%),
    cECE, mCE (%, vs ``reference``; only if it was scored), #params (if known). DataFrame."""
    agg = aggregate(results.table, reference)
    summary = pd.DataFrame(
        {
            "NLL": agg["nll"],
            "Acc": 100 * agg["accuracy"],
            "ECE": agg["ece"],
            "cNLL": agg["cnll"],
            "cA": 100 * agg["caccuracy"],
            "cECE": agg["cece"],
        }
    )
    if agg.attrs["reference"] is not None:
        summary["mCE"] = agg["mce"]
    counts = {**results.num_params, **(num_params or {})}
    if counts:
        summary["#params"] = [counts.get(m) for m in summary.index]
    summary.attrs["reference"] = agg.attrs["reference"]
    return summary


def format_table(summary):
    """The summary as text: 'cNLL / cA / cECE' in one column as in the paper, mCE's reference named."""
    shown = pd.DataFrame(index=summary.index)
    shown["NLL"] = summary["NLL"].map("{:.3f}".format)
    shown["Acc"] = summary["Acc"].map("{:.1f}".format)
    shown["ECE"] = summary["ECE"].map("{:.3f}".format)
    shown["cNLL / cA / cECE"] = [f"{a:.2f} / {b:.1f} / {c:.3f}" for a, b, c in summary[["cNLL", "cA", "cECE"]].to_numpy()]
    if "mCE" in summary:
        shown["mCE"] = summary["mCE"].map("{:.1f}".format)
    if "#params" in summary:
        shown["#params"] = [f"{int(v):,}" if v is not None and v == v else "-" for v in summary["#params"]]
    text = shown.to_string()
    reference = summary.attrs.get("reference")
    return text + (f"\nmCE reference: {reference} (= 100)" if reference else "")


def save(results, directory, reference="point_estimate", stem="ood"):
    """Write the per-set table and the summary as CSV and JSON into ``directory``.
    Returns {"table_csv", "table_json", "summary_csv", "summary_json"} paths."""
    os.makedirs(directory, exist_ok=True)
    summary = summary_table(results, reference)
    paths = {key: os.path.join(directory, f"{stem}_{key.replace('_', '.')}") for key in ("table_csv", "table_json", "summary_csv", "summary_json")}
    results.table.to_csv(paths["table_csv"], index=False)
    results.table.to_json(paths["table_json"], orient="records", indent=1)
    summary.to_csv(paths["summary_csv"], index_label="method")
    with open(paths["summary_json"], "w") as f:
        json.dump({"reference": summary.attrs["reference"], "rows": json.loads(summary.to_json(orient="index"))}, f, indent=1)
    return paths


METRIC_TITLES = {"nll": "NLL", "accuracy": "accuracy", "ece": "ECE", "brier": "Brier score",
                 "entropy": "predictive entropy", "mutual_info": "mutual information", "diversity": "diversity"}


def plot_severity(results, path, metrics_shown=("nll", "accuracy", "ece", "brier", "entropy", "mutual_info", "diversity")):
    """Each metric (mean over types) vs severity, one line per method in the order scored, severity 0 = clean;
    one panel per metric (diversity only where some method has members), in a grid with the legend in a cell of
    its own (`evals.plots.metric_panels`); NLL, ECE, Brier score and entropy on a log axis where their values
    span more than a factor of 10 (an outlying method would flatten the others). Writes a PNG, returns path."""
    from evals.plots import metric_panels

    curves = by_severity(results.table)
    shown = [m for m in metrics_shown if m in curves and curves[m].notna().any()]
    methods = list(dict.fromkeys(results.table["method"]))
    panels = {METRIC_TITLES.get(m, m): {method: (curves.loc[method].index.to_numpy(), curves.loc[method][m].to_numpy())
                                        for method in methods} for m in shown}
    spread = [METRIC_TITLES[m] for m in ("nll", "ece", "brier", "entropy")
              if m in shown and curves[m].min() > 0 and curves[m].max() > 10 * curves[m].min()]
    return metric_panels(panels, path, "severity (0 = clean)", log_panels=spread)


def plot_reliability(results, directory, stem="ood"):
    """Reliability diagrams (``evals.plots.reliability_diagram``), one panel per method, for the
    clean set and for all corrupted sets pooled. Returns the list of PNG paths."""
    from evals.plots import reliability_diagram

    os.makedirs(directory, exist_ok=True)
    paths = []
    for pool in (CLEAN, "corrupted"):
        if pool in results.labels:
            probs = {m: p[pool] for m, p in results.probs.items()}
            path = os.path.join(directory, f"{stem}_reliability_{pool}.png")
            paths.append(reliability_diagram(probs, results.labels[pool], path, title=f"{pool} sets"))
    return paths


def evaluate(predictors, test_set, out_dir=None, *, reference="point_estimate", verbose=True, **kwargs):
    """One call for several posteriors side by side: ``score`` them on the same corrupted sets of
    ``test_set`` (keyword arguments as ``score``), print the Table-2 summary, and with ``out_dir``
    save CSV / JSON, the severity curves and the reliability diagrams there.
    Returns (OODResults, summary DataFrame)."""
    results = score(predictors, test_set, **kwargs)
    summary = summary_table(results, reference)
    if verbose:
        print(format_table(summary))
    if out_dir is not None:
        save(results, out_dir, reference)
        plot_severity(results, os.path.join(out_dir, "ood_severity.png"))
        plot_reliability(results, out_dir)
    return results, summary
