"""Rank-1 BNNs (Dusenberry et al., ICML 2020): the verdicts of `zoo reproduce rank1`, one per finding of the paper,
from the tables of `zoo.experiments.reproduce.rank1`, and the mean +- SE / paired-difference helpers they use.

Rules: every comparison is a paired (by seed) difference with its 95 % t-interval (`zoo.experiments.analysis.verdicts.paired_interval`)
judged against the paper's direction (`zoo.experiments.analysis.verdicts.judge`: consistent when the interval lies on the paper's side,
contradicts when it lies wholly on the other, inconclusive otherwise); a claim with several parts gets
`zoo.experiments.analysis.verdicts.combine` of its parts. The paper's numbers are its CIFAR-10 WRN-28-10 Table 2 (10 seeds) unless said,
quoted from its text (`zoo.experiments.reproduce.quotes`).

Preconditions (`zoo.experiments.analysis.verdicts.gate`): every finding needs the fits it compares to have converged
(`fits_converged`: ``inference.fit``'s judgement of the ELBO, the ``converged`` column); the Cauchy row needs its own
recipe chosen on the validation split, as the Normal arm's was (`cauchy_finding`'s ``tuned``).
"""

from __future__ import annotations

import pandas as pd

from zoo.experiments.analysis.seed_summary import format_mean_se, mean_se
from zoo.experiments.analysis.verdicts import Precondition, combine, fits_converged, judge, paired_interval
from zoo.experiments.reproduce.quotes import quoted

__all__ = ["shown", "paired", "diff_text", "below", "findings", "table2_finding", "cauchy_finding",
           "POSITIVE_CLAIM", "CAUCHY_CLAIM", "BATCH_ENSEMBLES"]

BATCH_ENSEMBLES = ("batch_ensemble", "batch_ensemble_unregularised")
"""The library's BatchEnsemble (MAP under the Normal(1, 0.1) factor prior) and the unregularised one."""


def shown(runs: pd.DataFrame, by, metrics, digits=3) -> pd.DataFrame:
    """mean +- SE strings per group (zoo.experiments.analysis.seed_summary), in the order the groups first appear."""
    summary = mean_se(runs, by, metrics)
    order = {v: i for i, v in enumerate(runs[by].drop_duplicates())}
    summary = summary.sort_values(by, key=lambda col: col.map(order)).reset_index(drop=True)
    out = summary[[by, "n"]].copy()
    for m in metrics:
        out[m] = [format_mean_se(a, b, digits) for a, b in zip(summary[f"{m}_mean"], summary[f"{m}_se"])]
    return out


def paired(runs, by, a, b, metric, key="seed"):
    """The 95 % paired t-interval (`zoo.experiments.analysis.verdicts.Interval`) over seeds of metric(a) - metric(b)."""
    wide = runs.pivot_table(index=key, columns=by, values=metric)
    return paired_interval(wide[a].dropna(), wide[b].dropna())


def diff_text(runs, by, a, b, metric, digits=3):
    """``"NLL(a) - NLL(b) = m [lo, hi] (n = 5, paired t over seeds)"``."""
    return f"{metric}({a}) - {metric}({b}) = {paired(runs, by, a, b, metric).text(digits)}"


def below(runs, by, a, b, metric):
    """The verdict on "metric(a) < metric(b)": `judge` of the paired interval of the difference against < 0."""
    return judge(paired(runs, by, a, b, metric), high=0.0)


def _present(runs, names):
    return [n for n in names if n in set(runs["method"])]


