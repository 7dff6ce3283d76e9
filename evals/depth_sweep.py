"""The Liberty-or-Depth depth sweep (section 4, appendix B, Fig. 2 and the blog's figures).

For every activation, depth and seed: two moons (noise 0.1) -> an MLP with ``depth`` hidden layers of
the largest width that keeps it under ``weight_budget`` weights (biases included), unit Normal prior
-> mean-field VI pre-training (Adam, batch 64, 10 epochs, the full unweighted ELBO) -> NUTS started
from that posterior -> a full-covariance Gaussian fitted to the NUTS draws of all weights (appendix B
jitter) -> KL(q_diag || q_full) with the closest diagonal (eq. 5-6) and the blog's Wasserstein extra
error of the mean-field assumption. ``summarise`` gives the mean and standard error over seeds per
depth; ``plot_depth_sweep`` draws Fig. 2.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from evals.gaussians import (
    JITTER,
    closest_diagonal,
    fit_gaussian,
    kl_closest_diagonal,
    kl_marginal_diagonal,
    mean_field_extra_error,
    wasserstein2_gaussians,
)
from evals.metrics import accuracy
from models.networks.budget_mlp import widest_mlp_under_budget

__all__ = [
    "DepthSweepConfig",
    "QUICK",
    "MEDIUM",
    "FULL",
    "shift_null",
    "gaussian_metrics",
    "run_one",
    "run_depth_sweep",
    "summarise",
    "plot_depth_sweep",
]


@dataclass(frozen=True)
class DepthSweepConfig:
    """Settings of the sweep. The paper's values are the defaults (``FULL``); ``QUICK`` shrinks them.

    depths: numbers of hidden layers; activations: names in ``models.networks.mlp.ACTIVATIONS``;
    seeds: one run per seed (the paper: 20); weight_budget: every model has fewer weights than this;
    n_data, noise: two moons (10,000 points, noise 0.1; 20% are held out for test accuracy);
    svi_epochs, batch_size, learning_rate, init_scale: mean-field pre-training (Adam);
    num_warmup, num_samples, num_chains, max_tree_depth, target_accept_prob: NUTS (the paper: 100
      burn-in, 1000 draws, target 0.8); num_samples is per chain, and the Gaussian fit pools the
      S = num_chains * num_samples draws;
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
    num_samples: int = 1000
    num_chains: int = 1
    max_tree_depth: int = 10
    target_accept_prob: float = 0.8
    jitter: float = JITTER


FULL = DepthSweepConfig()
# Under 10 minutes on 2 CPU cores: 1,000 two-moons points instead of 10,000 and a 100-parameter
# budget instead of 1,000 (widths 19, 7, 5, 4 for depths 1-4), 3 seeds instead of 20. NUTS runs 2
# chains in parallel (one per host device; the `zoo` CLI sets 2), each started from its own draw of
# the SVI posterior, with 400 warm-up steps, trees up to depth 8 (255 leapfrog steps; depth 7 left
# the deeper nets unmixed, R-hat up to 1.8) and 400 draws per chain: S = 800 pooled draws for
# D <= 97 parameters (S / D >= 8), so the independent-draws floor ``kl_null`` (about D^2 / 4S) is
# 2-3 nats. The deeper nets still mix slowly (the first layer's weights; see docs/liberty-or-depth.md),
# hence ``kl_null_shift``, ``ess_bulk_min`` and ``rhat_max`` in every row. With 800 training points
# 100 epochs are 1,200 Adam steps, about the paper's 10 epochs of 10,000 points (1,560 steps).
QUICK = replace(
    FULL, depths=(1, 2, 3, 4), activations=("relu",), seeds=(0, 1, 2), weight_budget=100, n_data=1000,
    svi_epochs=100, num_warmup=400, num_samples=400, num_chains=2, max_tree_depth=8,
)
# QUICK's models and seeds with longer chains (1,000 warm-up steps, 1,000 draws per chain: S = 2,000,
# S / D >= 20), about 20 minutes on 2 CPU cores: does QUICK's answer survive better mixing?
MEDIUM = replace(QUICK, num_warmup=1000, num_samples=1000)


# The empirical W2 of the blog's extra error solves an S x S assignment problem; more draws than
# this are thinned evenly for it (the Gaussian fit and the KLs use all of them).
W2_MAX_DRAWS = 1000


def _chain_draws(posterior) -> np.ndarray:
    """(C, S_c, D) NUTS draws by chain: every site flattened and concatenated in site order."""
    return np.concatenate([np.asarray(v).reshape(v.shape[:2] + (-1,)) for v in posterior.samples.values()],
                          axis=-1)


