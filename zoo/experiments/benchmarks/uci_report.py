"""The report of `zoo benchmark uci`: summary.md (mean +- SE over splits beside the published numbers, the quality
bars, which guide is closest to NUTS, the weight-space comparison, the depth verdict) and the figure uci.png.

Published numbers (test log-likelihood per point and RMSE in original units, mean +- SE over the 20 splits of
Hernandez-Lobato & Adams 2015, one hidden layer of 50 units), with their sources:

* "VI": Graves (2011)-style mean-field VI as reported by Hernandez-Lobato & Adams (2015, the PBP paper) and by
  Gal & Ghahramani (2016, "Dropout as a Bayesian approximation", Table 1); the test LLs as issue 44 lists them
  after checking them against those sources (concrete -3.39, energy -2.39, wine -0.98, yacht -3.43); their SEs
  and the RMSEs are the same table's.
* "PBP" and "deep ensemble": Lakshminarayanan, Pritzel & Blundell (2017), Table 1 (reported there as NLL; the
  sign is flipped here; its PBP column quotes the PBP paper).
* "MC dropout": Gal & Ghahramani's MC-dropout repository (yaringal/DropoutUncertaintyExps), README of 2018,
  the grid-search column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats

from zoo.experiments.analysis.seed_summary import format_mean_se, mean_se

if TYPE_CHECKING:
    from matplotlib.artist import Artist

PUBLISHED = {  # {data set: {method: (test LL, its SE, RMSE, its SE)}}
    "concrete": {"VI": (-3.39, 0.02, 7.13, 0.12), "PBP": (-3.16, 0.02, 5.67, 0.09),
                 "MC dropout": (-2.93, 0.02, 4.82, 0.16), "deep ensemble": (-3.06, 0.18, 6.03, 0.58)},
    "energy": {"VI": (-2.39, 0.03, 2.65, 0.08), "PBP": (-2.04, 0.02, 1.80, 0.05),
               "MC dropout": (-1.21, 0.01, 0.54, 0.06), "deep ensemble": (-1.38, 0.22, 2.09, 0.29)},
    "wine-quality-red": {"VI": (-0.98, 0.01, 0.65, 0.01), "PBP": (-0.97, 0.01, 0.64, 0.01),
                         "MC dropout": (-0.93, 0.01, 0.62, 0.01), "deep ensemble": (-0.94, 0.12, 0.64, 0.04)},
    "yacht": {"VI": (-3.43, 0.16, 6.89, 0.67), "PBP": (-1.63, 0.02, 1.02, 0.05),
              "MC dropout": (-1.25, 0.01, 0.67, 0.05), "deep ensemble": (-1.18, 0.21, 1.58, 0.48)},
}
SOURCES = {
    "VI": "Graves-style VI as reported by Hernandez-Lobato & Adams 2015 (PBP paper) and Gal & Ghahramani 2016, "
          "Table 1",
    "PBP": "Lakshminarayanan et al. 2017, Table 1 (quoting the PBP paper)",
    "MC dropout": "MC-dropout repository README (2018 update), grid-search column",
    "deep ensemble": "Lakshminarayanan et al. 2017, Table 1 (5 networks, heteroscedastic, adversarial training)",
}
GUIDES = ("map", "mean_field", "full_covariance", "low_rank", "k_tied", "mc_dropout", "ensemble")


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Mean and SE over splits of test_ll, rmse, seconds per (hidden_layers, dataset, method); NUTS rows only
    from splits where it converged (``n`` counts them; ``flagged`` the splits left out)."""
    keep = (table.method != "nuts") | (table.nuts_converged == True)  # noqa: E712 - NaN elsewhere
    out = mean_se(table[keep], ["hidden_layers", "dataset", "method"], ["test_ll", "rmse", "seconds"])
    flagged = table[~keep].groupby(["hidden_layers", "dataset", "method"]).size().rename("flagged")
    out = out.merge(flagged.reset_index(), how="left", on=["hidden_layers", "dataset", "method"])
    out["flagged"] = out["flagged"].fillna(0).astype(int)
    return out


