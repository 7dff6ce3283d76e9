"""The k-tied Normal paper's findings, judged from the reproduction's tables: each function takes a table
the job wrote and returns (verdict, evidence) for `zoo.reproduce.report.Report.finding`. Rules (stated in
every evidence string): "within" means |difference| <= 2 combined standard errors; SE is over weight draws
(the paper's SEM) or over seeds, as each table says."""

from __future__ import annotations

import numpy as np
import pandas as pd
from evals.seed_summary import sem

__all__ = ["sigma_low_rank", "truncation_verdict", "snr_verdict", "convergence_verdict", "step_time_verdict"]


def _fmt(mean, se) -> str:
    return f"{mean:.3g} ± {se:.2g}" if np.isfinite(se) else f"{mean:.3g}"


def sigma_low_rank(spectra: pd.DataFrame, threshold: float = 0.9, gap: float = 0.2):
    """Fig. 3: every weight site's sd matrix has >= `threshold` of its variance in the top 2 singular values,
    the means' top-2 share is lower by > `gap` on average, and (when the table has ``sigma_top1_shuffled``)
    the sd's rank-2 residual (1 - top-2 share) is under half that of the same entries shuffled (rank 1):
    a positive matrix of little spread is nearly rank 1 anyway. spectra: `evals.sigma_spectrum.posterior_spectra`
    rows with a ``model`` column (one row per site and seed)."""
    parts, sigma_ok, mean_ok, null_ok = [], [], [], []
    for model, g in spectra.groupby("model", sort=False):
        s, m = g["sigma_top2"], g["mean_top2"]
        text = (f"{model}: sd top-2 share {s.mean():.3f} (min {s.min():.3f}) vs means {m.mean():.3f} "
                f"(max {m.max():.3f}), top-1 {g['sigma_top1'].mean():.3f} vs {g['mean_top1'].mean():.3f}")
        if "sigma_top1_shuffled" in g:
            null = g["sigma_top1_shuffled"]
            null_ok.append(bool((1 - s).mean() < 0.5 * (1 - null).mean()))
            text += f", shuffled-sd null top-1 {null.mean():.3f} (sd cv {g['sigma_cv'].mean():.2f})"
        parts.append(text + f" over {len(g)} site-seed rows")
        sigma_ok.append(bool((s >= threshold).all()))
        mean_ok.append(bool(s.mean() - m.mean() > gap))
    checks = sigma_ok + mean_ok + null_ok
    verdict = "reproduces" if all(checks) else "partly" if any(checks) else "does not reproduce"
    return verdict, "; ".join(parts) + (f" (rule: every sd top-2 >= {threshold}, mean gap > {gap}, sd rank-2 "
                                        "residual < half the shuffled null's)")


def _within(a, a_se, b, b_se) -> bool:
    return abs(a - b) <= 2 * np.hypot(a_se, b_se)


def truncation_verdict(scores: pd.DataFrame, metrics=("nll", "accuracy")):
    """Table 2: for every (model, seed), ranks k >= 2 are within 2 SE (per-draw SEM) of no truncation on
    every metric, and rank 1 is worse than it by more on at least one. scores: rows with model, seed, rank
    ("full" or an int) and ``{metric}``, ``{metric}_sem``."""
    keep, lose, lines = [], [], []
    for (model, seed), g in scores.groupby(["model", "seed"], sort=False):
        full = g[g["rank"] == "full"].iloc[0]
        for _, row in g[g["rank"] != "full"].iterrows():
            same = all(_within(row[m], row[f"{m}_sem"], full[m], full[f"{m}_sem"]) for m in metrics)
            worse = (row["nll"] - full["nll"] > 2 * np.hypot(row["nll_sem"], full["nll_sem"])
                     or full["accuracy"] - row["accuracy"] > 2 * np.hypot(row["accuracy_sem"], full["accuracy_sem"]))
            (lose if row["rank"] == 1 else keep).append(worse if row["rank"] == 1 else same)
        one = g[g["rank"] == 1]
        two = g[g["rank"] == 2]
        if len(one) and len(two):
            lines.append(f"{model} seed {seed}: NLL full {_fmt(full['nll'], full['nll_sem'])}, rank 2 "
                         f"{_fmt(two.iloc[0]['nll'], two.iloc[0]['nll_sem'])}, rank 1 "
                         f"{_fmt(one.iloc[0]['nll'], one.iloc[0]['nll_sem'])}; accuracy full {full['accuracy']:.3f}, "
                         f"rank 1 {one.iloc[0]['accuracy']:.3f}")
    a, b = all(keep), all(lose)
    verdict = "reproduces" if a and b else "partly" if a or b or any(keep) or any(lose) else "does not reproduce"
    return verdict, ("; ".join(lines) + f". Ranks >= 2 within 2 SE of full on {sum(keep)}/{len(keep)} "
                     f"(model, seed, rank) cases; rank 1 worse by > 2 SE on {sum(lose)}/{len(lose)} (SE: over "
                     "100 weight draws)")


