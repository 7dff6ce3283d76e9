"""Gaussian fits, closest diagonal (eq. 5-6), KL and 2-Wasserstein distances."""

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from evals.gaussians import (
    closest_diagonal,
    empirical_wasserstein2,
    fit_gaussian,
    kl_closest_diagonal,
    kl_gaussians,
    kl_marginal_diagonal,
    mean_field_extra_error,
    wasserstein2_gaussians,
)


def _random_cov(rng, dim):
    factor = rng.normal(size=(dim, dim))
    return factor @ factor.T + 0.5 * np.eye(dim)


def _correlated_2d(s1=1.5, s2=0.4, rho=0.8):
    return np.array([[s1**2, rho * s1 * s2], [rho * s1 * s2, s2**2]])


def test_fit_gaussian_is_the_unbiased_empirical_covariance_plus_jitter():
    draws = np.random.default_rng(0).normal(size=(40, 3))
    mean, cov = fit_gaussian(draws, jitter=1e-3)
    np.testing.assert_allclose(mean, draws.mean(0))
    np.testing.assert_allclose(cov, np.cov(draws, rowvar=False) + 1e-3 * np.eye(3))
    # fewer draws than dimensions: singular without jitter, positive definite with it
    few = np.random.default_rng(1).normal(size=(5, 10))
    assert np.linalg.eigvalsh(fit_gaussian(few, jitter=0.0)[1]).min() < 1e-12
    assert np.linalg.eigvalsh(fit_gaussian(few)[1]).min() > 0
    with pytest.raises(ValueError, match="draws"):
        fit_gaussian(np.array([[0.0, np.nan], [1.0, 2.0]]))


def test_closest_diagonal_uses_the_conditional_variances():
    s1, s2, rho = 1.5, 0.4, 0.8
    mean, var = closest_diagonal(np.array([1.0, -2.0]), _correlated_2d(s1, s2, rho))
    np.testing.assert_array_equal(mean, [1.0, -2.0])  # eq. 5
    np.testing.assert_allclose(var, [s1**2 * (1 - rho**2), s2**2 * (1 - rho**2)])  # eq. 6
    np.testing.assert_allclose(closest_diagonal(np.zeros(3), np.diag([1.0, 2.0, 3.0]))[1], [1.0, 2.0, 3.0])


def test_kl_closest_diagonal_of_a_diagonal_gaussian_is_zero():
    assert kl_closest_diagonal(np.diag([0.1, 2.0, 30.0, 4e-4])) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("rho", [0.3, -0.8, 0.99])
def test_kl_closest_diagonal_of_a_correlated_2d_gaussian_is_analytic(rho):
    assert kl_closest_diagonal(_correlated_2d(rho=rho)) == pytest.approx(-0.5 * np.log(1 - rho**2), rel=1e-10)


def test_kl_closest_diagonal_closed_form_equals_the_general_gaussian_kl():
    rng = np.random.default_rng(2)
    mean, cov = rng.normal(size=6), _random_cov(rng, 6)
    _, var = closest_diagonal(mean, cov)
    assert kl_closest_diagonal(cov) == pytest.approx(kl_gaussians(mean, var, mean, cov), rel=1e-10)
    assert kl_closest_diagonal(cov) > 0.1


def test_kl_to_the_marginal_diagonal_is_the_log_det_of_the_correlation_matrix():
    rng = np.random.default_rng(9)
    mean, cov = rng.normal(size=5), _random_cov(rng, 5)
    sd = np.sqrt(np.diag(cov))
    expected = -0.5 * np.linalg.slogdet(cov / np.outer(sd, sd))[1]
    assert kl_marginal_diagonal(cov) == pytest.approx(expected, rel=1e-10)
    assert kl_marginal_diagonal(cov) == pytest.approx(kl_gaussians(mean, cov, mean, np.diag(cov)), rel=1e-10)
    assert kl_marginal_diagonal(_correlated_2d(rho=0.6)) == pytest.approx(-0.5 * np.log(1 - 0.36), rel=1e-10)
    assert kl_marginal_diagonal(np.diag([3.0, 0.2])) == pytest.approx(0.0, abs=1e-12)
    # it is the minimum of KL(q_full || diagonal) over the diagonal variances
    result = minimize(lambda t: kl_gaussians(mean, cov, mean, np.exp(t)), np.zeros(5), method="BFGS")
    np.testing.assert_allclose(np.exp(result.x), np.diag(cov), rtol=1e-4)
    # and differs from KL(q_diag || q_full) of the closest diagonal beyond 2-D
    assert abs(kl_marginal_diagonal(cov) - kl_closest_diagonal(cov)) > 0.01


