"""Compile once: a second fit of the same structure compiles nothing (compiles counted with jax.monitoring)."""

import jax
import numpy as np
import optax
import pytest
from jax import monitoring

import inference
import zoo

COMPILES = []  # the compiled functions' names


def _count(event, seconds, **kwargs):
    # a backend compile, or a compiled program read back from the persistent cache: either means the
    # in-process cache did not serve the call
    if "backend_compile" in event or "cache_retrieval" in event:
        COMPILES.append(kwargs.get("fun_name", event))


monitoring.register_event_duration_secs_listener(_count)


def _entry(**kw):
    return zoo.get("mlp", data="two_moons", hidden=(5,), data_kwargs={"n": 160, "noise": 0.1}, **kw)


ADAM = optax.adam(1.5e-3)


def _fit(entry, guide=None, data=None, **kw):
    kw = {"steps": 30, "batch_size": 32, "progress": False, "chunk_size": 20, "optimizer": ADAM, **kw}
    guide = inference.mean_field(entry.model) if guide is None else guide
    return inference.fit(entry.model, guide, entry.train if data is None else data, **kw)


def test_a_second_fit_of_the_same_structure_compiles_nothing():
    first = _fit(_entry(), seed=0)
    entry = _entry()  # another zoo.get: another BNN object, another guide object
    shifted = (entry.train.x + np.float32(0.25), entry.train.y[::-1].copy())  # other data, same shape
    before = len(COMPILES)
    runs = [_fit(entry, seed=1), _fit(entry, data=shifted, seed=2), _fit(entry, steps=75, seed=3),
            _fit(entry, steps=3, kl_warmup=10, seed=4), _fit(entry, steps=20, temperature=0.5, seed=5)]
    assert len(COMPILES) == before, f"{len(COMPILES) - before} compiles on structurally equal fits"
    assert first.info.traces in (0, 1) and all(r.info.traces == 0 for r in runs)
    assert [len(r.losses) for r in runs] == [30, 30, 75, 3, 20]
    assert not np.allclose(runs[0].losses, runs[1].losses)  # the data really were the new data


def test_another_learning_rate_or_number_of_steps_compiles_nothing_and_a_users_optax_object_once():
    """The optimiser is data: a record's numbers live in its state (optax.inject_hyperparams), so a fit with another
    rate, another default schedule (another `steps`) or another seed reuses the compiled update, and computes
    optax's own numbers; a user's optax object is keyed by identity (one compile per object). The compiles are
    counted by the jitted update's own cache (`_cache_size`) and by jax.monitoring, nothing in the library."""
    from inference.svi import run_chunk

    entry = _entry()
    _fit(entry, optimizer=inference.optimizers.adam(learning_rate=1e-3), seed=0)
    _fit(entry, optimizer=None, steps=40, seed=0)  # the default: a cosine record
    cache, before = run_chunk._cache_size(), len(COMPILES)
    runs = [_fit(_entry(), optimizer=inference.optimizers.adam(learning_rate=rate), seed=1) for rate in (2e-3, 5e-2)]
    runs += [_fit(_entry(), optimizer=None, steps=steps, seed=2) for steps in (41, 90)]
    assert run_chunk._cache_size() == cache and COMPILES[before:] == [] and [r.info.traces for r in runs] == [0] * 4
    # the same numbers as optax's own objects (each of which compiles its own update once)
    mine = {id(o): o for o in (optax.adam(5e-2), optax.adam(optax.cosine_decay_schedule(1e-2, 90.0, alpha=0.01)))}
    theirs = [_fit(_entry(), optimizer=o, seed=s, steps=n) for o, s, n in zip(mine.values(), (1, 2), (30, 90))]
    assert [r.info.traces for r in theirs] == [1, 1]
    for ours, their in zip((runs[1], runs[3]), theirs):
        np.testing.assert_array_equal(ours.losses, their.losses)
        for k in ours.params:
            np.testing.assert_array_equal(ours.params[k], their.params[k])
    assert not np.array_equal(runs[0].losses, runs[1].losses)  # the rate really was the new rate
    assert _fit(_entry(), optimizer=list(mine.values())[0], seed=3).info.traces == 0  # the same object: reused