def table2_finding(report, runs, claim):
    """Table 2's verdict on `runs` (one row per (method, seed)): rank-1 Normal below the deterministic net and each
    BatchEnsemble (`BATCH_ENSEMBLES`, those present) on NLL, ECE, cNLL and cECE, and its relative NLL gain over the
    deterministic net larger under corruption: cNLL ratio - NLL ratio < 0 per seed (ratio = rank-1 / det - 1)."""
    r1, det = "rank1_normal", "deterministic"
    baselines = _present(runs, (det,) + BATCH_ENSEMBLES)
    parts, texts = [], []
    for b in baselines:
        for m in ("NLL", "ECE", "cNLL", "cECE"):
            parts.append(below(runs, "method", r1, b, m))
            texts.append(diff_text(runs, "method", r1, b, m))
    wide = {m: runs.pivot_table(index="seed", columns="method", values=m) for m in ("NLL", "cNLL")}
    rel = {m: wide[m][r1] / wide[m][det] - 1 for m in wide}
    more = paired_interval(rel["cNLL"], rel["NLL"])
    parts.append(judge(more, high=0.0))
    report.finding(claim, combine(parts), "; ".join(texts[1:]) + f" (rule: each difference < 0; "
                   f"{parts.count('consistent')}/{len(parts)} parts consistent, {parts.count('contradicts')} "
                   "contradicted)",
                   "NLL: rank-1 Gaussian " + quoted("r1.table2.gauss_nll") + ", det " + quoted("r1.table2.det_nll")
                   + ", BE " + quoted("r1.table2.be_nll") + "; cNLL " + quoted("r1.table2.gauss_cnll") + ", det "
                   + quoted("r1.table2.det_cnll") + ", BE " + quoted("r1.table2.be_cnll"),
                   f"{texts[0]}; relative cNLL gain - relative NLL gain = {more.text()}",
                   [fits_converged(runs, "Table 2 rows", "method", [r1, *baselines])])


CAUCHY_CLAIM = "rank-1 Cauchy is the best rank-1 row: below rank-1 Normal, deterministic and BatchEnsemble on NLL / cNLL"


def cauchy_finding(report, runs, tuned: str | None = None):
    """Table 2's Cauchy row: NLL and cNLL of rank-1 Cauchy below those of rank-1 Normal, the deterministic net and
    each BatchEnsemble (paired differences < 0). Preconditions: the fits converged, and the Cauchy arm's recipe was
    chosen on the validation split as the Normal arm's was (``tuned``: what was chosen and how; None: it ran the
    Normal arm's recipe, not met)."""
    c = "rank1_cauchy"
    if c not in set(runs["method"]):
        report.finding(CAUCHY_CLAIM, "not run", "no rank-1 Cauchy row")
        return
    others = _present(runs, ("rank1_normal", "deterministic") + BATCH_ENSEMBLES)
    parts = [below(runs, "method", c, o, m) for o in others for m in ("NLL", "cNLL")]
    texts = [diff_text(runs, "method", c, o, m) for o in others for m in ("NLL", "cNLL")]
    own = Precondition("the Cauchy arm's recipe chosen on the validation split, as the Normal arm's was",
                       tuned is not None, tuned or "not tuned: the Normal arm's recipe with the Cauchy sigma init")
    report.finding(CAUCHY_CLAIM, combine(parts), "; ".join(texts[1:]) + " (rule: each difference < 0)",
                   "NLL " + quoted("r1.table2.cauchy_nll") + " vs rank-1 Gaussian 0.128, det 0.159, BE 0.143; cNLL "
                   + quoted("r1.table2.cauchy_cnll") + " vs 0.84, 1.05, 1.02", texts[0],
                   [fits_converged(runs, "Table 2 rows", "method", [c, *others]), own])


