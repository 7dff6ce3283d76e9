"""Verdicts of the paper reproductions: a 95 % interval of our number and one rule that compares it with the paper.

Every finding of a `zoo reproduce` job states the paper's claim as a *region* of one quantity (a difference, a
ratio, an accuracy): "rank-1 has the lower NLL" is ``NLL(rank-1) - NLL(BatchEnsemble)`` in ``(-inf, 0)``; "rank 2
loses nothing" is ``NLL(rank 2) - NLL(full)`` in ``[-tol, tol]`` with a stated tolerance. Ours is a 95 % interval
of that quantity:

* `t_interval`: over seeds (independent runs), mean +- t_{0.975, n-1} SE, SE = sd / sqrt(n) with ddof 1
  (at n = 3 the half-width is 4.30 SE, at n = 5 2.78 SE, at n = 10 2.26 SE);
* `paired_interval`: the t-interval of the per-seed differences a_s - b_s when both arms share their seeds
  (the paired t-test's interval);
* `se_interval`: mean +- q SE for an SE of another origin (weight draws, a binomial test accuracy), q the t
  quantile for the stated degrees of freedom (``df=None``: the normal 1.96).

`judge` is the one rule: **consistent** when the whole interval lies in the paper's region, **contradicts** when
the interval lies wholly outside it (it excludes the paper's side), **inconclusive** otherwise (the interval
straddles a boundary: the noise cannot tell). One run gives no t-interval (an infinite one): inconclusive.
`combine` joins the verdicts of a claim with several parts.

A paper's claim is about a regime (a converged fit, the state after a phase transition, chains that mixed, sigmas
that moved from their initialisation). Every finding states it as one or more `Precondition` s, checked from the run
(`at_least` / `at_most` / `Precondition`); `gate` is the one rule that keeps a verdict only when they all hold and
otherwise says ``"inconclusive (precondition not met: ...)"``: a run that never reached the regime can neither
contradict nor confirm the claim. `zoo.experiments.reproduce.report.Report.finding` applies it to every finding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from base.errors import InputError

__all__ = ["VERDICTS", "Interval", "t_interval", "paired_interval", "se_interval", "judge", "combine",
           "region_text", "Precondition", "at_least", "at_most", "gate", "word", "fits_converged"]

VERDICTS = ("consistent", "inconclusive", "contradicts", "not run")
"""The words of a finding: the first three from `judge` / `combine`, "not run" when its experiment was left out."""

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A 95 % interval of one quantity: ``mean`` (the point estimate), ``lo``, ``hi``, ``n`` (runs or draws
    behind it) and ``kind`` (how it was made: "t over seeds", "paired t over seeds", "SE over draws"...)."""

    mean: float
    lo: float
    hi: float
    n: int
    kind: str

    def text(self, digits: int = 3, scale: float = 1.0) -> str:
        """``"0.123 [0.101, 0.145] (n = 5, paired t over seeds)"``, every number times ``scale``."""
        f = f"{{:.{digits}g}}"
        lo = "-inf" if not np.isfinite(self.lo) else f.format(scale * self.lo)
        hi = "inf" if not np.isfinite(self.hi) else f.format(scale * self.hi)
        return f"{f.format(scale * self.mean)} [{lo}, {hi}] (n = {self.n}, {self.kind})"


def t_interval(values, kind: str = "t over seeds") -> Interval:
    """The 95 % t-interval of the mean of ``values`` (any shape, flattened; NaNs dropped): mean +-
    t_{0.975, n-1} sd / sqrt(n), sd with ddof 1. One value (or none) gives (-inf, inf): no spread to estimate."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return Interval(float("nan"), -math.inf, math.inf, 0, kind)
    mean = float(v.mean())
    if v.size < 2:
        return Interval(mean, -math.inf, math.inf, 1, kind)
    half = float(stats.t.ppf(0.5 + LEVEL / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return Interval(mean, mean - half, mean + half, int(v.size), kind)


def paired_interval(a, b) -> Interval:
    """The 95 % t-interval of the mean of a_s - b_s over the shared seeds s (``a``, ``b``: equal-length arrays in
    seed order, or dicts / Series keyed by seed: only the seeds in both count)."""
    if hasattr(a, "keys") and hasattr(b, "keys"):
        common = [k for k in a.keys() if k in set(b.keys())]
        a, b = [a[k] for k in common], [b[k] for k in common]
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise InputError("b", f"<{b.size} values>", f"as many values as a ({a.size}), one per shared seed")
    return t_interval(a - b, "paired t over seeds")


def se_interval(mean: float, se: float, n: int, df: int | None = None, kind: str = "SE") -> Interval:
    """mean +- q se with q the 97.5 % quantile of Student's t with ``df`` degrees of freedom (None: the normal
    distribution's 1.96); a NaN / infinite ``se`` gives (-inf, inf)."""
    if se is None or not np.isfinite(se):
        return Interval(float(mean), -math.inf, math.inf, int(n), kind)
    q = float(stats.norm.ppf(0.5 + LEVEL / 2) if df is None else stats.t.ppf(0.5 + LEVEL / 2, df))
    return Interval(float(mean), float(mean - q * se), float(mean + q * se), int(n), kind)


