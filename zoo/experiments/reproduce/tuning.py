"""Choosing a training setting on a validation split, never on the test split.

The papers pick each arm's learning rate and prior on held-out training data (k-tied appendix D.4: Adam's
rate from {1e-4, 3e-4, 1e-3, 3e-3}, the prior sd from {0.2, 0.3}, the KL annealing slope from
{5e-5, 5e-6} per batch). `grid` spells such a grid out, `choose_on_validation` fits and scores every setting
and keeps the best; the table of every candidate goes into the job's report so a reader sees the margin.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd

from base.errors import InputError

__all__ = ["Choice", "grid", "choose_on_validation"]


@dataclass(frozen=True)
class Choice:
    """The setting kept (a dict of the grid's axes), its validation score and the table of every candidate
    (one row per setting: its axes, then ``validation``; non-finite scores are kept and never chosen)."""

    setting: dict
    score: float
    table: pd.DataFrame


def grid(**axes: Sequence) -> list[dict]:
    """Every combination of the axes' values, as dicts in row-major order (the last axis varies fastest).

    ``grid(learning_rate=(1e-3, 3e-3), prior_scale=(0.2, 0.3))`` -> 4 dicts. An empty axis is refused."""
    for name, values in axes.items():
        if len(values) == 0:
            raise InputError(name, values, "at least one value")
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


def choose_on_validation(settings: Sequence[dict], score: Callable[[dict], float], *,
                         higher_is_better: bool = False) -> Choice:
    """Score every setting with ``score(setting)`` (a fit on the training part, scored on the validation part)
    and keep the best; ties go to the earlier setting. A NaN or infinite score (a diverged fit) is recorded and
    never chosen; if every score is non-finite an `InputError` names the settings."""
    if len(settings) == 0:
        raise InputError("settings", settings, "at least one setting")
    rows = [{**s, "validation": float(score(s))} for s in settings]
    finite = [r for r in rows if math.isfinite(r["validation"])]
    if not finite:
        raise InputError("settings", list(settings), "at least one setting whose validation score is finite")
    sign = -1.0 if higher_is_better else 1.0
    best = min(finite, key=lambda r: sign * r["validation"])
    setting = {k: v for k, v in best.items() if k != "validation"}
    return Choice(setting, best["validation"], pd.DataFrame(rows))
