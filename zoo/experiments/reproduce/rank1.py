"""Rank-1 BNNs (Dusenberry et al., ICML 2020, "Efficient and Scalable Bayesian Neural Nets with Rank-1
Factors"): ``reproduce_rank1``, the `zoo reproduce rank1` job.

On the shipped digits (8x8, a validation part carved out of the training set for every choice) with the rank-1
MLP 64-64 (K = 4): the layout of the paper's Table 2 on the digits corruption suite (deterministic,
BatchEnsemble, rank-1 Normal and Cauchy, mean field, MC dropout with its rate chosen on the validation split, a
deep ensemble of half-width point estimates of about the rank-1 net's parameter count), Table 8 (evaluation
samples per component), Fig. 6 (diversity against accuracy over late checkpoints, rank-1 vs BatchEnsemble) from
the same fits, the ablations of `zoo.experiments.reproduce.rank1_ablations` (Figs. 2-5 and 9) and Table 2 again with a rank-1
WRN-10-1 (`zoo.experiments.reproduce.rank1_wrn`). The independent parts run as `zoo.experiments.parallel` tasks in worker processes
(`zoo.experiments.reproduce.rank1_tasks`; the report keeps its order). In "full", with a TFDS
data_dir, also WRN-28-10 on CIFAR-10 / CIFAR-10-C (`zoo.experiments.reproduce.rank1_cifar`). Every finding of the paper gets
a verdict in report.md with mean +- SE over seeds (`zoo.experiments.reproduce.rank1_verdicts`); every stage logs its seconds
and XLA compiles (`zoo.experiments.reproduce.stages`). The data, methods and recipes live in `zoo.experiments.reproduce.rank1_setup`."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from base.run_folder import claim_run_folder
from zoo.experiments.analysis.diversity import plot_diversity
from zoo.experiments.analysis.seed_summary import mean_se
from zoo.experiments.parallel import run_parallel
from zoo.progress_line import ProgressLine
from zoo.experiments.reproduce.rank1_cifar import CIFAR_FULL, CifarJob, cifar_part
from zoo.experiments.reproduce.rank1_setup import QUICK_RECIPE, Rank1Settings, task_split
from zoo.experiments.reproduce.rank1_tasks import METRICS, rank1_tasks, stage, table2
from zoo.experiments.reproduce.rank1_verdicts import findings, shown, table2_finding
from zoo.experiments.reproduce.rank1_wrn import DIGITS_WRN, WRN_CLAIM, DigitsWrn, wrn_table2
from zoo.experiments.reproduce.report import Report

__all__ = ["Rank1Job", "QUICK", "FULL", "table2", "reproduce_rank1"]


ABLATION_TYPES = ("gaussian_noise", "impulse_noise", "defocus_blur", "motion_blur", "contrast", "pixelate")


@dataclass(frozen=True)
class Rank1Job:
    """Sizes of `reproduce_rank1`. ``FULL`` has the paper's grid (10 seeds for the tables, 5 for the K sweep);
    ``QUICK``: 5 seeds for the MLP's Table 2 and the ablations, 3 for the digits WRN.

    seeds: Table 2 / Table 8 / Fig. 6 runs; recipe: the training recipe of every method (`Rank1Settings`);
    types, severities: the corruption suite of Table 2 (None: all 19 types); ensemble_hidden,
    ensemble_members: the deep ensemble (half-width MLPs, about the rank-1 net's parameter count, as the
    paper's WRN-28-5 ensemble against the rank-1 WRN-28-10); eval_samples: Table 8's draws per component;
    diversity_from: the checkpoints (every ``recipe.chunk_size`` steps) after this fraction of training make Fig. 6;
    ablation_seeds, ablation_steps, ablation_types, ablation_severities: the section-3 ablations (shorter runs
    on fewer corruptions); components, total_batch: Fig. 3 (K B constant); dropout_rates: Fig. 5;
    ablations: which of the five to run (a finding whose ablation is left out gets the verdict "not run");
    mc_dropout_rates: MC dropout's rate is the one of these with the best validation NLL (seed 0, the recipe);
    cauchy_dropout_rates: the rank-1 Cauchy arm's sigma init (dropout parameterisation) is the one of these with the
    best validation NLL, as the Normal arm's recipe was chosen on validation (one value: taken as given, and the
    Cauchy finding's precondition is not met);
    cifar: the WRN on CIFAR-10 / CIFAR-10-C part (`zoo.experiments.reproduce.rank1_cifar`, needs the TFDS sets in data_dir;
    None: left out, as in QUICK); wrn: the small WRN's Table 2 on digits (`zoo.experiments.reproduce.rank1_wrn.DigitsWrn`, on
    the first ``wrn_seed_count`` of ``seeds``, ``types`` x ``severities``; None: left out); wrn_seed_count: None for
    every seed (QUICK keeps 3: a rank-1 WRN method costs ~3x the whole MLP Table 2).
    """

    seeds: tuple = (0, 1, 2, 3, 4)
    recipe: Rank1Settings = QUICK_RECIPE
    types: tuple | None = None
    severities: tuple = (1, 2, 3, 4, 5)
    ensemble_hidden: tuple = (32, 32)
    ensemble_members: int = 4
    eval_samples: tuple = (1, 4, 25)
    diversity_from: float = 0.6
    ablation_seeds: tuple = (0, 1, 2, 3, 4)
    ablation_steps: int = 1500
    ablation_types: tuple | None = ABLATION_TYPES
    ablation_severities: tuple = (1, 3, 5)
    components: tuple = (1, 2, 4, 8, 16)
    total_batch: int = 512
    dropout_rates: tuple = (1e-3, 0.1, 0.3)
    methods: tuple = ("deterministic", "batch_ensemble", "batch_ensemble_unregularised", "rank1_normal",
                      "rank1_cauchy", "mean_field", "mc_dropout", "deep_ensemble")
    ablations: tuple = ("objectives", "components", "dropout_init", "prior_placement", "positive_priors")
    mc_dropout_rates: tuple = (0.05, 0.1, 0.2)
    cauchy_dropout_rates: tuple = (1e-6, 1e-3)
    cifar: CifarJob | None = None
    wrn: DigitsWrn | None = DIGITS_WRN
    wrn_seed_count: int | None = 3

    @property
    def wrn_seeds(self) -> tuple:
        """The digits WRN's seeds: the first ``wrn_seed_count`` of ``seeds`` (all when None)."""
        return self.seeds if self.wrn_seed_count is None else self.seeds[: self.wrn_seed_count]


