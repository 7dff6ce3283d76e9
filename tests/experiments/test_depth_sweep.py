"""The depth sweep's analysis: Gaussian metrics, the shift null, the summary and Fig. 2 (the runs: tests/zoo/test_liberty_or_depth.py)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from zoo.experiments.analysis.depth_sweep import gaussian_metrics, plot_depth_sweep, shift_null, summarise


def test_gaussian_metrics_separate_correlated_from_independent_draws():
    rng = np.random.default_rng(0)
    independent = rng.normal(size=(400, 6)) * np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0])
    mixing = np.eye(6) + 0.9 * np.tri(6, k=-1)
    correlated = independent @ mixing.T
    m_ind, m_cor = gaussian_metrics(independent), gaussian_metrics(correlated)
    # with independent draws the KL is the estimator's own floor, the same size as its null
    assert m_ind["kl_diag_full"] < 3 * m_ind["kl_null"] + 0.05
    assert m_cor["kl_diag_full"] > 10 * m_ind["kl_diag_full"]
    assert m_cor["w2_gaussian"] > 10 * m_ind["w2_gaussian"]
    assert m_cor["ess_bulk_min"] > 250  # independent draws
    assert np.isnan(m_cor["rhat_max"])  # one chain: ArviZ's R-hat needs two
    assert m_cor["num_draws"] == 400
    assert m_ind["cov_min_eig"] == pytest.approx(np.linalg.eigvalsh(np.cov(independent.T))[0])
    assert m_cor["w2_extra_error"] == pytest.approx(m_cor["w2_diag"] - m_cor["w2_full"])
    # with independent draws the shift null is the independent-draws null's size
    assert m_ind["kl_null_shift"] < 3 * m_ind["kl_null"] + 0.05


def _ar1_chains(rng, chains, length, dim, rho):
    """(chains, length, dim) stationary AR(1) draws with unit marginal variance, independent coordinates."""
    out = np.empty((chains, length, dim))
    out[:, 0] = rng.standard_normal((chains, dim))
    for t in range(1, length):
        out[:, t] = rho * out[:, t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal((chains, dim))
    return out


def test_shift_null_keeps_each_coordinate_and_gives_the_floor_of_slowly_mixing_chains():
    rng = np.random.default_rng(1)
    slow = _ar1_chains(rng, chains=2, length=500, dim=20, rho=0.97)  # ESS about 15 per chain
    shifted = shift_null(slow, seed=3)
    assert shifted.shape == slow.shape
    np.testing.assert_array_equal(np.sort(shifted, axis=1), np.sort(slow, axis=1))  # same values per chain
    assert not np.array_equal(shifted, slow)
    m = gaussian_metrics(slow)
    # slow independent chains look correlated: the independent-draws null is far too low a floor,
    # the shift null (same autocorrelation) is of the size of the spurious KL
    assert m["kl_diag_full"] > 3 * m["kl_null"]
    assert m["kl_null_shift"] > 3 * m["kl_null"]
    assert 0.4 < m["kl_diag_full"] / m["kl_null_shift"] < 2.5
    assert m["ess_bulk_min"] < 100
    # a true cross-correlation lifts the KL clear of the shift null
    mixing = np.eye(20) + 0.9 * np.tri(20, k=-1)
    m_cor = gaussian_metrics(slow @ mixing.T)
    assert m_cor["kl_diag_full"] > 3 * m_cor["kl_null_shift"]
    # R-hat: about 1 for two chains of independent draws, large for two chains in different places
    fast = rng.standard_normal((2, 500, 20))
    assert gaussian_metrics(fast)["rhat_max"] < 1.05
    assert gaussian_metrics(fast + np.array([0.0, 3.0])[:, None, None])["rhat_max"] > 1.5


def test_summary_gives_the_mean_and_standard_error_over_seeds():
    runs = pd.DataFrame({
        "activation": ["relu"] * 4, "depth": [1, 1, 2, 2], "width": [19, 19, 7, 7],
        "num_weights": [97, 97, 93, 93], "seed": [0, 1, 0, 1], "kl_diag_full": [2.0, 4.0, 1.0, 1.0],
    })
    summary = summarise(runs, metrics=("kl_diag_full",))
    assert summary["kl_diag_full_mean"].tolist() == [3.0, 1.0]
    assert summary["kl_diag_full_se"].tolist() == pytest.approx([np.std([2, 4], ddof=1) / np.sqrt(2), 0.0])
    assert summary["n"].tolist() == [2, 2]
    fig = plot_depth_sweep(summary, metrics=("kl_diag_full",))
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_ydata(), [3.0, 1.0])


def test_kl_floor_exact_expectation_matches_simulation_and_the_papers_d_and_s():
    """The estimator's floor for an exactly diagonal Gaussian: the digamma closed form at the paper's D = 990 gives
    1,855 nats for S = 1,000 (the issue's "about 1,900") and 26.2 for S = 10,000; it matches simulation at a small
    D, tends to D (D - 1) / (4 S) for S >> D and is infinite when S <= D (singular covariance)."""
    from zoo.experiments.analysis.depth_sweep import kl_floor, simulated_kl_floor

    assert kl_floor(990, 1000) == pytest.approx(1855.23, abs=0.01)
    assert kl_floor(990, 10_000) == pytest.approx(26.23, abs=0.01)
    sims = simulated_kl_floor(10, 30, repeats=400, seed=1)
    se = sims.std(ddof=1) / np.sqrt(sims.size)
    assert abs(sims.mean() - kl_floor(10, 30)) < 3 * se
    assert kl_floor(10, 100_000) == pytest.approx(10 * 9 / (4 * 100_000), rel=0.01)
    assert kl_floor(5, 5) == np.inf


def test_mixed_summary_reports_the_kl_above_floor_of_mixed_seeds_only():
    from zoo.experiments.analysis.depth_sweep import mixed_summary

    runs = pd.DataFrame({
        "activation": ["relu"] * 6, "depth": [1, 1, 1, 2, 2, 2], "seed": [0, 1, 2, 0, 1, 2], "num_weights": [9] * 6,
        "kl_diag_full": [5.0, 6.0, 7.0, 3.0, 3.0, 3.0], "kl_null_shift": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        "rhat_max": [1.01, 1.02, 1.30, 1.2, 1.01, np.nan]})
    out = mixed_summary(runs).set_index("depth")
    assert out.loc[1, "n_mixed"] == 2 and bool(out.loc[1, "mixed"])  # seed 2's R-hat 1.30: left out
    assert out.loc[1, "kl_excess_mean"] == pytest.approx(4.5)  # (4 + 5) / 2; t_{0.975,1} = 12.706, SE 0.5
    assert out.loc[1, "kl_excess_hi"] == pytest.approx(4.5 + 12.7062 * 0.5, abs=1e-3)
    assert not out.loc[2, "mixed"] and np.isnan(out.loc[2, "kl_excess_mean"])  # one mixed seed (NaN R-hat: unmixed)
