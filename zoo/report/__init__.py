"""`zoo report PATH`: one self-contained HTML page a person reads, from a saved posterior (`zoo fit` / `zoo nuts`
--out), a `zoo run` folder or a `zoo benchmark` (or `zoo reproduce`) folder.

* A posterior: the fit (settings, convergence and collapse verdicts, loss curve), ArviZ's diagnostics (R-hat / ESS
  per site, rank and trace plots for NUTS; the posterior sd per site for SVI), the test scores and reliability
  diagram, and for image classifiers the corrupted test sets and out-of-distribution detection
  (`zoo.report.posterior_page`). The page is written beside the folder, ``PATH.report.html`` (a saved posterior's
  folder holds only what its manifest lists).
* A job's folder: its settings, the verdicts of every posterior it saved, ArviZ's diagnostics of its NUTS
  posteriors, every table and figure it wrote, with captions, and its Markdown summary
  (`zoo.report.folder_page`). The page is written into the folder, ``PATH/report.html`` (the job's own folder).

Every image is inlined (base64 PNG) and the style sheet is in the page: it opens from disk with no server and no
network (`zoo.report.html`).
"""

from __future__ import annotations

import os
from pathlib import Path

from base.errors import InputError
from zoo.report.posterior_page import ReportSettings

__all__ = ["ReportSettings", "job_of", "report_kind", "default_output", "write_report"]

PAGE = "report.html"


def job_of(path) -> str | None:
    """The bnn-zoo job whose results folder `path` is: the job its ``bnn-zoo-run.json`` marker names
    (`base.run_folder`), or the ``kind`` of a ``run.json`` whose writer is bnn-zoo (`zoo benchmark uci`'s own
    marker); None for any other folder."""
    import json

    from base.run_folder import run_folder_job

    job = run_folder_job(path)
    if job is not None:
        return job
    marker = os.path.join(os.fspath(path), "run.json")
    try:
        with open(marker, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record.get("kind") if isinstance(record, dict) and record.get("writer") == "bnn-zoo" else None


def report_kind(path) -> str:
    """"posterior" (a saved posterior's folder) or "job" (a folder a bnn-zoo job marked as its results folder).
    Anything else raises InputError naming ``path`` and what it is."""
    from base.atomic_dir import folder_kind

    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise InputError("path", path, "a folder: a saved posterior, or a zoo run / zoo benchmark results folder")
    text = os.fspath(path)
    kind = folder_kind(text)
    if kind is None:
        raise InputError("path", text, "a saved posterior or a results folder", "nothing is there")
    if kind == "posterior":
        return "posterior"
    if kind == "file":
        raise InputError("path", text, "a saved posterior or a results folder", "it is a file, not a folder")
    if job_of(text) is not None:
        return "job"
    what = "a resumable fit state (zoo fit --checkpoint-dir)" if kind == "fit state" else \
        "no saved posterior and no bnn-zoo results (no posterior.json, no bnn-zoo-run.json)"
    raise InputError("path", text, "a saved posterior (zoo fit / zoo nuts --out) or a zoo run / zoo benchmark folder",
                     f"it holds {what}")


def default_output(path, kind: str) -> str:
    """Where the page goes: ``PATH/report.html`` for a job's folder, ``PATH.report.html`` beside a posterior."""
    text = os.fspath(path).rstrip("/\\")
    return os.path.join(text, PAGE) if kind == "job" else text + ".report.html"


def write_report(path, out=None, *, settings: ReportSettings | None = None, data=None) -> str:
    """Write the HTML report of `path` (a saved posterior or a job's results folder; module docstring) to `out`
    (default `default_output`) and return the page's path.

    settings: the sizes of the computations (`ReportSettings`); data: for a posterior fitted on the user's own
    arrays, the same arrays (`zoo.checkpoints.load_entry`). Raises InputError naming ``path`` or ``out`` for a
    folder it cannot report on or a page it cannot write, before any work.
    """
    from base.atomic_dir import check_output_file
    from zoo.report.html import Page

    kind = report_kind(path)
    out = default_output(path, kind) if out is None else os.fspath(out)
    check_output_file(out, "out")
    settings = settings or ReportSettings()
    name = Path(os.fspath(path).rstrip("/\\")).name
    if kind == "posterior":
        from zoo.checkpoints import load_entry
        from zoo.report.posterior_page import posterior_sections

        entry, post = load_entry(os.fspath(path), data=data)
        page = Page(f"bnn-zoo report: posterior {name} ({entry.name} on {entry.test.name})")
        posterior_sections(page, post, entry, settings)
    else:
        from zoo.report.folder_page import folder_sections

        page = Page(f"bnn-zoo report: {job_of(os.fspath(path))} folder {name}")
        folder_sections(page, Path(os.fspath(path)), settings)
    staging = out + ".partial"
    with open(staging, "w", encoding="utf-8") as f:
        f.write(page.render())
    os.replace(staging, out)
    return out
