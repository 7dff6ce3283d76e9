"""LOO on the training data estimates the held-out log predictive density (so az.loo / az.compare of
`to_arviz(post, train)` mean what they say), and `log_predictive_density` is exact.

The model is well specified: Bayesian linear regression y = x w + b + noise with w, b drawn from the very
N(0, 1) prior and the noise sd the likelihood's, fitted by NUTS. PSIS-LOO's elpd_loo / n_train and the test
set's lpd / n_test both estimate the expected log predictive density of one new point, each with a standard
error over examples (ArviZ's se for LOO, sqrt(n var_i lpd_i) for the test set); they must agree within 3
combined standard errors (a z-test at 0.3 %, ignoring the O(1/n) gap between a posterior on n - 1 and on n
points), and Pareto k < 0.7 for every point (a Gaussian-linear model has no influential points at n = 60).
"""

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

import inference
from inference.arviz_compat import loo as psis_loo
from models import bnn, likelihoods, priors
from models.networks.mlp import mlp
from inference.predictive_density import log_predictive_density, predictive_density_table

pytestmark = pytest.mark.smoke  # the subset .ci/run runs on the newest stack

NOISE, N_TRAIN, N_TEST = 0.5, 60, 2000


@pytest.fixture(scope="module")
def blr():
    rng = np.random.default_rng(3)
    w, b = rng.normal(size=3), rng.normal()  # from the prior N(0, 1)
    x = rng.normal(size=(N_TRAIN + N_TEST, 3)).astype(np.float32)
    y = (x @ w + b + NOISE * rng.normal(size=len(x))).astype(np.float32)
    model = bnn(mlp((), 1), priors.normal(1.0), likelihoods.normal(NOISE), name="blr_loo", feature_shape=(3,))
    train, test = (x[:N_TRAIN], y[:N_TRAIN]), (x[N_TRAIN:], y[N_TRAIN:])
    post = inference.nuts(model, train, num_chains=2, num_warmup=200, draws_per_chain=200, seed=0, progress=False)
    return model, train, test, post


def test_loo_of_the_training_data_matches_the_held_out_lpd(blr):
    _, train, test, post = blr
    loo = psis_loo(inference.to_arviz(post, train), pointwise=True)
    held = log_predictive_density(post, test)
    assert held.num_samples == 400 and held.pointwise.shape == (N_TEST,)
    per_point_loo, per_point_test = loo.elpd / N_TRAIN, held.mean
    tolerance = 3 * np.hypot(loo.se / N_TRAIN, held.se / N_TEST)
    assert abs(per_point_loo - per_point_test) < tolerance, (per_point_loo, per_point_test, tolerance)
    assert np.all(np.asarray(loo.pareto_k) < 0.7)
    assert loo.elpd_i.shape == (N_TRAIN,) and loo.elpd == pytest.approx(loo.elpd_i.sum(), rel=1e-9)
    assert 3.0 < loo.p < 6.0  # 4 parameters, a weak prior


def test_log_predictive_density_is_log_mean_exp_of_the_draws(blr):
    _, _, test, post = blr
    x, y = test[0][:50], test[1][:50]
    draws = post.draws()
    f = np.asarray(x, np.float64) @ np.asarray(draws["mlp/~/linear_0/w"], np.float64)[..., 0].T \
        + np.asarray(draws["mlp/~/linear_0/b"], np.float64)[:, 0]  # (N, S)
    pointwise = logsumexp(norm.logpdf(np.asarray(y, np.float64)[:, None], f, NOISE), axis=1) - np.log(f.shape[1])
    got = log_predictive_density(post, (x, y))
    np.testing.assert_allclose(got.pointwise, pointwise, rtol=1e-5, atol=1e-5)
    assert got.lpd == pytest.approx(pointwise.sum(), rel=1e-5)
    assert got.se == pytest.approx(np.sqrt(50 * pointwise.var(ddof=1)), rel=1e-4)


def test_the_table_ranks_posteriors_by_held_out_lpd(blr):
    model, train, test, post = blr
    prior_only = inference.MCMCPosterior(model=model, feature_shape=(3,), samples={
        "mlp/~/linear_0/w": np.random.default_rng(0).normal(size=(1, 200, 3, 1)).astype(np.float32),
        "mlp/~/linear_0/b": np.random.default_rng(1).normal(size=(1, 200, 1)).astype(np.float32)})
    table = predictive_density_table({"prior": prior_only, "nuts": post}, test)
    assert list(table.index) == ["nuts", "prior"]
    assert table.loc["nuts", "lpd_diff"] == 0.0 and table.loc["prior", "lpd_diff"] > 10 * table.loc["prior", "se_diff"]
    assert table.loc["nuts", "lpd"] == pytest.approx(log_predictive_density(post, test).lpd)
    assert table.loc["nuts", "n"] == N_TEST
