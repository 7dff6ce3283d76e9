"""The NUTS driver: chains mapped inside one compiled program, compiled once per (model structure, data shapes,
settings), and checked draw for draw against NumPyro's own MCMC + NUTS from the same start values and key."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import monitoring
from jax.flatten_util import ravel_pytree
from numpyro.infer import MCMC, NUTS

import inference
import zoo

nuts_module = importlib.import_module("inference.nuts")  # `inference.nuts` itself is the function

COMPILES: list = []  # every backend compile of this process (listeners cannot be unregistered: one for the module)
monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kwargs: COMPILES.append(event) if "backend_compile" in event else None)

# (chain_method, num_warmup, draws_per_chain, max_tree_depth, chunk length, tolerance of the draws, whether the
# reference's position is the driver's flat vector (`flat_potential`) or NumPyro's own dict of sites)
CASES = {
    # NumPyro's parallel MCMC traces init and sampling inside one pmap, as the driver does inside one shard_map
    # (one chain per device): on the same flat potential, equal to the bit over 43 iterations, with a padded last
    # chunk and the warm-up ending inside a chunk
    "parallel": ("parallel", 23, 20, 4, 8, 1e-6, True),
    # NumPyro's vectorized (and sequential) MCMC evaluates the initial gradient op by op outside jit, the
    # driver inside it; against a dict position the compiled arithmetic differs too: the last bits differ
    # (~1e-7), and NUTS trajectories amplify that ~2-3x per iteration (measured: ~1e-5 after 7 iterations,
    # O(1) after ~15), so only a short run agrees to float tolerance
    "vectorized": ("vectorized", 3, 4, 3, 4, 1e-4, False),
    "sequential": ("sequential", 3, 4, 3, 4, 1e-4, False),
}


@pytest.fixture(scope="module")
def tiny():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100, "noise": 0.1})


def _init_posterior(entry, seed):
    """An MCMC Posterior built by hand (1 chain x 4 draws), as a cheap stand-in for an SVI posterior."""
    rng = np.random.default_rng(seed)
    shapes = entry.model.site_shapes((2,))
    samples = {k: rng.normal(0.0, 0.5, (1, 4) + s).astype(np.float32) for k, s in shapes.items()}
    return inference.MCMCPosterior(model=entry.model, samples=samples, feature_shape=(2,))


def _numpyro_reference(entry, init, chain_method, num_warmup, draws, depth, flat, seed=0):
    """NumPyro's MCMC(NUTS(potential_fn=...)) from the start values `nuts` uses: (samples constrained, stats).
    flat: the position is one vector (the driver's `flat_potential`), else NumPyro's dict of sites."""
    x, y = entry.train.x, entry.train.y
    site_priors = entry.model.site_priors((2,))
    key = jax.random.PRNGKey(seed)
    init_u = nuts_module.initial_positions(entry.model, site_priors, (2,), init, 2, key, seed)
    potential = nuts_module.unconstrained_potential(entry.model, site_priors, jnp.asarray(x), jnp.asarray(y))
    if flat:
        unravel = ravel_pytree({k: v[0] for k, v in init_u.items()})[1]
        potential = nuts_module.flat_potential(entry.model, site_priors, unravel, jnp.asarray(x), jnp.asarray(y))
        init_u = jax.vmap(lambda u: ravel_pytree(u)[0])(init_u)
    mcmc = MCMC(NUTS(potential_fn=potential, dense_mass=False, target_accept_prob=0.8, max_tree_depth=depth),
                num_warmup=num_warmup, num_samples=draws, num_chains=2, chain_method=chain_method, progress_bar=False)
    mcmc.run(key, init_params=init_u, extra_fields=nuts_module.EXTRA_FIELDS)
    draws_u = mcmc.get_samples(group_by_chain=True)
    if flat:
        draws_u = jax.vmap(jax.vmap(unravel))(draws_u)
    transforms = nuts_module.site_transforms(site_priors)
    samples = {k: np.asarray(transforms[k](v)) for k, v in draws_u.items()}
    return samples, {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}


def test_the_flat_potential_is_the_dict_potential(tiny):
    """The driver's position is one vector: its potential and gradient are the site dict's, raveled."""
    site_priors = tiny.model.site_priors((2,))
    x, y = jnp.asarray(tiny.train.x), jnp.asarray(tiny.train.y)
    u = nuts_module.initial_positions(tiny.model, site_priors, (2,), _init_posterior(tiny, 0), 1,
                                      jax.random.PRNGKey(0), 0)
    z, unravel = ravel_pytree(u)
    np.testing.assert_array_equal(jax.jit(nuts_module.ravel_sites)(u), z)  # the driver's order is ravel_pytree's
    driver_unravel = jax.jit(nuts_module.site_unraveller(site_priors))(z)
    assert all(np.array_equal(driver_unravel[k], u[k]) for k in u)
    by_site = nuts_module.unconstrained_potential(tiny.model, site_priors, x, y)
    flat = nuts_module.flat_potential(tiny.model, site_priors, unravel, x, y)
    value, grad = jax.jit(jax.value_and_grad(by_site))(u)  # jitted: op by op would compile every operation
    flat_value, flat_grad = jax.jit(jax.value_and_grad(flat))(z)
    assert z.shape == (sum(int(np.prod(s)) for s in tiny.model.site_shapes((2,)).values()),)
    np.testing.assert_allclose(flat_value, value, rtol=1e-6)
    np.testing.assert_allclose(flat_grad, ravel_pytree(grad)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
def test_draws_equal_numpyros_mcmc_and_a_second_call_compiles_nothing(case, tiny, monkeypatch):
    chain_method, num_warmup, draws, depth, chunk_len, tol, flat = CASES[case]
    monkeypatch.setattr(nuts_module, "CHUNK_LEN", chunk_len)
    settings = dict(num_chains=2, num_warmup=num_warmup, draws_per_chain=draws, max_tree_depth=depth,
                    chain_method=chain_method, progress=False)
    init = _init_posterior(tiny, 0)
    post = inference.nuts(tiny.model, tiny.train, init=init, seed=0, **settings)

    shapes = tiny.model.site_shapes((2,))
    assert list(post.samples) == list(shapes)
    for k, s in shapes.items():
        assert post.samples[k].shape == (2, draws) + s and isinstance(post.samples[k], np.ndarray)
    assert {k: v.shape for k, v in post.sample_stats.items()} == {k: (2, draws) for k in nuts_module.EXTRA_FIELDS}
    assert post.info.chain_method == chain_method
    assert post.info.mean_leapfrog_steps == float(post.sample_stats["num_steps"].mean())

    samples, stats = _numpyro_reference(tiny, init, chain_method, num_warmup, draws, depth, flat)
    for k in shapes:
        np.testing.assert_allclose(post.samples[k], samples[k], rtol=tol, atol=tol, err_msg=k)
    np.testing.assert_array_equal(post.sample_stats["num_steps"], stats["num_steps"])
    np.testing.assert_array_equal(post.sample_stats["diverging"], stats["diverging"])
    np.testing.assert_allclose(post.sample_stats["accept_prob"], stats["accept_prob"], rtol=tol, atol=tol)

    # the same model object and settings, another seed, other data values of the same shapes, another init
    x, y = tiny.train.x, tiny.train.y
    other = (x + np.float32(0.05) * np.random.default_rng(1).normal(size=x.shape).astype(x.dtype), y[::-1].copy())
    COMPILES.clear()
    again = inference.nuts(tiny.model, other, init=_init_posterior(tiny, 1), seed=1, **settings)
    assert COMPILES == []
    assert not np.allclose(again.samples["mlp/~/linear_0/w"], post.samples["mlp/~/linear_0/w"])


def test_parallel_chains_on_a_device_mesh_give_the_vectorized_draws(tiny, monkeypatch):
    """chain_method="parallel" (``jax.shard_map``, one chain per device) runs each chain's own program: the draws
    and tree sizes of the batched ("vectorized") chains, with the settings of that case above (its sampler is
    reused)."""
    assert jax.local_device_count() >= 2, "tests/conftest.py forces 2 host devices before JAX starts"
    _, num_warmup, draws, depth, chunk_len, tol, _ = CASES["vectorized"]
    monkeypatch.setattr(nuts_module, "CHUNK_LEN", chunk_len)
    runs = {method: inference.nuts(tiny.model, tiny.train, init=_init_posterior(tiny, 0), seed=0, num_chains=2,
                                   num_warmup=num_warmup, draws_per_chain=draws, max_tree_depth=depth,
                                   chain_method=method, progress=False) for method in ("vectorized", "parallel")}
    assert runs["parallel"].info.chain_method == "parallel"
    for k, v in runs["vectorized"].samples.items():
        np.testing.assert_allclose(runs["parallel"].samples[k], v, rtol=tol, atol=tol, err_msg=k)
    np.testing.assert_array_equal(runs["parallel"].sample_stats["num_steps"], runs["vectorized"].sample_stats["num_steps"])


def test_chain_method_is_checked_and_parallel_falls_back_without_devices(tiny):
    with pytest.raises(ValueError, match=r"chain_method: expected one of .*got 'threads'"):
        inference.nuts(tiny.model, tiny.train, chain_method="threads")
    one_device = "sequential" if jax.default_backend() == "cpu" else "vectorized"  # batching gains nothing on CPU
    assert nuts_module.resolve_chain_method(None, 1) == "vectorized"
    assert nuts_module.resolve_chain_method(None, 2) == ("parallel" if jax.local_device_count() >= 2 else one_device)
    assert nuts_module.resolve_chain_method(None, jax.local_device_count() + 1) == one_device
    with pytest.warns(UserWarning, match=f"running the chains {one_device}"):
        assert nuts_module.resolve_chain_method("parallel", jax.local_device_count() + 1) == one_device


def test_a_second_call_from_another_svi_posterior_compiles_nothing(tiny, monkeypatch):
    """Chains started from an SVI posterior: its draws come from one jitted function per guide structure
    (`Posterior.draws`), so another fit of the same guide starts NUTS without compiling. (The same guide object
    here; guides built apart with equal structure share it too.)"""
    chain_method, num_warmup, draws, depth, chunk_len, *_ = CASES["parallel"]
    monkeypatch.setattr(nuts_module, "CHUNK_LEN", chunk_len)
    settings = dict(num_chains=2, num_warmup=num_warmup, draws_per_chain=draws, max_tree_depth=depth,
                    progress=False)
    guide = inference.mean_field(tiny.model)
    fits = [inference.fit(tiny.model, guide, tiny.train, steps=5, batch_size=32, progress=False, seed=s)
            for s in (0, 1)]
    first = inference.nuts(tiny.model, tiny.train, init=fits[0], seed=0, **settings)
    COMPILES.clear()
    second = inference.nuts(tiny.model, tiny.train, init=fits[1], seed=0, **settings)
    assert COMPILES == []
    assert first.info.chain_method == second.info.chain_method == default_method()
    assert not np.allclose(first.samples["mlp/~/linear_0/w"], second.samples["mlp/~/linear_0/w"])


def default_method():
    return "parallel" if jax.local_device_count() >= 2 else ("sequential" if jax.default_backend() == "cpu"
                                                              else "vectorized")
