"""`inference.per_example`: a guide draw per example estimates the same ELBO with a lower-variance gradient."""

import jax
import numpy as np
import pytest

import inference
import zoo
from inference.elbo import annealed_elbo_loss
from inference.svi import constrain as constrain_params, guide_param_init
from inference.per_example import per_example_elbo_loss
from base.errors import InputError

SITE = "mlp/~/linear_0/w"


@pytest.fixture(scope="module")
def setup():
    e = zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100}, log_uniform_sites=[SITE])
    guide = inference.zero_mean.zero_mean(e.model, variance_sites=SITE)
    x, y = np.asarray(e.train.x[:16], np.float32), np.asarray(e.train.y[:16])
    params_u, constraints, _ = guide_param_init(guide, jax.random.PRNGKey(0), x, y, len(e.train.y))
    return e, guide, x, y, params_u, constraints


def _losses_and_sigma_grads(setup, loss, num_keys=3000):
    e, guide, x, y, params_u, constraints = setup

    def one(key, pu):
        return loss(key, constrain_params(constraints, pu), e.model, guide, 1.0, 1, x, y, len(e.train.y))[0]

    keys = jax.random.split(jax.random.PRNGKey(1), num_keys)
    values, grads = jax.jit(jax.vmap(jax.value_and_grad(one, argnums=1), in_axes=(0, None)))(keys, params_u)
    sigma = [k for k in grads if k.startswith(SITE) and k.endswith("_sigma")][0]
    return np.asarray(values, np.float64), np.asarray(grads[sigma], np.float64)


def test_same_objective_lower_gradient_variance(setup):
    batch_loss, batch_grad = _losses_and_sigma_grads(setup, annealed_elbo_loss)
    example_loss, example_grad = _losses_and_sigma_grads(setup, per_example_elbo_loss)
    n = len(batch_loss)
    se = np.hypot(batch_loss.std() / np.sqrt(n), example_loss.std() / np.sqrt(n))
    assert abs(batch_loss.mean() - example_loss.mean()) < 4 * se  # the same expected loss (the negative ELBO)
    # the same expected gradient of the zero-mean sigmas, within Monte Carlo error
    grad_se = np.sqrt(batch_grad.var(0) / n + example_grad.var(0) / n)
    assert np.mean(np.abs(batch_grad.mean(0) - example_grad.mean(0)) / grad_se) < 1.5
    # measured 0.175 with 32 examples and 8 hidden units (the ratio falls like 1/B where the noise dominates)
    assert example_grad.var(0).mean() < 0.4 * batch_grad.var(0).mean()
    assert example_loss.std() < 0.7 * batch_loss.std()


def test_refuses_mutable_state(setup):
    e, guide, x, y, params_u, constraints = setup
    with pytest.raises(InputError, match="estimator"):
        per_example_elbo_loss(jax.random.PRNGKey(0), constrain_params(constraints, params_u), e.model, guide, 1.0,
                              1, x, y, 100, mutable={"state": {}})


def test_fit_passes_it_through(setup):
    e, *_ = setup
    guide = inference.zero_mean.zero_mean(e.model, variance_sites=SITE)
    post = inference.fit(e.model, guide, e.train, steps=20, batch_size=16, progress=False, chunk_size=20,
                         estimator="per_example")
    assert np.all(np.isfinite(post.losses)) and len(post.losses) == 20
    assert post.info.traces == 1  # its own compiled update (the cache key holds the estimator)


def test_resuming_with_another_estimator_is_refused(setup, tmp_path):
    import optax

    from inference.fit_state import check_identity, run_identity
    from base.errors import CheckpointError

    e, guide, x, y, *_ = setup
    ident = {name: run_identity(e.model, guide, optax.adam(1e-3), None, x, y, feature_shape=(2,), steps=10,
                                batch_size=4,
                                seed=0, kl_warmup=0, num_particles=1, chunk_size=5, init_params=None,
                                estimator=name) for name in ("standard", "per_example")}
    with pytest.raises(CheckpointError, match="estimator differs"):
        check_identity(str(tmp_path), ident["standard"], ident["per_example"])
    old = {k: v for k, v in ident["standard"].items() if k != "estimator"}  # no estimator: not this format's state
    with pytest.raises(CheckpointError, match="estimator differs"):
        check_identity(str(tmp_path), old, ident["standard"])


@pytest.mark.parametrize("bad", [True, False, "Local", None, "per-example"])
def test_a_bad_estimator_is_refused_naming_the_choices(setup, bad):
    e, guide, *_ = setup
    with pytest.raises(InputError, match=r"estimator: expected one of \('standard', 'per_example', 'local'\).*got"):
        inference.fit(e.model, guide, e.train, steps=2, batch_size=16, progress=False, estimator=bad)
