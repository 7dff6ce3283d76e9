"""Liberty or Depth (Foong et al., NeurIPS 2020): the experiments that train catalogue entries.

The depth sweep (section 4, appendix B, Fig. 2 and the blog's figures): for every activation, depth and
seed, two moons (noise 0.1) -> an MLP with ``depth`` hidden layers of the largest width that keeps it
under ``weight_budget`` weights (biases included), unit Normal prior -> mean-field VI pre-training (Adam,
batch 64, 10 epochs, the full unweighted ELBO) -> NUTS started from that posterior -> the Gaussian
summaries of `zoo.experiments.analysis.depth_sweep.gaussian_metrics` of the NUTS draws of all weights. Also the blog's
product-matrix covariance of a trained deep linear network, and ``reproduce_liberty_or_depth``, the
`zoo reproduce liberty-or-depth` job. The analysis (Gaussian fits, KL, W2, closed-form product
covariances, summaries, figures) lives in `zoo.experiments.analysis.depth_sweep`, `evals.gaussians` and
`zoo.experiments.analysis.product_covariance`; this module trains.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import optax
import pandas as pd

from evals.comparison import chain_draws, flat_draws
from zoo.progress_line import ProgressLine
from zoo.experiments.analysis.depth_sweep import (RHAT_MIXED, gaussian_metrics, kl_floor, mixed_summary, plot_depth_sweep,
                               simulated_kl_floor, summarise)
from evals.gaussians import JITTER
from evals.metrics import accuracy
from zoo.experiments.analysis.product_covariance import (
    closed_form_check,
    plot_covariance_heatmaps,
    posterior_product_covariance,
    simulate_product_covariance,
)
from zoo.experiments.analysis.verdicts import Precondition, combine, judge, paired_interval, t_interval
from inference import fit, mean_field, nuts
from inference.run_info import NutsInfo
from base.errors import InputError
from base.run_folder import claim_run_folder
from models.networks.budget_mlp import mlp_param_count, widest_mlp_under_budget
from zoo.registry import get
from zoo.experiments.reproduce.quotes import quoted
from zoo.experiments.reproduce.report import Report

__all__ = [
    "DepthSweepConfig",
    "QUICK",
    "MEDIUM",
    "FULL",
    "run_one",
    "run_depth_sweep",
    "deep_linear_product_covariance",
    "reproduce_liberty_or_depth",
    "floor_table",
    "floor_note",
    "depth_findings",
]

PAPER_DRAWS = (1000, 10_000)
"""The paper's S (1,000 NUTS draws) and ten times more, for the estimator-floor finding."""


@dataclass(frozen=True)
class DepthSweepConfig:
    """Settings of the sweep. The paper's values are the defaults (``FULL``); ``QUICK`` shrinks them.

    depths: numbers of hidden layers; activations: names in ``models.networks.mlp.ACTIVATIONS``;
    seeds: one run per seed (the paper: 20); weight_budget: every model has fewer weights than this;
    n_data, noise: two moons (10,000 points, noise 0.1; 20% are held out for test accuracy);
    svi_epochs, batch_size, learning_rate, init_scale: mean-field pre-training (Adam);
    num_warmup, draws_per_chain, num_chains, max_tree_depth, target_accept_prob: NUTS (the paper: 100
      burn-in, 1000 draws, target 0.8); draws_per_chain is per chain, and the Gaussian fit pools the
      S = num_chains * draws_per_chain draws;
    jitter: diagonal jitter of the Gaussian fit (appendix B).
    """

    depths: tuple = (1, 2, 3, 4, 5, 6, 7, 8)
    activations: tuple = ("relu", "leaky_relu", "linear")
    seeds: tuple = tuple(range(20))
    weight_budget: int = 1000
    n_data: int = 10_000
    noise: float = 0.1
    svi_epochs: int = 10
    batch_size: int = 64
    learning_rate: float = 1e-3
    init_scale: float = 1e-3
    num_warmup: int = 100
    draws_per_chain: int = 1000
    num_chains: int = 1
    max_tree_depth: int = 10
    target_accept_prob: float = 0.8
    jitter: float = JITTER


