"""Variance networks: the log-uniform prior and its KL divergences (variance-networks paper)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.distributions.kl import kl_divergence

from models.variance import (
    ZERO_MEAN_KL,
    LogUniform,
    kl_log_uniform_approx,
    kl_log_uniform_exact,
    kl_log_uniform_mc,
    kl_normal_log_uniform,
    log_alpha_from_additive,
    log_alpha_shape,
    log_uniform_prior,
    scale_from_log_alpha,
)

GRID = np.linspace(-4.0, 8.0, 25)


def test_eq10_matches_quadrature_of_eq9_within_001_nats():
    exact = kl_log_uniform_exact(GRID)
    approx = np.asarray(kl_log_uniform_approx(GRID), np.float64) + ZERO_MEAN_KL
    assert np.max(np.abs(approx - exact)) < 0.01


def test_eq10_matches_monte_carlo_of_eq9_within_001_nats():
    log_alpha = jnp.asarray(GRID[::4], jnp.float32)
    mc = np.asarray(kl_log_uniform_mc(log_alpha, jax.random.PRNGKey(0), num_samples=1 << 21))
    approx = np.asarray(kl_log_uniform_approx(log_alpha)) + ZERO_MEAN_KL
    assert np.max(np.abs(approx - mc)) < 0.01
    # and the Monte Carlo estimate itself is consistent with quadrature (se ~ 1e-3)
    assert np.max(np.abs(mc - kl_log_uniform_exact(GRID[::4]))) < 4e-3


def test_eq10_is_decreasing_and_vanishes_at_large_alpha():
    kl = np.asarray(kl_log_uniform_approx(jnp.linspace(-8.0, 20.0, 200)))
    assert np.all(np.diff(kl) < 0)
    assert abs(float(kl_log_uniform_approx(30.0))) < 1e-6
    assert float(kl_log_uniform_approx(-4.0)) == pytest.approx(
        0.63576 - 0.63576 / (1 + math.exp(-(1.87320 - 4 * 1.48695))) + 0.5 * math.log1p(math.exp(4.0)), rel=1e-5
    )


@pytest.mark.parametrize("sigma", [1e-3, 0.3, 50.0])
def test_zero_mean_kl_is_the_appendix_c_constant(sigma):
    w = sigma * jax.random.normal(jax.random.PRNGKey(1), (1 << 20,))
    mc = jnp.mean(dist.Normal(0.0, sigma).log_prob(w) - LogUniform().log_prob(w))
    assert float(mc) == pytest.approx(ZERO_MEAN_KL, abs=5e-3)
    assert ZERO_MEAN_KL == pytest.approx(-0.5 * math.log(2 * math.pi * math.e) - 0.5 * (np.euler_gamma + math.log(2)))
    assert float(kl_normal_log_uniform(0.0, sigma)) == pytest.approx(ZERO_MEAN_KL, abs=1e-6)


def test_large_alpha_limit_of_exact_kl_is_the_zero_mean_constant():
    assert float(kl_log_uniform_exact(14.0)) == pytest.approx(ZERO_MEAN_KL, abs=1e-3)


def test_registered_kl_sums_eq10_over_the_event_and_has_finite_gradients_at_zero_loc():
    loc = jnp.array([[1.0, -2.0], [0.0, 0.5]])
    scale = jnp.array([[0.1, 3.0], [0.2, 0.5]])
    q = dist.Normal(loc, scale).to_event(2)
    expected = np.sum(np.asarray(kl_log_uniform_approx(log_alpha_from_additive(loc, scale))) + ZERO_MEAN_KL)
    assert float(kl_divergence(q, LogUniform((2, 2)).to_event(2))) == pytest.approx(expected, rel=1e-6)
    assert float(kl_divergence(q, LogUniform().expand((2, 2)).to_event(2))) == pytest.approx(expected, rel=1e-6)
    grads = jax.grad(lambda s: jnp.sum(kl_normal_log_uniform(loc, s)), argnums=0)(scale)
    assert np.all(np.isfinite(np.asarray(grads)))
    assert float(grads[1, 0]) == 0.0  # zero loc: KL constant in sigma (appendix C)


def test_log_uniform_is_improper_and_refuses_to_sample():
    prior = log_uniform_prior()("mlp/~/linear_0/w", (3, 4))
    assert prior.batch_shape == (3, 4)
    np.testing.assert_allclose(prior.log_prob(jnp.full((3, 4), -2.0)), -math.log(2.0) * np.ones((3, 4)), rtol=1e-6)
    with pytest.raises(ValueError, match="improper"):
        prior.sample(jax.random.PRNGKey(0))


def test_additive_and_multiplicative_parameterisations_round_trip():
    loc = jnp.array([[0.5, -1.5, 2.0], [-0.1, 0.3, 1.0]])
    log_alpha = jnp.array([-1.0, 0.5, 3.0])  # neuron-wise, eq. 18
    scale = scale_from_log_alpha(loc, log_alpha)
    np.testing.assert_allclose(scale, np.exp(0.5 * np.asarray(log_alpha)) * np.abs(np.asarray(loc)), rtol=1e-6)
    np.testing.assert_allclose(log_alpha_from_additive(loc, scale), np.broadcast_to(log_alpha, loc.shape), rtol=1e-5)
    assert [log_alpha_shape((5, 3), g) for g in ("layer", "neuron", "weight")] == [(), (3,), (5, 3)]
    with pytest.raises(ValueError, match="granularity"):
        log_alpha_shape((5, 3), "row")