def test_kl_gaussians_matches_the_univariate_formula_and_is_zero_on_itself():
    m0, s0, m1, s1 = 0.3, 0.7, -1.0, 1.9
    expected = np.log(s1 / s0) + (s0**2 + (m0 - m1) ** 2) / (2 * s1**2) - 0.5
    assert kl_gaussians([m0], [[s0**2]], [m1], [[s1**2]]) == pytest.approx(expected, rel=1e-12)
    rng = np.random.default_rng(3)
    mean, cov = rng.normal(size=4), _random_cov(rng, 4)
    assert kl_gaussians(mean, cov, mean, cov) == pytest.approx(0.0, abs=1e-10)
    with pytest.raises(ValueError, match="S1"):
        kl_gaussians(mean, cov, mean, -cov)


def test_closest_diagonal_minimises_kl_over_all_diagonal_gaussians():
    rng = np.random.default_rng(4)
    mean, cov = rng.normal(size=3), _random_cov(rng, 3)

    def objective(theta):
        return kl_gaussians(theta[:3], np.exp(theta[3:]), mean, cov)

    result = minimize(objective, np.zeros(6), method="BFGS", options={"gtol": 1e-10})
    closed_mean, closed_var = closest_diagonal(mean, cov)
    np.testing.assert_allclose(result.x[:3], closed_mean, atol=1e-4)
    np.testing.assert_allclose(np.exp(result.x[3:]), closed_var, rtol=1e-4)
    assert result.fun == pytest.approx(kl_closest_diagonal(cov), abs=1e-8)
    # the marginal variances (moment matching) are worse in this direction of the KL
    assert kl_gaussians(mean, np.diag(cov), mean, cov) > kl_closest_diagonal(cov) + 0.01


def test_wasserstein_with_equal_covariances_is_the_mean_distance():
    rng = np.random.default_rng(5)
    cov = _random_cov(rng, 4)
    m0, m1 = rng.normal(size=4), rng.normal(size=4)
    assert wasserstein2_gaussians(m0, cov, m1, cov) == pytest.approx(np.linalg.norm(m0 - m1), rel=1e-6)


def test_wasserstein_of_diagonal_and_commuting_gaussians_has_its_closed_form():
    m0, m1 = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, -1.0])
    v0, v1 = np.array([1.0, 4.0, 0.25]), np.array([9.0, 1.0, 0.25])
    expected = np.sqrt(np.sum((m0 - m1) ** 2) + np.sum((np.sqrt(v0) - np.sqrt(v1)) ** 2))
    assert wasserstein2_gaussians(m0, v0, m1, v1) == pytest.approx(expected, rel=1e-12)
    assert wasserstein2_gaussians(m0, np.diag(v0), m1, np.diag(v1)) == pytest.approx(expected, rel=1e-10)
    # commuting (same eigenvectors): the same formula in the rotated basis
    rotation = np.linalg.qr(np.random.default_rng(6).normal(size=(3, 3)))[0]
    s0, s1 = rotation @ np.diag(v0) @ rotation.T, rotation @ np.diag(v1) @ rotation.T
    assert wasserstein2_gaussians(m0, s0, m1, s1) == pytest.approx(expected, rel=1e-8)
    assert wasserstein2_gaussians(m1, s1, m0, s0) == pytest.approx(expected, rel=1e-8)


def test_empirical_wasserstein_is_exact_optimal_transport():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(30, 3))
    shift = np.array([0.5, -1.0, 2.0])
    assert empirical_wasserstein2(x, x + shift) == pytest.approx(np.linalg.norm(shift), rel=1e-10)
    x, y = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    brute = min(np.mean(np.sum((x - y[list(p)]) ** 2, axis=1)) for p in itertools.permutations(range(6)))
    assert empirical_wasserstein2(x, y) == pytest.approx(np.sqrt(brute), rel=1e-10)


def test_mean_field_extra_error_is_large_for_correlated_draws_only():
    rng = np.random.default_rng(8)
    correlated = rng.multivariate_normal(np.zeros(2), _correlated_2d(1.0, 1.0, 0.95), size=400)
    independent = rng.normal(size=(400, 2))
    for diagonal in ("marginal", "closest"):
        err_correlated = mean_field_extra_error(correlated, seed=1, diagonal=diagonal)
        err_independent = mean_field_extra_error(independent, seed=1, diagonal=diagonal)
        assert set(err_correlated) == {"w2_diag", "w2_full", "extra_error"}
        assert err_correlated["extra_error"] == pytest.approx(err_correlated["w2_diag"] - err_correlated["w2_full"])
        # rho = 0.95: the marginal diagonal puts mass where the draws have none (the off-diagonal
        # corners); the closest diagonal has sd sqrt(1 - 0.95^2) = 0.31 on both axes, far too narrow
        assert err_correlated["extra_error"] > 0.3
        assert abs(err_independent["extra_error"]) < 0.1
    with pytest.raises(ValueError, match="diagonal"):
        mean_field_extra_error(independent, diagonal="full")