FULL = DepthSweepConfig(num_chains=2, draws_per_chain=500)
# FULL: the paper's 1,000 draws per run as 2 chains of 500 (one chain has no R-hat; a KL is reported only for
# mixed chains, R-hat <= 1.05).
# Quick: 1,000 two-moons points instead of 10,000 and a 100-parameter
# budget instead of 1,000 (widths 19, 7, 5, 4 for depths 1-4), 5 seeds instead of 20. NUTS runs 2
# chains in parallel (one per host device; the `zoo` CLI sets 2), each started from its own draw of
# the SVI posterior, with 400 warm-up steps, trees up to depth 8 (255 leapfrog steps; depth 7 left
# the deeper nets unmixed, R-hat up to 1.8) and 400 draws per chain: S = 800 pooled draws for
# D <= 97 parameters (S / D >= 8), so the independent-draws floor ``kl_null`` (about D^2 / 4S) is
# 2-3 nats. The deeper nets still mix slowly (the first layer's weights; see docs/liberty-or-depth.md),
# hence ``kl_null_shift``, ``ess_bulk_min`` and ``rhat_max`` in every row. With 800 training points
# 100 epochs are 1,200 Adam steps, about the paper's 10 epochs of 10,000 points (1,560 steps).
QUICK = replace(
    FULL, depths=(1, 2, 3, 4), activations=("relu",), seeds=(0, 1, 2, 3, 4), weight_budget=100, n_data=1000,
    svi_epochs=100, num_warmup=400, draws_per_chain=400, num_chains=2, max_tree_depth=8,
)
# QUICK's models and seeds with longer chains (1,000 warm-up steps, 1,000 draws per chain: S = 2,000,
# S / D >= 20): does QUICK's answer survive better mixing?
MEDIUM = replace(QUICK, num_warmup=1000, draws_per_chain=1000)


def run_one(config: DepthSweepConfig, depth: int, activation: str, seed: int, progress: bool = False) -> dict:
    """One run of the sweep: pre-train by mean-field SVI, NUTS from it, Gaussian summaries of the draws.

    The model is ``zoo.get("mlp", data="two_moons", hidden=(width,) * depth, activation=...)`` with a
    unit Normal prior on every weight and bias, width from ``widest_mlp_under_budget`` (biases
    counted); the data are re-drawn with the run's seed.
    Returns:
      a dict (one table row): activation, depth, width, num_weights (D), seed, the entries of
      ``gaussian_metrics`` of the (num_chains, draws_per_chain, D) draws, nuts_accuracy (test set,
      posterior mean predictive), divergences (all chains), mean_leapfrog_steps, svi_mean_sd and
      nuts_mean_sd (the average marginal standard deviation of a weight under the pre-trained
      mean-field posterior and under NUTS), svi_s, nuts_s.
    """
    width = widest_mlp_under_budget(depth, budget=config.weight_budget)
    entry = get("mlp", data="two_moons", data_kwargs={"n": config.n_data, "noise": config.noise, "seed": seed},
                hidden=(width,) * depth, activation=activation, prior_scale=1.0)
    steps = config.svi_epochs * (len(entry.train.y) // config.batch_size)
    t0 = time.perf_counter()
    svi = fit(entry.model, mean_field(entry.model, init_scale=config.init_scale), entry.train, steps=steps,
              batch_size=config.batch_size, optimizer=optax.adam(config.learning_rate), seed=seed,
              progress=progress)
    svi_s = time.perf_counter() - t0
    mcmc = nuts(entry.model, entry.train, init=svi, num_chains=config.num_chains, num_warmup=config.num_warmup,
                draws_per_chain=config.draws_per_chain, seed=seed, max_tree_depth=config.max_tree_depth,
                target_accept_prob=config.target_accept_prob, progress=progress)
    draws = flat_draws(chain_draws(mcmc))  # (chains, draws, D), every site in site order
    svi_sd = np.concatenate([np.asarray(v).std(0).ravel() for v in svi.draws(200, seed=seed).values()])
    probs = mcmc.predict(entry.test.x, num_samples=100, reduce="mean")  # (N, C), averaged over draws
    info = mcmc.info
    assert isinstance(info, NutsInfo)  # nuts records one
    return {
        "activation": activation, "depth": depth, "width": width, "num_weights": draws.shape[-1], "seed": seed,
        **gaussian_metrics(draws, config.jitter, seed),
        "nuts_accuracy": accuracy(probs, entry.test.y),
        "divergences": info.divergences, "mean_leapfrog_steps": info.mean_leapfrog_steps,
        "svi_mean_sd": float(svi_sd.mean()), "nuts_mean_sd": float(draws.reshape(-1, draws.shape[-1]).std(0).mean()),
        "svi_s": svi_s, "nuts_s": info.nuts_s,
    }


def _run_file(runs_dir: Path, activation: str, depth: int, seed: int) -> Path:
    return runs_dir / f"{activation}_depth{depth}_seed{seed}.json"


def _saved_run(path: Path, config: DepthSweepConfig) -> dict | None:
    """The row saved at ``path`` by a run of the same ``config``, or None (absent, unreadable, another config)."""
    import json

    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("config") != json.loads(json.dumps(asdict(config))):
        return None
    return record.get("row")


def _save_run(path: Path, config: DepthSweepConfig, row: dict) -> None:
    """Write {"config", "row"} to ``path`` atomically (a temporary file renamed: a cut run leaves no half file)."""
    import json

    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"config": asdict(config), "row": row}, default=float))
    tmp.replace(path)