def findings(report, runs, samples, div, ks, obj, drop, place, positive=None, cauchy_tuned: str | None = None):
    """One verdict per finding of the paper, from the tables above (``cauchy_tuned``: `cauchy_finding`'s ``tuned``)."""
    table2_finding(report, runs, "rank-1 (Normal) beats deterministic and BatchEnsemble on NLL and ECE, more so "
                                 "under corruption")
    cauchy_finding(report, runs, cauchy_tuned)
    if ks is None:
        report.finding("more mixture components help, up to a limit (K = 16 declines)", "not run", "ablation left out")
    else:
        _components_finding(report, ks)
    claim = "training with the average per-component likelihood generalises better than the log-mixture"
    if obj is None:
        report.finding(claim, "not run", "ablation left out")
    else:
        parts = [below(obj, "objective", "average", "mixture", m) for m in ("NLL", "cNLL")]
        report.finding(claim, combine(parts), diff_text(obj, "objective", "average", "mixture", "cNLL") + "; "
                       + diff_text(obj, "objective", "average", "mixture", "Acc") + " (rule: NLL, cNLL differences < 0)",
                       "average below mixture on test NLL (Fig. 4)", diff_text(obj, "objective", "average", "mixture", "NLL"),
                       [fits_converged(obj, "objective ablation")])
    if drop is None:
        report.finding("near-zero sigma initialisation (small dropout rate) gives better accuracy", "not run",
                       "ablation left out")
    else:
        _dropout_finding(report, drop)
    if place is None:
        report.finding("priors on both vectors generalise best on corruptions", "not run", "ablation left out")
    else:
        _placement_finding(report, place)
    if positive is None:
        report.finding(POSITIVE_CLAIM, "not run", "ablation left out")
    else:
        _positive_finding(report, positive)
    _samples_finding(report, samples, runs)
    _diversity_finding(report, div, runs)


