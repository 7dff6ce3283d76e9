"""Variance Networks (Neklyudov et al., 2018): the `zoo reproduce variance-networks` job.

Table 1 (stochastic / deterministic / ensemble accuracy of LeNet-5 as a point estimate, with binary
dropout, variational dropout and variance layers), Table 2 (layer-, neuron-, weight-wise and additive
parameterisations), the phase transition (Fig. 1), the curvature criterion kappa (eq. 16, Fig. 3-4),
sparse ensembles (Fig. 5) and iterative fast-sign attacks (Fig. 2), each stated as a finding of the report.
The trainings are in `zoo.experiments.reproduce.variance_networks_train`, the analyses in `zoo.experiments.analysis.curvature`,
`zoo.experiments.analysis.sparse_ensemble` and `zoo.experiments.analysis.fgsm`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from zoo.experiments.analysis.curvature import log10_kappa
from zoo.progress_line import ProgressLine
from zoo.experiments.analysis.fgsm import draws_predictor, iterative_fgsm, mixture_predictor
from zoo.experiments.analysis.seed_summary import mean_se
from zoo.experiments.analysis.sparse_ensemble import sparse_ensemble_curve
from zoo.experiments.analysis.verdicts import (Interval, Precondition, at_least, combine, judge, paired_interval,
                                              se_interval, t_interval)
from base.errors import InputError
from base.run_folder import claim_run_folder
from zoo.experiments.reproduce.quotes import QUOTES, quoted
from zoo.experiments.reproduce.report import Report
from zoo.experiments.reproduce.stages import StageTimes, stage
from zoo.experiments.reproduce.variance_networks_train import TABLE1, TABLE2, fit_method, log10_kappa_threshold, tune_method

__all__ = ["VarianceNetworksSettings", "QUICK", "FULL", "reproduce_variance_networks"]


@dataclass(frozen=True)
class VarianceNetworksSettings:
    """Settings of the job; ``FULL`` follows the paper where it says (MNIST, Caffe LeNet-5 20-50-500 with batch
    norm and ReLU after the variance layers, section 6; softplus in the kappa run, section 5; log10 kappa_0 = 1.5,
    10 draws and 5 networks in the attack), the rest is ours (the paper gives no optimiser settings: Adam, batch
    100, 200 epochs, each arm's rate chosen on a validation split).

    data: "mnist" (TFDS, prepared under data_dir) or "digits" / "digits_28" (shipped); channels, hidden:
    LeNet-5's widths; batch_norm: batch norm after every hidden layer (LeNet-5's ``batch_norm``: "variance layers
    ... followed with a Batch Normalization layer and a ReLU", section 6); activation: the Tables 1-2 networks'
    non-linearity; kappa_activation: that of the per-epoch run of Fig. 1, 3, 4, 5 (softplus: the kappa criterion
    needs a smooth network, section 5; when it equals ``activation`` the run is the same network as Table 2's
    layer-wise row); epochs: every training (one fit each, Adam never restarted); learning_rates: the
    candidates for each arm's Adam rate, chosen on the validation split by the ensemble accuracy
    (`variance_networks_train.tune_method`, the first seed; the other seeds reuse the choice);
    validation_fraction: the last part of the training set held out of every fit for that choice;
    learning_rate: the rate of a fit given none; variance_learning_rate: Adam's rate on log alpha and the sigmas,
    not tuned (0.1, as the quick setting's search on a validation split found: at 1e-2 log alpha cannot travel to
    the paper's ~6 in a few thousand steps; `variance_networks_train.optimizer_of`); curve_every: epochs between
    the points of the per-epoch curves (Fig. 1, 3, 4); init_log_alpha: start of log alpha; additive_init_scale:
    start of the additive sigma (eq. 20); ensemble_draws: draws of the ensemble procedure (eq. 2);
    deep_ensemble_size: networks in the deep ensembles of the attack; fgsm_*: the attack (step, steps,
    test points); log10_kappa_0: the paper's threshold at its N = 60,000 (the job scales it to the training part:
    `variance_networks_train.log10_kappa_threshold`, + log10(N / 60,000)); kappa_thresholds: log10 thresholds of
    Fig. 5 (the scaled kappa_0 is added); seeds: one run of everything per seed;
    estimator: noise per example in the stochastic layers (`inference.fit`'s option): "local", the paper's
    local reparameterisation trick on the dense layers (appendix A: "epsilon is sampled independently for each
    object") and Flipout on the convolution kernels (`inference.local_reparam`; batch norm works with it); "per_example", a weight draw per example
    (`inference.per_example`: the same expected log-likelihood, a vmap over the examples; refused with batch
    norm); "standard", one draw per minibatch;
    methods: labels of the Table 1-2 rows to train (None: all nine); the point estimate, binary dropout and the
    dense1 layer-wise row always run (the attacks use them), a finding whose rows were not trained says "not run"
    (smoke tests train three structures instead of nine);
    data_path: an .npz of images and labels (`zoo.experiments.reproduce.image_npz`, 28 x 28, the fixed 80 / 20 split) used
    instead of ``data`` (None: ``data``).
    """

    data: str = "mnist"
    channels: tuple = (20, 50)
    hidden: int = 500
    batch_norm: bool = True
    activation: str = "relu"
    kappa_activation: str = "softplus"
    batch_size: int = 100
    learning_rates: tuple = (1e-3, 3e-3, 1e-2)
    validation_fraction: float = 0.2
    learning_rate: float = 1e-3
    variance_learning_rate: float = 0.1
    epochs: int = 200
    curve_every: int = 20
    init_log_alpha: float = -4.0
    additive_init_scale: float = 1e-3
    dropout_rate: float = 0.5
    ensemble_draws: int = 100
    attack_draws: int = 10
    deep_ensemble_size: int = 5
    fgsm_eps: float = 0.1
    fgsm_iterations: int = 10
    fgsm_examples: int = 1000
    log10_kappa_0: float = 1.5
    kappa_thresholds: tuple = (-math.inf, -6.0, -4.0, -3.0, -2.0, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
    seeds: tuple = (0,)
    estimator: str = "local"
    methods: tuple | None = None
    data_path: str | None = None


FULL = VarianceNetworksSettings()
# Under 15 minutes on 2 CPU cores: digits 8x8 (1,348 training images, of which the last 270 are the validation
# part; 449 test images) with SAME padding, a narrow LeNet-5 (8 and 16 channels, 128 hidden units: 8,192 weights
# in dense1 instead of 400 k), batch norm and ReLU as FULL, 40 epochs (400 steps: 8 seeds fit the budget)
# of Adam at 3e-3 or 1e-2 (chosen per arm on the validation part) with 0.1 on log alpha and the sigmas, log alpha
# from -1 (chosen on a validation split, docs/variance-networks.md), curves every 2 epochs, 30 ensemble draws,
# 8 seeds (the first 3 are the deep ensembles' members).
QUICK = replace(FULL, data="digits", channels=(8, 16), hidden=128, learning_rates=(3e-3, 1e-2), learning_rate=1e-2,
                init_log_alpha=-1.0, epochs=40, curve_every=2, ensemble_draws=30, deep_ensemble_size=3,
                fgsm_examples=450, seeds=tuple(range(8)))


def _methods(settings) -> tuple:
    """The Table 1-2 methods to train: ``settings.methods`` (labels) plus the three the other analyses need."""
    # the rows the findings need most first (a stopped job keeps what finished), the costly all-4-layer rows last
    every = tuple(TABLE1[i] for i in (0, 1, 4)) + (TABLE2["neuron"], TABLE1[2], TABLE2["additive"]) \
        + tuple(TABLE1[i] for i in (6, 3, 5))
    if settings.methods is None:
        return every
    unknown = set(settings.methods) - {m.label for m in every}
    if unknown:
        raise InputError("methods", sorted(unknown), f"labels of {[m.label for m in every]}")
    needed = {TABLE1[0].label, TABLE1[1].label, TABLE2["layer"].label, *settings.methods}
    return tuple(m for m in every if m.label in needed)


def _binomial_se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n)

def _summary(rows: pd.DataFrame, by: str, order: list, metrics: list, n_test: int) -> pd.DataFrame:
    """Mean +- SE over seeds of `metrics` and the ELBO per `by` value, rows in `order` (those present); with one
    seed the accuracies' SE is the binomial standard error of a test accuracy on `n_test` images."""
    summary = mean_se(rows, by, metrics + ["elbo"])
    if rows["seed"].nunique() == 1:
        for m in metrics:
            summary[f"{m}_se"] = [_binomial_se(p, n_test) for p in summary[f"{m}_mean"]]
    present = set(rows[by])
    return summary.set_index(by).loc[[k for k in order if k in present]].reset_index()


def _transition_epoch(rows, chance: float) -> int | None:
    """First epoch whose deterministic accuracy is below the midpoint of chance and the ensemble's accuracy."""
    for r in rows:
        if r["epoch"] and r["deterministic_acc"] < 0.5 * (chance + r["ensemble_acc"]):
            return r["epoch"]
    return None


def _plot_transition(rows, log10_kappa_0) -> Figure:
    df = pd.DataFrame(rows)
    fig = Figure(figsize=(10, 3.2))
    a, b, c = fig.subplots(1, 3)
    a.plot(df.epoch, df.deterministic_acc, label="deterministic")
    a.plot(df.epoch, df.ensemble_acc, label="ensemble")
    a.set(xlabel="epoch", ylabel="test accuracy", title="Fig. 1: phase transition")
    a.legend()
    b.plot(df.epoch, df.log_alpha)
    b.set(xlabel="epoch", ylabel="log alpha (dense1)", title="layer-wise log alpha")
    c.plot(df.epoch, df.kappa_above, color="C3")
    c.set(xlabel="epoch", ylabel=f"weights with log10 kappa > {log10_kappa_0}", title="Fig. 4")
    c2 = c.twinx()
    c2.plot(df.epoch, df.deterministic_acc, color="C0", alpha=0.5)
    c2.set_ylabel("deterministic accuracy")
    fig.tight_layout()
    return fig


def _plot_histograms(kappas: dict, picks: dict, log10_kappa_0) -> Figure:
    fig = Figure(figsize=(5, 3.2))
    ax = fig.subplots()
    for (name, epoch), color in zip(picks.items(), ("C0", "C2", "C3")):
        ax.hist(log10_kappa(kappas[epoch]).ravel(), bins=60, alpha=0.5, color=color, label=f"{name} (epoch {epoch})")
    ax.axvline(log10_kappa_0, color="red")
    ax.set(xlabel="log10 kappa", ylabel="weights", title="Fig. 3: kappa of dense1")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _plot_sparse(curve: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(5, 3.2))
    ax = fig.subplots()
    t = curve.log10_threshold.replace(-math.inf, curve.log10_threshold[np.isfinite(curve.log10_threshold)].min() - 1)
    ax.plot(t, curve.acc_mean, label="below -> mean")
    ax.plot(t, curve.acc_zero, label="below -> 0")
    ax.axhline(curve.acc_full.iloc[0], color="red", label="full ensemble")
    ax.set(xlabel="log10 kappa threshold", ylabel="test accuracy", title="Fig. 5: sparse ensembles")
    ax2 = ax.twinx()
    ax2.plot(t, curve.compression, "b--")
    ax2.set_yscale("log")
    ax2.set_ylabel("compression (dashed)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _plot_attack(table: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(9, 3.2))
    a, b = fig.subplots(1, 2)
    for name, g in table.groupby("model", sort=False):
        a.plot(g.iteration, g.success_rate, label=name)
        b.plot(g.iteration, g.mean_entropy, label=name)
    a.set(xlabel="iteration", ylabel="successful attack rate", title="Fig. 2a")
    b.set(xlabel="iteration", ylabel="mean predictive entropy (nats)", title="Fig. 2b")
    a.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _save(report, name: str, table: pd.DataFrame) -> None:
    """Write ``name``.csv into the report's folder now (results so far: a job stopped later still leaves them);
    the final version goes into report.md through `Report.table`."""
    table.to_csv(report.out / f"{name}.csv", index=False)


def settings_key(settings: VarianceNetworksSettings) -> str:
    """The fingerprint of a job's settings (``settings_key`` column of ``fits.csv`` and ``tuning.csv``): a resumed
    job reads back only rows written under the same settings."""
    import hashlib

    return hashlib.sha1(repr(settings).encode()).hexdigest()[:12]


def _earlier(out_dir, name: str, key: str, resume: bool) -> pd.DataFrame:
    """The rows of ``out_dir/name`` written under settings ``key`` (empty unless ``resume``)."""
    from pathlib import Path

    path = Path(out_dir) / name
    if not resume or not path.exists():
        return pd.DataFrame()
    table = pd.read_csv(path)
    return table[table["settings_key"].astype(str) == key] if "settings_key" in table else pd.DataFrame()


def resumed_row(fits: pd.DataFrame, tuning: pd.DataFrame, label: str, seed: int, first: int, tuned: bool):
    """What an earlier run of the same settings left for (``label``, ``seed``): None when ``fits`` (its fits.csv
    rows) holds no kept row (``chosen`` True) for it, or when the method's rate is not chosen yet (``tuned``
    False) and this is not the first seed or ``tuning`` (its tuning.csv rows) has no choice for it. Otherwise
    (the kept row, the rows to add to fits.csv: every candidate at the first seed, else the kept row, the
    method's tuning rows or None when its rate was chosen already)."""
    if fits.empty:
        return None
    mine = fits[(fits["method"] == label) & (fits["seed"] == seed)]
    kept = mine[mine["chosen"].astype(str) == "True"]
    if kept.empty:
        return None
    if tuned:
        return kept.iloc[0].to_dict(), [kept.iloc[0].to_dict()], None
    choice = tuning[tuning["method"] == label] if not tuning.empty else tuning
    if seed != first or choice.empty:
        return None
    return kept.iloc[0].to_dict(), mine.to_dict("records"), choice.drop(columns="settings_key", errors="ignore")


STAGES = ("first-seed core trainings", "per-epoch run and sparse ensembles", "attacks", "Table 1-2 trainings")
"""The stages of `reproduce_variance_networks`, in order (the progress line's parts)."""


def reproduce_variance_networks(out_dir, setting: str = "quick", log=print, seeds=None, data_dir=None,
                                settings: VarianceNetworksSettings | None = None, data_path=None, epochs=None,
                                learning_rates=None, resume: bool = False) -> dict:
    """Every variance-networks experiment, written to ``out_dir`` with report.md.

    The stages, in order, each writing its CSV tables, findings and report.md as soon as it ends (``fits.csv``
    and ``tuning.csv`` after every fit), so that a job stopped by a time limit keeps what finished: the first
    seed's point estimate, binary dropout and dense1 layer-wise networks (each arm's learning rate chosen on the
    validation part), the per-epoch kappa run (Fig. 1, 3, 4) and sparse ensembles (Fig. 5), the attacks (Fig. 2,
    training the deep ensembles' members), then the other Table 1-2 trainings and the tables' findings.

    Args:
      out_dir: folder for the files (created).
      setting: "quick" (digits 8x8, a narrow LeNet-5, under 15 minutes on 2 CPU cores) or "full" (MNIST from
        TFDS prepared under ``data_dir``: the job stops with the loader's message if it is not prepared).
      log: a callable taking progress lines, or None.
      seeds: a tuple of ints replacing the setting's seeds (tables then show mean ± SE over seeds).
      data_dir: the TFDS data folder (full).
      settings: a `VarianceNetworksSettings` replacing the setting's (tests use tiny ones).
      data_path: an .npz of images 'imgs' (N, H, W) and labels 'labs' (N,) (e.g. USPS, MNIST arrays) replacing
        the setting's data (`zoo.experiments.reproduce.image_npz.load_image_npz`: resized to 28 x 28, split 80 / 20).
      epochs: replaces the setting's epochs (a positive int); the per-epoch curve keeps about 10 readings
        (curve_every = max(1, epochs // 10): each reading computes kappa on the whole training part).
      learning_rates: a tuple of positive floats replacing the setting's candidate learning rates.
      resume: the Table 1-2 trainings already in ``out_dir``'s ``fits.csv`` (and their learning-rate choices in
        ``tuning.csv``) from the same settings (`settings_key`) are read back instead of fitted again, so a run cut
        short (a GPU lent in ~10-minute pieces) continues at the first (method, seed) it had not finished; the
        first three stages (the networks the curves and attacks use) are fitted again.
    Returns:
      {"table1", "table2", "tuning", "transition", "sparse", "attack": DataFrames, "report": path of report.md}.
    """
    if settings is None:
        if setting not in ("quick", "full"):
            raise InputError.worded("setting", f"setting: expected 'quick' or 'full', got {setting!r}")
        settings = QUICK if setting == "quick" else FULL
    if seeds is not None:
        settings = replace(settings, seeds=tuple(seeds))
    if data_path is not None:
        settings = replace(settings, data_path=str(data_path))
    if epochs is not None:
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise InputError("epochs", epochs, "a positive integer")
        settings = replace(settings, epochs=epochs, curve_every=max(1, epochs // 10))
    if learning_rates is not None:
        rates = tuple(learning_rates)
        if not rates or not all(isinstance(r, (int, float)) and math.isfinite(r) and r > 0 for r in rates):
            raise InputError("learning_rates", learning_rates, "one or more positive finite learning rates")
        settings = replace(settings, learning_rates=rates)
    # one progress line, a part per stage of `STAGES` (zoo.progress_line); with print it rewrites itself on a
    # terminal, and the job's lines (`log`) print above it
    line = ProgressLine(len(STAGES), log=None if log is print else (log or (lambda text: None)))
    log = line.log
    claim_run_folder(out_dir, "zoo reproduce variance-networks", "out_dir")  # nothing of the user's is written into
    report = Report(out_dir, "Variance Networks (Neklyudov et al., 2018)", setting, log=log)
    report.note(f"Settings: {settings}.")
    report.note("Every row is one fit of `epochs` epochs (Adam never restarted) on the training part of the training "
                f"set; its last {settings.validation_fraction:.0%} is the validation part, on which each arm's "
                f"learning rate is chosen from {list(settings.learning_rates)} by the ensemble accuracy (first seed; "
                "the other seeds reuse the choice); the test split is scored, never used to choose. Only the "
                "variance (or dropout) layers are stochastic, every other weight is a point estimate. "
                + (f"Batch norm after every hidden layer, {settings.activation} in Tables 1-2; "
                   if settings.batch_norm else f"No batch norm, {settings.activation} in Tables 1-2; ")
                + (f"the per-epoch kappa run (Fig. 1, 3, 4, 5) is a separate dense1 layer-wise network with "
                   f"{settings.kappa_activation} (the kappa criterion needs a smooth network, section 5) at the "
                   "layer-wise row's chosen rate." if settings.kappa_activation != settings.activation else
                   "the per-epoch kappa run is Table 2's layer-wise network of the first seed, refitted with curves."))
    stages = {name: StageTimes(name, "variance-networks") for name in STAGES}

    def timed(name):  # seconds and compiles of a stage, and the progress line moved to it
        line.update(STAGES.index(name), name)
        return stage(name, log, "variance-networks", into=stages[name])

    fits, rows_by_fit, all_rows, chosen, tuning = {}, {}, [], {}, []
    first = settings.seeds[0]
    key = settings_key(settings)
    earlier_fits = _earlier(out_dir, "fits.csv", key, resume)
    earlier_tuning = _earlier(out_dir, "tuning.csv", key, resume)

    def from_earlier(method, seed) -> bool:
        """Take (method, seed)'s row (and at the first seed the method's learning-rate choice) from the earlier
        run's tables (`resumed_row`); True when they held it."""
        if (method.label, seed) in rows_by_fit:
            return False
        found = resumed_row(earlier_fits, earlier_tuning, method.label, seed, first, method.label in chosen)
        if found is None:
            return False
        row, rows, tuned = found
        if tuned is not None:
            chosen[method.label] = float(row["learning_rate"])
            tuning.append(tuned)
        all_rows.extend(rows)
        rows_by_fit[(method.label, seed)] = row
        log(f"  {method.label}, seed {seed}: read from fits.csv (fitted earlier)")
        return True

    def train(method, seed):
        """(entry, posterior) of ``method`` at ``seed``, fitted once: the first call of a method tunes its learning
        rate on the validation part with the first seed (`tune_method`; that seed's fit is the chosen
        candidate), later seeds fit at the chosen rate. Every fit's row goes into fits.csv at once."""
        if method.label not in chosen:
            choice, (e_m, post_m, row, _, _), candidates = tune_method(settings, method, first, data_dir, log)
            chosen[method.label] = choice.setting["learning_rate"]
            fits[(method.label, first)], rows_by_fit[(method.label, first)] = (e_m, post_m), row
            all_rows.extend({**c, "settings_key": key} for c in candidates)
            tuning.append(choice.table.assign(method=method.label, chosen=choice.table.learning_rate
                                              == choice.setting["learning_rate"]))
            _save(report, "tuning", pd.concat(tuning, ignore_index=True).assign(settings_key=key))
        if (method.label, seed) not in fits:
            e_m, post_m, row, _, _ = fit_method(settings, method, seed, data_dir, log,
                                                learning_rate=chosen[method.label])
            fits[(method.label, seed)], rows_by_fit[(method.label, seed)] = (e_m, post_m), row
            all_rows.append({**row, "chosen": True, "settings_key": key})
        _save(report, "fits", pd.DataFrame(all_rows))
        return fits[(method.label, seed)]

    layer = TABLE2["layer"]
    # the networks the curves and attacks need first, so that a job stopped early (a GPU time limit) still has them
    with timed("first-seed core trainings"):
        log(f"seed {first}: point estimate, binary dropout, dense1 layer-wise (learning rates chosen on the "
            "validation part)")
        for method in (TABLE1[0], TABLE1[1], layer):
            e = train(method, first)[0]
        n_test = len(e.test.y)
        chance = 1.0 / e.test.num_classes

    with timed("per-epoch run and sparse ensembles"):
        log(f"seed {first}: the dense1 layer-wise run with per-epoch curves (Fig. 1, 3, 4), "
            f"{settings.kappa_activation}, rate {chosen[layer.label]:g}")
        e, post, _, rows, kappas = fit_method(settings, layer, first, data_dir, log, curve=True,
                                              learning_rate=chosen[layer.label], activation=settings.kappa_activation)
        kappa_0 = log10_kappa_threshold(settings.log10_kappa_0, len(e.train.y))
        report.note(f"kappa_0 scaled to the training part (kappa sums the curvature over the data): log10 kappa_0 = "
                    f"{settings.log10_kappa_0} + log10({len(e.train.y)} / 60,000) = {kappa_0:.2f}.")
        transition = pd.DataFrame(rows).assign(seed=first)
        report.table("transition", transition, "Per-epoch run: accuracy, log alpha, kappas above kappa_0 (Fig. 1, 4)")
        report.figure("fig1_fig4_transition", _plot_transition(rows, round(kappa_0, 2)),
                      "Fig. 1 and 4: deterministic vs ensemble accuracy, log alpha, kappas above the threshold")
        t_epoch = _transition_epoch(rows, chance)
        last_epoch = rows[-1]["epoch"]
        epochs_read = sorted(kappas)

        def near(epoch):  # the recorded epoch closest to `epoch`
            return min(epochs_read, key=lambda k: abs(k - epoch))

        if t_epoch is None:
            picks = {"start": epochs_read[0], "middle": near(last_epoch // 2), "end": last_epoch}
        else:
            picks = {"before": near(t_epoch - 1), "during": near(t_epoch + 2 * settings.curve_every), "end": last_epoch}
        report.figure("fig3_kappa_histograms", _plot_histograms(kappas, picks, kappa_0),
                      "Fig. 3: histograms of log10 kappa (kappa <= 1e-25 shown at -25)")

        log("sparse ensembles (Fig. 5)")
        thresholds = tuple(sorted({*settings.kappa_thresholds, kappa_0}))
        assert layer.sites is not None  # TABLE2's variance-layer method names its sites
        sparse = sparse_ensemble_curve(post, layer.sites, kappas[last_epoch], thresholds, e.test.x, e.test.y,
                                       num_samples=settings.ensemble_draws)
        report.table("fig5_sparse_ensemble", sparse, "Fig. 5: ensemble accuracy with weights below a kappa threshold "
                     "set to their mean or to 0 (per-epoch run, last epoch)")
        report.figure("fig5_sparse_ensemble", _plot_sparse(sparse), "Fig. 5: sparse ensembles")
        layer_rows = pd.DataFrame([r for (label, _), r in rows_by_fit.items() if label == layer.label])
        _curve_findings(report, settings, layer_rows, rows, t_epoch, chance, sparse, n_test, kappas[last_epoch].size,
                        kappa_0)
        report.write()  # a job stopped in a later stage still leaves a report of this one

    with timed("attacks"):
        log("iterative fast-sign attacks (Fig. 2)")
        attack = _attack(settings, train, e.test, log)
        report.table("fig2_attack", attack, "Fig. 2: targeted iterative fast sign, target = (label + 1) mod 10")
        report.figure("fig2_attack", _plot_attack(attack), "Fig. 2: attack success rate and predictive entropy")
        _attack_finding(report, settings, pd.DataFrame([r for (label, _), r in rows_by_fit.items()
                                                        if label == layer.label]), attack, n_test)
        report.write()

    with timed("Table 1-2 trainings"):
        for seed in settings.seeds:
            log(f"seed {seed}: Table 1 and 2 trainings" + (" (learning rates chosen on the validation part)"
                                                           if seed == first else ""))
            for method in _methods(settings):
                if not from_earlier(method, seed):
                    train(method, seed)
                _save(report, "fits", pd.DataFrame(all_rows))
        metrics = ["stochastic_acc", "deterministic_acc", "ensemble_acc"]
        t1 = pd.DataFrame([rows_by_fit[(m.label, seed)] for seed in settings.seeds for m in _methods(settings)
                           if m in TABLE1])
        t2 = pd.DataFrame([{**rows_by_fit[(m.label, seed)], "parameterisation": name} for seed in settings.seeds
                           for name, m in TABLE2.items() if m in _methods(settings)])
        tuning = pd.concat(tuning, ignore_index=True)
        report.table("tuning", tuning[["method", "learning_rate", "validation", "chosen"]],
                     "Learning rate of each arm: validation ensemble accuracy of every candidate (first seed)")
        t1_sum = _summary(t1, "method", [m.label for m in TABLE1], metrics, n_test)
        report.table("table1", t1_sum, f"Table 1: test accuracy by inference procedure (LeNet-5, {settings.activation}"
                     + (", batch norm)" if settings.batch_norm else ")"))
        t2_sum = _summary(t2, "parameterisation", list(TABLE2), metrics, n_test)
        report.table("table2", t2_sum, "Table 2: final training ELBO and test accuracy per parameterisation of dense1",
                     digits=3)
        report.table("fits", pd.DataFrame(all_rows), "Every fit (the first seed's candidate rates and the deep "
                     "ensembles' extra members too; chosen: the rate kept): test and validation accuracies, ELBO, "
                     "seconds, compiles")
    compiles = int(sum(r["traces"] or 0 for r in all_rows))
    report.note("Seconds per stage: " + ", ".join(f"{k} {t.seconds:.0f} s" for k, t in stages.items())
                + f"; {compiles} compiled SVI updates for {len(all_rows)} fits ({len(settings.seeds)} seed(s) of "
                f"{len(_methods(settings))} methods, {len(settings.learning_rates)} candidate rates each on the "
                "first).")
    _point_estimate_note(report, settings, t1)
    earlier = len(report.findings)
    _training_findings(report, settings, t1, t2, chance, n_test)
    report.findings[:] = report.findings[earlier:] + report.findings[:earlier]  # Tables 1-2 first, as the paper
    line.close()
    path = report.write()
    return {"table1": t1_sum, "table2": t2_sum, "tuning": tuning, "transition": transition, "sparse": sparse,
            "attack": attack, "report": path}


PAPER_LENET5_MNIST = float(QUOTES["vn.table1.dropout_ens"].value) / 100
"""The paper's best LeNet-5 accuracy on MNIST (Table 1: binary dropout, deterministic and ensemble, 99.4 %)."""


def _point_estimate_note(report, settings, t1) -> None:
    """States whether the tuned point estimate is within 1 point (`ACC_TOLERANCE`) of the best accuracy known for
    LeNet-5 on the data: the paper's MNIST number, or (other data: no published number for this split) the best
    mean test accuracy any other arm of Table 1 reaches with any procedure (never the point estimate itself)."""
    means = t1.groupby("method")[["stochastic_acc", "deterministic_acc", "ensemble_acc"]].mean()
    point = float(means.loc[TABLE1[0].label, "deterministic_acc"])
    if settings.data == "mnist" and settings.data_path is None:
        best, source = PAPER_LENET5_MNIST, "the paper's LeNet-5 on MNIST (Table 1, dropout)"
    else:  # never the point estimate itself (the check would be circular)
        others = means.drop(index=TABLE1[0].label)
        arm, proc = others.stack().idxmax()
        best = float(others.loc[arm, proc])
        source = (f"no published LeNet-5 number for this data and split: the best mean test accuracy of any other "
                  f"arm here ({arm}, {proc.replace('_acc', '')})")
    within = point >= best - ACC_TOLERANCE
    report.note(f"Tuned point estimate: test accuracy {point:.4f} (mean over seeds) vs {best:.4f}, {source}: "
                + ("within" if within else "NOT within") + f" {100 * ACC_TOLERANCE:g} point.")


def _attack(settings, train, test, log):
    """Fig. 2 on the first seed's networks plus extra seeds for the deep ensembles; ``train(method, seed)`` gives
    the (entry, posterior) of a fit, training it at the method's chosen rate if it has not been."""
    seed = settings.seeds[0]
    variance, point, dropout = TABLE2["layer"], TABLE1[0], TABLE1[1]
    n = min(settings.fgsm_examples, len(test.y))
    x, y = test.x[:n], test.y[:n]
    targets = (y + 1) % test.num_classes

    def draws_of(method, s, draws=settings.attack_draws, median=False):
        post_m = train(method, s)[1]
        d = {k: np.asarray(v)[None] for k, v in post_m.median().items()} if median else \
            {k: np.asarray(v) for k, v in post_m.draws(draws, seed=s).items()}
        return post_m, d

    def predictor(method, s, **kwargs):
        post_m, d = draws_of(method, s, **kwargs)
        return draws_predictor(post_m.model, d, post_m.state)

    def ensemble(method, **kwargs):
        # the equal-weight mixture of the networks, each with its own draws and its own batch-norm statistics
        return mixture_predictor([predictor(method, s, **kwargs) for s in members])

    members = range(seed, seed + settings.deep_ensemble_size)
    models = {
        "variance network": predictor(variance, seed),
        "dropout (ensemble)": predictor(dropout, seed),
        "dropout (deterministic)": predictor(dropout, seed, median=True),
        f"deep ensemble ({settings.deep_ensemble_size} point estimates)": ensemble(point, draws=1),
        f"variance ensemble ({settings.deep_ensemble_size} variance networks)": ensemble(variance),
    }
    tables = []
    for name, predict in models.items():
        t = iterative_fgsm(predict, x, targets, settings.fgsm_eps, settings.fgsm_iterations)
        tables.append(t.assign(model=name))
        log(f"  {name}: success {t.success_rate.iloc[-1]:.3f}, entropy {t.mean_entropy.iloc[0]:.3f} -> "
            f"{t.mean_entropy.iloc[-1]:.3f}")
    return pd.concat(tables, ignore_index=True)[["model", "iteration", "success_rate", "mean_entropy"]]


CHANCE_TOLERANCE = 0.05
"""A deterministic accuracy "at chance" is at most chance + 0.05 (the paper's 10.1 % and 11.3 % on 10 classes)."""
ACC_TOLERANCE = 0.01
"""An accuracy "at the same level" is at most 1 point below its comparator (the paper: 99.3 vs dropout's 99.4)."""


def _binomial_interval(p: float, n_test: int, kind: str = "binomial SE, one network") -> Interval:
    """A test accuracy ``p`` on ``n_test`` images of one network: p +- 1.96 sqrt(p (1 - p) / n)."""
    return se_interval(p, _binomial_se(p, n_test), n_test, kind=kind)


def _accuracy_interval(rows: pd.DataFrame, by: str, key, metric: str, n_test: int) -> Interval:
    """t over seeds of ``metric`` of the rows with ``rows[by] == key``; one seed: the binomial interval."""
    v = rows.loc[rows[by] == key, metric].to_numpy()
    return t_interval(v) if len(v) >= 2 else _binomial_interval(float(v[0]), n_test)


def _accuracy_difference(rows: pd.DataFrame, by: str, a, b, metric: str, n_test: int) -> Interval:
    """metric(a) - metric(b): paired t over seeds; one seed: the two binomial SEs in quadrature (conservative:
    the same test images make the two accuracies positively correlated)."""
    wa, wb = (rows[rows[by] == k].set_index("seed")[metric] for k in (a, b))
    if len(wa) >= 2:
        return paired_interval(wa, wb)
    pa, pb = float(wa.iloc[0]), float(wb.iloc[0])
    return se_interval(pa - pb, math.hypot(_binomial_se(pa, n_test), _binomial_se(pb, n_test)), n_test,
                       kind="binomial SEs, one network each")


LOG_ALPHA_TRANSITION = float(QUOTES["vn.log_alpha"].value)
"""The paper's dense1 log alpha after the phase transition (6.3, section 6.1): the claims about the transition's
aftermath (Tables 1-2, Fig. 1, Fig. 5) are judged only on runs whose dense1 log alpha reached it."""


def transition_reached(log_alphas, where: str) -> Precondition:
    """The precondition of the claims about the state after the phase transition: the smallest dense1 log alpha
    in ``log_alphas`` (one per seed or per reading; NaNs dropped) is >= `LOG_ALPHA_TRANSITION`."""
    v = np.asarray(log_alphas, dtype=float).ravel()
    v = v[np.isfinite(v)]
    lowest = float(v.min()) if v.size else float("nan")
    measured = (f"{where}: dense1 log alpha {lowest:.2f}" + (f"-{float(v.max()):.2f}" if v.size > 1 else "")
                if v.size else f"{where}: no log alpha")
    return at_least(f"past the phase transition: dense1 log alpha >= {LOG_ALPHA_TRANSITION:g} (the paper's value "
                    f"after it, {QUOTES['vn.log_alpha'].source})", lowest, LOG_ALPHA_TRANSITION, measured)


def seed_variation(n_seeds: int) -> Precondition:
    """The precondition of an interval over networks: >= 2 seeds (one network's binomial interval ignores the
    seed-to-seed variation of training)."""
    return at_least("seed-to-seed variation measured (>= 2 seeds; one network's binomial interval ignores it)",
                    n_seeds, 2, f"{n_seeds} seed(s)")


def _table1_finding(report, t1, chance, n_test):
    """Table 1: the variance LeNet-5 (all 4 layers variance layers, layer-wise alpha: the paper's Table 1 row,
    section 6.1; the dense1-only row is Table 2's layer-wise column) has its deterministic accuracy <= chance +
    `CHANCE_TOLERANCE` and its ensemble accuracy minus binary dropout's >= -`ACC_TOLERANCE`. Preconditions: past
    the transition (`transition_reached` on that row's dense1, "only the first fully-connected layer experiences
    phase transition") and >= 2 seeds. The zero-mean row (eq. 12) is reported, not tested: its deterministic net
    (all means 0) is at chance by construction."""
    claim = "Variance networks: the deterministic procedure is at chance while the ensemble is as accurate (Table 1)"
    at_chance = chance + CHANCE_TOLERANCE
    row, dropout = TABLE1[5].label, TABLE1[1].label
    if row not in set(t1.method):
        report.finding(claim, "not run", f"the row {row!r} was not trained (settings.methods)")
        return
    det = _accuracy_interval(t1, "method", row, "deterministic_acc", n_test)
    ens = _accuracy_difference(t1, "method", row, dropout, "ensemble_acc", n_test)
    rows = t1[t1.method == row]
    zero = TABLE1[6].label
    zero_text = (f"; zero-mean row (deterministic at chance by construction, not tested): ens "
                 f"{_accuracy_interval(t1, 'method', zero, 'ensemble_acc', n_test).text(scale=100)} %"
                 if zero in set(t1.method) else "")
    report.finding(
        claim, combine([judge(det, high=at_chance), judge(ens, low=-ACC_TOLERANCE)]),
        f"rule: det <= chance + {CHANCE_TOLERANCE} ({100 * at_chance:.0f} %), ens - binary dropout's ens >= "
        f"-{100 * ACC_TOLERANCE:g} points{zero_text}",
        quoted("vn.table1.det", "vn.table1.ens", "vn.table1.dropout_ens"),
        f"{row}: det {det.text(scale=100)} %, ens - dropout ens {ens.text(scale=100)} points",
        [transition_reached(rows["log_alpha"], row), seed_variation(rows["seed"].nunique())])


def _training_findings(report, settings, t1, t2, chance, n_test):
    """Table 1 and Table 2's findings (paper's number, ours with a 95 % interval, `zoo.experiments.analysis.verdicts.judge`); t1, t2:
    one row per (method, seed)."""
    at_chance = chance + CHANCE_TOLERANCE
    _table1_finding(report, t1, chance, n_test)

    claim = "Layer- and neuron-wise alpha give a clear transition and the highest ELBO (Table 2)"
    present = set(t2.parameterisation)
    if len(present) < len(TABLE2):
        report.finding(claim, "not run", f"trained only {sorted(present)} of {list(TABLE2)} (settings.methods)")
    else:
        det = {k: _accuracy_interval(t2, "parameterisation", k, "deterministic_acc", n_test) for k in TABLE2}
        elbo = {k: paired_interval(t2[t2.parameterisation == "layer"].set_index("seed")["elbo"],
                                   t2[t2.parameterisation == k].set_index("seed")["elbo"]) for k in ("weight", "additive")}
        parts = ([judge(det[k], high=at_chance) for k in ("layer", "neuron")]
                 + [judge(det[k], low=at_chance) for k in ("weight", "additive")]
                 + [judge(v, low=0.0) for v in elbo.values()])
        transitioning = t2[t2.parameterisation.isin(["layer", "neuron"])]
        report.finding(
            claim, combine(parts), f"rule: det <= {100 * at_chance:.0f} % for layer / neuron, above for weight / "
            f"additive; ELBO(layer) - ELBO(weight / additive) > 0 (minibatch ELBO of the last epoch, paired over "
            f"{len(settings.seeds)} seed(s))",
            quoted("vn.table2.det", "vn.table2.elbo"),
            "; ".join(f"det {k} {v.text(scale=100)} %" for k, v in det.items()) + "; "
            + "; ".join(f"ELBO layer - {k} {v.text()}" for k, v in elbo.items()),
            [transition_reached(transitioning["log_alpha"], "layer- and neuron-wise rows"),
             seed_variation(t2["seed"].nunique())])


def _curve_findings(report, settings, t1, rows, t_epoch, chance, sparse, n_test, layer_size, kappa_0):
    """Fig. 1, 3-4 and 5's findings; rows: the first seed's per-epoch curve; kappa_0: the scaled log10 threshold;
    layer_size: the weights of dense1."""
    at_chance = chance + CHANCE_TOLERANCE
    layer = TABLE2["layer"].label
    early = rows[1] if len(rows) > 1 else rows[0]
    before = _binomial_interval(early["deterministic_acc"], n_test)
    # the end of the same network as the curve: Table 2's layer-wise rows over seeds when the curve is that network,
    # else the per-epoch run's last reading
    after = (_accuracy_interval(t1, "method", layer, "deterministic_acc", n_test)
             if settings.kappa_activation == settings.activation else
             _binomial_interval(rows[-1]["deterministic_acc"], n_test))
    report.finding(
        "The phase transition happens during training (Fig. 1)",
        combine([judge(before, low=0.5), judge(after, high=at_chance)]),
        f"rule: det accuracy >= 0.5 early, <= chance + {CHANCE_TOLERANCE} at the end; transition epoch {t_epoch} "
        f"(first seed's curve, {settings.kappa_activation}); last epoch log alpha {rows[-1]['log_alpha']:.2f} "
        "(paper: 6.3)",
        "det accuracy high, then " + quoted("vn.table2.det") + " after the transition (layer-wise: the first)",
        f"det at epoch {early['epoch']} {before.text(scale=100)} %; at the end {after.text(scale=100)} %",
        [transition_reached([rows[-1]["log_alpha"]], f"per-epoch run, epoch {rows[-1]['epoch']}")])

    above = [r["epoch"] for r in rows if r["kappa_above"] > 0]
    first_above = above[0] if above else None
    step = settings.curve_every
    claim = f"kappa crosses kappa_0 (log10 {kappa_0:.2f}, scaled) when the transition happens (Fig. 3-4)"
    happened = Precondition("a transition in the per-epoch run (deterministic accuracy below the midpoint of "
                            "chance and the ensemble's)", t_epoch is not None,
                            f"transition epoch {t_epoch}" if t_epoch is not None else
                            f"none in {rows[-1]['epoch']} epochs (log alpha {rows[-1]['log_alpha']:.2f})")
    paper = (f"weights above kappa_0 (log10 {quoted('vn.kappa_0')}) appear as the deterministic accuracy drops "
             "(Fig. 4)")
    if t_epoch is None:
        report.finding(claim, "inconclusive", f"nothing to time; kappas above kappa_0 at the end: "
                       f"{rows[-1]['kappa_above']} of {layer_size} weights", paper,
                       f"first epoch above kappa_0: {first_above}", [happened])
    else:
        gap = (first_above if first_above is not None else rows[-1]["epoch"] + step) - t_epoch
        interval = Interval(gap, gap - step, gap + step, 1, f"one run, epochs read every {step}")
        report.finding(
            claim, judge(interval, -2 * step, 2 * step),
            f"rule: the first epoch with kappas above kappa_0 within 2 readings of the transition epoch {t_epoch}; "
            f"kappas above at the end: {rows[-1]['kappa_above']} of {layer_size} weights", paper,
            f"first epoch above - transition epoch: {interval.text()}" + ("" if first_above is not None else
                                                                          " (no kappa ever above)"), [happened])

    at0 = sparse[np.isclose(sparse.log10_threshold, kappa_0)].iloc[0]
    loss = se_interval(at0.acc_zero - at0.acc_full, math.hypot(_binomial_se(at0.acc_zero, n_test),
                                                                _binomial_se(at0.acc_full, n_test)), n_test,
                       kind="binomial SEs, one network")
    share = Interval(float(at0.fraction_below), float(at0.fraction_below), float(at0.fraction_below), 1,
                     "one network, an exact count")
    report.finding(
        "Most of the variance layer can be zeroed without losing accuracy (Fig. 5)",
        combine([judge(share, low=0.9), judge(loss, low=-ACC_TOLERANCE)]),
        f"rule: >= 90 % of dense1 below kappa_0 and zeroed-ensemble accuracy - full >= -{100 * ACC_TOLERANCE:g} "
        f"points; compression {at0.compression:.1f}x, accuracy {at0.acc_zero:.3f} (means: {at0.acc_mean:.3f}) vs "
        f"full {at0.acc_full:.3f}", quoted("vn.fig5.zeroed") + " zeroed, no accuracy loss",
        f"{100 * at0.fraction_below:.1f} % zeroed; accuracy change {loss.text(scale=100)} points",
        [transition_reached([rows[-1]["log_alpha"]], f"per-epoch run, epoch {rows[-1]['epoch']}")])


def _attack_finding(report, settings, t1, attack, n_test):
    """Fig. 2's finding: the variance ensemble's attack success rate minus every other model's (binomial SEs)."""
    end = attack[attack.iteration == attack.iteration.max()].set_index("model")
    start = attack[attack.iteration == 0].set_index("model")
    var_ens = [m for m in end.index if m.startswith("variance ensemble")][0]
    others = [m for m in end.index if not m.startswith("variance")]
    n_attack = min(settings.fgsm_examples, n_test)
    diffs = {o: se_interval(end.success_rate[var_ens] - end.success_rate[o],
                            math.hypot(_binomial_se(end.success_rate[var_ens], n_attack),
                                       _binomial_se(end.success_rate[o], n_attack)), n_attack,
                            kind="binomial SEs") for o in others}
    learned = t1.loc[t1.method == TABLE2["layer"].label, "ensemble_acc"].mean()
    # a network at chance is "robust" only as a uniform predictor is
    trained = at_least("the attacked variance networks learned (ensemble test accuracy >= 0.5: a near-uniform "
                       "predictor resists trivially)", learned, 0.5, f"ensemble accuracy {learned:.3f}")
    report.finding(
        "Variance ensembles resist iterative FGSM with a higher predictive entropy (Fig. 2)",
        combine(judge(d, high=0.0) for d in diffs.values()),
        f"rule: success(variance ensemble) - success(other) < 0 after {settings.fgsm_iterations} steps of eps "
        f"{settings.fgsm_eps}; entropy (not tested, no SE): "
        + "; ".join(f"{m} {end.mean_entropy[m]:.3f} (clean {start.mean_entropy[m]:.3f})" for m in end.index)
        + f"; {n_attack} test points, the first seed's networks",
        quoted("vn.fig2") + ", and higher entropy",
        "; ".join(f"success - {o} {d.text(scale=100)} points" for o, d in diffs.items()), [trained])