def judge(interval: Interval, low: float = -math.inf, high: float = math.inf) -> str:
    """The verdict of ``interval`` against the paper's claim that the quantity lies in [``low``, ``high``]:
    "consistent" when lo >= low and hi <= high (the interval lies inside the paper's region), "contradicts" when
    hi < low or lo > high (the interval lies wholly on the other side), "inconclusive" otherwise (including an
    infinite interval from a single run, or a NaN estimate)."""
    if not low <= high:
        raise InputError("high", high, f"a bound >= low ({low})")
    lo, hi = interval.lo, interval.hi
    if not (np.isfinite(interval.mean) and lo == lo and hi == hi):
        return "inconclusive"
    if lo >= low and hi <= high:
        return "consistent"
    if hi < low or lo > high:
        return "contradicts"
    return "inconclusive"


def word(verdict: str) -> str:
    """The verdict's word (one of ``VERDICTS``) without its reason: ``word("inconclusive (precondition not met:
    ...)") == "inconclusive"``; anything else raises InputError."""
    head = str(verdict).split(" (", 1)[0]
    if head not in VERDICTS:
        raise InputError("verdict", verdict, f"one of {VERDICTS}, optionally followed by ' (reason)'")
    return head


@dataclass(frozen=True)
class Precondition:
    """The regime a paper's claim is about, checked from a run.

    what: the condition in words with the paper's value ("dense1 log alpha >= 6.3, past the transition (the paper's
    value after it, section 6.1)"); met: whether the run satisfies it; measured: the run's numbers behind ``met``
    ("log alpha 5.27, still rising")."""

    what: str
    met: bool
    measured: str

    def text(self) -> str:
        """``"yes: what (measured)"`` or ``"NO: what (measured)"``: the findings table's "precondition met?" cell."""
        return f"{'yes' if self.met else 'NO'}: {self.what} ({self.measured})"


def at_least(what: str, value: float, threshold: float, measured: str | None = None) -> Precondition:
    """The precondition ``value >= threshold`` (a NaN value is not met); ``measured`` defaults to the value."""
    v = float(value)
    return Precondition(what, bool(v == v and v >= threshold), measured or f"{v:.4g}")


def at_most(what: str, value: float, threshold: float, measured: str | None = None) -> Precondition:
    """The precondition ``value <= threshold`` (a NaN value is not met); ``measured`` defaults to the value."""
    v = float(value)
    return Precondition(what, bool(v == v and v <= threshold), measured or f"{v:.4g}")


def fits_converged(table: pd.DataFrame, what: str, by: str | None = None, keys=None) -> Precondition:
    """The precondition that every fit behind ``table``'s rows (those with ``table[by]`` in ``keys`` when given)
    converged: ``inference.fit``'s judgement of its ELBO (the ``converged`` column; None / NaN rows, e.g. a deep
    ensemble's, are left out). No ``converged`` column (a table from before it was recorded): not met."""
    rows = table if by is None or keys is None else table[table[by].isin(list(keys))]
    condition = "the fits compared converged (`inference.fit`'s ELBO judgement, info.converged)"
    if "converged" not in rows:
        return Precondition(condition, False, f"{what}: not recorded")
    judged = rows["converged"].dropna().astype(bool)
    return Precondition(condition, bool(len(judged)) and bool(judged.all()),
                        f"{what}: {int(judged.sum())} of {len(judged)} fits converged")


def gate(verdict: str, preconditions) -> str:
    """The one rule for preconditions: ``verdict`` (from `judge` / `combine`) when every one of ``preconditions``
    (`Precondition` s) is met; otherwise ``"inconclusive (precondition not met: what (measured); ...)"``, whatever
    the interval said: "contradicts" (and "consistent") only where the run reached the claim's regime. "not run"
    stays "not run". An empty ``preconditions`` raises InputError: every finding states its regime."""
    preconditions = list(preconditions)
    if word(verdict) == "not run":
        return verdict
    if not preconditions or not all(isinstance(p, Precondition) for p in preconditions):
        raise InputError("preconditions", preconditions, "one or more Precondition s (the claim's regime)")
    unmet = [p for p in preconditions if not p.met]
    if not unmet:
        return verdict
    return "inconclusive (precondition not met: " + "; ".join(f"{p.what} ({p.measured})" for p in unmet) + ")"


def combine(verdicts) -> str:
    """One verdict for a claim with several parts: "contradicts" when any part contradicts, "consistent" when
    every part is consistent, "inconclusive" otherwise ("not run" parts are left out; none left: "not run"). A part
    may carry its reason (`gate`'s "inconclusive (precondition not met: ...)"): only its word counts."""
    words = [str(v).split(" (", 1)[0] for v in verdicts]
    unknown = [v for v in words if v not in VERDICTS]
    if unknown:
        raise InputError("verdicts", unknown, f"words of {VERDICTS}")
    run = [v for v in words if v != "not run"]
    if not run:
        return "not run"
    if "contradicts" in run:
        return "contradicts"
    return "consistent" if all(v == "consistent" for v in run) else "inconclusive"


def region_text(low: float = -math.inf, high: float = math.inf, digits: int = 3) -> str:
    """The paper's region in words: "> 0", "< 0", "in [-0.01, 0.01]"."""
    f = f"{{:.{digits}g}}"
    if np.isfinite(low) and np.isfinite(high):
        return f"in [{f.format(low)}, {f.format(high)}]"
    if np.isfinite(low):
        return f">= {f.format(low)}"
    if np.isfinite(high):
        return f"<= {f.format(high)}"
    return "any value"