def test_a_recompiled_fit_gives_the_result_of_the_first_compile():
    a = _fit(_entry(), seed=7, steps=25)
    jax.clear_caches()
    b = _fit(_entry(), seed=7, steps=25)  # compiled afresh
    c = _fit(_entry(), seed=7, steps=25)  # reuses b's
    assert b.info.traces == 1 and c.info.traces == 0
    np.testing.assert_array_equal(a.losses, b.losses)
    np.testing.assert_array_equal(b.losses, c.losses)
    for k in b.params:
        np.testing.assert_array_equal(b.params[k], c.params[k])


def test_the_compiled_settings_see_every_setting_of_the_computation():
    """jit's key of a fit's update (`inference.svi.compiled_settings` and the optimiser's pytree structure) changes
    with whatever the computation depends on: no setting of the model, the guide or the fit can reuse another's
    compiled code; a learning rate is no part of it."""
    import models
    from inference.svi import compiled_settings

    def key(entry=None, guide=None, optimizer=None, **kw):
        entry = _entry() if entry is None else entry
        guide = inference.mean_field(entry.model) if guide is None else guide
        structure = jax.tree.structure(inference.optimizers.as_optimizer(optimizer or inference.optimizers.adam(1e-3)))
        return compiled_settings(entry.model, guide, kw.pop("n_data", 160), **kw), structure

    base = key()
    assert key() == base and hash(tuple(key()[0].values())) == hash(tuple(base[0].values()))
    assert key(optimizer=inference.optimizers.adam(learning_rate=0.5)) == base  # a rate is data
    assert key(optimizer=ADAM) == key(optimizer=ADAM) != key(optimizer=optax.adam(1.5e-3))  # optax's: by identity
    changed = {
        "prior scale": key(_entry(prior_scale=2.0)), "prior kind": key(_entry(prior="cauchy")),
        "width": key(zoo.get("mlp", data="two_moons", hidden=(6,), data_kwargs={"n": 160, "noise": 0.1})),
        "activation": key(_entry(activation="tanh")),
        "data set": key(zoo.get("mlp", data="two_moons", hidden=(5,), data_kwargs={"n": 160, "noise": 0.2})),
        "guide init scale": key(guide=inference.mean_field(_entry().model, init_scale=0.05)),
        "guide kind": key(guide=inference.k_tied.k_tied(_entry().model, k=2)),
        "optimizer kind": key(optimizer=inference.optimizers.sgd(1e-3)),
        "adam's b1": key(optimizer=inference.optimizers.adam(b1=0.8)),
        "n_data": key(n_data=161), "particles": key(num_particles=2), "estimator": key(estimator="local"),
    }
    for what, other in changed.items():
        assert other != base, what
    entry = _entry()
    entry.model.likelihood = models.likelihoods.categorical()  # replaced after the build: its spec is compared
    assert key(entry) == base
    entry.model.prior = models.priors.normal(3.0)
    assert key(entry) != base
    network = lambda x: __import__("haiku").Linear(2)(x)  # noqa: E731
    hand, other_hand = (models.bnn(network, feature_shape=(2,)) for _ in range(2))  # by hand: keyed by identity
    of = lambda model, guide: key(entry=type("E", (), {"model": model, "train": entry.train}), guide=guide)  # noqa: E731
    assert of(hand, inference.mean_field(hand)) == of(hand, inference.mean_field(hand))  # the same model object
    assert of(hand, inference.mean_field(hand)) != of(other_hand, inference.mean_field(other_hand))


@pytest.mark.parametrize("change", ["prior", "guide", "network", "num_particles"])
def test_what_changes_the_computation_compiles_again(change):
    _fit(_entry(), seed=0)
    entry = {"prior": lambda: _entry(prior_scale=0.5), "network": lambda: _entry(activation="tanh")}.get(
        change, _entry)()
    kw = {"num_particles": {"num_particles": 2}}.get(change, {})
    if change == "guide":
        kw["guide"] = inference.mean_field(entry.model, init_scale=0.05)
    before = len(COMPILES)
    post = _fit(entry, **kw)
    assert len(COMPILES) > before and post.info.traces == 1
    assert not np.array_equal(post.losses, _fit(_entry(), seed=0).losses)  # the new computation's numbers


