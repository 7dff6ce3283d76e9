"""The k-tied Normal paper (Swiatkowski et al., "The k-tied Normal Distribution: A Compact Parameterization
of Gaussian Mean Field Posteriors in Bayesian Neural Networks", ICML 2020): `zoo reproduce k-tied`.

1. Section 2.3, Fig. 3, appendix A: the sd matrices of converged mean-field posteriors are low-rank, the
   means are not (`zoo.experiments.analysis.sigma_spectrum`).
2. Tables 2, 3, 5: replacing each sd matrix by its rank-k SVD approximation (clipped at 0) loses nothing for
   k >= 2, and something for k = 1 (`zoo.experiments.analysis.rank_truncation`; mean and SEM over 100 weight draws).
3. Section 3.2, Fig. 6 top right, footnote 3: tying raises the gradient SNR of the Dense 2 layer's log-sd
   parameters (`zoo.experiments.analysis.gradient_snr`, `zoo.experiments.analysis.elbo_gradients`).
4. Fig. 6 bottom right, Fig. 7: the k-tied fit's validation -ELBO falls at least as fast; Fig. 6 left:
   accuracy, NLL and parameter counts at the end of the trace, and the claim that k >= 2 matches mean field's
   accuracy from the paper's recipe (`zoo.experiments.reproduce.k_tied_recipe`: each arm's Adam rate, prior sd and KL slope
   picked on a validation split, then trained on the whole training part; the point estimate tuned the same way
   and checked against the best accuracy known).
5. Table 4: a k-tied step is no slower than a mean-field one (`zoo.experiments.analysis.step_time`).

The runs are in `zoo.experiments.reproduce.k_tied_runs`, the verdict rules in `zoo.experiments.reproduce.k_tied_findings` (95 %
intervals, `zoo.experiments.analysis.verdicts`). ``data_path`` (`zoo reproduce k-tied --data PATH`): an .npz of images and labels
(`zoo.experiments.reproduce.image_npz`, resized to 28 x 28) replaces the MLP's data (trace and accuracy runs); the parts on
TFDS data (CNN, LSTM, step time) then run only with a ``data_dir``. Every stage writes its CSV tables and
report.md as it ends, so an interrupted job keeps what it finished.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import jax
import optax
import pandas as pd

from zoo.experiments.analysis.rank_truncation import clipped_entries, k_tied_param_count, truncate_sigma, truncation_scores
from zoo.experiments.analysis.seed_summary import mean_se
from zoo.experiments.analysis.sigma_spectrum import posterior_spectra
from inference import fit
from base.errors import InputError, ZooError
from base.run_folder import claim_run_folder
from zoo.experiments.reproduce import k_tied_findings as findings
from zoo.experiments.reproduce.k_tied_plots import plot_spectra, plot_traces
from zoo.experiments.reproduce.image_npz import load_image_npz
from zoo.experiments.reproduce.k_tied_recipe import POINT, Recipe, epoch_steps, final_runs, tune_arms
from zoo.experiments.reproduce.k_tied_runs import SIGMA_INIT, make_guide, model_data, step_time_rounds, train_with_trace
from zoo.experiments.reproduce.report import Report
from zoo.experiments.reproduce.stages import stage
from zoo.progress_line import ProgressLine
from zoo.registry import TFDS_DATA

__all__ = ["KTiedConfig", "QUICK", "FULL", "reproduce_k_tied"]

TITLE = "k-tied Normal (Swiatkowski et al., ICML 2020)"


@dataclass(frozen=True)
class KTiedConfig:
    """Settings of `reproduce_k_tied`. ``FULL`` follows the paper (appendix D); ``QUICK`` shrinks it.

    seeds: runs of the MLP trace (the paper: 3); mlp: (entry, data, architecture kwargs, validation size) of
      the MLP whose trace gives Fig. 6 and whose mean-field fits give Fig. 3 / Table 2's MLP rows;
    others: more (label, entry, data, kwargs, validation) for Fig. 3 and Table 2 only, each one mean-field
      fit of `other_steps` steps with the library's default optimiser (Adam, cosine-decayed 1e-2 -> 1e-4);
    prior_scale: the Normal prior's sd (the paper picks 0.2 or 0.3 on validation data; fixed here);
    batch_size, learning_rate: Adam at a constant rate for the MLP trace (the paper's grid: 1e-4 .. 3e-3);
    trace_ks: the trace's guides: None (mean field) and k-tied ranks;
    checkpoints: the steps where the trace records validation -ELBO and SNR (and the trace ends);
    epochs: None, or the trace's length in epochs: the checkpoints are then rescaled to end at
      `epoch_steps(n_train, batch_size, epochs)` (their fractions of the last one kept);
    snr_batches: the SNR window (footnote 3: 10); val_draws: weight draws per validation -ELBO;
    eval_draws: weight draws per score (the paper: 100); ranks: truncation ranks (plus no truncation);
    speed: (entry, data, kwargs) of Table 4's two-dense-layer model (None: not run); speed_rounds, speed_steps,
      speed_chunk, speed_batch: `zoo.experiments.analysis.step_time.fit_step_ms` settings;
    data_kwargs: {shipped data set name: keyword arguments of its function} (e.g. {"two_moons": {"n": 100}});
    accuracy: (entry, data, kwargs, validation) of Fig. 6 left's accuracy runs (None: not run); recipe: their
      `zoo.experiments.reproduce.k_tied_recipe.Recipe` (arms, validation grid, epochs, batch, seeds);
    notes: lines for the report's caveats (where the setting differs from the paper).
    """

    seeds: tuple = (0, 1, 2)
    mlp: tuple = ("mlp", "mnist", {"hidden": (400, 400)}, 10_000)
    others: tuple = (("CNN", "lenet_cnn", "cifar100", {}, 10_000), ("LSTM", "lstm", "imdb_reviews", {}, 5_000))
    other_steps: int = 15_000
    prior_scale: float = 0.3
    batch_size: int = 1024
    learning_rate: float = 1e-3
    checkpoints: tuple = (1000, 3000, 5000, 7000, 9000, 12_000, 15_000)
    epochs: float | None = 300
    chunk_size: int = 500
    snr_batches: int = 10
    val_draws: int = 100
    eval_draws: int = 100
    ranks: tuple = (1, 2, 3)
    trace_ks: tuple = (None, 1, 2, 3)
    speed: tuple | None = ("mlp", "mnist", {"hidden": (128,)})
    speed_rounds: int = 10
    speed_steps: int = 2200
    speed_chunk: int = 200
    speed_batch: int = 128
    data_kwargs: dict = field(default_factory=dict)
    accuracy: tuple | None = ("mlp", "mnist", {"hidden": (400, 400)}, 10_000)
    recipe: Recipe = Recipe()
    notes: tuple = ()


FULL = KTiedConfig(
    recipe=Recipe(arms=(POINT, None, 2), point_priors=(0.3,), epochs=300, batch_size=1024),
    notes=(
        "Full: the paper's models and data (MNIST MLP 400-400, CIFAR-100 LeNet, IMDB LSTM), batch 1,024. The trace "
        "(Fig. 6 right, Fig. 3, Table 2's MLP rows): Adam 1e-3 and prior sd 0.3 fixed (inside the paper's grid; "
        "the paper picks both on validation data), no KL annealing (as the paper's SNR and convergence runs), "
        "~300 epochs (steps counted from the epochs and the training set's size), 3 seeds. Fig. 3 and Table 2 use "
        "every weight site with ndim >= 2 (the LSTM's embedding table too; the paper analyses its dense layers); "
        "CNN and LSTM fits of 15,000 steps. Fig. 6 left: the paper's recipe and grid for mean field and 2-tied "
        "(1- and 3-tied not run: budget), the point estimate over the rates at prior sd 0.3, 5 seeds.",
    ))
QUICK = replace(
    FULL, seeds=(0, 1, 2, 3, 4), mlp=("mlp", "digits", {"hidden": (100, 100)}, 0.2),
    others=(("CNN", "lenet_cnn", "digits", {"channels": (8, 16), "hidden": 64}, 0.2),),
    other_steps=600, batch_size=128, learning_rate=3e-3, checkpoints=(100, 250, 500, 1000, 1500), epochs=None,
    chunk_size=250, val_draws=20, speed=("mlp", "digits_28", {"hidden": (128,)}), speed_rounds=3,
    speed_steps=600, speed_chunk=100, accuracy=("mlp", "digits", {"hidden": (64, 64)}, 0.2),
    recipe=Recipe(arms=(POINT, None, 2, 3), learning_rates=(1e-3, 3e-3), prior_scales=(0.3,),
                  kl_slopes=(5e-5, 5e-6), epochs=300, batch_size=128, chunk_size=500, seeds=tuple(range(8))),
    notes=(
        "Quick: digits (8x8, 1,348 training images, 20 % of them held out for validation) instead of MNIST; "
        "MLP 64-100-100-10 instead of 784-400-400-10; LeNet on digits with 8/16 channels and 64 hidden units "
        "(600 steps) instead of CIFAR-100 (the 28x28 stand-in was too slow for the CNN's quick budget); no "
        "LSTM (no shipped text data: not run); batch 128 instead of 1,024; the trace 1,500 steps instead of "
        "~300 epochs at Adam 3e-3 and prior sd 0.3 fixed, 5 seeds (the paper: 3); 20 weight draws per validation -ELBO. Fig. 6 left: "
        "MLP 64-64 on digits, the paper's recipe on a smaller grid (Adam {1e-3, 3e-3}, prior sd 0.3, KL slope "
        "{5e-5, 5e-6}; the point estimate: the rates), 300 epochs at batch 128, 8 seeds.",
    ),
)
CPU = replace(
    FULL, seeds=(0, 1, 2), trace_ks=(None, 2), others=(), speed=None, val_draws=20, epochs=100,
    recipe=replace(FULL.recipe, learning_rates=(1e-3, 3e-3), prior_scales=(0.3,), kl_slopes=(5e-5,),
                   point_priors=(0.3,), epochs=100),
    notes=FULL.notes + ("Sized for 2 CPU cores (`k_tied.CPU`, with --data): 100 epochs instead of ~300 (trace and "
                        "accuracy runs), the grid Adam {1e-3, 3e-3} x prior sd 0.3 x slope 5e-5, trace guides mean "
                        "field and 2-tied, 20 weight draws per validation -ELBO.",))
"""The full setting's MLP 784-400-400 parts at batch 1,024 sized for 2 CPU cores (about 45 minutes on USPS's
4,000 training images): ``reproduce_k_tied(out, "full", data_path=..., config=CPU)``."""


def _data_name(data) -> str:
    """A data set's name, or "the --data arrays" for a user's 4-tuple."""
    return data if isinstance(data, str) else "the --data arrays"


def _data_kwargs(cfg, data):
    """``cfg.data_kwargs`` of a shipped data set (None for a user's arrays: 10 classes)."""
    return cfg.data_kwargs.get(data) if isinstance(data, str) else {"num_classes": 10}


def _settings_text(cfg) -> str:
    """The config as the report shows it (a user's arrays by their shapes)."""
    def shown(part):
        if part is None or isinstance(part[1], str):
            return part
        return (part[0], f"<arrays {part[1][0].shape}>", *part[2:])
    return str({**asdict(replace(cfg, mlp=None, accuracy=None)), "mlp": shown(cfg.mlp),
                "accuracy": shown(cfg.accuracy)})


def _rank_label(k):
    return "full" if k is None else k


def _mlp_trace(cfg, entry, train, val, report):
    """Every (k, seed) trace of the MLP; returns (final posteriors {(k, seed): Posterior}, trace DataFrame)."""
    optimizer = optax.adam(cfg.learning_rate)
    finals, rows = {}, []
    weights = [n for n, shape in entry.model.site_shapes(entry.train.feature_shape).items() if len(shape) >= 2]
    site = weights[1]  # Dense 2
    for k in cfg.trace_ks:
        for seed in cfg.seeds:
            post, trace = train_with_trace(entry, train, val, k, seed, checkpoints=cfg.checkpoints,
                                           batch_size=cfg.batch_size, optimizer=optimizer, snr_site=site,
                                           snr_batches=cfg.snr_batches, val_draws=cfg.val_draws,
                                           chunk_size=cfg.chunk_size, log=report.log)
            finals[(k, seed)] = post
            rows += trace
    report.note(f"SNR layer: `{site}` (Dense 2). Each trace is one fit per interval between checkpoints, "
                "warm-started at the exact parameters (Adam's state restarts at each checkpoint); at a "
                f"checkpoint the SNR window is {cfg.snr_batches} fresh minibatches at the checkpoint's fixed "
                "parameters (the paper: the last 10 training batches, whose parameters move between batches).")
    return finals, pd.DataFrame(rows)


def _scores(post, test, n_train, draws, **labels):
    return {**labels, **truncation_scores(post, test, n_train, num_samples=draws)}


def reproduce_k_tied(out_dir, setting: str = "quick", log=print, seeds=None, data_dir=None,
                     config: KTiedConfig | None = None, data_path=None, resume: bool = False) -> dict:
    """Every k-tied Normal experiment (module docstring), written to `out_dir` with a report.md of verdicts.

    Args:
      out_dir: folder for the files (created).
      setting: "quick" (shipped digits, under 15 minutes on 2 CPU cores) or "full" (the paper's settings on
        TFDS mnist / cifar100 / imdb_reviews prepared under `data_dir`; hours on CPUs). A data set that is not
        prepared is reported and its experiments are "not run"; the others go on.
      log: a callable taking progress lines, or None.
      seeds: the MLP trace's seeds (default the setting's: 0, 1, 2).
      data_dir: the TFDS data directory (full).
      config: a `KTiedConfig` replacing the setting's (tests use a tiny one).
      data_path: an .npz of images and labels (`zoo.experiments.reproduce.image_npz.load_image_npz`: 28 x 28, the fixed
        80 / 20 split) for the MLP's trace and the accuracy runs instead of the setting's data (e.g. USPS or
        MNIST arrays); the MLP then has 784 inputs. The parts on TFDS data run only when `data_dir` is given.
      resume: Fig. 6 left's tuning fits and final runs already in ``out_dir``'s ``tuning.csv`` /
        ``accuracy_runs.csv`` from the same recipe and data size are read back instead of run again (the job's
        longest part at the paper's size: a run cut short, e.g. a GPU lent in ~10-minute pieces, continues there);
        the trace, Fig. 3 / Table 2 and Table 4 run again.
    Returns:
      {"trace", "trace_summary", "final_scores", "spectra", "truncation", "step_times", "tuning", "accuracy":
       DataFrames (those of the parts that ran), "report": path of report.md}.
    """
    settings = {"quick": QUICK, "full": FULL}
    if setting not in settings:
        raise InputError("setting", setting, "'quick' or 'full'")
    cfg = config or settings[setting]
    if seeds is not None:
        cfg = replace(cfg, seeds=tuple(seeds))
    if data_path is not None:
        arrays = load_image_npz(data_path)
        cfg = replace(cfg, mlp=(cfg.mlp[0], arrays, cfg.mlp[2], 0.2),  # validation: the last 20 % of training
                      accuracy=None if cfg.accuracy is None else (cfg.accuracy[0], arrays, cfg.accuracy[2], 0.2),
                      notes=cfg.notes + (f"Data: {data_path} ({len(arrays[1])} training images, {len(arrays[3])} test "
                                         "images, resized to 28 x 28; the last 20 % of the training part is the "
                                         "validation set) for the MLP trace and the accuracy runs.",))
    claim_run_folder(out_dir, "zoo reproduce k-tied", "out_dir")  # nothing of the user's is written into
    stages = ("accuracy runs (the paper's recipe)", "MLP trace", "Fig. 3 and Table 2", "Table 4 step time")
    # one progress line, a part per stage (zoo.progress_line): the job's lines print above it on a terminal
    line = ProgressLine(len(stages), log=None if log is print else (log or (lambda text: None)))
    report = Report(out_dir, TITLE, setting, log=line.log)
    for note in cfg.notes:
        report.note(note)
    report.note("Guides: mean field and k-tied as the paper's families, without the library's default sigma cap "
                "(`scale_cap=None`: sd = softplus(rho) / U Vᵀ itself), sd initialised at 0.01 (appendix D.4).")
    report.note(f"Settings: {_settings_text(cfg)}")
    skip_tfds = data_path is not None and data_dir is None  # --data without --data-dir: no TFDS part
    out: dict = {}
    mf_posts: dict = {}
    data_of: dict = {}
    line.update(0, stages[0])
    with stage(stages[0], report.log, "k-tied"):
        _accuracy_part(cfg, data_dir, report, out, resume)
    report.write()
    line.update(1, stages[1])
    with stage(stages[1], report.log, "k-tied"):
        _trace_part(cfg, data_dir, report, out, mf_posts, data_of)
    report.write()
    line.update(2, stages[2])
    with stage(stages[2], report.log, "k-tied"):
        _spectra_part(cfg, data_dir, skip_tfds, report, out, mf_posts, data_of)
    report.write()
    line.update(3, stages[3])
    with stage(stages[3], report.log, "k-tied"):
        _speed_part(cfg, data_dir, skip_tfds, report, out)
    line.close()
    out["report"] = report.write()
    return out


def _trace_part(cfg, data_dir, report, out, mf_posts, data_of):
    """The MLP's traces (Fig. 6 right) and final scores; fills `mf_posts` and `data_of` for Fig. 3 / Table 2."""
    name, data, kwargs, validation = cfg.mlp
    try:
        entry, train, val = model_data(name, data, kwargs, validation, data_dir, cfg.prior_scale, _data_kwargs(cfg, data))
    except (ZooError, ImportError) as err:
        report.note(f"MLP on {_data_name(data)}: not run ({err})")
        for claim in ("Tying raises the gradient SNR (Fig. 6 top right)",
                      "k-tied (k >= 2) converges at least as fast (Fig. 6 bottom right, Fig. 7)"):
            report.finding(claim, "not run", f"{_data_name(data)} is not prepared")
        return
    n_train = len(train[1])
    if cfg.epochs is not None:
        total = epoch_steps(n_train, cfg.batch_size, cfg.epochs)
        cfg = replace(cfg, checkpoints=tuple(sorted({max(1, round(total * c / cfg.checkpoints[-1]))
                                                     for c in cfg.checkpoints})))
        report.note(f"MLP trace: {cfg.epochs:g} epochs of {n_train} examples at batch {cfg.batch_size} = {total} "
                    f"steps; checkpoints {list(cfg.checkpoints)}.")
    finals, trace = _mlp_trace(cfg, entry, train, val, report)
    summary = mean_se(trace, ["k", "step"], ["val_neg_elbo", "snr", "snr_median", "snr_inf_share", "snr_squared_mean_median"])
    report.table("trace", trace, "MLP trace: validation -ELBO per example and Dense 2 gradient SNR per run")
    report.table("trace_summary", summary, "Fig. 6 right: mean and SE over seeds", digits=5)
    report.figure("fig6_snr_elbo", plot_traces(summary), "Fig. 6 right: Dense 2 gradient SNR and validation "
                  "-ELBO vs step (mean ± SE over seeds)")
    rows = [_scores(p, entry.test, n_train, cfg.eval_draws, k="mean field" if k is None else k, seed=s,
                    params=k_tied_param_count(entry.model, entry.train.feature_shape, k))
            for (k, s), p in finals.items()]
    final = pd.DataFrame(rows)
    report.table("final_scores", mean_se(final, ["k", "params"], ["neg_elbo", "nll", "accuracy", "ece"]),
                 "Fig. 6 left: test -ELBO, NLL, accuracy, ECE at the end of the trace (per-draw means; "
                 "mean ± SE over seeds) and variational parameter counts", digits=5)
    out.update(trace=trace, trace_summary=summary, final_scores=final)
    mf_posts.update({("MLP", s): finals[(None, s)] for s in cfg.seeds if (None, s) in finals})
    data_of["MLP"] = (entry, n_train)
    report.finding("Tying raises the gradient SNR (Fig. 6 top right)", *findings.snr_verdict(trace))
    report.finding("k-tied (k >= 2) converges at least as fast (Fig. 6 bottom right, Fig. 7)",
                   *findings.convergence_verdict(trace))


def _accuracy_part(cfg, data_dir, report, out, resume: bool = False):
    """Fig. 6 left with the paper's recipe (`zoo.experiments.reproduce.k_tied_recipe`): the validation choice per arm, the
    final runs, the accuracy verdict and the point-estimate check."""
    claim = "k-tied (k >= 2) matches mean field's test accuracy (Fig. 6 left)"
    check = "Baseline check: the tuned point estimate is within 1 point of the best accuracy known"
    if cfg.accuracy is None:
        report.finding(claim, "not run", "not in this setting")
        return
    name, data, kwargs, validation = cfg.accuracy
    rec = cfg.recipe
    priors = sorted(set(rec.prior_scales) | set(rec.point_priors or ()))
    try:
        tuning_entries = {p: model_data(name, data, kwargs, validation, data_dir, p, _data_kwargs(cfg, data))
                          for p in priors}
        whole = {p: model_data(name, data, kwargs, 0, data_dir, p, _data_kwargs(cfg, data))[0] for p in priors}
    except (ZooError, ImportError) as err:
        report.finding(claim, "not run", f"{_data_name(data)}: {err}")
        return
    n_tune, n_whole = len(next(iter(tuning_entries.values()))[1][1]), len(next(iter(whole.values())).train.y)
    report.note(f"Fig. 6 left (the paper's recipe): {name} {kwargs} on {_data_name(data)}; per arm the validation "
                f"grid Adam {list(rec.learning_rates)} x prior sd {list(rec.prior_scales)} x KL slope "
                f"{list(rec.kl_slopes)} per batch (raised every {rec.kl_every} batches; the point estimate: "
                f"rate x prior sd {list(rec.point_priors or rec.prior_scales)}, no KL schedule), each fitted on "
                f"{n_tune} examples with seed {rec.seeds[0]} and scored by validation accuracy; then the chosen "
                f"setting trained on all {n_whole} training examples, seeds {list(rec.seeds)}, {rec.epochs:g} epochs "
                f"at batch {rec.batch_size} ({epoch_steps(n_tune, rec.batch_size, rec.epochs)} and "
                f"{epoch_steps(n_whole, rec.batch_size, rec.epochs)} steps), scored once on the test split.")
    choices, tuning = tune_arms(tuning_entries, rec, log=report.log, out_dir=report.out, resume=resume)
    report.table("tuning", tuning, "Fig. 6 left: every candidate setting per arm, fitted on the training part and "
                 "scored on the validation part (validation: accuracy; chosen: the arm's pick)")
    runs = final_runs(whole, choices, rec, log=report.log, out_dir=report.out, resume=resume)
    report.table("accuracy_runs", runs, f"Fig. 6 left: test accuracy and NLL of each arm with its chosen setting "
                 f"({name} {kwargs} on {_data_name(data)}), per seed; final_kl_weight: beta at the last step")
    betas = runs.groupby("k", sort=False)["final_kl_weight"].first()
    report.note("Fig. 6 left: the KL weight beta at the last step of each arm's final runs: "
                + ", ".join(f"{k if isinstance(k, str) else f'{k}-tied'} {b:.4g}" for k, b in betas.items())
                + " (the point estimate has no KL schedule: "
                "1). The stepwise schedule reaches 1 after 1 / slope batches (20,000 at 5e-5, 200,000 at 5e-6).")
    report.finding(claim, *findings.accuracy_verdict(runs))
    reference = findings.best_known_accuracy(data, runs)
    report.finding(check, *findings.point_estimate_verdict(runs, *reference))
    out.update(tuning=tuning, accuracy=runs)


def _spectra_part(cfg, data_dir, skip_tfds, report, out, mf_posts, data_of):
    """The other models' mean-field fits, then Fig. 3 (sd spectra) and Tables 2, 3 (truncation)."""
    for label, name, data, kwargs, validation in cfg.others:
        if skip_tfds and data in TFDS_DATA:
            report.note(f"{label} ({name} on {data}): not run: no --data-dir")
            continue
        try:
            e, tr, _ = model_data(name, data, kwargs, validation, data_dir, cfg.prior_scale, _data_kwargs(cfg, data))
        except (ZooError, ImportError) as err:
            report.note(f"{label} ({name} on {data}): not run ({err})")
            continue
        report.log(f"{label}: mean-field fit, {cfg.other_steps} steps")
        mf_posts[(label, cfg.seeds[0])] = fit(e.model, make_guide(e.model, None), tr, steps=cfg.other_steps,
                                              batch_size=cfg.batch_size, seed=cfg.seeds[0], progress=False)
        data_of[label] = (e, len(tr[1]))
    if not mf_posts:
        for claim in ("Mean-field sd matrices are low-rank, the means are not (Fig. 3)",
                      "Rank >= 2 truncation loses nothing, rank 1 does (Tables 2, 3)"):
            report.finding(claim, "not run", "no model's data are prepared")
        return
    spectra = pd.concat([posterior_spectra(p, init=SIGMA_INIT).assign(model=m, seed=s)
                         for (m, s), p in mf_posts.items()])
    report.table("spectra", spectra, "Fig. 3: share of variance in the top 1-3 singular values of each "
                 "weight site's sd and mean matrices (mean-field posteriors)")
    first = {m: p for (m, s), p in mf_posts.items() if s == cfg.seeds[0]}
    report.figure("fig3_spectra", plot_spectra(first), "Fig. 3: fraction of variance per singular value, sd "
                  "(solid) and means (dashed), seed " + str(cfg.seeds[0]))
    report.finding("Mean-field sd matrices are low-rank, the means are not (Fig. 3)",
                   *findings.sigma_low_rank(spectra))
    rows = []
    for (m, s), p in mf_posts.items():
        e, n_train = data_of[m]
        for k in (*cfg.ranks, None):
            clipped, total = clipped_entries(p, k) if k is not None else (0, 0)
            rows.append(_scores(truncate_sigma(p, k), e.test, n_train, cfg.eval_draws, model=m, seed=s,
                                rank=_rank_label(k), params=k_tied_param_count(e.model, e.train.feature_shape, k),
                                clipped=clipped))
            report.log(f"  truncation {m} seed {s} rank {_rank_label(k)}: NLL {rows[-1]['nll']:.4f}")
    truncation = pd.DataFrame(rows)
    report.table("truncation", truncation, "Tables 2, 3: post-hoc rank-k truncation of the sd matrices "
                 "(per-draw mean and SEM over weight draws; clipped: entries raised to the floor 1e-6)")
    report.finding("Rank >= 2 truncation loses nothing, rank 1 does (Tables 2, 3)",
                   *findings.truncation_verdict(truncation, spectra))
    out.update(spectra=spectra, truncation=truncation)


def _speed_part(cfg, data_dir, skip_tfds, report, out):
    """Table 4: ms per step of mean field and 2-tied, interleaved rounds."""
    claim = "A k-tied step is no slower (Table 4)"
    if cfg.speed is None:
        report.finding(claim, "not run", "not in this setting")
        return
    name, data, kwargs = cfg.speed
    if skip_tfds and data in TFDS_DATA:
        report.finding(claim, "not run", f"{data}: not run: no --data-dir")
        return
    try:
        e = model_data(name, data, kwargs, 0, data_dir, cfg.prior_scale, _data_kwargs(cfg, data))[0]
    except (ZooError, ImportError) as err:
        report.finding(claim, "not run", f"{data}: {err}")
        return
    times = pd.DataFrame(step_time_rounds(e, (None, 2), cfg.speed_rounds, cfg.speed_steps, cfg.speed_batch,
                                          cfg.speed_chunk))
    report.table("step_times", times, f"Table 4: ms per SVI step, {name} {kwargs} on {data}, batch "
                 f"{cfg.speed_batch} (compile excluded)")
    report.finding(claim, *findings.step_time_verdict(times, backend=jax.default_backend()))
    out["step_times"] = times
