"""Rank-1 BNNs (Dusenberry et al., ICML 2020): the verdicts of `zoo reproduce rank1`, one per finding of the paper
(issue 17's list), from the tables of `zoo.reproduce.rank1`, and the mean +- SE / paired-difference helpers they use.

Rules: a difference is significant when the paired (by seed) mean difference is more than 2 standard errors from 0;
"reproduces" needs every part of a claim to hold so, "partly" some of it (or the direction without significance,
where said), "does not reproduce" none.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evals.seed_summary import format_mean_se, mean_se, sem

__all__ = ["shown", "paired", "diff_text", "below", "findings", "table2_finding", "POSITIVE_CLAIM"]


def shown(runs: pd.DataFrame, by, metrics, digits=3) -> pd.DataFrame:
    """mean +- SE strings per group (evals.seed_summary), in the order the groups first appear."""
    summary = mean_se(runs, by, metrics)
    order = {v: i for i, v in enumerate(runs[by].drop_duplicates())}
    summary = summary.sort_values(by, key=lambda col: col.map(order)).reset_index(drop=True)
    out = summary[[by, "n"]].copy()
    for m in metrics:
        out[m] = [format_mean_se(a, b, digits) for a, b in zip(summary[f"{m}_mean"], summary[f"{m}_se"])]
    return out


def paired(runs, by, a, b, metric, key="seed"):
    """Mean and SE over seeds of metric(a) - metric(b), paired by seed."""
    wide = runs.pivot_table(index=key, columns=by, values=metric)
    d = (wide[a] - wide[b]).dropna()
    return float(d.mean()), sem(d), len(d)


def diff_text(runs, by, a, b, metric, digits=4):
    m, se, n = paired(runs, by, a, b, metric)
    return f"{metric}({a}) - {metric}({b}) = {format_mean_se(m, se, digits)} (n = {n})"


def below(runs, by, a, b, metric):
    """Whether metric(a) < metric(b) by more than 2 SE of the paired difference (1 when SE is NaN)."""
    m, se, _ = paired(runs, by, a, b, metric)
    return m + 2 * (se if np.isfinite(se) else 0.0) < 0



def table2_finding(report, runs, claim):
    """Table 2's verdict on `runs` (one row per (method, seed)): rank-1 Normal vs deterministic and BatchEnsemble on
    NLL / ECE (clean) and cNLL / cECE, and whether its relative NLL gain is larger under corruption (against the
    baselines that `runs` holds; the deterministic net is needed)."""
    r1, det = "rank1_normal", "deterministic"
    baselines = [b for b in (det, "batch_ensemble") if b in set(runs["method"])]
    clean = [below(runs, "method", r1, b, m) for b in baselines for m in ("NLL", "ECE")]
    corr = [below(runs, "method", r1, b, m) for b in baselines for m in ("cNLL", "cECE")]
    rel = {m: paired(runs, "method", r1, det, m)[0] / runs[runs.method == det][m].mean() for m in ("NLL", "cNLL")}
    more = rel["cNLL"] < rel["NLL"]
    verdict = "reproduces" if all(clean) and all(corr) and more else "partly" if any(clean + corr) else \
        "does not reproduce"
    report.finding(claim, verdict, "; ".join(diff_text(runs, "method", r1, b, m) for b in baselines
                                      for m in ("NLL", "ECE", "cNLL", "cECE"))
                   + f"; relative NLL change vs deterministic clean {100 * rel['NLL']:+.1f} %, corrupted "
                     f"{100 * rel['cNLL']:+.1f} % (significant at 2 SE: clean {clean}, corrupted {corr})")


def findings(report, runs, samples, div, ks, obj, drop, place, positive=None):
    """One verdict per finding of the paper (issue 17's list), from the tables above."""
    table2_finding(report, runs, "rank-1 (Normal) beats deterministic and BatchEnsemble on NLL and ECE, more so "
                                 "under corruption")
    if ks is None:
        report.finding("more mixture components help, up to a limit (K = 16 declines)", "not run", "ablation left out")
    else:
        _components_finding(report, ks)
    if obj is None:
        report.finding("training with the average per-component likelihood generalises better than the log-mixture",
                       "not run", "ablation left out")
    else:
        better = [below(obj, "objective", "average", "mixture", mm) for mm in ("NLL", "cNLL")]
        report.finding("training with the average per-component likelihood generalises better than the "
                       "log-mixture", "reproduces" if all(better) else "partly" if any(better) else
                       "does not reproduce",
                       "; ".join(diff_text(obj, "objective", "average", "mixture", mm) for mm in ("NLL", "Acc", "cNLL")))
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
    _samples_finding(report, samples)
    _diversity_finding(report, div)


def _components_finding(report, ks):
    m = mean_se(ks, "K", ["NLL", "cNLL"]).set_index("K")
    best = int(m["NLL_mean"].idxmin())
    k1, kmax = m.index.min(), m.index.max()
    helps = m.loc[best, "NLL_mean"] < m.loc[k1, "NLL_mean"]
    limit = best < kmax and m.loc[kmax, "NLL_mean"] > m.loc[best, "NLL_mean"]
    report.finding("more mixture components help, up to a limit (K = 16 declines)",
                   "reproduces" if helps and limit else "partly" if helps else "does not reproduce",
                   "test NLL by K: " + ", ".join(f"K={k}: {format_mean_se(r.NLL_mean, r.NLL_se, 4)}" for k, r in m.iterrows())
                   + "; cNLL by K: " + ", ".join(f"K={k}: {format_mean_se(r.cNLL_mean, r.cNLL_se, 3)}"
                                                  for k, r in m.iterrows()))


def _dropout_finding(report, drop):
    d = mean_se(drop, "dropout_rate", ["Acc", "ECE", "NLL"]).set_index("dropout_rate")
    lo, hi = d.index.min(), d.index.max()
    acc_gain = paired(drop, "dropout_rate", lo, hi, "Acc")
    report.finding("near-zero sigma initialisation (small dropout rate) gives better accuracy",
                   "reproduces" if acc_gain[0] - 2 * np.nan_to_num(acc_gain[1]) > 0 else
                   "partly" if acc_gain[0] > 0 else "does not reproduce",
                   "accuracy by p: " + ", ".join(f"p={p:g}: {format_mean_se(r.Acc_mean, r.Acc_se, 2)} %"
                                                for p, r in d.iterrows())
                   + f"; ECE by p: " + ", ".join(f"p={p:g}: {format_mean_se(r.ECE_mean, r.ECE_se, 4)}" for p, r in d.iterrows())
                   + f"; Acc(p={lo:g}) - Acc(p={hi:g}) = {format_mean_se(acc_gain[0], acc_gain[1], 2)} points")


def _placement_finding(report, place):
    both = [below(place, "prior_on", "both", o, "cNLL") for o in ("s only", "r only")]
    pm = mean_se(place, "prior_on", ["cNLL"]).set_index("prior_on")
    lowest = pm["cNLL_mean"].idxmin() == "both"
    report.finding("priors on both vectors generalise best on corruptions",
                   "reproduces" if all(both) else "partly" if lowest or any(both) else "does not reproduce",
                   "cNLL: " + ", ".join(f"{k}: {format_mean_se(r.cNLL_mean, r.cNLL_se, 4)}" for k, r in pm.iterrows())
                   + "; " + "; ".join(diff_text(place, "prior_on", "both", o, "cNLL") for o in ("s only", "r only")))


def _samples_finding(report, samples):
    s_lo, s_hi = samples.samples_per_component.min(), samples.samples_per_component.max()
    help_c = [below(samples, "samples_per_component", s_hi, s_lo, mm) for mm in ("cNLL", "cECE")]
    help_c.append(below(samples.assign(err=-samples["cA"]), "samples_per_component", s_hi, s_lo, "err"))  # cA up
    report.finding("more evaluation samples per component help the corrupted metrics",
                   "reproduces" if all(help_c) else "partly" if any(help_c) else "does not reproduce",
                   "; ".join(diff_text(samples, "samples_per_component", s_hi, s_lo, mm)
                             for mm in ("NLL", "cNLL", "cA", "cECE")))


def _diversity_finding(report, div):
    r1, be = "rank1_normal", "batch_ensemble"
    late = div.groupby(["method", "seed"], as_index=False)[["diversity", "accuracy"]].mean()
    dv = paired(late, "method", r1, be, "diversity")
    acc = paired(late, "method", r1, be, "accuracy")
    verdict = ("reproduces" if dv[0] - 2 * np.nan_to_num(dv[1]) > 0 and acc[0] >= -0.005 else
               "partly" if dv[0] > 0 else "does not reproduce")
    report.finding("rank-1 members are more diverse than BatchEnsemble's at equal or better accuracy", verdict,
                   f"late-checkpoint mean, paired by seed: diversity(rank-1) - diversity(BE) = "
                   f"{format_mean_se(dv[0], dv[1], 3)}, accuracy(rank-1) - accuracy(BE) = "
                   f"{format_mean_se(100 * acc[0], 100 * acc[1], 2)} points (n = {dv[2]} seeds)")


POSITIVE_CLAIM = ("real-valued factor priors beat positive-valued (log-normal) ones on test NLL and ECE, "
                  "comparable accuracy")


def _positive_finding(report, positive):
    real, pos = "real (Normal)", "positive (log-normal)"
    better = [below(positive, "factors", real, pos, m) for m in ("NLL", "ECE")]
    acc = paired(positive, "factors", real, pos, "Acc")
    comparable = abs(acc[0]) <= 2 * np.nan_to_num(acc[1]) + 0.25
    report.finding(POSITIVE_CLAIM, "reproduces" if all(better) and comparable else
                   "partly" if any(better) else "does not reproduce",
                   "; ".join(diff_text(positive, "factors", real, pos, m) for m in ("NLL", "ECE", "Acc", "cNLL",
                                                                                      "cA", "cECE")))