def run_depth_sweep(config: DepthSweepConfig = QUICK, log=print, runs_dir=None, resume: bool = True) -> pd.DataFrame:
    """Every (activation, depth, seed) run of ``config``: a DataFrame with one row per run
    (columns of ``run_one``); ``df.attrs["config"]`` holds the config as a dict.

    ``runs_dir`` (a folder, made if absent): each run's row is saved there as JSON the moment it finishes, and
    (with ``resume``) a run whose row is already there from the same config is read back instead of run again, so a
    sweep cut short (a GPU lent in ~10-minute pieces) resumes at the first run it had not finished. One run is the unit: at the paper's
    size (``FULL``, ~1,000 parameters, 2 chains of 500 draws after 100 warm-up steps) a few minutes on one GPU."""
    rows: list = []
    # one progress line (zoo.progress_line), a part per run (each of about the same number of weights)
    runs = len(config.activations) * len(config.depths) * len(config.seeds)
    line = ProgressLine(runs, log=None if log is print else log) if log is not None else None
    log = line.log if line is not None else None
    if runs_dir is not None:
        runs_dir = Path(runs_dir)
        runs_dir.mkdir(parents=True, exist_ok=True)
    for activation in config.activations:
        for depth in config.depths:
            for seed in config.seeds:
                if line is not None:
                    line.update(len(rows), f"{activation} depth {depth} seed {seed}: MFVI, then NUTS from it")
                path = None if runs_dir is None else _run_file(runs_dir, activation, depth, seed)
                saved = None if path is None or not resume else _saved_run(path, config)
                if path is not None and saved is not None:
                    rows.append(saved)
                    if log is not None:
                        log(f"{activation} depth {depth} seed {seed}: read from {path.name} (finished earlier)")
                    continue
                rows.append(run_one(config, depth, activation, seed))
                if path is not None:
                    _save_run(path, config, rows[-1])
                if log is not None:
                    row = rows[-1]
                    log(f"{activation} depth {depth} (width {row['width']}, {row['num_weights']} weights) "
                        f"seed {seed}: KL {row['kl_diag_full']:.3f} (null {row['kl_null']:.3f}, "
                        f"shift null {row['kl_null_shift']:.3f}), W2 extra {row['w2_extra_error']:.4f}, "
                        f"ESS min {row['ess_bulk_min']:.0f}, R-hat max {row['rhat_max']:.3f}, "
                        f"acc {row['nuts_accuracy']:.3f}, {row['divergences']} divergences, "
                        f"{row['svi_s'] + row['nuts_s']:.0f} s")
    if line is not None:
        line.close()
    table = pd.DataFrame(rows)
    table.attrs["config"] = asdict(config)
    return table


