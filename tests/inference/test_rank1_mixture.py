"""Rank-1 mixture guide and BatchEnsemble (rank-1 paper section 3, as its reference implementation runs it)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest

import models
from inference import fit, nuts
from inference.by_site import by_site
from inference.elbo import elbo_terms
from inference.rank1_mixture import RatioCauchy, batch_ensemble, rank1_mixture
from models.networks.mlp import mlp
from models.rank1 import rank1_likelihood, rank1_mlp, rank1_prior

K, D = 3, 4


def _model(factor="normal"):
    return models.bnn(rank1_mlp([5], 2, K), rank1_prior(factor), rank1_likelihood(models.likelihoods.categorical(), K),
                      feature_shape=(D,))


def _xy(n=6):
    x = jax.random.normal(jax.random.PRNGKey(0), (n, D))
    return x, (x[:, 0] > 0).astype(jnp.int32)


def _init_params(guide, seed=0):
    return guide.init_params(jax.random.PRNGKey(seed), _xy()[0])


def _kls(seeds, params, model, guide, x, y):
    """The ELBO's KL term with key PRNGKey(s) for each of `seeds`, by one jitted function (one compile per guide,
    not one per operation)."""
    kl = jax.jit(lambda key: elbo_terms(key, params, model, guide, x, y, 6)[1])
    return [float(kl(jax.random.PRNGKey(s))) for s in seeds]


def _layer_count(m, n, per_factor):
    return m * n + K * n + per_factor * K * (m + n)  # W, per-component bias, alpha and gamma


def test_parameter_count_formula():
    for guide, per_factor in ((rank1_mixture(_model()), 2), (batch_ensemble(_model()), 1)):
        params = _init_params(guide)
        expected = _layer_count(D, 5, per_factor) + _layer_count(5, 2, per_factor)
        assert guide.num_params_formula() == guide.num_free_params(params) == expected


def test_initialisation_random_signs_dropout_scale_and_haiku_weights():
    model = _model()
    guide = rank1_mixture(model, dropout_rate=1e-3, sign_init=0.5)
    params = _init_params(guide)
    loc = np.asarray(params["rank1_mlp/rank1_dense_0/alpha_auto_loc"])
    assert loc.shape == (K, D) and set(np.unique(loc).tolist()) <= {-1.0, 1.0}
    np.testing.assert_allclose(params["rank1_mlp/rank1_dense_1/gamma_auto_scale"], math.sqrt(1e-3 / (1 - 1e-3)), rtol=1e-5)
    haiku_w = model.init_values(jax.random.PRNGKey(0), (D,))["rank1_mlp/rank1_dense_0/w"]
    np.testing.assert_allclose(params["rank1_mlp/rank1_dense_0/w_auto_loc"], haiku_w)
    assert "rank1_mlp/rank1_dense_0/w_auto_scale" not in params  # W is a point estimate
    assert not any(k.endswith("_scale") for k in _init_params(batch_ensemble(model)))


def test_normal_kl_is_the_closed_form_sum_over_components_plus_l2():
    model = _model()
    guide = rank1_mixture(model)
    params = _init_params(guide)
    x, y = _xy()
    kl_a, kl_b = _kls((1, 2), params, model, guide, x, y)
    expected = 0.0
    for name in model.site_shapes((D,)):
        loc = np.asarray(params[f"{name}_auto_loc"], np.float64)
        if name.endswith(("alpha", "gamma")):  # KL(N(loc, s) || N(1, 0.1)) per entry, summed over components
            s = np.asarray(params[f"{name}_auto_scale"], np.float64)
            expected += np.sum(np.log(0.1 / s) + (s**2 + (loc - 1.0) ** 2) / (2 * 0.01) - 0.5)
        else:  # Delta: -log N(w | 0, 1)
            expected += np.sum(0.5 * loc**2 + 0.5 * np.log(2 * np.pi))
    assert kl_a == pytest.approx(expected, rel=1e-5)
    assert kl_a == kl_b


def test_cauchy_kl_is_a_one_sample_estimate():
    model = _model("cauchy")
    guide = rank1_mixture(model, family="cauchy")
    params = _init_params(guide)
    x, y = _xy()
    kls = _kls(range(3), params, model, guide, x, y)
    assert len(set(kls)) == 3 and all(np.isfinite(kls))


def test_a_model_without_rank1_layers_is_refused():
    with pytest.raises(ValueError, match="rank-1"):  # when the guide is built: it reads the sites then
        rank1_mixture(models.bnn(mlp([3], 2), feature_shape=(D,)))
    with pytest.raises(ValueError, match="family"):
        rank1_mixture(_model(), family="laplace")


def test_nuts_samples_r_and_s_with_w_fixed_at_the_svi_estimate():
    model = _model()
    guide = rank1_mixture(model)
    median = guide.median(_init_params(guide))
    fixed_model = models.bnn(rank1_mlp([5], 2, K, fixed=median), rank1_prior(),
                             rank1_likelihood(models.likelihoods.categorical(), K))
    x, y = _xy(12)
    factors = {k: v for k, v in median.items() if k.endswith(("alpha", "gamma"))}
    assert set(fixed_model.site_shapes(x)) == set(factors)
    np.testing.assert_allclose(fixed_model.apply(factors, x), model.apply(median, x), rtol=1e-6)
    post = nuts(fixed_model, (np.asarray(x), np.asarray(y)), num_chains=1, num_warmup=30, draws_per_chain=10,
                progress=False, max_tree_depth=4)
    assert {k: v.shape for k, v in post.samples.items()} == {k: (1, 10) + v.shape for k, v in factors.items()}
    assert np.isfinite(post.predict(x, num_samples=10)).all()


def test_ratio_cauchy_draws_follow_the_cauchy_distribution():
    d = RatioCauchy(jnp.array([1.0, -2.0]), jnp.array([0.5, 3.0]))
    draws = np.asarray(d.sample(jax.random.PRNGKey(0), (40000,)))
    q = np.quantile(draws, [0.25, 0.5, 0.75], axis=0)
    expected = np.asarray(d.icdf(jnp.array([[0.25], [0.5], [0.75]])))
    assert np.abs((q - expected) / np.array([0.5, 3.0])).max() < 0.07  # quartile standard errors ~0.014 scale
    guide = rank1_mixture(_model("cauchy"), family="cauchy")
    assert isinstance(guide.distributions(_init_params(guide))["rank1_mlp/rank1_dense_0/alpha"].base_dist, RatioCauchy)


def test_by_site_combines_rank1_families_per_layer_with_the_mixture_guides_own_terms():
    model = _model("cauchy")
    mixed = by_site(model, {"*/rank1_dense_0/*": ("rank1_mixture", {"family": "normal"}),
                            "*/rank1_dense_1/*": ("rank1_mixture", {"family": "cauchy"})}, default=None)
    whole = rank1_mixture(model, family="cauchy")
    params, whole_params = _init_params(mixed), _init_params(whole)
    assert {k: v.shape for k, v in params.items()} == {k: v.shape for k, v in whole_params.items()}
    assert mixed.num_params_formula() == mixed.num_free_params(params) == whole.num_params_formula()
    dists = mixed.distributions(params)
    assert type(dists["rank1_mlp/rank1_dense_0/gamma"].base_dist) is dist.Normal
    assert isinstance(dists["rank1_mlp/rank1_dense_1/alpha"].base_dist, RatioCauchy)
    assert isinstance(dists["rank1_mlp/rank1_dense_1/w"].base_dist, dist.Delta)  # W and biases: point estimates
    x, y = _xy()
    kl_mixed = _kls(range(2), params, model, mixed, x, y)
    assert all(np.isfinite(kl_mixed)) and kl_mixed[0] != kl_mixed[1]  # the Cauchy layer's KL is sampled
    post = fit(model, mixed, (np.asarray(x), np.asarray(y)), steps=20, batch_size=6, progress=False)
    draws = post.draws(8)
    a = np.asarray(draws["rank1_mlp/rank1_dense_0/alpha"])
    assert a.shape == (8, K, D) and np.std(a, 0).min() > 0
    np.testing.assert_array_equal(np.ptp(np.asarray(draws["rank1_mlp/rank1_dense_0/w"]), 0), 0.0)  # W point-estimated
    assert np.isfinite(post.predict(x, num_samples=4)).all()



def test_lognormal_factors_are_positive_and_their_kl_is_the_log_space_normal_kl():
    """Fig. 9's positive-valued factors: LogNormal(loc, sigma) posteriors under a LogNormal(0, 0.1) prior. Every draw
    is positive, loc starts at 0 (factors 1) for v > 0 and at N(0, |v|) for v <= 0, and the ELBO's one-sample KL
    (log q - log p, no closed form registered) averages to the KL of the log-space Normals, summed over components."""
    from types import SimpleNamespace

    from inference.rank1_mixture import Rank1FactorFamily

    model = _model("lognormal")
    zeros = _init_params(rank1_mixture(model, family="lognormal", sign_init=0.5))
    assert not np.any(np.asarray(zeros["rank1_mlp/rank1_dense_0/alpha_auto_loc"]))
    guide = rank1_mixture(model, family="lognormal", sign_init=-0.5, dropout_rate=0.1)
    params = _init_params(guide)
    loc = np.asarray(params["rank1_mlp/rank1_dense_0/alpha_auto_loc"])
    assert loc.std() > 0.1 and abs(loc.mean()) < 0.5
    draws = jax.jit(lambda key, p: guide.sample_posterior(key, p, sample_shape=(500,)))(jax.random.PRNGKey(0), params)
    assert all(float(draws[n].min()) > 0 for n in draws if n.endswith(("alpha", "gamma")))
    assert np.median(np.asarray(draws["rank1_mlp/rank1_dense_0/alpha"]), 0) == pytest.approx(np.exp(loc), rel=0.1)
    real = SimpleNamespace(name="rank1_mlp/rank1_dense_0/alpha", shape=(K, D), is_real=True)
    with pytest.raises(ValueError, match="positive-valued prior"):  # under a Normal prior it would be a Normal
        Rank1FactorFamily("lognormal").distribution(real, {"loc": loc, "scale": np.ones((K, D))})
    x, y = _xy()
    kls = jax.jit(jax.vmap(lambda key: elbo_terms(key, params, model, guide, x, y, 6)[1]))(
        jax.random.split(jax.random.PRNGKey(3), 400))  # jitted: one compile, not one per operation
    expected = 0.0
    for name in model.site_shapes((D,)):
        m = np.asarray(params[f"{name}_auto_loc"], np.float64)
        if name.endswith(("alpha", "gamma")):  # KL(N(m, s) || N(0, 0.1)) in log space, per entry
            s = np.asarray(params[f"{name}_auto_scale"], np.float64)
            expected += np.sum(np.log(0.1 / s) + (s**2 + m**2) / (2 * 0.01) - 0.5)
        else:  # Delta: -log N(w | 0, 1)
            expected += np.sum(0.5 * m**2 + 0.5 * np.log(2 * np.pi))
    assert float(jnp.mean(kls)) == pytest.approx(expected, rel=0.02)
    assert float(jnp.std(kls)) > 0  # a sampled estimate, not a closed form