def results_table(table: pd.DataFrame) -> str:
    """Markdown: per depth and data set, every method's test LL and RMSE (mean +- SE over splits) and seconds,
    then the published rows."""
    s = summarise(table)
    lines = []
    for depth in sorted(table.hidden_layers.unique()):
        lines += [f"### {depth} hidden layer{'s' if depth > 1 else ''} of 50", "",
                  "| data set | method | splits | test LL | RMSE | seconds per split |", "|---|---|---|---|---|---|"]
        for name in table.dataset.unique():
            part = s[(s.hidden_layers == depth) & (s.dataset == name)]
            for method in [m for m in list(GUIDES) + ["nuts"] if m in set(part.method)]:
                r = part[part.method == method].iloc[0]
                n = f"{r.n}" + (f" (+{r.flagged} not converged, left out)" if r.flagged else "")
                lines.append(f"| {name} | {method} | {n} | {format_mean_se(r.test_ll_mean, r.test_ll_se, 2)} | "
                             f"{format_mean_se(r.rmse_mean, r.rmse_se, 2)} | {r.seconds_mean:.1f} |")
            nuts_all = table[(table.hidden_layers == depth) & (table.dataset == name) & (table.method == "nuts")]
            if len(nuts_all) and (nuts_all.nuts_converged != True).any():  # noqa: E712
                lines.append(f"| {name} | nuts, all splits (incl. not converged) | {len(nuts_all)} | "
                             f"{format_mean_se(nuts_all.test_ll.mean(), _se(nuts_all.test_ll), 2)} | "
                             f"{format_mean_se(nuts_all.rmse.mean(), _se(nuts_all.rmse), 2)} | |")
            for method, (ll, ll_se, rmse, rmse_se) in PUBLISHED.get(name, {}).items():
                lines.append(f"| {name} | published: {method} | 20 | {ll:.2f} +- {ll_se:.2f} | "
                             f"{rmse:.2f} +- {rmse_se:.2f} | |")
        lines.append("")
    lines += ["Published sources:", ""] + [f"- {k}: {v}" for k, v in SOURCES.items()] + [""]
    return "\n".join(lines)


def _se(values) -> float:
    values = np.asarray(values, float)
    return float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def quality_bars(table: pd.DataFrame) -> str:
    """Markdown: the issue's bars on one hidden layer, evaluated (NUTS: mean over the splits where it converged;
    with none converged, no NUTS bar). "Within the deep-ensemble range": the published mean +- 2 of its SEs."""
    s = summarise(table[table.hidden_layers == 1])
    lines = ["| bar | data set | ours | published | holds |", "|---|---|---|---|---|"]
    for name in [d for d in table.dataset.unique() if d in PUBLISHED]:
        pub = PUBLISHED[name]
        part = s[s.dataset == name].set_index("method")
        best = max(v[0] for v in pub.values())
        checks = []
        if "nuts" in part.index:
            checks.append(("NUTS LL >= best published", part.loc["nuts", "test_ll_mean"], f"{best:.2f}",
                           part.loc["nuts", "test_ll_mean"] >= best))
        if "mean_field" in part.index:
            checks.append(("mean field LL >= published VI", part.loc["mean_field", "test_ll_mean"],
                           f"{pub['VI'][0]:.2f}", part.loc["mean_field", "test_ll_mean"] >= pub["VI"][0]))
        ll, se = pub["deep ensemble"][:2]
        for method in ("map", "ensemble"):
            if method in part.index:
                v = part.loc[method, "test_ll_mean"]
                checks.append((f"{method} LL in deep-ensemble mean +- 2 SE", v,
                               f"[{ll - 2 * se:.2f}, {ll + 2 * se:.2f}]",
                               "yes" if ll - 2 * se <= v <= ll + 2 * se else
                               "NO: above (better)" if v > ll + 2 * se else "NO: below"))
        lines += [f"| {bar} | {name} | {ours:.2f} | {pub_text} | "
                  f"{ok if isinstance(ok, str) else 'yes' if ok else 'NO'} |" for bar, ours, pub_text, ok in checks]
    return "\n".join(lines) + "\n"


