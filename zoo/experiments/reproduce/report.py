"""The files of a paper reproduction: figures, CSV tables and one Markdown report that states, finding by
finding, the paper's number, ours with its 95 % interval and the verdict (`zoo.experiments.analysis.verdicts`).

    report = Report(out_dir, "k-tied Normal (Swiatkowski et al., 2020)", setting="quick")
    report.table("truncation", table, "Post-hoc rank-k truncation (Tables 2, 3)")
    report.figure("fig3_spectra", fig, "Fraction of variance in the top singular values (Fig. 3)")
    report.finding("sigma is low-rank, the means are not", "consistent", "rule: ...", paper="top-2 share > 0.9",
                   ours="0.97 [0.95, 0.99] (n = 5, t over seeds)",
                   preconditions=[at_least("sigma moved from its init (max |log sigma / sigma_0|)", 2.1, 0.1)])
    report.write()   # out_dir/report.md, listing every file written

A verdict is one of ``VERDICTS`` ("consistent", "inconclusive", "contradicts", "not run"), computed by
`zoo.experiments.analysis.verdicts.judge` from the paper's region and our interval; the evidence is the rest of the numbers.
Every finding that ran states its preconditions (the regime the paper's claim is about, checked from the run:
`zoo.experiments.analysis.verdicts.Precondition`); `finding` passes its verdict through
`zoo.experiments.analysis.verdicts.gate`, which makes it "inconclusive (precondition not met: ...)" when one fails.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple, Sequence

import pandas as pd

from zoo.experiments.analysis.verdicts import VERDICTS, Precondition, gate, word

__all__ = ["Report", "Finding", "VERDICTS"]


class Finding(NamedTuple):
    """One row of the report's findings: the claim, the verdict (after `gate`), the evidence, the paper's number,
    ours, and the preconditions (`Precondition.text` of each, "; "-joined; "" for a finding not run)."""

    claim: str
    verdict: str
    evidence: str
    paper: str = ""
    ours: str = ""
    precondition: str = ""


def shown_numbers(table: pd.DataFrame, digits: int) -> pd.DataFrame:
    """`table` with its float columns rounded to `digits` decimals, except that a nonzero value below
    10^(1 - digits), which the rounding would keep to one digit or none, keeps `digits` significant digits (so a KL
    slope 5e-05 is not shown as 0 or 0.0001)."""
    def one(v):
        if isinstance(v, float) and v == v and 0 < abs(v) < 10.0 ** (1 - digits):
            return float(f"{v:.{digits}g}")
        return round(v, digits) if isinstance(v, float) else v
    shown = table.copy()
    for col in shown.columns:
        if pd.api.types.is_float_dtype(shown[col]):
            shown[col] = shown[col].map(one)
    return shown


class Report:
    """Collects a reproduction's outputs under ``out_dir`` and writes ``report.md`` at the end.

    Args:
      out_dir: folder for every file (created).
      title: the paper, as the report's heading.
      setting: "quick" or "full" (or another name), stated in the report with the seeds and data.
      log: a callable taking progress lines (default print), or None for silence.
    """

    def __init__(self, out_dir, title: str, setting: str, log=print):
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.title, self.setting = title, setting
        self.log = log or (lambda line: None)
        self.files: list[str] = []
        self.sections: list[str] = []
        self.findings: list[Finding] = []
        self.notes: list[str] = []
        self._start = time.perf_counter()

    def table(self, name: str, table: pd.DataFrame, caption: str, digits: int = 4) -> Path:
        """Write ``name``.csv and add the table (`shown_numbers`: ``digits`` decimals, small numbers ``digits``
        significant digits) to the report under ``caption``."""
        path = self.out / f"{name}.csv"
        table.to_csv(path, index=False)
        self.files.append(path.name)
        shown = table if digits is None else shown_numbers(table, digits)
        self.sections.append(f"### {caption}\n\n{_markdown(shown)}\n\n(`{path.name}`)\n")
        self.log(f"{caption}:\n{shown.to_string(index=False)}")
        return path

    def figure(self, name: str, fig, caption: str) -> Path:
        """Save a matplotlib Figure as ``name``.png and show it in the report under ``caption``."""
        path = self.out / f"{name}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        self.files.append(path.name)
        self.sections.append(f"### {caption}\n\n![{caption}]({path.name})\n")
        self.log(f"wrote {path}")
        return path

    def finding(self, claim: str, verdict: str, evidence: str, paper: str = "", ours: str = "",
                preconditions: Sequence[Precondition] = ()) -> None:
        """Record one of the paper's findings: the paper's number, ours, the preconditions and the verdict.

        Args:
          claim: the paper's finding, in a few words.
          verdict: one of ``VERDICTS`` (`zoo.experiments.analysis.verdicts.judge` / `combine`), before the gate.
          evidence: the rule and the other measured numbers behind the verdict.
          paper: the paper's number (or direction), quoted with its table / figure, and the region the verdict tests.
          ours: our number with its 95 % interval (`zoo.experiments.analysis.verdicts.Interval.text`).
          preconditions: the regime the claim is about, checked from the run (one or more
            `zoo.experiments.analysis.verdicts.Precondition` s; required unless ``verdict`` is "not run"); the
            recorded verdict is `zoo.experiments.analysis.verdicts.gate` of ``verdict`` and them.
        """
        word(verdict)  # an unknown word raises InputError naming "verdict"
        verdict = gate(verdict, preconditions)
        cell = "; ".join(p.text() for p in preconditions)
        self.findings.append(Finding(claim, verdict, evidence, paper, ours, cell))
        self.log(f"finding: {claim}: {verdict} (paper {paper}; ours {ours}; preconditions {cell or '-'}; {evidence})")

    def note(self, text: str) -> None:
        """A paragraph of the report's "Settings and caveats" (e.g. where the setting differs from the paper)."""
        self.notes.append(text)

    def write(self) -> Path:
        """Write ``report.md`` (findings first, then caveats, tables and figures) and return its path."""
        minutes = (time.perf_counter() - self._start) / 60
        lines = [f"# {self.title}: reproduction ({self.setting})", ""]
        lines += ["## Findings", "", "Verdicts (`zoo.experiments.analysis.verdicts.judge`, `gate`): consistent when our 95 % "
                  "interval lies in the paper's region, contradicts when it lies wholly outside it, inconclusive "
                  "otherwise; inconclusive (precondition not met) whenever the run did not reach the regime the "
                  "claim is about.", "",
                  "| finding | paper | ours (95 % interval) | precondition met? | verdict | evidence |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {f.claim} | {f.paper} | {f.ours} | {f.precondition} | {f.verdict} | {f.evidence} |"
                  for f in self.findings] or ["| (none recorded) | | | | | |"]
        lines += ["", "## Settings and caveats", ""]
        lines += [f"- {n}" for n in self.notes] + [f"- Wall time: {minutes:.1f} min.", ""]
        lines += ["## Results", ""] + self.sections
        lines += ["## Files", ""] + [f"- `{f}`" for f in self.files] + [""]
        path = self.out / "report.md"
        tmp = path.with_suffix(".md.tmp")
        tmp.write_text("\n".join(lines))
        tmp.replace(path)
        self.log(f"wrote {path}")
        return path


def _markdown(table: pd.DataFrame) -> str:
    """A GitHub Markdown table (no dependency on `tabulate`)."""
    header = "| " + " | ".join(str(c) for c in table.columns) + " |"
    rule = "|" + "---|" * len(table.columns)
    rows = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule] + rows)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