def shift_null(draws, seed: int = 0) -> np.ndarray:
    """The draws with their coordinates decoupled but each coordinate's autocorrelation kept.

    Every coordinate of every chain is rotated in time by its own uniformly random offset
    (``np.roll``), so the cross-covariance between coordinates is zero in expectation while each
    coordinate's marginal and autocorrelation (hence its ESS) are unchanged. ``kl_closest_diagonal``
    of a Gaussian fitted to these draws is the value KL(q_diag || q_full) (eq. 5-6) takes for a truly
    diagonal posterior sampled by a chain that mixes as slowly as this one: the floor a KL must clear
    to mean something. With independent draws it matches the standard-normal null ``kl_null``.

    Args:
      draws: (C, S_c, D) draws by chain, or (S, D) draws of one chain.
      seed: seed of the offsets.
    Returns:
      an array of the shape of ``draws``.
    """
    draws = np.asarray(draws, dtype=np.float64)
    by_chain = draws[None] if draws.ndim == 2 else draws
    num_chains, length, dim = by_chain.shape
    offsets = np.random.default_rng(seed).integers(0, length, size=(num_chains, dim))
    index = (np.arange(length)[None, :, None] - offsets[:, None, :]) % length
    shifted = np.take_along_axis(by_chain, index, axis=1)
    return shifted[0] if draws.ndim == 2 else shifted


def gaussian_metrics(draws, jitter: float = JITTER, seed: int = 0) -> dict:
    """Every Gaussian summary of one run's posterior draws (section 4, appendix B, the blog).

    Args:
      draws: (C, S_c, D) draws by chain (pooled to S = C * S_c draws for the Gaussian fit) or (S, D)
        draws of one chain.
      jitter: diagonal jitter of the Gaussian fit (appendix B).
      seed: seed of the nulls and of the W2 estimate's Gaussian draws.
    Returns:
      {"kl_diag_full": KL(q_diag || q_full), eq. 5-6's closest diagonal (Fig. 2);
       "kl_full_marginal": KL(q_full || N(mu, diag Sigma)), the blog's direction;
       "kl_null": kl_diag_full of S independent standard-normal draws in D dimensions, the value the
         estimator gives when the posterior is exactly diagonal and the draws independent (its
         finite-sample floor, about D (D - 1) / (4 S); the KL is invariant to rescaling each
         coordinate, so the null needs no variances);
       "kl_null_shift": kl_diag_full of ``shift_null(draws)``, the floor for draws as autocorrelated
         as these (>= kl_null when the chain mixes slowly);
       "w2_diag", "w2_full", "w2_extra_error": the blog's sample-based W2 extra error
         (``evals.gaussians.mean_field_extra_error``, marginal diagonal) on at most ``W2_MAX_DRAWS``
         evenly spaced pooled draws;
       "w2_gaussian": closed-form W2(q_diag, q_full) with eq. 5-6's diagonal;
       "ess_bulk_min": the smallest bulk ESS over the D coordinates (all chains);
       "rhat_max": the largest rank-normalised split R-hat over the D coordinates (NaN for a single
         chain: ArviZ needs two);
       "num_draws": S;
       "cov_min_eig": the smallest eigenvalue of the empirical covariance before the jitter (when it is
         far above ``jitter``, the jitter does not set the KL)}.
    """
    import arviz as az

    by_chain = np.asarray(draws, dtype=np.float64)
    if by_chain.ndim == 2:
        by_chain = by_chain[None]
    if by_chain.ndim != 3:
        raise ValueError(f"draws: expected a (C, S_c, D) or (S, D) array, got shape {np.shape(draws)}")
    pooled = by_chain.reshape(-1, by_chain.shape[-1])
    mean, cov = fit_gaussian(pooled, jitter)
    # the exact empirical W2 is an S x S assignment (O(S^3)): at most W2_MAX_DRAWS evenly spaced draws
    thinned = pooled[np.linspace(0, len(pooled) - 1, min(len(pooled), W2_MAX_DRAWS)).round().astype(int)]
    wasserstein = mean_field_extra_error(thinned, jitter, seed)
    null = np.random.default_rng(seed).standard_normal(pooled.shape)
    shifted = shift_null(by_chain, seed).reshape(pooled.shape)
    dataset = az.convert_to_dataset({"w": by_chain})
    return {
        "kl_diag_full": kl_closest_diagonal(cov),
        "kl_full_marginal": kl_marginal_diagonal(cov),
        "kl_null": kl_closest_diagonal(fit_gaussian(null, jitter)[1]),
        "kl_null_shift": kl_closest_diagonal(fit_gaussian(shifted, jitter)[1]),
        "w2_diag": wasserstein["w2_diag"],
        "w2_full": wasserstein["w2_full"],
        "w2_extra_error": wasserstein["extra_error"],
        "w2_gaussian": wasserstein2_gaussians(*closest_diagonal(mean, cov), mean, cov),
        "ess_bulk_min": float(az.ess(dataset, method="bulk")["w"].min()),
        "rhat_max": float(az.rhat(dataset)["w"].max()),
        "num_draws": pooled.shape[0],
        "cov_min_eig": float(np.linalg.eigvalsh(cov - jitter * np.eye(cov.shape[0]))[0]),
    }


