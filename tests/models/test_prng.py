"""`base.prng.flat_key`: the same draws as JAX's own threefry key, bit for bit (only compile time changes)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from base.prng import FLAT_THREEFRY, flat_key, normal_draws

pytestmark = pytest.mark.smoke  # the subset .ci/run runs on the newest stack

SHAPES = [(), (7,), (5, 3), (4, 6, 10), (2, 3, 4, 5)]


def _draws(key):
    """Every kind of draw the library makes, at multi-dimensional shapes, after a split and a fold_in."""
    a, b = jax.random.split(jax.random.fold_in(key, 11))
    return ([jax.random.normal(a, s) for s in SHAPES] + [jax.random.uniform(b, s) for s in SHAPES]
            + [jax.random.bernoulli(a, 0.3, (6, 5)), jax.random.randint(b, (3, 4, 2), 0, 9),
               jax.random.bits(a, (5, 5, 3)), jax.random.cauchy(b, (2, 9)), jax.random.permutation(a, 12)])


@pytest.mark.parametrize("partitionable", [True, False])
def test_flat_key_draws_equal_the_raw_keys_draws_bit_for_bit(partitionable):
    with jax.threefry_partitionable(partitionable):
        raw = jax.random.PRNGKey(3)
        expected = _draws(raw)
        eager = _draws(flat_key(raw))
        jitted = jax.jit(lambda k: _draws(flat_key(k)))(raw)
        typed = _draws(flat_key(jax.random.key(3)))  # a typed threefry key holds the same bits as PRNGKey(3)
    for got in (eager, jitted, typed):
        for e, g in zip(expected, got, strict=True):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(e))


def test_flat_key_under_vmap_gives_each_key_its_own_draws():
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    got = jax.vmap(lambda k: jax.random.normal(flat_key(k), (4, 5)))(keys)
    assert got.shape == (3, 4, 5)
    for i in range(3):
        np.testing.assert_array_equal(got[i], jax.random.normal(keys[i], (4, 5)))


def test_flat_key_types_and_leaves_other_implementations_alone():
    key = flat_key(jax.random.PRNGKey(0))
    assert key.shape == () and jax.random.key_impl(key) == FLAT_THREEFRY
    assert flat_key(key) is key  # already flat
    rbg = jax.random.key(0, impl="rbg")
    assert flat_key(rbg) is rbg
    np.testing.assert_array_equal(jax.random.key_data(key), jnp.array([0, 0], jnp.uint32))



DRAW_SHAPES = [(64, 64), (64,), (10,), (3, 5, 7), (1,), (0,), (100, 4, 3)]


@pytest.mark.parametrize("make_key, own_hash_from", [  # all draws in one hash; the large ones alone; each alone
    (jax.random.PRNGKey, 2 ** 15), (jax.random.key, 2 ** 15), (lambda s: flat_key(jax.random.PRNGKey(s)), 2 ** 15),
    (jax.random.PRNGKey, 60), (jax.random.key, 1)])
def test_normal_draws_equal_one_normal_per_draw_bit_for_bit(make_key, own_hash_from, assert_same_draws):
    """`normal_draws` hashes small draws' counters in one vector and large draws alone: the numbers of one
    jax.random.normal per draw either way."""
    def batched(key):
        return normal_draws(list(jax.random.split(key, len(DRAW_SHAPES))), DRAW_SHAPES, own_hash_from=own_hash_from)

    def one_by_one(key):
        return [jax.random.normal(k, s) for k, s in zip(jax.random.split(key, len(DRAW_SHAPES)), DRAW_SHAPES)]

    for seed in (0, 7):
        got, expected = jax.jit(batched)(make_key(seed)), jax.jit(one_by_one)(make_key(seed))
        for g, e in zip(got, expected, strict=True):
            assert g.shape == e.shape and g.dtype == e.dtype == jnp.float32
            assert_same_draws(g, e)


def test_normal_draws_with_constant_scales_equal_numpyros_scaled_draws_bit_for_bit(assert_same_draws):
    """With `scales`, draw i is ``jax.random.normal(k_i, s_i) * scale_i`` as XLA compiles it with a constant
    scale, for shared and own-hash draws alike."""
    shapes, scales = [(64, 64), (10,), (3, 5, 7)], [0.3, 1.7, 0.05]
    for own_hash_from in (2 ** 15, 60):
        def batched(key):
            return normal_draws(list(jax.random.split(key, 3)), shapes, scales, own_hash_from=own_hash_from)

        def one_by_one(key):
            return [jax.random.normal(k, s) * c for k, s, c in zip(jax.random.split(key, 3), shapes, scales)]

        for got, expected in zip(jax.jit(batched)(jax.random.PRNGKey(2)), jax.jit(one_by_one)(jax.random.PRNGKey(2)),
                                 strict=True):
            assert_same_draws(got, expected)


def test_normal_draws_declines_what_it_cannot_reproduce():
    keys = list(jax.random.split(jax.random.PRNGKey(0), 2))
    assert normal_draws(list(jax.random.split(jax.random.key(0, impl="rbg"), 2)), [(3,), (2,)]) is None
    with jax.threefry_partitionable(False):  # the other bit layout: the caller draws one by one
        assert normal_draws(keys, [(3,), (2,)]) is None
    assert [d.shape for d in normal_draws(keys, [(3,), (0,)])] == [(3,), (0,)]


def test_a_normal_guide_draws_numpyros_per_site_numbers_with_one_hash():
    """The mean-field guide takes the keys its sample statements would take, in order (NumPyro's seed handler
    splits its key once per site), and draws every site with one hash: the trace holds loc + scale * normal(key_i)
    of one draw per site with those keys (to float rounding: the compiled kernels differ)."""
    from numpyro import handlers

    import inference
    import zoo

    entry = zoo.get("mlp", data="two_moons", hidden=(5,), data_kwargs={"n": 64, "noise": 0.1})
    guide = inference.mean_field(entry.model, init_scale=0.3, scale_cap=None)  # q.scale is the sd drawn with
    x, y = entry.train.x[:8], entry.train.y[:8]
    guide.setup(x)  # the site table outside any trace, as fit builds it

    def draws_and_expected(key):
        trace = handlers.trace(handlers.seed(guide, key)).get_trace(x, y, len(entry.train))
        draws, expected = {}, {}
        for name in entry.model.site_shapes(x):
            key, site_key = jax.random.split(key)
            loc, scale = (trace[guide.param_name(name, s)]["value"] for s in ("loc", "scale"))
            draws[name] = trace[name]["value"]
            expected[name] = loc + jax.random.normal(site_key, loc.shape) * scale
        return draws, expected

    draws, expected = jax.jit(draws_and_expected)(jax.random.PRNGKey(4))
    assert list(draws) == list(entry.model.site_shapes(x))
    for name in draws:
        np.testing.assert_allclose(draws[name], expected[name], rtol=1e-6, atol=1e-7, err_msg=name)
