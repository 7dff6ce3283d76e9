"""Rank-1 BNNs (Dusenberry et al., ICML 2020): the Wide ResNet rows of Table 2.

`wrn_entry_guide` builds one method's catalogue entry (``wide_resnet``, rank-1 through ``num_components``) and guide;
the CIFAR-10 part of --full (`zoo.experiments.reproduce.rank1_cifar`) and the digits WRN of the quick job share it. `DigitsWrn`
is the small WRN on the shipped digits (WRN-10-1 on the 8x8 images: the three stride groups give 8x8, 4x4 and 2x2
feature maps), trained with a `Rank1Settings` recipe chosen on the validation split; `wrn_method_runs` trains and
scores one method for every seed (one independent task of `zoo.experiments.parallel.run_parallel`: its structures compile in
one process) and `wrn_table2` puts the methods' per-set scores together into Table 2 rows (mCE vs the
deterministic WRN of the same seed).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from zoo.experiments.reproduce.rank1_setup import (QUICK_RECIPE, Rank1Settings, corrupted_sets, draws_for, fit_method, score_rows,
                                       summary_of_rows, task_split)
from zoo.experiments.reproduce.stages import StageTimes
from zoo.experiments.reproduce.stages import stage as _stage

__all__ = ["WRN_METHODS", "wrn_entry_guide", "DigitsWrn", "WRN_RECIPE", "DIGITS_WRN", "wrn_method_runs",
           "wrn_table2", "WRN_CLAIM"]

WRN_METHODS = {  # method: (rank-1?, guide, rank-1 family)
    "deterministic": (False, "point_estimate", None),
    "batch_ensemble": (True, "rank1_mixture", "delta"),
    "rank1_normal": (True, "rank1_mixture", "normal"),
    "rank1_cauchy": (True, "rank1_mixture", "cauchy"),
}
"""{method: (rank-1 or not, guide, rank-1 family)}: BatchEnsemble is the rank-1 net with point-mass factors."""

WRN_CLAIM = ("WRN on digits / digits-C: rank-1 (Normal) beats deterministic and BatchEnsemble on NLL and ECE, more "
             "so under corruption")


def wrn_entry_guide(method: str, data, *, depth: int, width: int, num_components: int, prior_scale: float,
                    sign_init: float, dropout_rate: float, cauchy_dropout_rate: float, data_kwargs=None):
    """The ``wide_resnet`` catalogue entry WRN-`depth`-`width` on `data` (``zoo.get``'s data argument) and the guide of
    `method` (a key of `WRN_METHODS`): a point estimate, or with K = `num_components` the ``rank1_mixture`` guide of
    the method's family (Normal / Cauchy factors with sigma initialised from `dropout_rate` /
    `cauchy_dropout_rate`, section 3.5; point masses for BatchEnsemble; means from `sign_init`). `prior_scale`: the
    Normal prior sd of W. Returns (entry, guide)."""
    import inference
    import zoo
    from base.errors import InputError

    if method not in WRN_METHODS:
        raise InputError("method", method, f"one of {sorted(WRN_METHODS)}")
    rank1, guide_name, family = WRN_METHODS[method]
    entry = zoo.get("wide_resnet", data=data, data_kwargs=data_kwargs, depth=depth, k=width, prior_scale=prior_scale,
                    **({"num_components": num_components, "factor": "cauchy" if family == "cauchy" else "normal"}
                       if rank1 else {}))
    kwargs = {} if not rank1 else {
        "family": family, "sign_init": sign_init,
        "dropout_rate": cauchy_dropout_rate if family == "cauchy" else dropout_rate}
    return entry, inference.make_guide(guide_name, entry.model, **kwargs)


WRN_RECIPE = QUICK_RECIPE.replace(steps=400, batch_size=32, chunk_size=100)
"""The digits WRN's recipe (docs/rank1.md): the MLP's (Adam 1e-2 cosine-decayed, loc init N(1, 0.5), KL over 2/3,
1 draw per component) at batch 32 (K x 32 = 128 rows a step for the rank-1 nets) for 400 steps (12 epochs): a
budget length, not a tuned one (1,200 steps gave the lower validation NLL; 600 put the quick job at 16 minutes on
2 CPU cores once the MLP rows had 5 seeds)."""


@dataclass(frozen=True)
class DigitsWrn:
    """The quick job's WRN rows of Table 2 on digits / digits-C. depth, width: WRN-depth-width (8x8 inputs);
    recipe: `Rank1Settings` (its ``num_components``, ``prior_scale``, ``sign_init``, ``dropout_rate``,
    ``cauchy_dropout_rate``, training and ``eval_samples``); methods: keys of `WRN_METHODS` (the deterministic net is
    mCE's reference)."""

    depth: int = 10
    width: int = 1
    recipe: Rank1Settings = WRN_RECIPE
    methods: tuple = ("deterministic", "batch_ensemble", "rank1_normal")


DIGITS_WRN = DigitsWrn()


def wrn_method_runs(method: str, wrn: DigitsWrn, seeds, types=None, severities=(1, 2, 3, 4, 5), log=None) -> dict:
    """Train the digits WRN of `method` under ``wrn.recipe`` for every seed on the digits split (`digits_split`,
    seed 0, `task_split`) and score it on the test set and its corruptions (`types` x `severities`, `score_rows`).

    Returns {"rows": per-set scores (`score_rows` table, column "seed" added), "params": {seed: free parameters of
    the guide}, "converged": {seed: `inference.fit`'s judgement of the ELBO}}: plain data, so that the methods can run in separate processes (`zoo.experiments.parallel`)."""
    split = task_split()
    r = wrn.recipe
    sets = corrupted_sets(split.test_raw, split, types, severities)
    rows, params, converged = [], {}, {}
    times = {part: StageTimes(f"WRN {method} {part}", "rank1") for part in ("fit", "scoring")}
    for seed in seeds:
        with _stage("fit", None, "rank1", times["fit"]):
            entry, guide = wrn_entry_guide(method, "digits", data_kwargs={"size": split.size}, depth=wrn.depth,
                                           width=wrn.width, num_components=r.num_components,
                                           prior_scale=r.prior_scale, sign_init=r.sign_init,
                                           dropout_rate=r.dropout_rate, cauchy_dropout_rate=r.cauchy_dropout_rate)
            post = fit_method(method, split, r, seed, guide=guide, entry=entry)
        params[seed] = int(post.guide.num_free_params(post.params))
        converged[seed] = getattr(getattr(post, "info", None), "converged", None)
        with _stage("scoring", None, "rank1", times["scoring"]):
            rows.append(score_rows({method: post}, sets, split.test_raw, draws={method: draws_for(method, r)},
                                   preprocess=split.preprocess, seed=seed).assign(seed=seed))
    if log is not None:
        for t in times.values():
            log(t.line() + f" ({len(seeds)} seeds)")
    return {"rows": pd.concat(rows, ignore_index=True), "params": params, "converged": converged}


def wrn_table2(results: dict, methods) -> pd.DataFrame:
    """Table 2 rows from {method: `wrn_method_runs` result}: per seed, `summary_of_rows` of the methods' per-set
    scores (mCE vs the deterministic WRN when it ran). Returns one row per (method, seed): NLL, Acc, ECE, cNLL,
    cA, cECE, mCE, #params, seed, converged."""
    rows = pd.concat([results[m]["rows"] for m in methods], ignore_index=True)
    runs = []
    for seed in rows["seed"].drop_duplicates():
        part = rows[rows.seed == seed].drop(columns="seed")
        summary = summary_of_rows(part, methods, num_params={m: results[m]["params"][seed] for m in methods})
        runs.append(summary.assign(seed=seed, converged=summary["method"].map(
            lambda m: results[m].get("converged", {}).get(seed))))
    return pd.concat(runs, ignore_index=True)
