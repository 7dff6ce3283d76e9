"""`zoo run`'s report, results.md: one Markdown table per question, each after a sentence saying what it answers.

The questions: how accurate and calibrated each digits posterior is on clean data; what each SVI fit ran and how
many parameters its guide has; how each holds up on digits-C (the rank-1 paper's Table 2 layout, then accuracy and
NLL by severity); whether it grows less certain under shift; how mean-field SVI and NUTS compare on two moons, on
test data and by PSIS-LOO; whether the NUTS chains mixed. A table holds only the rows its columns apply to, counts
are printed as integers, and a cell with no value is blank (the sentence before the table says which). The data
files (results.csv, ood_table.csv, ...) keep every number at full precision.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd


class Column(NamedTuple):
    """One column of a Markdown table: the row's `key`, its `header`, and `fmt`, a format spec for numbers
    (",.0f" prints a count as 1,234; ".4f" four decimals) or "" to print the value as it is."""

    key: str
    header: str
    fmt: str = ""


def cell(value, fmt: str = "") -> str:
    """`value` as a table cell: blank for None or NaN, "yes" / "no" for a bool, a number by the format spec
    `fmt`, anything else as str."""
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    return format(value, fmt) if fmt else str(value)


def markdown_table(rows: pd.DataFrame, columns: list) -> str:
    """A GitHub Markdown table of `rows` (one table row per DataFrame row, in order), with `columns`
    ([`Column`]) read from the DataFrame's columns; numeric columns are right-aligned."""
    header = "| " + " | ".join(c.header for c in columns) + " |"
    rule = "|" + "|".join("---:" if c.fmt else "---" for c in columns) + "|"
    body = ["| " + " | ".join(cell(row[c.key], c.fmt) for c in columns) + " |" for _, row in rows.iterrows()]
    return "\n".join([header, rule, *body])


def section(heading: str, question: str, rows: pd.DataFrame, columns: list) -> str:
    """One question of the report: '## heading', the sentence saying what the table answers, the table."""
    return f"## {heading}\n\n{question}\n\n{markdown_table(rows, columns)}\n"


_DIGITS_CLEAN = [Column("posterior", "posterior"), Column("network", "network"),
                 Column("accuracy", "accuracy", ".4f"), Column("deterministic_acc", "deterministic acc.", ".4f"),
                 Column("nll", "NLL", ".4f"), Column("ece", "ECE", ".4f"), Column("brier", "Brier", ".4f"),
                 Column("note", "note")]
_DIGITS_FITS = [Column("posterior", "posterior"), Column("network", "network"), Column("weights", "weights", ",.0f"),
                Column("steps", "steps", ",.0f"), Column("guide_params", "guide params", ",.0f"),
                Column("formula_params", "paper formula", ",.0f"), Column("final_loss", "final loss", ",.0f"),
                Column("seconds", "fit s", ",.0f")]
# the rank-1 paper's Table 2, with the digits of `evals.ood.format_table`
_DIGITS_C = [Column("posterior", "posterior"), Column("NLL", "NLL", ".3f"), Column("Acc", "Acc %", ".1f"),
             Column("ECE", "ECE", ".3f"), Column("cNLL", "cNLL", ".2f"), Column("cA", "cA %", ".1f"),
             Column("cECE", "cECE", ".3f"), Column("mCE", "mCE", ",.1f"), Column("#params", "#params", ",.0f")]
_SHIFT = [Column("posterior", "posterior"), Column("entropy_clean", "entropy, clean", ".3f"),
          Column("entropy_worst", "entropy, severity {worst}", ".3f"), Column("mi_clean", "MI, clean", ".4f"),
          Column("mi_worst", "MI, severity {worst}", ".4f"), Column("diversity", "diversity", ".2f")]
_MOONS = [Column("posterior", "posterior"), Column("accuracy", "accuracy", ".4f"), Column("nll", "NLL", ".4f"),
          Column("ece", "ECE", ".4f"), Column("brier", "Brier", ".4f"), Column("weights", "weights", ",.0f"),
          Column("guide_params", "guide params", ",.0f"), Column("seconds", "s", ",.0f")]