QUICK = Rank1Job()
# The paper's grid on the same data: 10 seeds (Table 2), 5 for the K sweep (Fig. 3), dropout rates over the
# range of Fig. 5, full-length ablations, every corruption type; hours on 2 CPU cores.
FULL = Rank1Job(seeds=tuple(range(10)), wrn_seed_count=None, recipe=QUICK_RECIPE.replace(steps=6000), ablation_seeds=tuple(range(5)),
                ablation_steps=6000, ablation_types=None, ablation_severities=(1, 2, 3, 4, 5),
                dropout_rates=(1e-6, 1e-3, 0.01, 0.1, 0.2, 0.3), cifar=CIFAR_FULL)


def _errorbars(runs, x, metrics, xlabel, logx=False, categorical=False):
    """One panel per metric: mean +- SE over seeds against `x`."""
    from matplotlib.figure import Figure

    summary = mean_se(runs, x, metrics)
    if categorical:
        order = list(runs[x].drop_duplicates())
        summary = summary.set_index(x).loc[order].reset_index()
    fig = Figure(figsize=(3.0 * len(metrics), 2.8))
    axes = fig.subplots(1, len(metrics))
    pos = np.arange(len(summary)) if categorical else summary[x]
    for ax, m in zip(np.atleast_1d(axes), metrics):
        ax.errorbar(pos, summary[f"{m}_mean"], yerr=summary[f"{m}_se"].fillna(0), marker="o", capsize=3)
        ax.set_title(m)
        ax.set_xlabel(xlabel)
        if categorical:
            ax.set_xticks(pos, [str(v) for v in summary[x]])
        elif logx:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _curves_figure(curves: pd.DataFrame):
    """Fig. 4: NLL over training per component (thin) and of the mixture (bold), train (dashed) and test (solid),
    one panel per training objective, averaged over seeds."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.2))
    axes = fig.subplots(1, 2, sharey=True)
    mean = curves.groupby(["objective", "set", "member", "step"], as_index=False)["nll"].mean()
    for ax, objective in zip(axes, ("average", "mixture")):
        for (part, member), g in mean[mean.objective == objective].groupby(["set", "member"]):
            mixture = member == "mixture"
            ax.plot(g["step"], g["nll"], "--" if part == "train" else "-",
                    color=("black" if part == "train" else "tab:blue") if mixture else "tab:gray",
                    lw=2 if mixture else 0.8, alpha=1 if mixture else 0.6,
                    label=f"{part} mixture" if mixture else (f"{part} components" if member.endswith(" 0") else None))
        ax.set_title(f"{objective} likelihood in training")
        ax.set_xlabel("step")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("NLL (log scale)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def reproduce_rank1(out_dir, setting: str = "quick", log=print, seeds=None, data_dir=None, workers=None) -> Report:
    """`zoo reproduce rank1`: the rank-1 BNN paper's Table 2, Table 8, Fig. 6 and the ablations of Figs. 2-5 on
    the shipped digits with the rank-1 MLP, then report.md with a verdict per finding.

    Args:
      out_dir: output folder (tables as CSV + Markdown, figures as PNG, report.md).
      setting: "quick" (`QUICK`) or "full" (`FULL`), or a `Rank1Job`.
      seeds: the Table-2 seeds (default: the setting's); the ablations use the first ``len(ablation_seeds)``.
      data_dir: TFDS folder with cifar10 and cifar10_corrupted for the WRN part (``job.cifar``, in "full"); without
        it, or when a set is missing, that finding is "not run" with the reason and the digits parts still run.
      workers: processes for the independent parts (`zoo.experiments.reproduce.rank1_tasks.rank1_tasks`: the MLP's Table 2, the
        digits WRN's methods, two groups of ablations) through `zoo.experiments.parallel.run_parallel` (default: the
        ``BNN_ZOO_WORKERS`` environment variable, else the CPU cores); 1 runs them here, one after the other,
        with the same results. The stage lines come from the tasks (printed when `log` is not None).
    Returns the written `Report`.
    """
    job = setting if isinstance(setting, Rank1Job) else {"quick": QUICK, "full": FULL}[setting]
    name = setting if isinstance(setting, str) else "custom"
    if seeds is not None:
        seeds = tuple(int(s) for s in seeds)
        job = replace(job, seeds=seeds, ablation_seeds=seeds[:max(1, len(job.ablation_seeds))])
    echo = None if log is None else print  # the tasks' stage lines (a log function may not cross into a worker)
    log = log or (lambda line: None)
    claim_run_folder(out_dir, "zoo reproduce rank1", "out_dir")  # nothing of the user's is written into
    report = Report(out_dir, "Rank-1 BNNs (Dusenberry et al., ICML 2020)", setting=name, log=log)
    split = task_split()
    r = job.recipe
    report.note(f"Data: the shipped digits (8x8), {len(split.train)} training images, {len(split.val_raw)} "
                f"validation images (held out of the training part; every recipe choice was made on them), "
                f"{len(split.test_raw)} test images; corruptions: {'all 19 types' if job.types is None else job.types} "
                f"x severities {job.severities}. Network: MLP {'-'.join(map(str, r.hidden))}, rank-1 K = "
                f"{r.num_components}{_wrn_note(job)}. Recipe: Adam {r.lr:g} ({r.schedule}), {r.steps} steps of batch {r.batch_size}, "
                f"KL annealed over {r.kl_fraction:.2f} of them, loc init "
                f"{'N(1, %g)' % abs(r.sign_init) if r.sign_init <= 0 else 'random signs'}, sigma init from dropout "
                f"rate {r.dropout_rate:g}, factor prior Normal/Cauchy(1, {r.factor_scale:g}), {r.eval_samples} draws "
                f"per component at evaluation. Seeds {job.seeds} (ablations: {job.ablation_seeds}, "
                f"{job.ablation_steps} steps).")
    report.note(("The paper's WRN-28-10 on CIFAR-10 / CIFAR-10-C runs in --full with a TFDS data_dir (its finding "
                 "says \"not run\" and why when the sets are missing)" if job.cifar is not None else
                 "The WRN on CIFAR-10 / CIFAR-10-C is left out of this setting (--full runs it from a TFDS data_dir)")
                + "; both settings run the digits experiments. batch_ensemble is the rank-1 model with point-mass "
                "factors, i.e. MAP under the Normal(1, 0.1) factor prior; batch_ensemble_unregularised drops that "
                "prior (a flat one: Wen et al.'s BatchEnsemble, factors trained on the likelihood alone). The "
                "Cauchy row's sigma init is chosen on the validation split from p in "
                f"{', '.join(f'{v:g}' for v in job.cauchy_dropout_rates)} (one value: taken as given; the paper's appendix Table 5 "
                f"for Cauchy; Normal: {r.dropout_rate:g}). Mean field and MC dropout are scored with K x "
                f"{r.eval_samples} = {r.num_components * r.eval_samples} draws (the rank-1 nets' forward passes); MC "
                "dropout drops the inputs of every dense layer but the first (hidden units), its rate chosen on the "
                "validation split.")

    log(f"[rank1] Table 2: {len(job.methods)} methods x {len(job.seeds)} seeds"
        + (f"; WRN: {len(job.wrn.methods)} methods" if job.wrn is not None else ""))
    tasks = rank1_tasks(job, echo)
    line = ProgressLine(len(tasks), log=None if log is print else log)  # the parts running, the time left
    results = dict(zip([t.name for t in tasks], run_parallel(tasks, workers, line.log, progress=line)))
    mlp = results["mlp table 2"]
    if mlp["rate"] is not None:
        report.table("mc_dropout_rate", pd.DataFrame(mlp["chosen"]), f"MC dropout's rate by validation NLL (seed "
                     f"{job.seeds[0]}): {mlp['rate']:g}")
    cauchy_tuned = None
    if mlp.get("cauchy") is not None:
        best, rows = mlp["cauchy"]
        report.table("cauchy_sigma_init", pd.DataFrame(rows), f"rank-1 Cauchy's sigma init (dropout rate) by "
                     f"validation NLL (seed {job.seeds[0]}): {best:g}")
        cauchy_tuned = (f"sigma init p = {best:g} of {', '.join(f'{r:g}' for r in job.cauchy_dropout_rates)} by "
                        "validation NLL")
    runs, samples, div = mlp["runs"], mlp["samples"], mlp["diversity"]
    metrics = [m for m in METRICS if m in runs] + ["#params"]
    report.table("table2", shown(runs, "method", metrics), "Table 2 layout on digits + digits-C (mean +- SE over "
                 "seeds; mCE vs the deterministic net = 100)")
    report.table("table2_runs", runs, "Table 2, every run")
    report.table("table8", shown(samples, "samples_per_component", [m for m in METRICS if m in samples]),
                 "Table 8: rank-1 Normal evaluated with 1, 4, 25 draws per component (same fits)")
    report.figure("fig6_diversity", plot_diversity(div.groupby(["method", "step"], as_index=False).mean(
        numeric_only=True)), "Fig. 6: disagreement / (1 - acc) against accuracy and NLL over late checkpoints "
        "(mean over seeds; test set)")
    report.table("fig6_diversity", div, "Fig. 6 data: every checkpoint")
    wrn_runs = None
    if job.wrn is not None:
        w = job.wrn
        wrn_runs = wrn_table2({m: results[f"wrn {m}"] for m in w.methods}, w.methods)
        report.table("table2_wrn", shown(wrn_runs, "method", [m for m in METRICS if m in wrn_runs] + ["#params"]),
                     f"Table 2 layout on digits + digits-C with WRN-{w.depth}-{w.width}, K = "
                     f"{w.recipe.num_components} (mean +- SE over seeds; mCE vs the deterministic WRN = 100)")
        report.table("table2_wrn_runs", wrn_runs, "Table 2 with the WRN, every run")
    ablated = {}
    for name, result in results.items():
        if name.startswith("ablations "):
            ablated.update(result)

    ab = job.recipe.replace(steps=job.ablation_steps)
    cols = ["NLL", "Acc", "ECE", "cNLL", "cA", "cECE"]
    ks = obj = drop = place = positive = None
    if "objectives" in ablated:
        obj, curves = ablated["objectives"]
        report.table("fig4_objective", shown(obj, "objective", cols), "Fig. 4: training objective (evaluation: "
                     "the mixture)")
        report.figure("fig4_objective", _curves_figure(curves), "Fig. 4: train / test NLL over training, per "
                      "component and of the mixture")
        report.table("fig4_curves", curves, "Fig. 4 data: curves")
    if "components" in ablated:
        ks = ablated["components"]
        report.table("fig3_components", shown(ks, "K", cols), f"Fig. 3: K components, total batch K x B = "
                     f"{job.total_batch}")
        report.figure("fig3_components", _errorbars(ks, "K", cols, "K", logx=True), "Fig. 3: metrics against K "
                      "(mean +- SE)")
    if "dropout_init" in ablated:
        drop = ablated["dropout_init"]
        report.table("fig5_dropout_init", shown(drop, "dropout_rate", cols), "Fig. 5: sigma initialised from a "
                     "dropout rate p")
        report.figure("fig5_dropout_init", _errorbars(drop, "dropout_rate", ["Acc", "NLL", "ECE"], "dropout rate p",
                                                      logx=True), "Fig. 5: accuracy, NLL, ECE against p")
    if "prior_placement" in ablated:
        place = ablated["prior_placement"]
        report.table("fig2_prior_placement", shown(place, "prior_on", cols), "Fig. 2: priors on s only, r only "
                     "or both")
        report.figure("fig2_prior_placement", _errorbars(place, "prior_on", ["NLL", "ECE", "cNLL", "cECE"],
                                                         "prior on", categorical=True), "Fig. 2: priors on s, r or both")
    if "positive_priors" in ablated:
        positive = ablated["positive_priors"]
        report.table("fig9_positive_priors", shown(positive, "factors", cols), "Fig. 9: real-valued Normal(1, "
                     f"{ab.factor_scale:g}) vs positive-valued LogNormal(0, {ab.factor_scale:g}) factors (prior and "
                     "posterior)")
        report.figure("fig9_positive_priors", _errorbars(positive, "factors", ["NLL", "Acc", "ECE", "cNLL", "cA",
                                                                               "cECE"], "factors", categorical=True),
                      "Fig. 9: real- vs positive-valued factors")
    findings(report, runs, samples, div, ks, obj, drop, place, positive, cauchy_tuned=cauchy_tuned)
    if wrn_runs is not None and job.wrn is not None and {"deterministic", "rank1_normal"} <= set(job.wrn.methods):
        table2_finding(report, wrn_runs, WRN_CLAIM)
    elif job.wrn is not None:
        report.finding(WRN_CLAIM, "not run", f"the WRN ran {', '.join(job.wrn.methods)}; the finding needs the "
                                             "deterministic and the rank-1 Normal WRN")
    if job.cifar is not None:
        with stage("CIFAR-10 / CIFAR-10-C (WRN)", log):
            cifar_part(report, job.cifar, data_dir, log, finding=table2_finding)
    report.write()
    return report


def _wrn_note(job) -> str:
    """The report's words on the digits WRN (empty when it is left out)."""
    if job.wrn is None:
        return ""
    w, r = job.wrn, job.wrn.recipe
    return (f"; and WRN-{w.depth}-{w.width} on the 8x8 images (rank-1 K = {r.num_components}; methods "
            f"{', '.join(w.methods)}; seeds {job.wrn_seeds}; Adam {r.lr:g} ({r.schedule}), {r.steps} steps of batch {r.batch_size}, the "
            f"rest as the MLP's)")