CLOSENESS = (("ll_gap", "test LL - NUTS's", 3), ("rmse_gap", "RMSE - NUTS's", 3),
             ("mean_abs_z", "mean abs(mu - mu_nuts) / sd_nuts", 2), ("sd_ratio", "sd / sd_nuts", 2),
             ("w2", "W2 to NUTS's predictive", 3))
"""The columns of `closest_table`: (uci.csv column, header, decimals)."""


def interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean of `values` over splits and its two-sided Student-t interval at `level`
    (mean +- t_{n-1} SE); lo = hi = NaN for fewer than 2 values."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(values.mean())
    if values.size < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size))
    return mean, mean - half, mean + half


def format_interval(values, decimals: int) -> str:
    """"mean [lo, hi]" of `interval` (only the mean for one split)."""
    mean, lo, hi = interval(values)
    if not np.isfinite(mean):
        return "-"
    return f"{mean:.{decimals}f}" + (f" [{lo:.{decimals}f}, {hi:.{decimals}f}]" if np.isfinite(lo) else "")


def closest_table(table: pd.DataFrame, converged_only: bool = True) -> str:
    """Markdown "which guide is closest to the exact posterior": per depth and data set, each guide's test-LL and
    RMSE gaps to NUTS, mean |mu - mu_nuts| / sd_nuts, sd / sd_nuts and the mean 2-Wasserstein distance between
    its predictive and NUTS's at the test inputs (`CLOSENESS`; mean over splits with a 95 % t-interval), the
    guides ordered by mean |z| (closest first), then one sentence per set naming the closest guide by W2.
    converged_only: only the splits where NUTS converged; False: every split (then NUTS is not the exact
    posterior wherever it did not converge: indicative only)."""
    ok = table[(table.method != "nuts") & table.ll_gap.notna()]
    if converged_only:
        ok = ok[ok.nuts_converged == True]  # noqa: E712
    if ok.empty:
        return "No split's NUTS run converged: no comparison against a converged NUTS.\n"
    columns = [c for c in CLOSENESS if c[0] in ok.columns]
    lines = ["| layers | data set | rank | guide | splits | " + " | ".join(h for _, h, _ in columns) + " |",
             "|---" * (5 + len(columns)) + "|"]
    sentences = []
    for (depth, name), part in ok.groupby(["hidden_layers", "dataset"], sort=False):
        order = part.groupby("method").mean_abs_z.mean().sort_values().index
        for rank, method in enumerate(order, 1):
            rows = part[part.method == method]
            lines.append(f"| {depth} | {name} | {rank} | {method} | {len(rows)} | "
                         + " | ".join(format_interval(rows[c], d) for c, _, d in columns) + " |")
        if "w2" in part and part.w2.notna().any():
            w2 = part.groupby("method").w2.mean().sort_values()
            sentences.append(f"- {name} ({depth} layer{'s' if depth > 1 else ''}, {part.split.nunique()} splits): "
                             f"closest to NUTS's predictive is {w2.index[0]} (mean W2 {w2.iloc[0]:.3g} in the "
                             f"target's units), farthest {w2.index[-1]} ({w2.iloc[-1]:.3g}).")
    return "\n".join(lines) + "\n" + ("\n" + "\n".join(sentences) + "\n" if sentences else "")


LOOSE_RHAT = 1.1
"""Izmailov et al. 2021 ("What are Bayesian neural network posteriors really like?") judge HMC on BNNs by
function-space R-hat < 1.1 over their chains: the looser criterion, stated beside the strict one."""