_DENSITY = [Column("posterior", "posterior"), Column("lpd", "test lpd", ".3f"), Column("se", "se", ".3f"),
            Column("lpd_mean", "lpd per point", ".4f"), Column("lpd_diff", "lpd diff", ".3f"),
            Column("se_diff", "se diff", ".3f"), Column("elpd_loo", "elpd_loo", ".3f"),
            Column("loo_se", "se (LOO)", ".3f"), Column("p_loo", "p_loo", ".3f"),
            Column("elpd_diff", "elpd diff", ".3f"), Column("weight", "weight", ".3f"),
            Column("warning", "Pareto k warning")]
_NUTS = [Column("run", "run"), Column("schedule", "chains x (warm-up + draws)"),
         Column("divergences", "divergences", ",.0f"), Column("kept", "of draws", ",.0f"),
         Column("rhat_max_predictive", "max R-hat", ".3f"), Column("ess_bulk_min_predictive", "min bulk ESS", ",.0f"),
         Column("seconds", "NUTS s", ",.0f")]


def results_markdown(table: pd.DataFrame, ood_table: pd.DataFrame, ood_summary: pd.DataFrame,
                     comparison: pd.DataFrame, test_lpd: pd.DataFrame, *, title: str, draws: int, ood_draws: int) -> str:
    """results.md of one `zoo run`, a section (`section`) per question.

    Args:
      table: the results rows, indexed by (data, posterior): data "digits" (SVI rows with `steps`; NUTS rows with
        `divergences`) and "two_moons" (`zoo.experiments.run.main_job`'s table).
      ood_table: `evals.ood.OODResults.table` of the digits posteriors, one row per (method, type, severity).
      ood_summary: `evals.ood.summary_table` of it (rows in any order; shown in `table`'s order).
      comparison: ``az.compare`` of the two-moons posteriors; test_lpd: their `inference.predictive_density.predictive_density_table`.
      title: the report's first line, after "# " (the size, seed and time of the run).
      draws, ood_draws: predictive draws per posterior on the clean test sets and on each digits-C set.
    Returns the Markdown text.
    """
    rows = table.reset_index()
    digits = rows[rows["data"] == "digits"]
    nuts = rows[rows["divergences"].notna()] if "divergences" in rows else rows.iloc[:0]
    order = list(digits["posterior"])
    summary = ood_summary.reindex([m for m in order if m in ood_summary.index]).rename_axis("posterior").reset_index()
    corrupted = ood_table[ood_table["type"] != "clean"]
    severities = ood_table.pivot_table(index="method", columns="severity", values=["accuracy", "nll"], aggfunc="mean")
    severities = severities.reindex([m for m in order if m in severities.index])
    worst = int(corrupted["severity"].max())
    n_types, n_clean = corrupted["type"].nunique(), int(ood_table.loc[ood_table["type"] == "clean", "n"].iloc[0])
    levels = list(severities["accuracy"].columns)
    moons = rows[rows["data"] == "two_moons"]
    density = test_lpd.join(comparison.rename(columns={"se": "loo_se"}), how="left").rename_axis("posterior")
    parts = [
        (f"# {title}\n\nEvery number below, at full precision, is in `results.csv` / `results.json` (one row per "
         "posterior), `ood_table.csv` (one row per posterior and digits-C set), `ood_summary.csv`, "
         "`az_compare_moons.csv` and `test_lpd_moons.csv`; the figures are next to this file.\n"),
        section("Digits: clean test set",
                f"How accurate and how well calibrated is each posterior on the {n_clean} clean digits test images? "
                f"Scores of the predictive mean over {draws} draws; `deterministic acc.` is the network at the "
                "posterior mean (variance paper Table 1), which a NUTS posterior does not have (blank). A row more "
                "than 2 accuracy points below the point estimate, or with more than twice its NLL, says why in its "
                "`note`.",
                digits if "note" in digits else digits.assign(note=""), _DIGITS_CLEAN),
        section("Digits: the SVI fits",
                "What did each SVI fit run, and how many parameters has its guide? `guide params` counts the free "
                "variational parameters of the fitted guide (a Cholesky factor n(n+1)/2), `paper formula` the "
                "papers' count (k-tied mn + k(m+n) per matrix, rank-1 K(m+n) per layer on top of the network); "
                "`final loss` is the mean loss of the last 5 % of steps, comparable between rows with the same "
                "prior and network only; `fit s` includes compiling.",
                digits[digits["steps"].notna()], _DIGITS_FITS),
        section("Digits-C: corrupted test sets",
                f"How does each posterior hold up when the test digits are corrupted ({n_types} types x "
                f"{corrupted['severity'].nunique()} severities, {ood_draws} draws)? The rank-1 paper's Table 2: "
                "clean NLL, accuracy and ECE (from these draws, so a little off the clean table's), their means "
                "over the corrupted sets (cNLL, cA, cECE), and mCE, the corruption error relative to "
                "point_estimate (= 100). `#params`: the guide's free parameters (blank for NUTS).",
                summary, _DIGITS_C),
        section("Digits-C: accuracy by severity",
                f"How fast does accuracy fall as the corruption grows? Accuracy (%) averaged over the {n_types} "
                "types at each severity.",
                (100 * severities["accuracy"]).rename_axis("posterior").reset_index(), _by_severity(levels, ".1f")),
        section("Digits-C: NLL by severity",
                f"How fast does the NLL grow with the corruption? NLL averaged over the {n_types} types at each "
                "severity.",
                severities["nll"].rename_axis("posterior").reset_index(), _by_severity(levels, ".3f")),
        section("Digits-C: uncertainty under shift",
                "Does each posterior grow less certain as the inputs leave the training distribution? Mean "
                f"predictive entropy and mutual information (MI: the part of it from disagreeing draws) on the "
                f"clean set and at severity {worst}, and the draws' diversity over the corrupted sets (rank-1 "
                "paper sec. 3.6: disagreement between draws / error; blank where every prediction was right).",
                _shift_rows(ood_table, order, worst),
                [c._replace(header=c.header.format(worst=worst)) for c in _SHIFT]),
        section("Two moons: mean-field SVI and NUTS",
                "How do mean-field SVI and NUTS from it, on the same two-moons MLP 2-16-16-2, score on the test "
                f"points? Scores of the predictive mean over {draws} draws; `guide params` as above (blank for "
                "NUTS); `s`: the SVI fit's or the NUTS run's seconds.",
                moons, _MOONS),
        section("Two moons: predictive density of new data",
                "Which posterior predicts new data better? Measured on the test set (log predictive density, "
                "`test_lpd_moons.csv`) and estimated from the training data by PSIS-LOO (`az.compare`, "
                "`az_compare_moons.csv`); differences are to the best row; `Pareto k warning`: ArviZ's flag that "
                "the PSIS-LOO estimate is not reliable (a blank: ArviZ gave no number).",
                density.reset_index(), _DENSITY),
        section("NUTS diagnostics",
                "Did the NUTS chains mix? Divergent transitions after warm-up, and function-space diagnostics "
                "(weights are not identified): the largest split R-hat and the smallest bulk ESS over p(y = c | x) "
                "at 20 test points.",
                _nuts_rows(nuts), _NUTS),
    ]
    return "\n".join(parts)