def run_one(config: DepthSweepConfig, depth: int, activation: str, seed: int, progress: bool = False) -> dict:
    """One run of the sweep: pre-train by mean-field SVI, NUTS from it, Gaussian summaries of the draws.

    The model is ``zoo.get("mlp", data="two_moons", hidden=(width,) * depth, activation=...)`` with a
    unit Normal prior on every weight and bias, width from ``widest_mlp_under_budget`` (biases
    counted); the data are re-drawn with the run's seed.
    Returns:
      a dict (one table row): activation, depth, width, num_weights (D), seed, the entries of
      ``gaussian_metrics`` of the (num_chains, num_samples, D) draws, nuts_accuracy (test set,
      posterior mean predictive), divergences (all chains), mean_leapfrog_steps, svi_mean_sd and
      nuts_mean_sd (the average marginal standard deviation of a weight under the pre-trained
      mean-field posterior and under NUTS), svi_s, nuts_s.
    """
    import optax

    import zoo
    from inference import fit, mean_field, nuts

    width = widest_mlp_under_budget(depth, budget=config.weight_budget)
    entry = zoo.get("mlp", data="two_moons", data_kwargs={"n": config.n_data, "noise": config.noise, "seed": seed},
                    hidden=(width,) * depth, activation=activation, prior_scale=1.0)
    steps = config.svi_epochs * (len(entry.train.y) // config.batch_size)
    t0 = time.perf_counter()
    svi = fit(entry.model, mean_field(entry.model, init_scale=config.init_scale), entry.train, steps=steps,
              batch_size=config.batch_size, optimizer=optax.adam(config.learning_rate), seed=seed,
              progress=progress)
    svi_s = time.perf_counter() - t0
    mcmc = nuts(entry.model, entry.train, init=svi, num_chains=config.num_chains, num_warmup=config.num_warmup,
                num_samples=config.num_samples, seed=seed, max_tree_depth=config.max_tree_depth,
                target_accept_prob=config.target_accept_prob, progress=progress)
    draws = _chain_draws(mcmc)
    svi_sd = np.concatenate([np.asarray(v).std(0).ravel() for v in svi.draws(200, seed=seed).values()])
    probs = mcmc.predict(entry.test.x, num_samples=100)
    return {
        "activation": activation, "depth": depth, "width": width, "num_weights": draws.shape[-1], "seed": seed,
        **gaussian_metrics(draws, config.jitter, seed),
        "nuts_accuracy": accuracy(probs.mean(0), entry.test.y),
        "divergences": mcmc.info["divergences"], "mean_leapfrog_steps": mcmc.info["mean_leapfrog_steps"],
        "svi_mean_sd": float(svi_sd.mean()), "nuts_mean_sd": float(draws.reshape(-1, draws.shape[-1]).std(0).mean()),
        "svi_s": svi_s, "nuts_s": mcmc.info["nuts_s"],
    }


def run_depth_sweep(config: DepthSweepConfig = QUICK, log=print) -> pd.DataFrame:
    """Every (activation, depth, seed) run of ``config``: a DataFrame with one row per run
    (columns of ``run_one``); ``df.attrs["config"]`` holds the config as a dict."""
    rows = []
    for activation in config.activations:
        for depth in config.depths:
            for seed in config.seeds:
                rows.append(run_one(config, depth, activation, seed))
                if log is not None:
                    row = rows[-1]
                    log(f"{activation} depth {depth} (width {row['width']}, {row['num_weights']} weights) "
                        f"seed {seed}: KL {row['kl_diag_full']:.3f} (null {row['kl_null']:.3f}, "
                        f"shift null {row['kl_null_shift']:.3f}), W2 extra {row['w2_extra_error']:.4f}, "
                        f"ESS min {row['ess_bulk_min']:.0f}, R-hat max {row['rhat_max']:.3f}, "
                        f"acc {row['nuts_accuracy']:.3f}, {row['divergences']} divergences, "
                        f"{row['svi_s'] + row['nuts_s']:.0f} s")
    table = pd.DataFrame(rows)
    table.attrs["config"] = asdict(config)
    return table


def summarise(runs: pd.DataFrame,
              metrics=("kl_diag_full", "kl_null", "kl_null_shift", "kl_full_marginal", "w2_extra_error",
                       "w2_gaussian", "ess_bulk_min", "rhat_max", "nuts_accuracy")) -> pd.DataFrame:
    """Mean and standard error of the mean (sd / sqrt(n), ddof 1) over seeds per activation and depth.

    Args:
      runs: the table of ``run_depth_sweep``.
    Returns:
      one row per (activation, depth): width, num_weights, n (seeds), and {metric}_mean, {metric}_se.
    """
    grouped = runs.groupby(["activation", "depth"], sort=True)
    out = grouped[["width", "num_weights"]].first()
    out["n"] = grouped.size()
    for metric in metrics:
        out[f"{metric}_mean"] = grouped[metric].mean()
        out[f"{metric}_se"] = grouped[metric].std(ddof=1) / np.sqrt(out["n"])
    return out.reset_index()


def plot_depth_sweep(summary: pd.DataFrame, metrics=("kl_diag_full", "w2_extra_error", "w2_gaussian")):
    """Fig. 2 (KL(q_diag || q_full), eq. 5-6) and the blog's Wasserstein-error figure: mean vs depth,
    one line per activation, shaded +- one standard error; the KL panel also draws the mean
    ``kl_null_shift`` (dashed) when ``summary`` has it.

    Args:
      summary: the table of ``summarise`` (one row per activation and depth).
      metrics: the ``{metric}_mean`` / ``{metric}_se`` columns to draw, one panel each.
    Returns:
      the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    titles = {"kl_diag_full": "KL(q_diag || q_full)", "w2_extra_error": "Wasserstein error (diag - full)",
              "w2_gaussian": "W2(q_diag, q_full), Gaussian", "kl_full_marginal": "KL(q_full || q_marg)"}
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for activation, rows in summary.groupby("activation"):
            mean, se = rows[f"{metric}_mean"].to_numpy(), rows[f"{metric}_se"].fillna(0).to_numpy()
            ax.plot(rows["depth"], mean, marker="o", label=activation)
            ax.fill_between(rows["depth"], mean - se, mean + se, alpha=0.25)
            if metric == "kl_diag_full" and "kl_null_shift_mean" in rows:
                ax.plot(rows["depth"], rows["kl_null_shift_mean"], linestyle="--", color=ax.lines[-1].get_color(),
                        label=f"{activation}: floor (shift null)")
        ax.set_xticks(sorted(summary["depth"].unique()))
        ax.set_xlabel("hidden layers (about equal number of weights)")
        ax.set_title(titles.get(metric, metric))
        ax.legend()
    fig.tight_layout()
    return fig


def reproduce_liberty_or_depth(out_dir, setting: str = "quick", log=print, **overrides) -> dict:
    """Every Liberty-or-Depth experiment, written to ``out_dir`` (the `zoo reproduce liberty-or-depth` job).

    1. Fig. 1: simulated covariance of products of L = 1, 5, 20 mean-field 4x4 layers (10,000 draws).
    2. eq. 14 / 16-17 vs the simulation (``closed_form_check``) for L = 2, 3, 5.
    3. The blog's heatmap: product-matrix covariance of a trained 10-layer mean-field linear network
       on digits (quick: fewer SVI steps).
    4. The depth sweep (``QUICK``, ``MEDIUM`` or ``FULL``), its per-depth summary and Fig. 2.

    Args:
      out_dir: folder for the files (created).
      setting: "quick" (under 10 minutes on 2 CPU cores), "medium" (QUICK with longer chains,
        about 20 minutes) or "full" (the paper's settings: hours).
      log: a callable taking progress lines, or None.
      **overrides: fields of `DepthSweepConfig` replacing the setting's (e.g. ``seeds=(0, 1)``,
        ``activations=("relu", "linear")``).
    Returns:
      {"closed_forms": DataFrame, "runs": DataFrame, "summary": DataFrame, "files": [paths]}.
    """
    from pathlib import Path

    from evals.product_covariance import (
        closed_form_check,
        deep_linear_product_covariance,
        plot_covariance_heatmaps,
        simulate_product_covariance,
    )

    settings = {"quick": QUICK, "medium": MEDIUM, "full": FULL}
    if setting not in settings:
        raise ValueError(f"setting: expected 'quick', 'medium' or 'full', got {setting!r}")
    log = log or (lambda line: None)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
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

    runs = run_depth_sweep(replace(settings[setting], **overrides), log=log)
    summary = summarise(runs)
    runs.to_csv(out / "depth_sweep_runs.csv", index=False)
    summary.to_csv(out / "depth_sweep_summary.csv", index=False)
    files += [str(out / "depth_sweep_runs.csv"), str(out / "depth_sweep_summary.csv")]
    save_figure(plot_depth_sweep(summary), "fig2_depth_sweep.png")
    log("depth sweep (mean and standard error over seeds):\n" + summary.to_string(index=False))
    return {"closed_forms": closed, "runs": runs, "summary": summary, "files": files}