def convergence_table(table: pd.DataFrame) -> str:
    """Markdown: per depth, data set and split, NUTS's function-space R-hat and bulk ESS (the worst test point),
    its divergences, and whether it meets the strict criterion (R-hat <= 1.01 and ESS >= 400, `nuts_converged`)
    and Izmailov et al.'s looser one (R-hat < `LOOSE_RHAT`); then the counts per set."""
    nuts = table[table.method == "nuts"]
    if nuts.empty:
        return "No NUTS run.\n"
    lines = ["| layers | data set | split | R-hat (f) | bulk ESS (f) | divergences | strict: R-hat <= 1.01, ESS >= 400 | "
             f"Izmailov et al.: R-hat < {LOOSE_RHAT} |", "|---|---|---|---|---|---|---|---|"]
    for _, r in nuts.iterrows():
        lines.append(f"| {r.hidden_layers} | {r.dataset} | {r.split} | {r.max_rhat:.3f} | {r.min_ess:.0f} | "
                     f"{r.divergences:.0f} | {'yes' if r.nuts_converged == True else 'NO'} | "  # noqa: E712
                     f"{'yes' if r.max_rhat < LOOSE_RHAT else 'NO'} |")
    lines.append("")
    for (depth, name), part in nuts.groupby(["hidden_layers", "dataset"], sort=False):
        lines.append(f"- {name} ({depth} layer{'s' if depth > 1 else ''}): strict {int((part.nuts_converged == True).sum())}"  # noqa: E712
                     f" of {len(part)} splits, loose {int((part.max_rhat < LOOSE_RHAT).sum())} of {len(part)}")
    return "\n".join(lines) + "\n"


def weight_table(weights: pd.DataFrame, agreement: pd.DataFrame) -> str:
    """Markdown of the weight-space comparison (`evals.comparison.compare`, all weights) and of which NUTS chains
    agree (fraction of weights with two-chain R-hat <= 1.05)."""
    if weights.empty:
        return "No weight-space comparison ran (it needs mean_field, full_covariance and nuts).\n"
    metrics = ["mean_abs_diff_mean[a-b]", "mean_abs_diff_sd[a-b]", "mean_sd[a]", "mean_sd[b]", "w2_gaussian[a-b]",
               "rhat_max[b]"]
    wide = weights.pivot_table(index=["hidden_layers", "dataset", "split", "pair"], columns="metric", values="value")
    cols = [m for m in metrics if m in wide.columns]
    lines = ["| layers | data set | split | a - b | " + " | ".join(cols) + " |", "|---" * (4 + len(cols)) + "|"]
    for key, r in wide.iterrows():
        lines.append("| " + " | ".join(str(k) for k in key) + " | " + " | ".join(f"{r[c]:.3g}" for c in cols) + " |")
    lines += ["", "NUTS chains in weight space (fraction of weights whose two-chain R-hat <= 1.05; a pair near 1 "
              "samples one mode, near 0 two modes, e.g. hidden units swapped):", ""]
    for (depth, name, split), part in agreement.groupby(["hidden_layers", "dataset", "split"], sort=False):
        pairs = ", ".join(f"{p}: {v:.2f}" for p, v in zip(part.pair, part.agree_fraction))
        lines.append(f"- {depth} layer(s), {name}, split {split}: {pairs}")
    return "\n".join(lines) + "\n"


