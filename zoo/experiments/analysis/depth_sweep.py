"""The analysis of the Liberty-or-Depth depth sweep (section 4, appendix B, Fig. 2 and the blog's figures).

Given the NUTS draws of one run by chain, (C, S_c, D) (``evals.comparison.flat_draws``),
``gaussian_metrics`` fits a full-covariance Gaussian to the draws of all weights (appendix B jitter) and
gives KL(q_diag || q_full) with the closest diagonal (eq. 5-6), its floors (``shift_null``) and the blog's
Wasserstein extra error of the mean-field assumption. ``summarise`` gives the mean and standard error over seeds per depth; ``plot_depth_sweep``
draws Fig. 2. The runs themselves (training, NUTS) are `zoo.experiments.reproduce.liberty_or_depth`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import digamma

from inference.diagnostics import ess_rhat
from zoo.experiments.analysis.seed_summary import mean_se
from zoo.experiments.analysis.verdicts import t_interval
from base.errors import InputError
from evals.gaussians import (
    JITTER,
    closest_diagonal,
    fit_gaussian,
    kl_closest_diagonal,
    kl_marginal_diagonal,
    mean_field_extra_error,
    wasserstein2_gaussians,
)

__all__ = [
    "kl_floor",
    "simulated_kl_floor",
    "mixed_summary",
    "RHAT_MIXED",
    "shift_null",
    "gaussian_metrics",
    "summarise",
    "plot_depth_sweep",
]


# The empirical W2 of the blog's extra error solves an S x S assignment problem; more draws than
# this are thinned evenly for it (the Gaussian fit and the KLs use all of them).
W2_MAX_DRAWS = 1000


RHAT_MIXED = 1.05
"""A run's chains count as mixed when the largest split R-hat over its coordinates is at most this."""


def kl_floor(dim: int, num_draws: int) -> float:
    """The expected KL(q_diag || q_full) (eq. 5-6, `evals.gaussians.kl_closest_diagonal`) of the Gaussian fitted to
    ``num_draws`` = S independent draws of an exactly diagonal D-dimensional Gaussian (``dim`` = D), without
    jitter: the estimator's floor, what Fig. 2's procedure reads when the posterior has no correlations at all.

    The KL is invariant to rescaling each coordinate, so take unit variances; the centred scatter matrix is
    W ~ Wishart_D(n, I) with n = S - 1, and KL = 1/2 [sum_i log (W^-1)_ii + log det W]. Each 1 / (W^-1)_ii is
    chi-square with n - D + 1 degrees of freedom and log det W is a sum of independent log chi-square_{n-j+1},
    j = 1..D (Bartlett), with E log chi-square_k = psi(k / 2) + log 2, so

        E KL = 1/2 [sum_{j=1}^{D} psi((n - j + 1) / 2) - D psi((n - D + 1) / 2)]

    (about D (D - 1) / (4 S) when S >> D). At D = 990: 1,855 nats for S = 1,000, 26.2 for S = 10,000.
    Returns inf when S <= D (the empirical covariance is singular: only the jitter keeps the KL finite)."""
    n = int(num_draws) - 1
    dim = int(dim)
    if dim < 1:
        raise InputError("dim", dim, "a dimension >= 1")
    if n < 1:
        raise InputError("num_draws", num_draws, "at least 2 draws")
    if n < dim:
        return float("inf")
    j = np.arange(1, dim + 1)
    return float(0.5 * (np.sum(digamma((n - j + 1) / 2)) - dim * digamma((n - dim + 1) / 2)))


def simulated_kl_floor(dim: int, num_draws: int, repeats: int = 3, seed: int = 0) -> np.ndarray:
    """KL(q_diag || q_full) of Gaussians fitted (jitter 0) to ``num_draws`` standard-normal draws in ``dim``
    dimensions, ``repeats`` times: (repeats,) values whose mean estimates `kl_floor`."""
    rng = np.random.default_rng(seed)
    return np.array([kl_closest_diagonal(fit_gaussian(rng.standard_normal((num_draws, dim)), 0.0)[1])
                     for _ in range(repeats)])