def _by_severity(levels: list, fmt: str) -> list:
    """The columns of a by-severity table: the posterior, then one per severity level (0: "clean")."""
    return [Column("posterior", "posterior")] + [Column(s, f"severity {s}" if s else "clean", fmt) for s in levels]


def _shift_rows(ood_table: pd.DataFrame, order: list, worst: int) -> pd.DataFrame:
    """Per method in `order`: entropy and MI on the clean set and at severity `worst` (means over types), and
    diversity averaged over the corrupted sets."""
    means = ood_table.groupby(["method", "severity"])[["entropy", "mutual_info"]].mean()
    diversity = ood_table[ood_table["type"] != "clean"].groupby("method")["diversity"].mean()
    return pd.DataFrame([{"posterior": m, "entropy_clean": means.loc[(m, 0), "entropy"],
                          "entropy_worst": means.loc[(m, worst), "entropy"],
                          "mi_clean": means.loc[(m, 0), "mutual_info"], "mi_worst": means.loc[(m, worst), "mutual_info"],
                          "diversity": diversity.get(m)} for m in order if m in diversity.index])


def _nuts_rows(nuts: pd.DataFrame) -> pd.DataFrame:
    """The NUTS rows with their run ("data, posterior"), schedule "chains x (warm-up + draws)" and kept draws."""
    return nuts.assign(
        run=nuts["data"] + ", " + nuts["posterior"],
        schedule=[f"{c:.0f} x ({w:.0f} + {d:.0f})" for c, w, d in nuts[["chains", "warmup", "draws_per_chain"]].to_numpy()],
        kept=nuts["chains"] * nuts["draws_per_chain"])