def depth_verdict(table: pd.DataFrame, metric: str = "ll_gap", converged_only: bool = True
                  ) -> tuple[str, pd.DataFrame]:
    """Liberty or Depth's claim on real data: mean field's gap to NUTS shrinks with depth. Per data set, the paired
    (by split) difference d = |gap at 2 layers| - |gap at 1 layer| of `metric` (ll_gap: test LL - NUTS's;
    mean_abs_z) and its 95 % t-interval over splits: "consistent" when the interval lies below 0,
    "contradicts" above 0, "inconclusive" otherwise (or with fewer than 2 splits). converged_only: only splits
    where NUTS converged at both depths. Returns (markdown, one row per data set)."""
    mf = table[(table.method == "mean_field") & table[metric].notna()]
    rows = []
    for name, part in mf.groupby("dataset", sort=False):
        wide = part.pivot_table(index="split", columns="hidden_layers", values=metric)
        if not {1, 2} <= set(wide.columns):
            continue
        if converged_only:
            conv = part.pivot_table(index="split", columns="hidden_layers", values="nuts_converged",
                                    aggfunc=lambda v: bool(np.all(v == True)))  # noqa: E712
            wide = wide[conv.reindex(wide.index).fillna(False).all(axis=1)]
        d = (wide[2].abs() - wide[1].abs()).dropna().to_numpy()
        n = len(d)
        if n >= 2:
            half = stats.t.ppf(0.975, n - 1) * d.std(ddof=1) / np.sqrt(n)
            lo, hi = d.mean() - half, d.mean() + half
        else:
            lo = hi = float("nan")
        verdict = "consistent" if hi < 0 else "contradicts" if lo > 0 else "inconclusive"
        rows.append({"dataset": name, "metric": metric, "splits": n,
                     "gap_1": float(wide[1].abs().mean()) if n else float("nan"),
                     "gap_2": float(wide[2].abs().mean()) if n else float("nan"),
                     "mean_diff": float(d.mean()) if n else float("nan"), "ci_low": lo, "ci_high": hi,
                     "verdict": verdict})
    result = pd.DataFrame(rows)
    if result.empty:
        return "", result
    lines = ["| data set | splits | abs gap, 1 layer | abs gap, 2 layers | 2 - 1 (95 % t-interval) | verdict |",
             "|---|---|---|---|---|---|"]
    for r in result.itertuples():
        lines.append(f"| {r.dataset} | {r.splits} | {r.gap_1:.3f} | {r.gap_2:.3f} | {r.mean_diff:.3f} "
                     f"[{r.ci_low:.3f}, {r.ci_high:.3f}] | {r.verdict} |")
    return "\n".join(lines) + "\n", result