def test_predictions_of_another_posterior_of_the_same_structure_compile_nothing():
    a, b = _fit(_entry(), seed=0), _fit(_entry(), seed=5)
    x = _entry().test.x
    a.predict(x, num_samples=6, chunk_size=3)
    a.log_likelihood(x, _entry().test.y, num_samples=6, chunk_size=3)
    before = len(COMPILES)
    pb = b.predict(x, num_samples=6, chunk_size=3)
    b.log_likelihood(x, _entry().test.y, num_samples=6, chunk_size=3)
    assert len(COMPILES) == before
    assert not np.allclose(pb, a.predict(x, num_samples=6, chunk_size=3))  # b's own parameters were used


def test_fewer_draws_than_a_chunk_reuse_the_chunks_sampler():
    post = _fit(_entry(), seed=0)
    x = _entry().test.x
    full = post.predict(x, num_samples=8, chunk_size=8)
    before = len(COMPILES)
    part = post.predict(x, num_samples=3, chunk_size=8)  # the first 3 of the chunk's 8 draws
    assert "jit(sample)" not in COMPILES[before:]
    np.testing.assert_allclose(part, full[:3], rtol=1e-6)
    post.draws(5)  # fewer draws than a chunk: the chunk-size sampler
    before = len(COMPILES)
    few = post.draws(2, seed=4)  # e.g. NUTS's starting points: that same sampler, no new compile
    assert "jit(sample)" not in COMPILES[before:]
    alone = post._svi_draws(jax.random.PRNGKey(4), 2)  # a sampler of exactly 2 draws
    for k in post.site_names:  # the same numbers as 2 draws made alone
        np.testing.assert_array_equal(few[k], alone[k])


def test_a_guide_draws_the_same_weights_with_a_flat_key():
    from base.prng import flat_key

    entry = zoo.get("mlp", data="two_moons", hidden=(3,), data_kwargs={"n": 40})
    guide = inference.mean_field(entry.model)
    params = guide.init_params(jax.random.PRNGKey(0), entry.train.x[:2])
    raw = guide.sample_posterior(jax.random.PRNGKey(1), params, sample_shape=(4,))
    flat = guide.sample_posterior(flat_key(jax.random.PRNGKey(1)), params, sample_shape=(4,))
    assert set(raw) == set(flat)
    for k in raw:
        np.testing.assert_array_equal(flat[k], raw[k])


def _batch_norm_mlp(num_outputs):
    """A network with Haiku state (batch-norm statistics), named apart so no other test has compiled it."""
    import haiku as hk

    from models.networks.layers import batch_norm

    def network(x, is_training=False):
        h = jax.nn.relu(batch_norm(hk.Linear(3, name="bn_mlp_in")(x), is_training, name="bn_mlp_bn"))
        return hk.Linear(num_outputs, name="bn_mlp_out")(h)

    return network


def test_a_stateful_networks_initial_state_and_nuts_start_compile_nothing_more():
    """A batch-norm network: its initial state, asked for inside a trace (a fit's jitted initialisation), is the
    one kept from the first initialisation outside (before: the initialiser compiled a second time under
    compile-time evaluation, and its constants op by op); a first NUTS run obtains exactly its two sampler programs
    (start values stacked on the host, not op by op). Persistent-cache reads count as programs obtained too."""
    import jax.numpy as jnp

    import models

    entry = _entry()
    model = models.bnn(_batch_norm_mlp(2), name="bn_mlp", feature_shape=entry.train.feature_shape)
    feature_shape = entry.train.feature_shape
    assert model.is_stateful(feature_shape)
    model.init_values(jax.random.PRNGKey(0), feature_shape)  # as a guide's site table does, outside any trace
    before = len(COMPILES)
    state = jax.eval_shape(lambda: jax.tree.map(jnp.asarray, model.initial_state(feature_shape)))
    assert len(COMPILES) == before, COMPILES[before:]
    assert jax.tree.leaves(state)
    post = inference.fit(model, inference.mean_field(model), entry.train, steps=5, batch_size=32, progress=False)
    assert post.state is not None
    before = len(COMPILES)
    inference.nuts(model, entry.train, num_chains=2, num_warmup=2, draws_per_chain=2, max_tree_depth=2,
                   chain_method="vectorized", progress=False)
    programs = [name for name in COMPILES[before:] if "cache_retrieval" not in name]  # a cache hit is both events
    assert sorted(programs) == ["jit(sampler_chunk)", "jit(sampler_init)"], programs
