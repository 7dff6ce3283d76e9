"""Variance-network guides: zero-mean N(0, sigma²) (eq. 12) and N(mu, alpha mu²) (eq. 17-19)."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import models
from inference import SVIPosterior, fit
from inference.elbo import elbo_terms
from inference.zero_mean import predictions_by_procedure, variance_layers, zero_mean
from models.networks.mlp import mlp
from models.variance import ZERO_MEAN_KL, log_uniform_prior

SITE = "mlp/~/linear_0/w"
KEY = jax.random.PRNGKey(0)


def _model(variance_prior=None):
    prior = models.priors.by_pattern({SITE: variance_prior or log_uniform_prior()}, default=models.priors.normal(1.0))
    return models.bnn(mlp([6], 3), prior, feature_shape=(4,))


def _data(n=60):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(n, 4)).astype(np.float32)
    return x, np.argmax(x[:, :3] ** 2, axis=1).astype(np.int32)


def test_locations_are_exactly_zero_after_training():
    x, y = _data()
    model = _model()
    guide = zero_mean(model, variance_sites=[SITE])
    sigma0 = np.asarray(guide.init_params(KEY, x)[f"{SITE}_auto_sigma"])
    post = fit(model, guide, (x, y), steps=80, batch_size=20, optimizer=optax.adam(3e-2), progress=False)
    assert f"{SITE}_auto_loc" not in post.params
    assert not np.allclose(post.params[f"{SITE}_auto_sigma"], sigma0)  # sigma did train
    median, q, draws = jax.jit(lambda params: (  # jitted: one compile, not one per operation
        guide.median(params)[SITE], guide.quantiles(params, [0.2, 0.8])[SITE],
        guide.sample_posterior(jax.random.PRNGKey(3), params, x, sample_shape=(4000,))[SITE]))(post.params)
    assert np.all(np.asarray(median) == 0.0)
    np.testing.assert_allclose(q[0], -q[1], rtol=1e-6)
    z = np.asarray(draws.mean(0)) / (np.asarray(post.params[f"{SITE}_auto_sigma"]) / np.sqrt(4000))
    assert np.abs(z).max() < 5.0  # the sample mean is 0 within 5 standard errors, for every weight


def test_kl_to_log_uniform_is_the_appendix_c_constant_for_every_sigma():
    x, y = _data(10)
    kls = {}
    for prior_name, variance_prior in (("log_uniform", None), ("normal", models.priors.normal(1.0))):
        model = _model(variance_prior)
        guide = zero_mean(model, variance_sites=[SITE])
        params = guide.init_params(KEY, x)
        for factor in (1.0, 7.0):
            p = dict(params, **{f"{SITE}_auto_sigma": params[f"{SITE}_auto_sigma"] * factor})
            kls[prior_name, factor] = float(elbo_terms(jax.random.PRNGKey(0), p, model, guide, x, y, len(x))[1])
    assert kls["log_uniform", 7.0] == pytest.approx(kls["log_uniform", 1.0], abs=1e-3)
    assert abs(kls["normal", 7.0] - kls["normal", 1.0]) > 1.0
    # log-uniform minus Normal(0, 1) prior on the variance site: 24 ZERO_MEAN_KL - sum KL(N(0, s²) || N(0, 1))
    sigma = np.asarray(params[f"{SITE}_auto_sigma"], np.float64)
    kl_normal = np.sum(-np.log(sigma) + 0.5 * sigma**2 - 0.5)
    assert kls["log_uniform", 1.0] - kls["normal", 1.0] == pytest.approx(24 * ZERO_MEAN_KL - kl_normal, abs=1e-3)


@pytest.mark.parametrize("granularity,alpha_shape", [("layer", ()), ("neuron", (6,)), ("weight", (4, 6))])
def test_variance_layers_scale_is_sqrt_alpha_abs_mu(granularity, alpha_shape):
    x, y = _data(10)
    guide = variance_layers(_model(), variance_sites=SITE, granularity=granularity, init_log_alpha=-2.0)
    params = guide.init_params(KEY, x)
    log_alpha = params[f"{SITE}_auto_log_alpha"]
    assert log_alpha.shape == alpha_shape
    params[f"{SITE}_auto_log_alpha"] = log_alpha + jnp.linspace(0.0, 1.0, log_alpha.size).reshape(alpha_shape)
    fn = guide.distributions(params)[SITE].base_dist
    mu = params[f"{SITE}_auto_loc"]
    np.testing.assert_allclose(fn.scale, jnp.exp(0.5 * params[f"{SITE}_auto_log_alpha"]) * jnp.abs(mu), rtol=1e-6)
    # mu per weight + alphas on the variance site; 2 per entry elsewhere (b0: 6, w1: 18, b1: 3)
    expected = 24 + int(np.prod(alpha_shape)) + 2 * (6 + 18 + 3)
    assert guide.num_params_formula() == guide.num_free_params(params) == expected


def test_deterministic_prediction_of_a_zero_mean_layer_ignores_the_input():
    x, y = _data(30)
    model = _model()
    guide = zero_mean(model, variance_sites=[SITE])
    post = SVIPosterior(model=model, guide=guide, params=guide.init_params(KEY, x), feature_shape=(4,))
    out = predictions_by_procedure(post, x, num_samples=8)
    assert {k: v.shape for k, v in out.items()} == {k: (30, 3) for k in ("deterministic", "stochastic", "ensemble")}
    np.testing.assert_allclose(out["deterministic"], np.broadcast_to(out["deterministic"][0], (30, 3)), rtol=1e-6)
    assert np.ptp(out["ensemble"], axis=0).max() > 1e-4  # the ensemble does depend on x


def test_patterns_that_match_no_site_are_refused():
    with pytest.raises(ValueError, match="linear_9"):  # when the guide is built: it reads the sites then
        zero_mean(_model(), variance_sites=["mlp/~/linear_9/w"])
    with pytest.raises(ValueError, match="variance_sites"):
        zero_mean(_model(), variance_sites=[])
