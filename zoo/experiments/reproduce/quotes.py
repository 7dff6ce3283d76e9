"""The four papers' numbers that the reproductions compare with, each quoted from the paper's text.

A `Quote` is a passage of a paper as printed (a table row or a phrase, whitespace collapsed) and the value taken
from it, with its table / figure and section. ``tests/experiments/test_quotes.py`` checks every quote against the
papers' texts (the project's shared ``papers/<paper>.txt``): the passage occurs in the text and the value occurs in
the passage, so a misquote (rank-1 Table 8's cNLL, a setting the paper never states) fails a test instead of
reaching a report. The texts carry no page breaks, so a quote names its table or figure and section, not a page.

The jobs build their "paper" column from `QUOTES` (`quoted`); a number derived from quotes (a difference, a ratio)
names the quotes it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from base.errors import InputError

__all__ = ["Quote", "QUOTES", "quoted", "normalised", "found"]


@dataclass(frozen=True)
class Quote:
    """paper: the text's name ("variance-networks", "rank1-bnn", "k-tied-normal", "liberty-or-depth_paper");
    source: table / figure and section ("Table 2 (section 4.1), CIFAR-10 WRN-28-10"); passage: the paper's words
    or table row as printed (whitespace collapsed); value: the number (or words) taken from the passage."""

    paper: str
    source: str
    passage: str
    value: str

    def text(self) -> str:
        """``"0.80 (Table 8, appendix C.2)"``: the value and where it is printed."""
        return f"{self.value} ({self.source})"


def normalised(text: str) -> str:
    """``text`` with every run of whitespace (tabs of the tables, line breaks) made one space."""
    return " ".join(text.split())


def found(quote: Quote, paper_text: str) -> bool:
    """Whether ``quote`` is in ``paper_text``: its passage occurs (whitespace collapsed) and its value occurs in
    the passage."""
    passage = normalised(quote.passage)
    return quote.value in passage and passage in normalised(paper_text)


def _load(path: Path) -> dict[str, Quote]:
    """`QUOTES` from the tab-separated file ``path``: a header (key, paper, source, value, passage), one quote a
    line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0].split("\t"), [line.split("\t") for line in lines[1:] if line.strip()]
    bad = [r[0] for r in rows if len(r) != len(header)]
    if header != ["key", "paper", "source", "value", "passage"] or bad:
        raise InputError("path", str(path), "a quotes table: key, paper, source, value, passage, tab-separated",
                         hint=f"malformed rows: {bad}" if bad else "")
    return {key: Quote(paper, source, passage, value) for key, paper, source, value, passage in rows}


QUOTES: dict[str, Quote] = _load(Path(__file__).with_name("quotes.tsv"))
"""Every number the jobs quote, by key (paper prefix "vn", "r1", "kt", "lod"), from ``quotes.tsv`` beside this
module (data, one quote a line: key, paper, source, value, passage)."""


def quoted(*keys: str) -> str:
    """The quotes ``keys`` as the report's "paper" column shows them: ``"0.84 (Table 8 ..., 1 sample)"``, "; "-
    joined. An unknown key raises InputError."""
    unknown = [k for k in keys if k not in QUOTES]
    if unknown:
        raise InputError("keys", unknown, f"keys of QUOTES ({len(QUOTES)} quotes)")
    return "; ".join(QUOTES[k].text() for k in keys)