def mixed_summary(runs: pd.DataFrame, rhat_max: float = RHAT_MIXED) -> pd.DataFrame:
    """Per (activation, depth), over the runs whose chains mixed (``rhat_max`` column <= `rhat_max`): n_runs,
    n_mixed, mixed (n_mixed >= 2: enough for an interval), and the 95 % t-interval over those seeds of
    ``kl_excess`` = kl_diag_full - kl_null_shift (the KL above the floor of draws as autocorrelated as these):
    kl_excess_mean, kl_excess_lo, kl_excess_hi (NaN where the depth is unmixed), and the mean kl_null_shift.
    A single-chain run (R-hat NaN) counts as unmixed."""
    rows = []
    for (activation, depth), g in runs.groupby(["activation", "depth"], sort=True):
        ok = g[g["rhat_max"] <= rhat_max]
        excess = t_interval((ok["kl_diag_full"] - ok["kl_null_shift"]).to_numpy())
        mixed = len(ok) >= 2
        rows.append({"activation": activation, "depth": depth, "num_weights": int(g["num_weights"].iloc[0]),
                     "n_runs": len(g), "n_mixed": len(ok), "mixed": mixed,
                     "kl_excess_mean": excess.mean if mixed else np.nan,
                     "kl_excess_lo": excess.lo if mixed else np.nan,
                     "kl_excess_hi": excess.hi if mixed else np.nan,
                     "kl_null_shift_mean": float(ok["kl_null_shift"].mean()) if mixed else np.nan})
    return pd.DataFrame(rows)


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

    by_chain = np.asarray(draws, dtype=np.float64)
    if by_chain.ndim == 2:
        by_chain = by_chain[None]
    if by_chain.ndim != 3:
        raise InputError.worded("draws", f"draws: expected a (C, S_c, D) or (S, D) array, got shape {np.shape(draws)}")
    pooled = by_chain.reshape(-1, by_chain.shape[-1])
    mean, cov = fit_gaussian(pooled, jitter)
    # the exact empirical W2 is an S x S assignment (O(S^3)): at most W2_MAX_DRAWS evenly spaced draws
    thinned = pooled[np.linspace(0, len(pooled) - 1, min(len(pooled), W2_MAX_DRAWS)).round().astype(int)]
    wasserstein = mean_field_extra_error(thinned, jitter, seed)
    null = np.random.default_rng(seed).standard_normal(pooled.shape)
    shifted = shift_null(by_chain, seed).reshape(pooled.shape)
    return {
        "kl_diag_full": kl_closest_diagonal(cov),
        "kl_full_marginal": kl_marginal_diagonal(cov),
        "kl_null": kl_closest_diagonal(fit_gaussian(null, jitter)[1]),
        "kl_null_shift": kl_closest_diagonal(fit_gaussian(shifted, jitter)[1]),
        "w2_diag": wasserstein["w2_diag"],
        "w2_full": wasserstein["w2_full"],
        "w2_extra_error": wasserstein["extra_error"],
        "w2_gaussian": wasserstein2_gaussians(*closest_diagonal(mean, cov), mean, cov),
        **ess_rhat(by_chain),
        "num_draws": pooled.shape[0],
        "cov_min_eig": float(np.linalg.eigvalsh(cov - jitter * np.eye(cov.shape[0]))[0]),
    }


def summarise(runs: pd.DataFrame,
              metrics=("kl_diag_full", "kl_null", "kl_null_shift", "kl_full_marginal", "w2_extra_error",
                       "w2_gaussian", "ess_bulk_min", "rhat_max", "nuts_accuracy")) -> pd.DataFrame:
    """Mean and standard error of the mean (sd / sqrt(n), ddof 1) over seeds per activation and depth.

    Args:
      runs: the table of ``run_depth_sweep``.
    Returns:
      one row per (activation, depth): width, num_weights, n (seeds), and {metric}_mean, {metric}_se.
    """
    summary = mean_se(runs, ["activation", "depth"], metrics)
    first = runs.groupby(["activation", "depth"], sort=True)[["width", "num_weights"]].first().reset_index()
    summary = first.merge(summary, on=["activation", "depth"])
    return summary[["activation", "depth", "width", "num_weights"] + list(summary.columns[4:])]


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
    from matplotlib.figure import Figure  # the object API: no pyplot, the backend is left alone

    titles = {"kl_diag_full": "KL(q_diag || q_full)", "w2_extra_error": "Wasserstein error (diag - full)",
              "w2_gaussian": "W2(q_diag, q_full), Gaussian", "kl_full_marginal": "KL(q_full || q_marg)"}
    fig = Figure(figsize=(5 * len(metrics), 3.6))
    axes = fig.subplots(1, len(metrics), squeeze=False)
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
