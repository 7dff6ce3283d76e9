"""zoo.experiments.analysis.curvature: eq. 16 on a quadratic loss, and the dense-layer shortcut against the exact diagonal."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import inference
import zoo
from zoo.experiments.analysis.curvature import (count_above, dense_layer_diagonal_hessian, diagonal_hessian, kappa, layer_kappa,
                             log10_kappa)

SITE = "mlp/~/linear_0/w"


@pytest.fixture(scope="module")
def moons():
    return zoo.get("mlp", data="two_moons", hidden=(4,), activation="softplus", data_kwargs={"n": 100},
                   log_uniform_sites=[SITE])


def test_kappa_of_a_quadratic_loss_is_eq_16():
    a = jnp.array([[1.0, 2.0], [0.5, 4.0], [3.0, 0.25]])  # d²L/dW_ij² = a_ij
    c = jnp.arange(6.0).reshape(3, 2)
    def loss(w):
        return 0.5 * jnp.sum(a * (w - c) ** 2) + w[0, 0] * w[1, 1]  # a cross term leaves the diagonal alone
    sigma2 = jnp.array([[0.1, 1.0], [2.0, 0.01], [1.0, 3.0]])
    k = kappa(diagonal_hessian(loss, jnp.zeros((3, 2))), sigma2)
    np.testing.assert_allclose(np.asarray(k), np.asarray(sigma2 * a), rtol=1e-6)  # 0.1 2 1 0.04 3 0.75
    assert count_above(k, np.log10(1.5)) == 2
    assert log10_kappa(np.array([0.0, 100.0])).tolist() == [-25.0, 2.0]


def test_dense_layer_shortcut_equals_the_exact_diagonal(moons):
    model, train = moons.model, moons.train
    params = model.init_values(jax.random.PRNGKey(0), train.x)
    x, y = train.x[:50], train.y[:50]

    def nll(w):
        return -jnp.sum(model.log_likelihood({**params, SITE: w}, x, y))

    exact = np.asarray(diagonal_hessian(nll, params[SITE]))
    fast = dense_layer_diagonal_hessian(model, params, SITE, x, y, batch_size=20)  # 3 minibatches summed
    assert fast.shape == params[SITE].shape == (2, 4)
    np.testing.assert_allclose(fast, exact, rtol=1e-4, atol=1e-6)
    assert np.abs(exact).max() > 1e-3  # a real check, not 0 == 0


def test_layer_kappa_uses_the_guide_variance(moons):
    guide = inference.zero_mean.variance_layers(moons.model, variance_sites=[SITE], granularity="weight", init_log_alpha=0.0)
    post = inference.fit(moons.model, guide, moons.train, steps=20, batch_size=50, optimizer=optax.adam(1e-2),
                         progress=False)
    k = layer_kappa(post, SITE, moons.train.x, moons.train.y)
    mu = np.asarray(post.median()[SITE], np.float64)
    alpha = np.exp(np.asarray(post.params[guide.param_name(SITE, "log_alpha")], np.float64))
    curvature = dense_layer_diagonal_hessian(moons.model, post.median(), SITE, moons.train.x, moons.train.y)
    np.testing.assert_allclose(k, alpha * mu ** 2 * curvature, rtol=1e-4)
