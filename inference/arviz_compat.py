"""The two ArviZ APIs behind one set of functions: ArviZ 0.x (`az.InferenceData`, Python 3.11) and ArviZ 1.x
(arviz-base / arviz-stats on an ``xarray.DataTree``, Python >= 3.12).

What is the same under both and needs no adapter: ``az.convert_to_dataset``, ``az.ess`` / ``az.rhat`` (bulk
ESS and rank-normalised split R-hat, the same numbers), ``az.loo`` / ``az.compare`` / ``az.summary`` of the
object `inference.to_arviz` returns, group access (``data.posterior["name"].attrs``), ``data.to_netcdf(path)``
and ``az.from_netcdf(path)``. What differs, and is adapted here:

- building the object and listing its groups: `from_groups`, `group_names` (0.x ``az.from_dict(posterior=..., ...)``, 1.x ``az.from_dict({"posterior":
  ...})``); it returns the installed ArviZ's native type, so a user's own ``az.*`` calls work on it.
- PSIS-LOO's result: `loo` returns `LooEstimate` (0.x names ``elpd_loo`` / ``p_loo`` / ``loo_i``, 1.x ``elpd`` /
  ``p`` / ``elpd_i``).
- the comparison table: `compare` returns ArviZ 0.x's columns on both (1.x names ``elpd`` / ``p``, signs
  ``elpd_diff`` the other way, rounds by default and flags Pareto k in a string ``diag_elpd``).
- plots: ArviZ 1.x's (arviz-plots) take other arguments and return a PlotCollection, not matplotlib axes; the
  package's forest and pair plots adapt in `evals.arviz_plots` (plots are analyses: evals, not inference).
- the summary table: `summary` gives the 94 % HDI under 0.x's column names on both (1.x's default is an 89 %
  equal-tailed interval).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import arviz as az
import numpy as np
import pandas as pd

arviz: Any = az
"""The ArviZ module, untyped here: its functions take other arguments in 0.x and 1.x, and a type checker sees one."""

ARVIZ_1 = int(az.__version__.split(".")[0]) >= 1
"""True under ArviZ 1.x (DataTree), False under 0.x (InferenceData)."""

ArvizData = Any
"""What `inference.to_arviz` returns: ``az.InferenceData`` under ArviZ 0.x, ``xarray.DataTree`` under 1.x."""

COMPARE_COLUMNS = ["rank", "elpd_loo", "p_loo", "elpd_diff", "weight", "se", "dse", "warning"]
"""`compare`'s columns (ArviZ 0.x's names, without its constant ``scale`` column)."""


def from_groups(groups: dict, dims: dict | None = None) -> ArvizData:
    """The installed ArviZ's object from {group: {variable: array}}; arrays of a sampled group are (chain, draw,
    *shape), observed_data's (*shape); `dims`: {variable: [dim name per axis after (chain, draw)]}."""
    if ARVIZ_1:
        return arviz.from_dict(groups, dims=dims)
    return arviz.from_dict(**groups, dims=dims)


def group_names(data: ArvizData) -> list[str]:
    """The names of `data`'s groups, e.g. ["posterior", "log_likelihood"] (0.x ``data.groups()``; 1.x the
    DataTree's children)."""
    return list(data.children) if ARVIZ_1 else list(data.groups())


class LooEstimate(NamedTuple):
    """PSIS-LOO of one posterior, the same fields under both ArviZ APIs.

    elpd, se: the estimate of the expected log pointwise predictive density of new data and its standard error;
    p: the effective number of parameters (p_loo); pareto_k (N,): the Pareto shape of each point's importance
    ratios; elpd_i (N,): pointwise elpd (None unless ``pointwise=True``); warning: whether ArviZ flags a
    Pareto k above its threshold.
    """

    elpd: float
    se: float
    p: float
    pareto_k: np.ndarray
    elpd_i: np.ndarray | None
    warning: bool


def loo(data: ArvizData, pointwise: bool = False) -> LooEstimate:
    """``az.loo`` of `data` (its log_likelihood group, one variable) as a `LooEstimate` (Vehtari, Gelman and
    Gabry 2017, PSIS-LOO, eq. 10 for elpd_loo)."""
    result = arviz.loo(data, pointwise=True)  # 0.x keeps pareto_k only with the pointwise values
    fields = ("elpd", "p", "elpd_i") if ARVIZ_1 else ("elpd_loo", "p_loo", "loo_i")
    elpd, p, elpd_i = (getattr(result, f) for f in fields)
    return LooEstimate(float(elpd), float(result.se), float(p), np.asarray(result.pareto_k),
                       None if elpd_i is None or not pointwise else np.asarray(elpd_i), bool(result.warning))


def compare(named: dict) -> pd.DataFrame:
    """``az.compare`` (PSIS-LOO, stacking weights) of {name: data with a log_likelihood group}, best first, with
    ArviZ 0.x's columns (`COMPARE_COLUMNS`) at full precision under either API: elpd_loo, p_loo, se; elpd_diff
    >= 0, the best model's elpd_loo minus this one's, and dse its standard error; weight; warning: a Pareto k
    above ArviZ's threshold."""
    if not ARVIZ_1:
        return arviz.compare(named, ic="loo", method="stacking")[COMPARE_COLUMNS]
    table = arviz.compare(named, method="stacking", round_to="none")
    table = table.rename(columns={"elpd": "elpd_loo", "p": "p_loo"})
    table["elpd_diff"] = -table["elpd_diff"].astype(float)
    table["warning"] = table["diag_elpd"].fillna("").astype(str) != ""
    return table[COMPARE_COLUMNS]


HDI_PROB = 0.94
"""`summary`'s interval: the highest-density interval of this probability (ArviZ 0.x's default)."""


def summary(data, var_names=None, round_to: int | str = "none") -> pd.DataFrame:
    """``az.summary`` of `data` (anything ``az.convert_to_dataset`` takes) with the same columns under both APIs:
    mean, sd, hdi_3%, hdi_97% (the 94 % HDI), mcse_mean, mcse_sd, ess_bulk, ess_tail, r_hat; one row per scalar
    entry (``name[i, j]``) of the variables `var_names` (default all). mean, sd, mcse, bulk ESS and R-hat are the same numbers under both; ess_tail is not
    (ArviZ 1.x computes tail ESS differently). `round_to`: decimals, or "none" for full precision."""
    dataset = arviz.convert_to_dataset(data)
    dataset = dataset if var_names is None else dataset[list(var_names)]
    columns = ["mean", "sd", "hdi_3%", "hdi_97%", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat"]
    if ARVIZ_1:
        table = arviz.summary(dataset, ci_kind="hdi", ci_prob=HDI_PROB, round_to=round_to)
        table = table.rename(columns={"hdi94_lb": "hdi_3%", "hdi94_ub": "hdi_97%"})
    else:
        table = arviz.summary(dataset, hdi_prob=HDI_PROB, round_to=round_to)
    return table[columns]
