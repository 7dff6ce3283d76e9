"""k-tied Normal guide (k-tied paper eq. 8, Table 1, appendix D.4)."""
import math

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from inference.k_tied import k_tied, tied_scale
from inference.mean_field import mean_field
from models.networks.mlp import mlp


def _init_params(guide, feature_dim_or_shape, seed=0):
    shape = feature_dim_or_shape if isinstance(feature_dim_or_shape, tuple) else (feature_dim_or_shape,)
    return guide.init_params(jax.random.PRNGKey(seed), jnp.zeros((2,) + shape))


def _param_shapes(guide, feature_shape):
    """{name: ShapeDtypeStruct} of the guide's parameters, from an abstract trace (nothing compiled)."""
    return jax.eval_shape(lambda key: guide.init_params(key, jnp.zeros((2,) + feature_shape)), jax.random.PRNGKey(0))


def _conv_net(x):
    h = jax.nn.relu(hk.Conv2D(4, 3, padding="VALID")(x))
    return hk.Linear(2)(h.reshape(h.shape[0], -1))


def test_parameter_count_is_table_1_formula_for_dense_and_conv():
    dense = k_tied(models.bnn(mlp([5], 2), feature_shape=(3,)), k=2)
    params = _param_shapes(dense, (3,))
    # linear_0 w: 3*5 + 2*(3+5); b: 2*5; linear_1 w: 5*2 + 2*(5+2); b: 2*2
    assert dense.num_params_formula() == dense.num_free_params(params) == (15 + 16) + 10 + (10 + 14) + 4

    conv = k_tied(models.bnn(_conv_net, feature_shape=(6, 6, 2)), k=3)
    params = _param_shapes(conv, (6, 6, 2))
    # conv w (3,3,2,4) -> m = 18, n = 4; dense w (4*4*4, 2) -> m = 64, n = 2
    assert params["conv2_d/w_auto_u"].shape == (18, 3) and params["conv2_d/w_auto_v"].shape == (4, 3)
    expected = (72 + 3 * 22) + 2 * 4 + (128 + 3 * 66) + 2 * 2
    assert conv.num_params_formula() == conv.num_free_params(params) == expected


def test_init_is_log_domain_half_log_s0_over_k_plus_noise():
    s0, k = 0.01, 3
    guide = k_tied(models.bnn(mlp([200], 150), feature_shape=(100,)), k=k, init_scale=s0, init_noise=0.1)
    params = _init_params(guide, 100)
    log_u = np.log(np.asarray(params["mlp/~/linear_0/w_auto_u"]))
    assert log_u.mean() == pytest.approx(0.5 * (math.log(s0) - math.log(k)), abs=0.03)  # 300 draws: se 0.006
    assert log_u.std() == pytest.approx(0.1, abs=0.02)
    sigma = tied_scale(params["mlp/~/linear_0/w_auto_u"], params["mlp/~/linear_0/w_auto_v"], (100, 200))
    assert float(jnp.mean(sigma)) == pytest.approx(s0 * math.exp(0.01), rel=0.05)  # E exp(noise_u + noise_v)
    np.testing.assert_allclose(params["mlp/~/linear_0/b_auto_scale"], s0, rtol=1e-6)  # 1-D site: mean field


def _positive_factors(a, k):
    """U (m, k) > 0, V (n, k) > 0 with U Vᵀ = a, for k >= min(m, n): U = [I + eps, tiny], Vᵀ = U⁻¹ a."""
    m, n = a.shape
    if m > n:
        u_t, v_t = _positive_factors(a.T, k)
        return v_t, u_t
    u = np.full((m, k), 1e-20)
    u[:, :m] = np.eye(m) + 1e-3
    v = np.full((n, k), 1e-20)
    v[:, :m] = np.linalg.solve(u[:, :m], a).T
    assert np.all(v > 0)
    return u.astype(np.float32), v.astype(np.float32)


def test_full_rank_k_tied_represents_any_mean_field_sigma():
    """With k >= min(m, n) for every matrix, the k-tied guide equals the mean-field guide at any sigma."""
    model = models.bnn(mlp([5], 2), feature_shape=(3,))
    kt, mf = k_tied(model, k=3), mean_field(model)
    params_kt = _init_params(kt, 3)
    params_mf = {f"{k}_auto_loc": v for k, v in model.init_values(jax.random.PRNGKey(0), (3,)).items()}
    rng = np.random.default_rng(0)
    for site, shape in model.site_shapes((3,)).items():
        sigma = rng.uniform(0.05, 2.0, size=shape).astype(np.float32)
        params_mf[f"{site}_auto_scale"] = jnp.asarray(sigma)
        if len(shape) == 2:
            u, v = _positive_factors(sigma, 3)
            params_kt[f"{site}_auto_u"], params_kt[f"{site}_auto_v"] = jnp.asarray(u), jnp.asarray(v)
        else:
            params_kt[f"{site}_auto_scale"] = jnp.asarray(sigma)
        params_kt[f"{site}_auto_loc"] = params_mf[f"{site}_auto_loc"]
    q = jnp.array([0.1, 0.5, 0.93])
    quant_kt, quant_mf = kt.quantiles(params_kt, q), mf.quantiles(params_mf, q)
    assert set(quant_kt) == set(quant_mf)
    for site in quant_mf:
        np.testing.assert_allclose(quant_kt[site], quant_mf[site], rtol=1e-4, atol=1e-6)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="rank"):
        k_tied(models.bnn(mlp([5], 2), feature_shape=(3,)), k=0)
    with pytest.raises(ValueError, match="init_scale"):
        k_tied(models.bnn(mlp([5], 2), feature_shape=(3,)), init_scale=0.0)
