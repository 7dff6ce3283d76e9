"""The sections of a report on a job's results folder (`zoo run`, `zoo benchmark uci|images`, `zoo reproduce`):
what the job recorded (its settings), a verdict table of every posterior it saved, ArviZ's diagnostics of every
saved NUTS posterior, each table (CSV) and each figure (PNG) it wrote, with a caption by file name, and its
Markdown summary. Nothing is refitted: the page reads the folder (and draws only from saved NUTS chains).
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pandas as pd

from zoo.report.html import Page

FIGURE_CAPTIONS = (  # (file name pattern, caption): the first match wins
    ("loss_*.png", "The negative ELBO per step: look for a curve that has flattened by the last steps; one still "
                   "falling means that row stopped before it converged."),
    ("reliability*.png", "Accuracy against confidence per bin, one panel per posterior: bars on the diagonal are "
                         "calibrated, bars below it over-confident."),
    ("ood_reliability*.png", "Reliability on the clean and the pooled corrupted sets: calibration that holds on "
                             "the clean set but not under corruption shows here."),
    ("ood_severity*.png", "Each metric against corruption severity (0 = clean), the mean over types, one line per "
                          "posterior: good posteriors lose accuracy and gain NLL and ECE slowly."),
    ("ood_detection*.png", "AUROC of each posterior (rows) against each shifted set (columns), one panel per "
                           "uncertainty score: dark red (near 1) means the posterior flags that set, white (0.5) "
                           "that it cannot tell it from test images."),
    ("predictive_map*.png", "p(y = 1 | x) over the plane with the data: the predictions should grow uncertain "
                            "(white) away from the data, not stay confident."),
    ("images.png", "Test NLL against training CPU time relative to the point estimate: methods low and to the "
                   "left give better predictions for their cost."),
    ("uci*.png", "Each guide's test log-likelihood against NUTS's, per data set: points near NUTS's are the "
                 "guides that recover the posterior's predictions."),
    ("*.png", "A figure this job wrote (its file name says what it shows): read it beside the table of the same "
              "name."),
)
TABLE_CAPTIONS = (
    ("results.csv", "Every posterior's scores on its test set: compare accuracy and NLL with the point estimate's "
                    "row; a row far below it did not work at these settings."),
    ("ood_summary.csv", "The corrupted sets as in the rank-1 paper's Table 2: lower cNLL, cECE and mCE, higher cA "
                        "are better; mCE is relative to the point estimate (100)."),
    ("ood_detection*.csv", "Out-of-distribution detection per posterior and shifted set: AUROC near 1 and FPR at "
                           "95 % TPR near 0 are good; OUT inputs are the positive class of AUROC and AUPR-out."),
    ("az_compare*.csv", "ArviZ's PSIS-LOO comparison: the higher elpd_loo the better; a warning flags Pareto k "
                        "values that make the estimate unreliable."),
    ("az_summary*.csv", "ArviZ's summary: R-hat above 1.01 or a small ESS means the chains have not mixed."),
    ("images.csv", "Every (network, seed, method) row of the image leaderboard: accuracy, NLL, ECE on clean and "
                   "corrupted test images and the training cost relative to the point estimate."),
    ("*.csv", "A table this job wrote: its columns are described in the job's documentation."),
)
SKIPPED_TABLES = ("ood_table.csv",)  # per-set rows (thousands): the summary tables show them aggregated
VERDICTS_CAPTION = ("Every posterior the job saved, as its checkpoint records it: a fit that did not converge or "
                    "collapsed (ignores the data), or NUTS chains with divergences, is named in the flag column; "
                    "read those rows' scores with care.")


def caption_for(name: str, patterns) -> str:
    """The caption of the first pattern matching the file name `name`."""
    return next(text for pattern, text in patterns if fnmatch.fnmatch(name, pattern))


def _posterior_folders(folder: Path) -> list:
    from base.atomic_dir import folder_kind

    root = folder / "posteriors"
    return sorted(p for p in root.iterdir() if folder_kind(p) == "posterior") if root.is_dir() else []


def verdict_rows(folder: Path) -> pd.DataFrame:
    """One row per saved posterior under ``folder/posteriors``: kind, guide, steps, converged, collapsed,
    divergences, the recorded one-line verdict (from each ``posterior.json``; no model is rebuilt)."""
    rows = []
    for path in _posterior_folders(folder):
        record = json.loads((path / "posterior.json").read_text())
        info = record.get("info") or {}
        guide = (record.get("guide") or {}).get("name") or (record.get("config") or {}).get("name") or record["kind"]
        rows.append({"posterior": path.name, "kind": record["kind"], "guide": guide,
                     "converged": info.get("converged"), "collapsed": info.get("collapsed"),
                     "divergences": info.get("divergences"),
                     "fit_s": info.get("fit_s", info.get("nuts_s")), "flag": flag(info)})
    return pd.DataFrame(rows).set_index("posterior") if rows else pd.DataFrame()


def flag(info: dict) -> str:
    """What to worry about in a posterior's recorded run, in words ("" when nothing): a fit that did not converge,
    a collapsed posterior, NUTS divergences."""
    words = []
    if info.get("converged") is False:
        words.append("not converged")
    if info.get("collapsed"):
        words.append("collapsed: ignores the data")
    if info.get("divergences"):
        words.append(f"{info['divergences']} divergences")
    return "; ".join(words)


def settings_record(folder: Path) -> dict:
    """What the job recorded about its run: run.json (benchmarks), results.json's settings and seconds (zoo run),
    and the folder's marker (job, created)."""
    from base.run_folder import RUN_MARKER

    record = {}
    for name, keys in ((RUN_MARKER, None), ("run.json", None), ("results.json", ("settings", "seconds"))):
        path = folder / name
        if path.is_file():
            data = json.loads(path.read_text())
            record.update({k: v for k, v in data.items() if keys is None or k in keys})
    return record