def deep_linear_product_covariance(depth: int = 10, width: int = 16, steps: int = 3000, batch_size: int = 128,
                                   num_samples: int = 10_000, seed: int = 0, progress: bool = False):
    """Train a mean-field deep linear network on digits and return its product-matrix covariance.

    The blog shows a 10-layer linear network on FashionMNIST; digits (8x8 pixels, 10 classes) keeps
    the product matrix at 64 x 10, so the covariance is 640 x 640. Unit Normal prior, mean-field SVI
    (Adam 1e-3, sigma init 1e-3), ``num_samples`` draws of the guide.
    Returns:
      (cov (640, 640), posterior).
    """
    entry = get("deep_linear", data="digits", depth=depth, width=width, prior_scale=1.0)
    # the settings this figure was measured at (Adam 1e-3, sigma init 1e-3), pinned against fit's defaults
    posterior = fit(entry.model, mean_field(entry.model, init_scale=1e-3), entry.train, steps=steps,
                    batch_size=batch_size, optimizer=optax.adam(1e-3), seed=seed, progress=progress)
    return posterior_product_covariance(posterior, num_samples, seed)[0], posterior


def reproduce_liberty_or_depth(out_dir, setting: str = "quick", log=print, resume: bool = False, **overrides) -> dict:
    """Every Liberty-or-Depth experiment, written to ``out_dir`` (the `zoo reproduce liberty-or-depth` job).

    1. Fig. 1: simulated covariance of products of L = 1, 5, 20 mean-field 4x4 layers (10,000 draws).
    2. eq. 14 / 16-17 vs the simulation (``closed_form_check``) for L = 2, 3, 5.
    3. The blog's heatmap: product-matrix covariance of a trained 10-layer mean-field linear network
       on digits (quick: fewer SVI steps).
    4. The depth sweep (``QUICK``, ``MEDIUM`` or ``FULL``), its per-depth summary and Fig. 2.
    5. report.md: the estimator's floor at the paper's D and S (`floor_table`), KL minus floor per depth over
       the mixed seeds only, and their verdicts (`depth_findings`).

    Resumable: every sweep run's row is saved under ``out_dir/runs`` as it finishes (`run_depth_sweep`), and the
    same call with ``resume=True`` on the same folder (the job's own: `base.run_folder.claim_run_folder`) reads back
    the runs of the same settings instead of running them again; steps 1-3 (minutes) are redone.

    Args:
      out_dir: folder for the files (created).
      setting: "quick" (`QUICK`: depths 1-4, 5 seeds), "medium" (QUICK with longer chains) or "full" (the
        paper's settings: hours).
      log: a callable taking progress lines, or None.
      **overrides: fields of `DepthSweepConfig` replacing the setting's (e.g. ``seeds=(0, 1)``,
        ``activations=("relu", "linear")``).
    Returns:
      {"closed_forms", "runs", "summary", "floors" (`floor_table`), "mixed" (`zoo.experiments.analysis.depth_sweep.mixed_summary`):
       DataFrames, "files": [paths], report.md (`depth_findings`) the last}.
    """
    settings = {"quick": QUICK, "medium": MEDIUM, "full": FULL}
    if setting not in settings:
        raise InputError("setting", setting, "'quick', 'medium' or 'full'")
    log = log or (lambda line: None)
    out = Path(claim_run_folder(out_dir, "zoo reproduce liberty-or-depth", "out_dir"))  # nothing of the user's
    files = []

    def save_figure(fig, name):
        fig.savefig(out / name, dpi=120, bbox_inches="tight")
        files.append(str(out / name))

    covs = {f"{L} layer{'s' if L > 1 else ''}": simulate_product_covariance(L, seed=L).cov for L in (1, 5, 20)}
    fig1 = plot_covariance_heatmaps(covs, "Product of mean-field 4x4 layers (Fig. 1)")
    save_figure(fig1, "fig1_product_covariance.png")
    closed = pd.DataFrame([closed_form_check(L, seed=L) for L in (2, 3, 5)])
    closed.to_csv(out / "closed_forms.csv", index=False)
    files.append(str(out / "closed_forms.csv"))
    log("closed forms vs 10,000-draw simulation:\n" + closed.to_string(index=False))

    steps = 5000 if setting == "full" else 1000
    cov, _ = deep_linear_product_covariance(depth=10, width=16, steps=steps)
    save_figure(plot_covariance_heatmaps({"10-layer linear network, digits": cov}), "deep_linear_digits_covariance.png")

    config = replace(settings[setting], **overrides)
    runs = run_depth_sweep(config, log=log, runs_dir=out / "runs", resume=resume)
    summary = summarise(runs)
    runs.to_csv(out / "depth_sweep_runs.csv", index=False)
    summary.to_csv(out / "depth_sweep_summary.csv", index=False)
    files += [str(out / "depth_sweep_runs.csv"), str(out / "depth_sweep_summary.csv")]
    save_figure(plot_depth_sweep(summary), "fig2_depth_sweep.png")
    log("depth sweep (mean and standard error over seeds):\n" + summary.to_string(index=False))

    report = Report(out, "Liberty or Depth (Foong et al., NeurIPS 2020)", setting, log=log)
    report.note(f"Settings: {asdict(config)}. Files also written: " + ", ".join(Path(f).name for f in files) + ".")
    floors = floor_table(FULL.depths, FULL.weight_budget)
    report.table("estimator_floor", floors, "The KL estimator's floor (exact expectation for an exactly diagonal "
                 "posterior, `zoo.experiments.analysis.depth_sweep.kl_floor`) at the paper's D per depth (the widest "
                 "MLP under 1,000 weights, biases counted in the budget or not; D counts every parameter) and "
                 "S = 1,000 / 10,000 draws", digits=2)
    mixed = mixed_summary(runs)
    report.table("kl_above_floor", mixed, f"KL minus the shift floor per depth, 95 % t-interval over the seeds whose "
                 f"chains mixed (R-hat <= {RHAT_MIXED}); a depth with fewer than 2 mixed seeds is unmixed (no KL)",
                 digits=3)
    depth_findings(report, floors, runs, mixed, config)
    files.append(str(report.write()))
    return {"closed_forms": closed, "runs": runs, "summary": summary, "floors": floors, "mixed": mixed,
            "files": files}


