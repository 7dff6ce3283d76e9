"""`Posterior.predict` / `log_likelihood`: chunks written into one output, the same numbers as stacking the
chunks, and the reductions over draws (reduce="mean", "log_mean_exp") that never hold (S, N, C)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import inference
import zoo
from inference.posterior import LOG_LIKELIHOOD_REDUCTIONS

S, CHUNK = 7, 3  # S not a multiple of the chunk size: the last chunk is padded


@pytest.fixture(scope="module")
def tiny():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100, "noise": 0.1})


@pytest.fixture(scope="module")
def svi(tiny):
    return inference.fit(tiny.model, inference.mean_field(tiny.model), tiny.train, steps=20, progress=False)


@pytest.fixture(scope="module")
def mcmc(tiny, svi):
    """An MCMC-kind Posterior built by hand: 2 chains x 4 draws (8 = S + 1, also not a multiple of CHUNK)."""
    draws = svi.draws(8, seed=1)
    samples = {k: np.asarray(v).reshape((2, 4) + v.shape[1:]) for k, v in draws.items()}
    return inference.MCMCPosterior(model=tiny.model, samples=samples, feature_shape=svi.feature_shape)


@pytest.fixture(params=["svi", "mcmc"])
def post(request, svi, mcmc):
    return svi if request.param == "svi" else mcmc


def _chunk_draws(post, num_samples, seed, chunk_size):
    """[{site: (chunk_size, ...)}, ...] the draws of each chunk, by hand: SVI chunk i is `chunk_size` guide draws
    with the key fold_in(PRNGKey(seed), i); MCMC: the stored draws, the last chunk padded with its last draw."""
    if isinstance(post, inference.SVIPosterior):
        base, x0 = jax.random.PRNGKey(seed), jnp.zeros((1,) + tuple(post.feature_shape))
        sample = jax.jit(lambda key, params: post.guide.sample_posterior(key, params, x0, sample_shape=(chunk_size,)))
        chunks = [sample(jax.random.fold_in(base, i), post.params) for i in range(-(-num_samples // chunk_size))]
        return [{k: out[k] for k in post.site_names} for out in chunks]
    flat = post.draws(num_samples)
    chunks = []
    for start in range(0, num_samples, chunk_size):
        chunk = {k: np.asarray(v[start:start + chunk_size]) for k, v in flat.items()}
        pad = chunk_size - len(next(iter(chunk.values())))
        chunks.append({k: np.concatenate([v, np.repeat(v[-1:], pad, 0)]) for k, v in chunk.items()})
    return chunks


def _stacked(fn, post, num_samples, seed, chunk_size, *args):
    """The pre-allocation result: every chunk through jit(vmap(fn)), cut to its real draws, concatenated."""
    apply = jax.jit(jax.vmap(lambda p, s, *a: fn(p, *a, state=s), in_axes=(0,) + (None,) * (len(args) + 1)))
    out = [np.asarray(apply(chunk, post.state, *args)) for chunk in _chunk_draws(post, num_samples, seed, chunk_size)]
    return np.concatenate(out)[:num_samples]


def test_predict_and_log_likelihood_equal_the_stacked_chunks_bit_for_bit(post, tiny):
    x, y = tiny.test.x[:12], tiny.test.y[:12]
    probs = post.predict(x, S, seed=3, chunk_size=CHUNK)
    assert probs.shape == (S, 12, 2) and probs.dtype == np.float32
    np.testing.assert_array_equal(probs, _stacked(tiny.model.predictive, post, S, 3, CHUNK, x))
    ll = post.log_likelihood(x, y, S, seed=3, chunk_size=CHUNK)
    assert ll.shape == (S, 12)
    np.testing.assert_array_equal(ll, _stacked(tiny.model.log_likelihood, post, S, 3, CHUNK, x, y))


def test_each_row_is_the_network_at_that_draw(mcmc, tiny):
    x = tiny.test.x[:12]
    probs = mcmc.predict(x, 8, chunk_size=CHUNK)
    flat = mcmc.draws()  # chain-major
    for s in range(8):
        want = tiny.model.predictive({k: v[s] for k, v in flat.items()}, x, state=mcmc.state)
        np.testing.assert_allclose(probs[s], want, rtol=1e-5, atol=1e-6)


def test_reduce_mean_is_the_mean_over_draws(post, tiny):
    x, y = tiny.test.x, tiny.test.y
    mean = post.predict(x, S, seed=3, chunk_size=CHUNK, reduce="mean")
    per_draw = post.predict(x, S, seed=3, chunk_size=CHUNK)
    assert mean.shape == per_draw.shape[1:] and mean.dtype == per_draw.dtype
    np.testing.assert_allclose(mean, per_draw.mean(0), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(mean, per_draw.mean(0))  # the same float32 running sum, draw by draw
    ll = post.log_likelihood(x, y, S, seed=3, chunk_size=CHUNK)
    np.testing.assert_allclose(post.log_likelihood(x, y, S, seed=3, chunk_size=CHUNK, reduce="mean"), ll.mean(0),
                               rtol=0, atol=1e-6)


def test_reduce_log_mean_exp_is_the_log_pointwise_predictive_density(post, tiny):
    x, y = tiny.test.x, tiny.test.y
    ll = post.log_likelihood(x, y, S, seed=3, chunk_size=CHUNK).astype(np.float64)
    lpd = post.log_likelihood(x, y, S, seed=3, chunk_size=CHUNK, reduce="log_mean_exp")
    assert lpd.shape == (len(x),)
    np.testing.assert_allclose(lpd, np.log(np.exp(ll).mean(0)), rtol=1e-6, atol=1e-6)
    # stable where exp underflows: a shift of -1000 moves the running logsumexp by exactly -1000
    shifted = ll[:, :3] - 1000.0
    fold = LOG_LIKELIHOOD_REDUCTIONS["log_mean_exp"](S, shifted[:CHUNK])
    for start in range(0, S, CHUNK):
        fold.add(start, shifted[start:start + CHUNK])
    np.testing.assert_allclose(fold.result() + 1000.0, lpd[:3], rtol=0, atol=1e-6)


@pytest.mark.parametrize("kwargs, message", [
    ({"reduce": "sum"}, r"reduce: expected one of \[None, 'mean'\], got 'sum'"),
    ({"reduce": "log_mean_exp"}, r"reduce: expected one of \[None, 'mean'\], got 'log_mean_exp'"),
    ({"num_samples": 0}, r"num_samples: expected a positive integer, got 0"),
    ({"num_samples": 2.5}, r"num_samples: expected a positive integer, got 2.5"),
    ({"chunk_size": 0}, r"chunk_size: expected a positive integer, got 0"),
    ({"chunk_size": None}, r"chunk_size: expected a positive integer, got None"),
])
def test_bad_arguments_are_named(svi, tiny, kwargs, message):
    with pytest.raises(ValueError, match=message):
        svi.predict(tiny.test.x[:3], **kwargs)


def test_log_likelihood_names_its_reductions(svi, tiny):
    with pytest.raises(ValueError, match=r"reduce: expected one of \[None, 'mean', 'log_mean_exp'\], got 'max'"):
        svi.log_likelihood(tiny.test.x[:3], tiny.test.y[:3], reduce="max")


def test_fewer_draws_than_a_chunk_run_unpadded_with_the_same_draws(svi, mcmc, tiny):
    """S < chunk_size: the network runs on the S draws only (a fifth of the work for 10 of 50), the same draws."""
    x = tiny.test.x[:12]
    np.testing.assert_allclose(svi.predict(x, 2, seed=4, chunk_size=50), svi.predict(x, 50, seed=4, chunk_size=50)[:2],
                               rtol=1e-6, atol=1e-7)  # SVI: the first 2 of the chunk's 50 guide draws
    np.testing.assert_allclose(mcmc.predict(x, 8, chunk_size=50), mcmc.predict(x, 8, chunk_size=3), rtol=1e-6, atol=1e-7)


def test_mcmc_draws_are_chunked_on_the_host_without_compiling(tiny, svi):
    """Device-array samples (as nuts returns them) are reshaped, picked, cut and padded in NumPy: predicting on a
    new input shape compiles the network once and nothing else (no per-site reshape / slice / concatenate)."""
    from jax import monitoring

    draws = svi.draws(6, seed=2)
    samples = {k: jnp.reshape(v, (2, 3) + v.shape[1:]) for k, v in draws.items()}  # jax arrays
    post = inference.MCMCPosterior(model=tiny.model, samples=samples, feature_shape=svi.feature_shape)
    compiled = []
    monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **kw: compiled.append(kw.get("fun_name")) if event.endswith("backend_compile_duration")
        else None)
    post.predict(tiny.test.x[:9], 5, chunk_size=2)  # 5 of 6 draws picked, 3 chunks, the last padded
    assert len(compiled) == 1, compiled
