"""Rank-1 layers: forward equals the materialised W o alpha_k gamma_kᵀ per component (rank-1 paper eq. 3)."""
import math

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro.distributions import Categorical

from models import bnn
from models.likelihoods import categorical
from models.rank1 import (
    ComponentMixture,
    Rank1Conv2D,
    Rank1Dense,
    random_sign_init,
    rank1_apply,
    rank1_dense_apply,
    rank1_likelihood,
    rank1_mlp,
    rank1_prior,
    scale_from_dropout,
    split_components,
    tile_components,
)

K, N = 3, 4


def _params_with_random_factors(params, key):
    """Replace alpha, gamma, b by generic random values so the test does not rest on the ±1 init."""
    out = {}
    for module, leaves in params.items():
        out[module] = dict(leaves)
        for i, name in enumerate(("alpha", "gamma", "b")):
            leaf = leaves[name]
            out[module][name] = jax.random.normal(jax.random.fold_in(key, i), leaf.shape) * 1.5 + 0.3
    return out


def test_dense_forward_equals_materialised_weights_per_component():
    net = hk.transform(lambda x: Rank1Dense(5, num_components=K)(x))
    x = jax.random.normal(jax.random.PRNGKey(0), (N, 6))
    xt = tile_components(x, K)
    params = _params_with_random_factors(net.init(jax.random.PRNGKey(1), xt), jax.random.PRNGKey(2))
    p = params["rank1_dense"]
    assert {k: v.shape for k, v in p.items()} == {"w": (6, 5), "alpha": (K, 6), "gamma": (K, 5), "b": (K, 5)}
    out = split_components(net.apply(params, None, xt), K)
    for k in range(K):
        weight_k = p["w"] * jnp.outer(p["alpha"][k], p["gamma"][k])
        np.testing.assert_allclose(out[k], x @ weight_k + p["b"][k], rtol=1e-5, atol=1e-5)


def test_conv_forward_equals_materialised_kernel_per_component():
    net = hk.transform(lambda x: Rank1Conv2D(4, 3, num_components=K, stride=2, padding="VALID")(x))
    x = jax.random.normal(jax.random.PRNGKey(0), (N, 7, 7, 2))
    xt = tile_components(x, K)
    params = _params_with_random_factors(net.init(jax.random.PRNGKey(1), xt), jax.random.PRNGKey(3))
    p = params["rank1_conv2_d"]
    out = split_components(net.apply(params, None, xt), K)
    assert out.shape == (K, N, 3, 3, 4)
    for k in range(K):
        kernel_k = p["w"] * p["alpha"][k][:, None] * p["gamma"][k]
        ref = jax.lax.conv_general_dilated(x, kernel_k, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        np.testing.assert_allclose(out[k], ref + p["b"][k], rtol=1e-4, atol=1e-5)


def test_tiling_is_component_major_and_rejects_untiled_batches():
    x = jnp.arange(8.0).reshape(4, 2)
    xt = tile_components(x, 3)
    np.testing.assert_array_equal(xt[4:8], x)
    np.testing.assert_array_equal(split_components(xt, 3)[2], x)
    with pytest.raises(ValueError, match="multiple of 3"):
        split_components(jnp.ones((5, 2)), 3)


def test_draws_are_clipped_to_ten():
    net = hk.transform(lambda x: Rank1Dense(1, num_components=1, with_bias=False)(x))
    params = {"rank1_dense": {"w": jnp.ones((1, 1)), "alpha": jnp.full((1, 1), 50.0), "gamma": jnp.full((1, 1), -30.0)}}
    assert float(net.apply(params, None, jnp.ones((1, 1)))[0, 0]) == pytest.approx(-100.0)


def test_random_sign_init_and_dropout_scale():
    signs = random_sign_init(0.75)(jax.random.PRNGKey(0), (20000,))
    assert set(np.unique(np.asarray(signs)).tolist()) == {-1.0, 1.0}
    assert float(jnp.mean(signs > 0)) == pytest.approx(0.75, abs=0.015)
    normal = random_sign_init(-0.5)(jax.random.PRNGKey(1), (20000,))
    assert float(jnp.mean(normal)) == pytest.approx(1.0, abs=0.02)
    assert float(jnp.std(normal)) == pytest.approx(0.5, abs=0.02)
    assert scale_from_dropout(1e-3) == pytest.approx(math.sqrt(1e-3 / 0.999))
    assert scale_from_dropout(0.2) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="dropout rate"):
        scale_from_dropout(1.0)


def _component_logits():
    # 2 examples x 3 components x 2 classes, tiled component-major as a network would output them
    logits_nkc = jnp.array([[[2.0, -1.0], [0.0, 0.5], [-3.0, 1.0]], [[0.3, 0.2], [1.0, -2.0], [4.0, 0.0]]])
    return logits_nkc, jnp.moveaxis(logits_nkc, 1, 0).reshape(6, 2)


def test_likelihood_average_and_log_mixture_objectives():
    logits_nkc, output = _component_logits()
    y = jnp.array([1, 0])
    log_p = np.take_along_axis(np.asarray(jax.nn.log_softmax(logits_nkc, -1)), np.asarray(y)[:, None, None], -1)[..., 0]
    for objective in ("average", "mixture"):
        lik = rank1_likelihood(categorical(), 3, objective)
        train = lik.distribution(output, {}).log_prob(y)
        expected = log_p.mean(1) if objective == "average" else np.log(np.exp(log_p).mean(1))
        np.testing.assert_allclose(train, expected, rtol=1e-5)
        np.testing.assert_allclose(lik.log_prob(output, y, {}), np.log(np.exp(log_p).mean(1)), rtol=1e-5)
        np.testing.assert_allclose(lik.predictive(output, {}), jax.nn.softmax(logits_nkc, -1).mean(1), rtol=1e-6)
    assert np.all(log_p.mean(1) < np.log(np.exp(log_p).mean(1)))  # Jensen: the log-mixture bound is tighter
    with pytest.raises(ValueError, match="objective"):
        rank1_likelihood(categorical(), 3, "max")