def floor_table(depths=FULL.depths, budget: int = FULL.weight_budget, draws=PAPER_DRAWS) -> pd.DataFrame:
    """The KL(q_diag || q_full) estimator's floor (`zoo.experiments.analysis.depth_sweep.kl_floor`: its expectation for an
    exactly diagonal posterior and independent draws) for the paper's networks, one row per depth, under both
    readings of appendix B's width rule ("the largest width that keeps the number of weights in the model under
    1000": biases counted or not). D is every parameter of the network so built (weights and biases: the KL is over
    "all parameters in the model", `models.networks.budget_mlp.mlp_param_count`): columns width, D (biases
    counted in the budget), width_weights_only, D_weights_only (the budget on weights alone), and
    ``floor_S{S}`` / ``floor_weights_only_S{S}`` for each S in ``draws``."""
    rows = []
    for depth in depths:
        width = widest_mlp_under_budget(depth, budget=budget)
        dim = mlp_param_count(depth, width)
        width_w = widest_mlp_under_budget(depth, budget=budget, count_biases=False)
        dim_w = mlp_param_count(depth, width_w)
        rows.append({"depth": depth, "width": width, "D": dim, "width_weights_only": width_w, "D_weights_only": dim_w,
                     **{f"floor_S{s}": kl_floor(dim, s) for s in draws},
                     **{f"floor_weights_only_S{s}": kl_floor(dim_w, s) for s in draws}})
    return pd.DataFrame(rows)


DEPTH_CLAIM = "KL(q_diag || q_full) above its floor falls with depth (Fig. 2)"


def floor_note(floors: pd.DataFrame, simulate_dim: int = 990, repeats: int = 3) -> str:
    """The report's words on the estimator's floor at the paper's D and S = 1,000 (a caveat about Fig. 2, not a
    claim of the paper: the paper states no value for it): the exact expectation per depth under both readings of
    the width rule, a `repeats`-fold simulation at D = `simulate_dim`, and why it is not compared with Fig. 2."""
    sim = t_interval(simulated_kl_floor(simulate_dim, PAPER_DRAWS[0], repeats), "t over simulations")
    s = PAPER_DRAWS[0]
    per_depth = ", ".join(f"depth {r.depth}: D = {r.D} -> {getattr(r, f'floor_S{s}'):.0f} nats (weights-only budget: "
                          f"D = {r.D_weights_only} -> {getattr(r, f'floor_weights_only_S{s}'):.0f})"
                          for r in floors.itertuples())
    return (f"The KL estimator's floor (its expectation for an exactly diagonal posterior, S = {s:,} independent "
            f"draws as the paper's, `kl_floor`; not a claim of the paper, which states no value for it): {per_depth}. "
            f"Simulated at D = {simulate_dim}: {sim.text(4)} (exact {kl_floor(simulate_dim, s):.0f}). An infinite floor "
            f"is D >= S: the empirical covariance of {s:,} draws is singular and only the jitter keeps the KL finite. "
            "The floor moves "
            "with D across depths by hundreds of nats, so Fig. 2's KLs at S = 1,000 are mostly floor unless they are "
            "larger; Fig. 2's plotted values are not in the paper's text (a figure), so the comparison needs the "
            "figure read off by a person.")