def snr_verdict(summary: pd.DataFrame, metric: str = "snr_median"):
    """Fig. 6 top right: at every checkpoint, each k-tied rank's SNR (`metric`: the median over the layer's
    entries by default, or "snr", their mean; averaged over seeds) exceeds mean field's by more than 2
    combined SE over seeds. summary: mean_se rows by (k, step) with ``{metric}_mean``, ``{metric}_se``."""
    mf = summary[summary["k"] == "mean field"].set_index("step")
    wins, total, lines = 0, 0, []
    for _, row in summary[summary["k"] != "mean field"].iterrows():
        base = mf.loc[row["step"]]
        total += 1
        se = 2 * np.hypot(np.nan_to_num(row[f"{metric}_se"]), np.nan_to_num(base[f"{metric}_se"]))
        wins += bool(row[f"{metric}_mean"] - base[f"{metric}_mean"] > se)
    if total == 0:
        return "not run", "no k-tied trace"
    for step in (mf.index.min(), mf.index.max()):
        at = summary[summary["step"] == step]
        lines.append(f"step {step}: " + ", ".join(
            f"{'MF' if k == 'mean field' else f'{k}-tied'} {_fmt(m, e)}"
            for k, m, e in zip(at["k"], at[f"{metric}_mean"], at[f"{metric}_se"])))
    verdict = "reproduces" if wins == total else "partly" if wins else "does not reproduce"
    return verdict, ("; ".join(lines) + f" ({metric}: mean ± SE over seeds; k-tied above mean field by > 2 SE in "
                     f"{wins}/{total} (k, step) cases)")


def convergence_verdict(summary: pd.DataFrame, ks=(2, 3)):
    """Fig. 6 bottom right / Fig. 7: k-tied (ranks `ks`) validation -ELBO is at most mean field's + 2 SE at
    every checkpoint ("at least as fast"), and below it by > 2 SE at some ("faster")."""
    mf = summary[summary["k"] == "mean field"].set_index("step")
    never_worse, faster, lines = True, False, []
    for k in ks:
        g = summary[summary["k"] == k]
        for _, row in g.iterrows():
            base = mf.loc[row["step"]]
            se = 2 * np.hypot(np.nan_to_num(row["val_neg_elbo_se"]), np.nan_to_num(base["val_neg_elbo_se"]))
            never_worse &= bool(row["val_neg_elbo_mean"] <= base["val_neg_elbo_mean"] + se)
            faster |= bool(row["val_neg_elbo_mean"] < base["val_neg_elbo_mean"] - se)
    for step in sorted(mf.index)[:: max(1, len(mf.index) // 3)]:
        at = summary[summary["step"] == step]
        lines.append(f"step {step}: " + ", ".join(
            f"{'MF' if k == 'mean field' else f'{k}-tied'} {_fmt(m, s)}"
            for k, m, s in zip(at["k"], at["val_neg_elbo_mean"], at["val_neg_elbo_se"])))
    verdict = "reproduces" if never_worse and faster else "partly" if never_worse or faster else "does not reproduce"
    return verdict, ("; ".join(lines) + f" (validation -ELBO per example, mean ± SE over seeds; ranks {list(ks)} "
                     f"never above mean field + 2 SE: {never_worse}; below it by > 2 SE somewhere: {faster})")


def step_time_verdict(times: pd.DataFrame, k=2):
    """Table 4: the k-tied step is no slower: the mean over rounds of the per-round ratio k-tied / mean field
    is <= 1 + 2 SE."""
    wide = times.pivot(index="round", columns="k", values="ms")
    ratio = (wide[k] / wide["mean field"]).to_numpy()
    m = float(ratio.mean())
    se = sem(ratio)
    ok = m <= 1 + 2 * np.nan_to_num(se)
    ms = {c: _fmt(wide[c].mean(), sem(wide[c]))
          for c in wide.columns}
    evidence = (f"ms/step mean field {ms['mean field']}, {k}-tied {ms[k]}; ratio {k}-tied / mean field "
                f"{_fmt(m, se)} over {ratio.size} interleaved rounds")
    return ("reproduces" if ok else "does not reproduce"), evidence
