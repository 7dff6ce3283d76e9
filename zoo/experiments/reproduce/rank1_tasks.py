"""Rank-1 BNNs (Dusenberry et al., ICML 2020): the independent parts of `zoo reproduce rank1`, as tasks of
`zoo.experiments.parallel.run_parallel` (one worker process per CPU core, sharing the compilation cache).

`rank1_tasks(job)` lists them, longest first: the MLP's Table 2 / Table 8 / Fig. 6 (`mlp_table2_part`, with MC
dropout's rate chosen first on the validation split), the digits WRN's Table 2 one method per task
(`zoo.experiments.reproduce.rank1_wrn.wrn_method_runs`) and the ablations in two groups (`ablations_part`). Each task takes
plain settings (a `Rank1Job`, names, seeds), rebuilds the deterministic digits split itself (`task_split`) and
returns DataFrames and numbers, so that its result is the same in a worker as here; `zoo.experiments.reproduce.rank1` writes
the report from the results, in its own order.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from zoo.experiments.analysis.diversity import diversity_table
from evals.ood import ensemble
from zoo.experiments.parallel import Task
from zoo.experiments.reproduce import rank1_ablations as ablations
from zoo.experiments.reproduce.rank1_setup import (choose_mc_dropout_rate, choose_on_validation_nll, corruption_summary, corrupted_sets, draws_for,
                                       fit_method, task_split)
from zoo.experiments.reproduce.rank1_wrn import wrn_method_runs
from zoo.experiments.reproduce.stages import StageTimes, stage as _stage

__all__ = ["table2", "mlp_table2_part", "ablations_part", "rank1_tasks", "ABLATION_GROUPS", "METRICS"]

METRICS = ("NLL", "Acc", "ECE", "cNLL", "cA", "cECE", "mCE")
DIVERSE = ("rank1_normal", "batch_ensemble", "batch_ensemble_unregularised")
"""The methods whose late checkpoints make Fig. 6 (member diversity)."""

ABLATION_GROUPS = (("objectives", "components"), ("dropout_init", "prior_placement", "positive_priors"))
"""The ablations in two tasks of about equal cost (each trains the recipe's own arm once per seed, `FitCache`;
"objectives" first in its group: its "average" arm is the recipe)."""


def stage(name, log=print, into=None):
    """`zoo.experiments.reproduce.stages.stage` tagged ``[rank1]``."""
    return _stage(name, log, "rank1", into)


def _num_params(post) -> int:
    return int(post.guide.num_free_params(post.params))


def _converged(post) -> bool | None:
    """``inference.fit``'s judgement of the fit's ELBO (``info.converged``); None when the posterior records none."""
    value = getattr(getattr(post, "info", None), "converged", None)
    return None if value is None else bool(value)


def table2(job, split, log=print):
    """Train every method of ``job.methods`` for every seed and score it on the test set and its corruptions.

    Returns (runs: one row per (method, seed) with the Table-2 columns and #params; samples: rank-1 Normal
    scored with ``job.eval_samples`` draws per component, one row per (draws, seed) (Table 8); diversity: one
    row per (method, seed, checkpoint) of `zoo.experiments.analysis.diversity.diversity_table` for rank-1 Normal and
    both BatchEnsembles (`DIVERSE`) over the checkpoints after ``diversity_from`` of training (Fig. 6))."""
    recipe = job.recipe
    late = job.diversity_from * recipe.steps
    xte, yte = split.standardised(split.test_raw)
    runs, samples, diversity = [], [], []
    times = {name: StageTimes(name, "rank1") for name in
             [f"table 2 fit {m}" for m in job.methods] + ["table 2 scoring", "table 8 scoring", "fig 6 diversity"]}
    for seed in job.seeds:
        posts, draws, counts, checkpoints = {}, {}, {}, {}
        for method in job.methods:
            with stage(method, into=times[f"table 2 fit {method}"], log=None):
                if method == "deep_ensemble":
                    members = [fit_method("deterministic", split, recipe, 1000 * (m + 1) + seed,
                                          hidden=job.ensemble_hidden) for m in range(job.ensemble_members)]
                    posts[method] = ensemble(members, num_samples=1, seed=seed)
                    draws[method] = 1
                    counts[method] = sum(_num_params(p) for p in members)
                    continue
                seen = []
                hook = (lambda step, p, seen=seen: seen.append((step, p)) if step > late else None) \
                    if method in DIVERSE else None
                posts[method] = fit_method(method, split, recipe, seed, on_chunk=hook)
                draws[method], counts[method] = draws_for(method, recipe), _num_params(posts[method])
                if seen:
                    checkpoints[method] = seen
        with stage("scoring", into=times["table 2 scoring"], log=None):
            summary = corruption_summary(posts, split.test_raw, split, draws=draws, types=job.types,
                                         severities=job.severities, seed=seed, num_params=counts)
        runs.append(summary.assign(seed=seed, converged=summary["method"].map(
            lambda m: _converged(posts[m]) if m != "deep_ensemble" else None)))
        log(f"  seed {seed}:\n{summary.round(4).to_string(index=False)}")
        with stage("table 8", into=times["table 8 scoring"], log=None):
            for s in job.eval_samples:
                if s == draws["rank1_normal"]:  # Table 2's own row: the same draws
                    row = summary.set_index("method").loc["rank1_normal"].to_dict()
                else:
                    row = corruption_summary({"rank1_normal": posts["rank1_normal"]}, split.test_raw, split,
                                             draws={"rank1_normal": s}, types=job.types, severities=job.severities,
                                             seed=seed, reference=None).iloc[0].to_dict()
                samples.append({"samples_per_component": s, "seed": seed,
                                **{k: row[k] for k in METRICS if k in row and k != "mCE"}})
        with stage("fig 6", into=times["fig 6 diversity"], log=None):
            table = diversity_table(checkpoints, xte, yte, num_samples=1, seed=seed)
        diversity.append(table.assign(seed=seed))
    for t in times.values():
        log(t.line())
    return pd.concat(runs, ignore_index=True), pd.DataFrame(samples), pd.concat(diversity, ignore_index=True)


def _quiet(line):
    """A log that drops its line."""


def mlp_table2_part(job, log=None) -> dict:
    """The MLP part of Table 2 on the digits split (`task_split`): MC dropout's rate and the rank-1 Cauchy arm's
    sigma init (``job.cauchy_dropout_rates``, as the Normal arm's recipe was chosen) chosen on the validation split
    (when those methods are in ``job.methods``), then `table2` with them. Returns {"rate": the rate or None,
    "chosen": [{"rate", "val_NLL"}], "cauchy": (the Cauchy sigma init, [{"cauchy_dropout_rate", "val_NLL"}]) or
    None, "runs", "samples", "diversity": `table2`'s tables}. `log`: print or None."""
    log = log or _quiet
    split = task_split()
    rate, chosen, cauchy = None, [], None
    if "mc_dropout" in job.methods:
        with stage("MC dropout rate on the validation split", log):
            rate, chosen = choose_mc_dropout_rate(split, job.recipe, job.mc_dropout_rates, seed=job.seeds[0])
        job = replace(job, recipe=job.recipe.replace(mc_dropout_rate=rate))
    if "rank1_cauchy" in job.methods and len(job.cauchy_dropout_rates) > 1:
        with stage("rank-1 Cauchy sigma init on the validation split", log):
            cauchy = choose_on_validation_nll("rank1_cauchy", "cauchy_dropout_rate", job.cauchy_dropout_rates, split,
                                              job.recipe, seed=job.seeds[0])
        job = replace(job, recipe=job.recipe.replace(cauchy_dropout_rate=cauchy[0]))
    with stage("corrupting the test set (MLP table 2)", log):
        corrupted_sets(split.test_raw, split, job.types, job.severities)
    with stage("table 2 + table 8 + fig 6", log):
        runs, samples, div = table2(job, split, log)
    return {"rate": rate, "chosen": chosen, "cauchy": cauchy, "runs": runs, "samples": samples, "diversity": div}


def ablations_part(job, names, log=None) -> dict:
    """The ablations `names` (of ``job.ablations``, in this order) on ``job.ablation_seeds`` with
    ``job.ablation_steps`` steps, sharing one `FitCache`. Returns {name: result}: "objectives" (final scores,
    curves), the others one table each (`zoo.experiments.reproduce.rank1_ablations`). `log`: print or None."""
    log = log or _quiet
    split = task_split()
    ab = job.recipe.replace(steps=job.ablation_steps)
    with stage("corrupting the test set (ablations)", log):
        corrupted_sets(split.test_raw, split, job.ablation_types, job.ablation_severities)
    kw = dict(types=job.ablation_types, severities=job.ablation_severities, log=log, cache=ablations.FitCache())
    out = {}
    for name in names:
        title, run = _ABLATIONS[name]
        log(f"[rank1] ablation: {title}")
        with stage(f"ablation {name}", log):
            out[name] = run(split, ab, job, kw)
    return out


_ABLATIONS = {
    "objectives": ("average vs mixture likelihood (Fig. 4)",
                   lambda split, ab, job, kw: ablations.objectives(split, ab, job.ablation_seeds, **kw)),
    "components": ("K (Fig. 3)", lambda split, ab, job, kw: ablations.components(
        split, ab, job.ablation_seeds, job.components, job.total_batch, **kw)),
    "dropout_init": ("dropout-rate initialisation of sigma (Fig. 5)", lambda split, ab, job, kw: ablations.dropout_init(
        split, ab, job.ablation_seeds, job.dropout_rates, **kw)),
    "prior_placement": ("priors on s, r or both (Fig. 2)",
                        lambda split, ab, job, kw: ablations.prior_placement(split, ab, job.ablation_seeds, **kw)),
    "positive_priors": ("real- vs positive-valued factors (Fig. 9)",
                        lambda split, ab, job, kw: ablations.positive_priors(split, ab, job.ablation_seeds, **kw)),
}


def rank1_tasks(job, log=None) -> list:
    """The `zoo.experiments.parallel.Task`s of `job`, about longest first (measured in docs/rank1.md): "mlp table 2"
    (`mlp_table2_part`), "wrn <method>" for the rank-1 methods of ``job.wrn.methods`` (`wrn_method_runs`: K x the
    deterministic net's rows a step), "ablations <names>" for each group of `ABLATION_GROUPS` with an ablation of
    ``job.ablations`` (`ablations_part`), then "wrn deterministic" (no WRN task when ``job.wrn`` is None).
    `log`: print or None (it crosses into the worker processes)."""
    wrn = () if job.wrn is None else job.wrn.methods

    def wrn_task(method):
        return Task(f"wrn {method}", wrn_method_runs, {"method": method, "wrn": job.wrn,
                                                      "seeds": job.wrn_seeds,
                                                      "types": job.types, "severities": job.severities, "log": log})

    groups = [tuple(n for n in group if n in job.ablations) for group in ABLATION_GROUPS]
    return ([Task("mlp table 2", mlp_table2_part, {"job": job, "log": log})]
            + [wrn_task(m) for m in wrn if m != "deterministic"]
            + [Task("ablations " + ", ".join(g), ablations_part, {"job": job, "names": g, "log": log})
               for g in groups if g]
            + [wrn_task(m) for m in wrn if m == "deterministic"])