def _components_finding(report, ks):
    """Fig. 3 ("from 1 to 8, the performance across all metrics increases. At K = 16, however, there is a decline"):
    NLL(K = 8) - NLL(K = 1) < 0 (more components help) and NLL(K = max) - NLL(K = 8) > 0 (up to a limit), paired by
    seed (the largest K below the maximum when 8 was not run)."""
    values = sorted(ks["K"].unique())
    k1, kmax = values[0], values[-1]
    mid = 8 if 8 in values and kmax > 8 else values[-2] if len(values) > 2 else values[len(values) // 2]
    helps = paired(ks, "K", mid, k1, "NLL")
    limit = paired(ks, "K", kmax, mid, "NLL")
    m = mean_se(ks, "K", ["NLL"]).set_index("K")
    report.finding("more mixture components help, up to a limit (K = 16 declines)",
                   combine([judge(helps, high=0.0), judge(limit, low=0.0)]),
                   "test NLL by K: " + ", ".join(f"K={k}: {format_mean_se(r.NLL_mean, r.NLL_se, 4)}" for k, r in m.iterrows())
                   + f" (rule: NLL(K={mid}) - NLL(K={k1}) < 0 and NLL(K={kmax}) - NLL(K={mid}) > 0)",
                   "better " + quoted("r1.fig3") + ", worse at K = 16",
                   f"NLL(K={mid}) - NLL(K={k1}) = {helps.text()}; NLL(K={kmax}) - NLL(K={mid}) = {limit.text()}",
                   [fits_converged(ks, "K ablation")])


def _dropout_finding(report, drop):
    """Fig. 5: Acc(smallest p) - Acc(largest p) > 0, paired by seed."""
    d = mean_se(drop, "dropout_rate", ["Acc", "ECE"]).set_index("dropout_rate")
    lo, hi = d.index.min(), d.index.max()
    gain = paired(drop, "dropout_rate", lo, hi, "Acc")
    report.finding("near-zero sigma initialisation (small dropout rate) gives better accuracy",
                   judge(gain, low=0.0),
                   "accuracy by p: " + ", ".join(f"p={p:g}: {format_mean_se(r.Acc_mean, r.Acc_se, 2)} %"
                                                for p, r in d.iterrows())
                   + "; ECE by p: " + ", ".join(f"p={p:g}: {format_mean_se(r.ECE_mean, r.ECE_se, 4)}" for p, r in d.iterrows())
                   + " (rule: difference > 0)", "accuracy highest at p near 0 (Fig. 5)",
                   f"Acc(p={lo:g}) - Acc(p={hi:g}) = {gain.text()} points", [fits_converged(drop, "dropout-rate ablation")])


def _placement_finding(report, place):
    """Fig. 2: cNLL(both) - cNLL(s only) < 0 and cNLL(both) - cNLL(r only) < 0, paired by seed."""
    parts = [below(place, "prior_on", "both", o, "cNLL") for o in ("s only", "r only")]
    report.finding("priors on both vectors generalise best on corruptions", combine(parts),
                   diff_text(place, "prior_on", "both", "r only", "cNLL") + " (rule: each difference < 0)",
                   "priors on r and s: lowest cNLL (Fig. 2)", diff_text(place, "prior_on", "both", "s only", "cNLL"),
                   [fits_converged(place, "prior-placement ablation")])


def _samples_finding(report, samples, runs):
    """Table 8: the most draws per component vs the fewest: cNLL and cECE differences < 0, cA difference > 0 (the
    rank-1 Normal fits of `runs`, which must have converged)."""
    by = "samples_per_component"
    s_lo, s_hi = samples[by].min(), samples[by].max()
    parts = [below(samples, by, s_hi, s_lo, m) for m in ("cNLL", "cECE")]
    parts.append(judge(paired(samples, by, s_hi, s_lo, "cA"), low=0.0))
    report.finding("more evaluation samples per component help the corrupted metrics", combine(parts),
                   "; ".join(diff_text(samples, by, s_hi, s_lo, m) for m in ("NLL", "cA", "cECE"))
                   + " (rule: cNLL, cECE differences < 0, cA > 0)",
                   "cNLL for 1, 4, 25 draws: " + "; ".join(quoted(f"r1.table8.cnll_{n}") for n in (1, 4, 25)),
                   diff_text(samples, by, s_hi, s_lo, "cNLL"),
                   [fits_converged(runs, "rank-1 Normal fits", "method", ["rank1_normal"])])


def _diversity_finding(report, div, runs):
    """Fig. 6: for each BatchEnsemble present (`BATCH_ENSEMBLES`), diversity(rank-1) - diversity(BE) > 0 and
    accuracy(rank-1) - accuracy(BE) >= -0.005 (half a point), over the late checkpoints' means, paired by seed."""
    r1 = "rank1_normal"
    late = div.groupby(["method", "seed"], as_index=False)[["diversity", "accuracy"]].mean()
    parts, texts = [], []
    for be in [b for b in BATCH_ENSEMBLES if b in set(late["method"])]:
        dv = paired(late, "method", r1, be, "diversity")
        acc = paired(late, "method", r1, be, "accuracy")
        parts += [judge(dv, low=0.0), judge(acc, low=-0.005)]
        texts.append(f"vs {be}: diversity {dv.text()}, accuracy {acc.text(scale=100)} points")
    report.finding("rank-1 members are more diverse than BatchEnsemble's at equal or better accuracy",
                   combine(parts), "late-checkpoint means; rule: diversity difference > 0, accuracy difference >= "
                   "-0.5 points, against each BatchEnsemble", "higher diversity at equal or better accuracy (Fig. 6)",
                   "; ".join(texts), [fits_converged(runs, "Table 2 fits", "method", [r1, *BATCH_ENSEMBLES])])


POSITIVE_CLAIM = ("real-valued factor priors beat positive-valued (log-normal) ones on test NLL and ECE, "
                  "comparable accuracy")


def _positive_finding(report, positive):
    """Fig. 9: NLL and ECE differences (real - positive) < 0 and the accuracy difference >= -0.5 points."""
    real, pos = "real (Normal)", "positive (log-normal)"
    parts = [below(positive, "factors", real, pos, m) for m in ("NLL", "ECE")]
    parts.append(judge(paired(positive, "factors", real, pos, "Acc"), low=-0.5))
    report.finding(POSITIVE_CLAIM, combine(parts),
                   "; ".join(diff_text(positive, "factors", real, pos, m) for m in ("ECE", "Acc", "cNLL"))
                   + " (rule: NLL, ECE differences < 0, accuracy difference >= -0.5 points)",
                   "real-valued better on NLL, ECE (app. C.1, Fig. 9)", diff_text(positive, "factors", real, pos, "NLL"),
                   [fits_converged(positive, "factor-prior ablation")])

