"""Mean and standard error over seeds (or any repeated runs) of a table of results.

The papers report "mean +- SEM over seeds"; every reproduction summarises its per-seed rows with
``mean_se`` so the convention (ddof 1, sd / sqrt(n), n = rows in the group) is the same everywhere.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from base.errors import InputError

__all__ = ["mean_se", "sem", "format_mean_se"]


def mean_se(runs: pd.DataFrame, by, metrics) -> pd.DataFrame:
    """Mean and standard error of the mean (sd / sqrt(n), ddof 1) of each metric per group.

    Args:
      runs: one row per run (e.g. per seed), holding the columns ``by`` and ``metrics``.
      by: a column name or a list of them to group on.
      metrics: the numeric columns to summarise.
    Returns:
      one row per group: the ``by`` columns, ``n`` (rows in the group) and, per metric, ``{metric}_mean``
      and ``{metric}_se`` (NaN for a group of one row: one run has no spread to estimate).
    """
    by = [by] if isinstance(by, str) else list(by)
    metrics = list(metrics)
    missing = [c for c in by + metrics if c not in runs.columns]
    if missing:
        raise InputError("runs", f"a table with columns {list(runs.columns)}", f"a table with the columns {missing}")
    grouped = runs.groupby(by, sort=True)
    out = pd.DataFrame({"n": grouped.size()})
    for metric in metrics:
        out[f"{metric}_mean"] = grouped[metric].mean()
        out[f"{metric}_se"] = grouped[metric].std(ddof=1) / np.sqrt(out["n"])
    return out.reset_index()


def sem(values) -> float:
    """Standard error of the mean of ``values`` (any shape, flattened): sd / sqrt(n), ddof 1; NaN for n < 2."""
    values = np.asarray(values, dtype=float).ravel()
    return float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else float("nan")


def format_mean_se(mean: float, se: float, digits: int = 3) -> str:
    """``"0.123 +- 0.004"`` (or ``"0.123"`` when ``se`` is NaN: a single run), for reports."""
    if se is None or not np.isfinite(se):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} +- {se:.{digits}f}"
