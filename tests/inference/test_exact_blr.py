"""Exactness through the bridge: Bayesian linear regression with a Normal prior and known noise has a
closed-form Gaussian posterior N(m, Lambda^-1), Lambda = I/s^2 + Phi^T Phi / sigma^2,
m = Lambda^-1 Phi^T y / sigma^2 (Phi = [x, 1]). The mean-field optimum of KL(q || p) for a Gaussian p has
the exact mean and variances 1 / Lambda_ii; NUTS must recover the mean and the full covariance."""

import arviz as az
import numpy as np
import optax
import pytest

import inference
from models import bnn, likelihoods, priors
from models.networks.mlp import mlp

PRIOR_SD, NOISE = 1.0, 0.5


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5]) + 0.3 + NOISE * rng.normal(size=40)).astype(np.float32)
    phi = np.c_[x, np.ones(40)].astype(np.float64)
    precision = np.eye(4) / PRIOR_SD**2 + phi.T @ phi / NOISE**2
    cov = np.linalg.inv(precision)
    mean = cov @ phi.T @ y / NOISE**2
    model = bnn(mlp((), 1), priors.normal(PRIOR_SD), likelihoods.normal(NOISE), name="blr", feature_shape=(3,))
    return x, y, model, mean, cov, precision


def _stack(draws):
    """Site draws -> (S, 4) in the order [w_0, w_1, w_2, b]."""
    return np.c_[np.asarray(draws["mlp/~/linear_0/w"])[..., 0], np.asarray(draws["mlp/~/linear_0/b"])]


def test_mean_field_recovers_exact_mean_and_diagonal_precision(problem):
    x, y, model, mean, cov, precision = problem
    schedule = optax.exponential_decay(2e-2, transition_steps=4000, decay_rate=0.01)
    post = inference.fit(model, inference.mean_field(model, init_scale=0.1), (x, y), steps=4000, batch_size=40,
                         num_particles=16, optimizer=optax.adam(schedule), progress=False, seed=1)
    loc = np.r_[post.params["mlp/~/linear_0/w_auto_loc"][:, 0], post.params["mlp/~/linear_0/b_auto_loc"]]
    scale = np.r_[post.params["mlp/~/linear_0/w_auto_scale"][:, 0], post.params["mlp/~/linear_0/b_auto_scale"]]
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(loc - mean) < 0.05 * sd), (loc, mean)
    np.testing.assert_allclose(scale, 1 / np.sqrt(np.diag(precision)), rtol=0.05)


def test_nuts_recovers_exact_mean_and_covariance(problem):
    x, y, model, mean, cov, _ = problem
    post = inference.nuts(model, (x, y), num_chains=2, num_warmup=300, draws_per_chain=1000, seed=0, progress=False)
    draws = _stack(post.draws())
    by_chain = draws.reshape(2, -1, 4)
    ess = np.array([az.ess(by_chain[..., i]) for i in range(4)])
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * sd / np.sqrt(ess))
    emp = np.cov(draws.T)
    # sd of a covariance estimate ~ sqrt((S_ii S_jj + S_ij^2) / ESS)
    tol = 4 * np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / ess.min())
    assert np.all(np.abs(emp - cov) < tol)
    assert post.info.divergences == 0