def nuts_sections(page: Page, folder: Path, settings) -> None:
    """ArviZ's diagnostics of every saved NUTS posterior (`zoo.report.posterior_page.diagnostics_section`)."""
    from zoo.checkpoints import load_entry
    from zoo.report.posterior_page import diagnostics_section

    for path in _posterior_folders(folder):
        if json.loads((path / "posterior.json").read_text()).get("kind") != "mcmc":
            continue
        entry, post = load_entry(str(path))
        page.heading(f"NUTS: {path.name}", level=2)
        diagnostics_section(page, post, entry, settings)


def folder_sections(page: Page, folder: Path, settings) -> None:
    """Every section of a job folder's report, in order."""
    from zoo.report.posterior_page import _flat, _key_value

    record = settings_record(folder)
    if record:
        page.heading("The run")
        page.table(_key_value(_flat(record)), "What the job recorded about this run (its command, settings, "
                   "machine, time): numbers from runs with other settings are not comparable.")
    verdicts = verdict_rows(folder)
    if len(verdicts):
        page.heading("Saved posteriors: verdicts")
        page.table(verdicts, VERDICTS_CAPTION)
    tables = [p for p in sorted(folder.glob("*.csv")) if p.name not in SKIPPED_TABLES]
    if tables:
        page.heading("Tables")
        for path in tables:
            page.heading(path.name, level=3)
            try:
                frame = pd.read_csv(path)
            except pd.errors.EmptyDataError:
                page.text(f"{path.name} is empty: the run wrote no rows there (e.g. no method that fills it ran).")
                continue
            frame = frame.rename(columns=lambda c: "" if str(c).startswith("Unnamed:") else c)  # a saved index
            page.table(frame, caption_for(path.name, TABLE_CAPTIONS), source=path.name, index=False)
    figures = sorted(folder.glob("*.png"))
    if figures:
        page.heading("Figures")
        for path in figures:
            page.heading(path.name, level=3)
            page.figure(path.read_bytes(), caption_for(path.name, FIGURE_CAPTIONS), path.stem)
    nuts_sections(page, folder, settings)
    for name in ("results.md", "summary.md"):
        if (folder / name).is_file():
            page.heading(f"The job's own summary ({name})")
            page.preformatted((folder / name).read_text())