def plot(table: pd.DataFrame, path) -> None:
    """uci.png: per data set, every method's test LL (mean +- SE over splits; NUTS over converged splits) per
    depth, with the published numbers as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summarise(table)
    names = list(table.dataset.unique())
    cols = min(2, len(names))
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    methods = [m for m in list(GUIDES) + ["nuts"] if m in set(table.method)]
    depths = sorted(table.hidden_layers.unique())
    styles = {"VI": (":", "tab:gray"), "PBP": ("-.", "tab:olive"), "MC dropout": ("--", "tab:purple"),
              "deep ensemble": ((0, (6, 2, 1, 2, 1, 2)), "tab:brown")}
    for ax, name in zip(axes.ravel(), names):
        for j, depth in enumerate(depths):
            shift = (j - (len(depths) - 1) / 2) * 0.25
            part = s[(s.dataset == name) & (s.hidden_layers == depth)].set_index("method")
            ms = [m for m in methods if m in part.index]
            label = f"{depth} hidden layer{'s' if depth > 1 else ''}"
            ax.errorbar([methods.index(m) + shift for m in ms], part.loc[ms, "test_ll_mean"],
                        yerr=part.loc[ms, "test_ll_se"].fillna(0), fmt="o", color=f"C{j}", capsize=3, label=label)
            nuts = table[(table.dataset == name) & (table.hidden_layers == depth) & (table.method == "nuts")]
            if len(nuts) and (nuts.nuts_converged != True).any():  # noqa: E712
                ax.errorbar([methods.index("nuts") + shift], [nuts.test_ll.mean()], yerr=[_se(nuts.test_ll) or 0],
                            fmt="o", mfc="white", color=f"C{j}", capsize=3,
                            label=f"{label}: NUTS, all splits, not all converged")
        for method, (ll, *_rest) in PUBLISHED.get(name, {}).items():
            ax.axhline(ll, linestyle=styles[method][0], color=styles[method][1], linewidth=1.2,
                       label=f"published {method}")
        ax.set_xlim(-0.5, len(methods) - 0.5)
        ax.set_xticks(range(len(methods)))
        ax.set_xticklabels([m.replace("_", "\n") for m in methods], fontsize=8)
        ax.set_title(name)
        ax.set_ylabel("test log-likelihood per point")
        ax.grid(axis="y", alpha=0.3)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    fig.suptitle("UCI regression (Hernandez-Lobato & Adams splits): test LL, mean +- SE over splits (higher is "
                 "better); lines: published")
    handles: dict[str, Artist] = {}
    for ax in axes.ravel():
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(out, table: pd.DataFrame, weights: pd.DataFrame, agreement: pd.DataFrame, settings: dict,
                 seconds: float) -> None:
    """summary.md and uci.png into the folder `out` from the benchmark's tables."""
    from pathlib import Path

    out = Path(out)
    plot(table, out / "uci.png")
    splits = table.groupby("dataset").split.nunique().to_dict()
    parts = ["# UCI regression benchmark: every guide against NUTS", "",
             ("Wall time " + (f"{seconds:.0f} s" if seconds is not None else "unknown (a run stopped part-way)")
              + f". Splits per data set: {splits}. Settings: ")
             + ", ".join(f"{k}={v}" for k, v in settings.items() if k not in ("splits", "hidden_layers")) + ".",
             "Test LL per point and RMSE in the target's original units; mean +- SE over splits. NUTS rows "
             "average only the splits where NUTS converged (R-hat <= 1.01 and bulk ESS >= 400 on the predictive "
             "means at the test inputs); the others are flagged and left out.", "", "## Results", "",
             results_table(table), "## NUTS convergence per split", "", convergence_table(table),
             "## Quality bars (one hidden layer)", "", quality_bars(table),
             "## Which guide is closest to the exact posterior (NUTS)", "",
             "Function space on the test inputs; mu, sd: mean and sd over draws of the network output. Ranked "
             "by mean abs(mu - mu_nuts) / sd_nuts; sd / sd_nuts is a geometric mean over test points (0 for a "
             "point estimate); W2: the 2-Wasserstein distance between the guide's and NUTS's predictive "
             "distributions of the target (mixtures of Normals over the draws, noise included; by their quantile "
             "functions, zoo.experiments.benchmarks.uci_w2), averaged over test points, in the target's units. "
             "Each cell: the mean over splits [95 % t-interval].", "", "Splits where NUTS converged:", "", closest_table(table, True),
             "Every split, NUTS converged or not (where it did not, NUTS is no exact reference: indicative "
             "only):", "", closest_table(table, False),
             "## Weight space (evals.comparison, all weights)", "", weight_table(weights, agreement)]
    if table.hidden_layers.nunique() > 1:
        parts += ["## Depth: does mean field's gap to NUTS shrink from 1 to 2 hidden layers?", ""]
        for label, converged_only in (("splits where NUTS converged at both depths", True),
                                      ("every split (indicative where NUTS did not converge)", False)):
            for what, metric in (("test LL gap, abs(test LL - NUTS's)", "ll_gap"),
                                 ("function-space gap, mean abs(mu - mu_nuts) / sd_nuts", "mean_abs_z")):
                text, _ = depth_verdict(table, metric, converged_only)
                parts += [f"{what}; {label}:", "", text or "(no paired splits)\n"]
    (out / "summary.md").write_text("\n".join(parts))


def rewrite(out) -> None:
    """summary.md and uci.png again from the CSVs and run.json a run left in the folder `out` (also a run that was
    stopped part-way: its finished splits; the wall time is then unknown)."""
    import json
    from pathlib import Path

    out = Path(out)
    info = json.loads((out / "run.json").read_text())
    frames = [pd.read_csv(out / f) if (out / f).stat().st_size > 1 else pd.DataFrame()
              for f in ("uci.csv", "weights.csv", "chains.csv")]
    table, weights, agreement = frames
    write_report(out, table, weights, agreement, info["settings"], info["seconds"])