def test_mixture_samples_come_from_a_uniformly_chosen_component():
    # component k puts all mass on class k
    logits = jnp.where(jnp.eye(3, dtype=bool), 0.0, -1e4)[None].repeat(2, 0)  # (n=2, K=3, C=3)
    mix = ComponentMixture(Categorical(logits=logits))
    draws = np.asarray(mix.sample(jax.random.PRNGKey(0), (3000,)))
    assert draws.shape == (3000, 2)
    np.testing.assert_allclose(np.bincount(draws.ravel(), minlength=3) / draws.size, 1 / 3, atol=0.02)


def test_rank1_mlp_model_outputs_tiled_logits_and_averaged_probabilities():
    model = bnn(rank1_mlp([4], 2, 3), rank1_prior(), rank1_likelihood(categorical(), 3))
    x = jax.random.normal(jax.random.PRNGKey(0), (5, 6))
    params = model.init_values(jax.random.PRNGKey(1), x)
    assert params["rank1_mlp/rank1_dense_0/alpha"].shape == (3, 6)
    out = model.apply(params, x)
    assert out.shape == (15, 2)
    np.testing.assert_allclose(model.predictive(params, x), jax.nn.softmax(split_components(out, 3), -1).mean(0), rtol=1e-6)
    prior = model.site_priors(x)
    assert float(prior["rank1_mlp/rank1_dense_0/alpha"].base_dist.base_dist.loc) == 1.0


def test_fixed_weights_must_be_w_or_b_with_the_right_shape():
    x = jnp.ones((2, 3))
    with pytest.raises(ValueError, match="only"):
        hk.transform(lambda z: Rank1Dense(4, 2, fixed={"alpha": jnp.ones((2, 3))})(z)).init(jax.random.PRNGKey(0), x)
    with pytest.raises(ValueError, match=r"expected shape \(3, 4\)"):
        hk.transform(lambda z: Rank1Dense(4, 2, fixed={"w": jnp.ones((4, 3))})(z)).init(jax.random.PRNGKey(0), x)
    params = hk.transform(lambda z: Rank1Dense(4, 2, fixed={"w": jnp.ones((3, 4))})(z)).init(jax.random.PRNGKey(0), x)
    assert set(params["rank1_dense"]) == {"alpha", "gamma", "b"}


def test_log_predictive_is_the_log_of_the_component_average_and_exact_far_below_float32():
    """log (1/K) sum_k softmax_k, by a logsumexp of log-softmaxes: equal to log(predictive) where that is
    representable, finite where every component's probability underflows float32."""
    lik = rank1_likelihood(categorical(), 3)
    output = jax.random.normal(jax.random.PRNGKey(0), (3 * 5, 4)) * 3.0  # K n = 15 rows, C = 4
    np.testing.assert_allclose(lik.log_predictive(output, {}), jnp.log(lik.predictive(output, {})), atol=1e-5)
    extreme = jnp.zeros((3 * 2, 4)).at[:, 0].set(200.0)  # class 1: probability e^-200 in every component
    log_p = lik.log_predictive(extreme, {})
    assert lik.predictive(extreme, {})[0, 1] == 0.0
    np.testing.assert_allclose(log_p[:, 1], -200.0, rtol=1e-6)


def test_dense_factor_gradients_equal_autodiff_of_the_forward_in_both_modes():
    """`rank1_dense_apply`'s custom derivative (per-component weight gradients where the input is data) against
    autodiff of `rank1_apply` with a plain matmul: reverse mode with and without the input's gradient, and the
    forward-mode Hessian-vector product."""
    keys = jax.random.split(jax.random.PRNGKey(5), 6)
    x = tile_components(jax.random.normal(keys[0], (N, 6)), K) * 1.3
    alpha, gamma = jax.random.normal(keys[1], (K, 6)), jax.random.normal(keys[2], (K, 5))
    bias, w = jax.random.normal(keys[3], (K, 5)), jax.random.normal(keys[4], (6, 5))
    target = jax.random.normal(keys[5], (K * N, 5))

    def loss(apply):
        return lambda x, alpha, gamma, w: jnp.sum(jnp.tanh(apply(x, alpha, gamma, w)) * target)

    custom = loss(lambda x, a, g, w: rank1_dense_apply(x, a, g, bias, w))
    plain = loss(lambda x, a, g, w: rank1_apply(x, a, g, bias, lambda z: z @ w))
    for argnums in [(1, 2, 3), (0, 1, 2, 3)]:  # the input as data (no tangent), and differentiated
        for got, want in zip(jax.grad(custom, argnums)(x, alpha, gamma, w), jax.grad(plain, argnums)(x, alpha, gamma, w)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            assert float(jnp.max(jnp.abs(want))) > 0.1
    hvp = [jax.jvp(jax.grad(f, 1), (x, alpha, gamma, w), (0 * x, gamma[:, :1] * alpha, 0 * gamma, w))[1]
           for f in (custom, plain)]
    np.testing.assert_allclose(hvp[0], hvp[1], rtol=1e-4, atol=1e-5)
