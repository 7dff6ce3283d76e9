"""`models.prng.flat_key`: the same draws as JAX's own threefry key, bit for bit (only compile time changes)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from models.prng import FLAT_THREEFRY, flat_key

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

