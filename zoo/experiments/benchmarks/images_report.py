"""The report of `zoo benchmark images`: summary.md (mean +- SE over seeds, each method's distance from the
5-member ensemble, issue 43's goal checked row by row) and the figure images.png (test NLL against training CPU
time relative to the map fit).

The goal (issue 43, item 5), per network on the mean over seeds:
  1. a Laplace or IVON row at a training cost of at most `COST_MAX` x map's has a lower NLL and a lower ECE than
     map_temperature and a lower cNLL than map;
  2. an IVON row's NLL (`IVONS`) is at most mean_field's + `NLL_SLACK` and its cost at most `IVON_COST_MAX` x
     mean_field's.
Each check says "met", "not met" (with the numbers) or "not measured" (a row it needs is missing).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from zoo.experiments.analysis.seed_summary import format_mean_se, mean_se

METHODS = ("map", "map_temperature", "ensemble", "mc_dropout", "mean_field", "ivon", "ivon_half", "k_tied", "low_rank",
           "laplace_last_layer", "laplace_kfac", "laplace_last_layer_val", "laplace_kfac_val")
"""Every method of `zoo benchmark images` (`zoo.experiments.benchmarks.images`), in the order each (network, seed)
fits them (map first: the others' reference and start), which is also the order of the report's tables."""
METRICS = ("accuracy", "nll", "ece", "cal_nll", "cal_ece", "cnll", "cece", "cpu_s", "cpu_vs_map")
CANDIDATES = ("laplace_last_layer", "laplace_kfac", "laplace_last_layer_val", "laplace_kfac_val", "ivon", "ivon_half")
IVONS = ("ivon", "ivon_half")
"""The rows goal 2 accepts (IVON over mean field's steps, and over half of them)."""
"""The rows goal 1 accepts (issue 43: "Laplace or IVON")."""
COST_MAX = 1.5
NLL_SLACK = 0.005
IVON_COST_MAX = 0.5
REFERENCE = "ensemble"


def with_relative_cost(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with cpu_vs_map = cpu_s / cpu_s of the map row of the same network and seed (NaN without one),
    recomputed from the rows (a resumed run may have refitted a map after rows that compared with an earlier one)."""
    table = table.copy()
    maps = table[table.method == "map"].set_index(["network", "seed"]).cpu_s.astype(float)
    keys = pd.MultiIndex.from_arrays([table.network, table.seed])
    table["cpu_vs_map"] = table.cpu_s.astype(float).to_numpy() / maps.reindex(keys).to_numpy()
    return table


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Mean and SE over seeds of `METRICS` per (network, method); ``n`` counts the seeds."""
    numeric = table.copy()
    for c in METRICS:
        numeric[c] = pd.to_numeric(numeric[c], errors="coerce")
    return mean_se(numeric, ["network", "method"], METRICS)


def ordered(methods) -> list:
    """`methods` in the benchmark's order (`METHODS`), unknown names last."""
    methods = list(dict.fromkeys(methods))
    return [m for m in METHODS if m in methods] + [m for m in methods if m not in METHODS]


def results_table(table: pd.DataFrame) -> str:
    """Markdown: per network, every method's scores (mean +- SE over seeds) and cost."""
    s = summarise(table)
    lines = []
    for network in table.network.unique():
        part = s[s.network == network].set_index("method")
        lines += [f"### {network}", "", "| method | seeds | accuracy | NLL | ECE | calibrated NLL | calibrated ECE "
                  "| cNLL | cECE | training CPU s | x map |", "|---" * 11 + "|"]
        for method in ordered(part.index):
            r = part.loc[method]
            cells = [format_mean_se(r[f"{m}_mean"], r[f"{m}_se"], 1 if m == "cpu_s" else 2 if m == "cpu_vs_map"
                                    else 3) for m in METRICS]
            lines.append(f"| {method} | {r.n} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def ensemble_distance(table: pd.DataFrame) -> str:
    """Markdown: per network and method, the paired (same seed) differences method - ensemble of NLL, ECE, cNLL
    and cost, mean +- SE over seeds (negative: better than the ensemble)."""
    rows = []
    for network, part in table.groupby("network", sort=False):
        ref = part[part.method == REFERENCE].set_index("seed")
        if ref.empty:
            continue
        for method in ordered(part.method.unique()):
            if method == REFERENCE:
                continue
            mine = part[part.method == method].set_index("seed")
            seeds = mine.index.intersection(ref.index)
            if len(seeds):
                diff = {m: mine.loc[seeds, m].astype(float) - ref.loc[seeds, m].astype(float)
                        for m in ("nll", "ece", "cnll")}
                diff["cost"] = mine.loc[seeds, "cpu_s"].astype(float) / ref.loc[seeds, "cpu_s"].astype(float)
                rows.append({"network": network, "method": method, "seeds": len(seeds),
                             **{m: (float(v.mean()), _se(v)) for m, v in diff.items()}})
    if not rows:
        return f"Not measured: no {REFERENCE} row.\n"
    lines = [f"| network | method | seeds | NLL - {REFERENCE}'s | ECE - {REFERENCE}'s | cNLL - {REFERENCE}'s | "
             f"CPU / {REFERENCE}'s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['network']} | {r['method']} | {r['seeds']} | " +
                     " | ".join(format_mean_se(r[m][0], r[m][1], 3 if m != "cost" else 2)
                                for m in ("nll", "ece", "cnll", "cost")) + " |")
    return "\n".join(lines) + "\n"


def _se(values) -> float:
    values = np.asarray(values, float)
    return float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def goal_checks(table: pd.DataFrame) -> pd.DataFrame:
    """One row per check (module docstring) per network: network, check, verdict ("met" / "not met" / "not
    measured"), seeds (the fewest of the rows it compares) and the numbers in words."""
    s = summarise(table)
    rows = []
    for network in table.network.unique():
        part = s[s.network == network].set_index("method")

        def mean(method, metric, part=part):
            return float(part.loc[method, f"{metric}_mean"])

        def seeds(*methods, part=part):
            return int(min(part.loc[m, "n"] for m in methods))

        for cand in CANDIDATES:
            check = f"goal 1: {cand} at <= {COST_MAX} x map's cost beats map_temperature (NLL, ECE) and map (cNLL)"
            need = (cand, "map", "map_temperature")
            if not all(m in part.index for m in need):
                rows.append({"network": network, "check": check, "verdict": "not measured", "seeds": 0,
                             "numbers": "missing rows: " + ", ".join(m for m in need if m not in part.index)})
                continue
            tests = [("cost", mean(cand, "cpu_vs_map"), COST_MAX, "x map"),
                     ("NLL", mean(cand, "nll"), mean("map_temperature", "nll"), "map_temperature"),
                     ("ECE", mean(cand, "ece"), mean("map_temperature", "ece"), "map_temperature"),
                     ("cNLL", mean(cand, "cnll"), mean("map", "cnll"), "map")]
            words = [f"{what} {v:.4f} {'<=' if what == 'cost' and v <= bar else '<' if v < bar else '>='} "
                     f"{bar:.4f} ({ref})" for what, v, bar, ref in tests]
            ok = all((v <= bar) if what == "cost" else (v < bar) for what, v, bar, _ in tests)
            rows.append({"network": network, "check": check, "verdict": "met" if ok else "not met",
                         "seeds": seeds(*need), "numbers": "; ".join(words)})
        for cand in IVONS:
            check = (f"goal 2: {cand}'s NLL <= mean_field's + {NLL_SLACK} at <= {IVON_COST_MAX} x mean_field's "
                     "training CPU time")
            if not {cand, "mean_field"} <= set(part.index):
                rows.append({"network": network, "check": check, "verdict": "not measured", "seeds": 0,
                             "numbers": "missing rows: " + ", ".join(m for m in (cand, "mean_field")
                                                                     if m not in part.index)})
                continue
            nll, ref = mean(cand, "nll"), mean("mean_field", "nll")
            ratio = mean(cand, "cpu_s") / mean("mean_field", "cpu_s")
            ok = nll <= ref + NLL_SLACK and ratio <= IVON_COST_MAX
            rows.append({"network": network, "check": check, "verdict": "met" if ok else "not met",
                         "seeds": seeds(cand, "mean_field"),
                         "numbers": f"NLL {nll:.4f} vs {ref:.4f} (difference {nll - ref:+.4f}); CPU {ratio:.2f} x "
                                    "mean_field's"})
    return pd.DataFrame(rows)


def goal_text(table: pd.DataFrame) -> str:
    """Markdown of `goal_checks`, then each network's verdict on goals 1 and 2 (met when one candidate meets it)."""
    checks = goal_checks(table)
    lines = ["| network | check | seeds | verdict | numbers (means over seeds) |", "|---|---|---|---|---|"]
    lines += [f"| {r.network} | {r.check} | {r.seeds} | **{r.verdict}** | {r.numbers} |" for r in checks.itertuples()]
    lines.append("")
    for (network, goal), part in checks.groupby([checks.network, checks.check.str[:6]], sort=False):
        met = [r.check.split(": ")[1].split(" ")[0].removesuffix("'s") for r in part.itertuples()
               if r.verdict == "met"]
        measured = (part.verdict != "not measured").any()
        lines.append(f"- {network}, {goal}: " + (f"met by {', '.join(met)}" if met else
                                                 "not met" if measured else "not measured") +
                     f" (seeds per row: {', '.join(str(n) for n in part.seeds)}; the issue asks seeds 0-2).")
    return "\n".join(lines) + "\n"


def plot(table: pd.DataFrame, path) -> None:
    """images.png: per network, test NLL (mean +- SE over seeds) against training CPU time relative to map (both
    on log scales), one labelled point per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summarise(table)
    networks = list(table.network.unique())
    fig, axes = plt.subplots(1, len(networks), figsize=(6.5 * len(networks), 4.8), squeeze=False)
    for ax, network in zip(axes.ravel(), networks):
        part = s[s.network == network].set_index("method")
        for i, method in enumerate(ordered(part.index)):
            r = part.loc[method]
            ax.errorbar([r.cpu_vs_map_mean], [r.nll_mean], yerr=[0 if np.isnan(r.nll_se) else r.nll_se],
                        xerr=[0 if np.isnan(r.cpu_vs_map_se) else r.cpu_vs_map_se], fmt="o", color=f"C{i % 10}",
                        capsize=3)
            ax.annotate(method, (r.cpu_vs_map_mean, r.nll_mean), textcoords="offset points", xytext=(5, 4),
                        fontsize=8)
        ax.axvline(COST_MAX, color="gray", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training CPU time / map's (log scale; dotted: 1.5)")
        ax.set_ylabel("test NLL (log scale; lower is better)")
        ax.set_title(f"{network}: {int(part.n.max())} seed(s), mean +- SE")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(out, table: pd.DataFrame, info: dict) -> None:
    """summary.md and images.png into the folder `out` from the run's table and run.json record `info`."""
    from pathlib import Path

    out = Path(out)
    table = with_relative_cost(table)
    if table.empty:
        (out / "summary.md").write_text("# Image leaderboard\n\nNo finished row yet.\n")
        return
    plot(table, out / "images.png")
    settings = ", ".join(f"{k}={v}" for k, v in info.get("settings", {}).items())
    parts = ["# Image leaderboard: posteriors beside MAP, temperature scaling, ensembles and MC dropout", "",
             f"Command: `{info.get('command')}`. Data: {info.get('data')}. Commit: {info.get('commit')}. Machine: "
             f"{info.get('machine')} (CPU seconds count this process only; run.json has the load). "
             f"Settings: {settings}.", "",
             "Lower is better for NLL, ECE, cNLL, cECE. Calibrated: after one temperature fitted on the validation "
             "images. cNLL / cECE: mean over severities of the mean over corruption types. Training CPU s: process "
             "CPU seconds of the fit (tracing and compiling included, JAX's in-memory caches cleared before every "
             "fit; map_temperature and the Laplace rows include the map fit); x map: over the map row of the same "
             "network and seed. "
             "Mean +- SE over seeds.", "", "## Results", "", results_table(table),
             f"## Distance from the {REFERENCE} (same seed; negative: better than the {REFERENCE})", "",
             ensemble_distance(table), "## Issue 43's goal, row by row", "", goal_text(table)]
    if (out / "ood_detection.csv").is_file():
        parts += ["", detection_summary(out)]
    (out / "summary.md").write_text("\n".join(parts))


def detection_summary(out) -> str:
    """ood_detection.png and the summary's OOD detection section from the folder's ``ood_detection.csv``: each
    (network, method)'s numbers averaged over its seeds (`zoo.experiments.detection_tables`)."""
    from zoo.experiments.detection_tables import write_detection

    rows = pd.read_csv(out / "ood_detection.csv")
    rows["posterior"] = rows["network"] + " " + rows["method"]
    numbers = [c for c in rows.columns if c not in ("network", "seed", "method", "posterior", "out_set", "score")]
    mean = rows.groupby(["posterior", "out_set", "score"], sort=False)[numbers].mean()
    text = write_detection(mean, str(out), "test images against shifted ones (mean over seeds)", table_file=False)
    return text + f"\n(Mean over seeds; per seed: ood_detection.csv, {int(rows['seed'].nunique())} seed(s).)\n"


def rewrite(out) -> None:
    """summary.md and images.png again from the ``images.csv`` and ``run.json`` a run left in the folder `out` (also
    a run stopped part-way: its finished rows)."""
    import json
    from pathlib import Path

    out = Path(out)
    write_report(out, pd.read_csv(out / "images.csv"), json.loads((out / "run.json").read_text()))