def depth_findings(report, floors: pd.DataFrame, runs: pd.DataFrame, mixed: pd.DataFrame, config,
                   simulate_dim: int = 990, repeats: int = 3) -> None:
    """The job's finding and the floor caveat. The caveat (`floor_note`): the estimator's floor at the paper's D and
    S. The finding: per activation, KL minus the shift floor at the deepest mixed depth minus at the shallowest,
    paired by seed (mixed seeds of both depths only), < 0. Preconditions: chains mixed (split R-hat <= 1.05 in >= 2
    seeds) at >= 2 depths of every activation, and the shallowest mixed depth's KL above its shift floor (the 95 %
    interval of the excess above 0: else there is nothing to fall). ``floors``: `floor_table`."""
    report.note(floor_note(floors, simulate_dim, repeats))
    verdicts, ours, unmixed, above, mixed_depths = [], [], [], [], []
    enough = True
    for activation, g in mixed.groupby("activation", sort=False):
        unmixed += [f"{activation} depth {d} ({m}/{n} mixed)" for d, m, n, ok in
                    zip(g["depth"], g["n_mixed"], g["n_runs"], g["mixed"]) if not ok]
        ok = g[g["mixed"]]
        mixed_depths.append(f"{activation}: {', '.join(str(int(d)) for d in ok['depth']) or 'none'}")
        if len(ok) < 2:
            enough = False
            ours.append(f"{activation}: fewer than 2 mixed depths")
            continue
        shallow, deep = int(ok["depth"].min()), int(ok["depth"].max())
        low = ok[ok["depth"] == shallow].iloc[0]
        above.append((f"{activation} depth {shallow}: excess {low['kl_excess_mean']:.3g} [{low['kl_excess_lo']:.3g}, "
                      f"{low['kl_excess_hi']:.3g}]", bool(low["kl_excess_lo"] > 0)))
        r = runs[(runs["activation"] == activation) & (runs["rhat_max"] <= RHAT_MIXED)]
        excess = (r["kl_diag_full"] - r["kl_null_shift"]).to_numpy()
        by = {d: pd.Series(excess[(r["depth"] == d).to_numpy()], index=r["seed"][r["depth"] == d]) for d in (shallow, deep)}
        d = paired_interval(by[deep], by[shallow])
        verdicts.append(judge(d, high=0.0))
        ours.append(f"{activation}: excess(depth {deep}) - excess(depth {shallow}) = {d.text()}")
    preconditions = [
        Precondition(f"chains mixed (split R-hat <= {RHAT_MIXED} in >= 2 seeds) at >= 2 depths", enough,
                     "mixed depths " + "; ".join(mixed_depths)),
        Precondition("the shallow depth's KL above its shift floor (95 % interval of KL - floor > 0)",
                     bool(above) and all(ok for _, ok in above), "; ".join(t for t, _ in above) or "no mixed pair")]
    report.finding(
        DEPTH_CLAIM, combine(verdicts) if verdicts else "inconclusive",
        "excess = KL - shift floor (`zoo.experiments.analysis.depth_sweep.shift_null`); only seeds with R-hat <= "
        f"{RHAT_MIXED} count; unmixed: {', '.join(unmixed) or 'none'}; {config.num_chains} chains x "
        f"{config.draws_per_chain} draws (rule: the paired difference < 0)",
        f"{quoted('lod.falls')} with depth, 1 to 8 hidden layers at {quoted('lod.params')} parameters, "
        f"{quoted('lod.draws')} draws, {quoted('lod.seeds')} runs (Fig. 2)", "; ".join(ours), preconditions)
