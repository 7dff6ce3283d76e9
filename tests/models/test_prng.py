"""`base.prng.flat_key`: the same draws as JAX's own threefry key, bit for bit (only compile time changes)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from base.prng import FLAT_THREEFRY, flat_key, normal_draws, paired_normals

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


_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)


def _threefry2x32_reference(key, x0, x1):
    """Threefry-2x32 with 20 rounds (Salmon et al., 2011) in NumPy: key (k0, k1), counters x0, x1 uint32 arrays."""
    m = np.uint64(0xFFFFFFFF)
    ks = [np.uint64(key[0]), np.uint64(key[1])]
    ks.append(ks[0] ^ ks[1] ^ np.uint64(0x1BD11BDA))
    x = [(np.asarray(x0, np.uint64) + ks[0]) & m, (np.asarray(x1, np.uint64) + ks[1]) & m]
    for block in range(5):
        for r in _ROTATIONS[4 * (block % 2): 4 * (block % 2) + 4]:
            x[0] = (x[0] + x[1]) & m
            x[1] = ((x[1] << np.uint64(r)) | (x[1] >> np.uint64(32 - r))) & m
            x[1] = x[1] ^ x[0]
        x[0] = (x[0] + ks[(block + 1) % 3]) & m
        x[1] = (x[1] + ks[(block + 2) % 3] + np.uint64(block + 1)) & m
    return x[0].astype(np.uint32), x[1].astype(np.uint32)


def test_threefry_reference_matches_the_published_known_answers():
    """Random123's known-answer vectors for threefry2x32_20 (key, counter -> output)."""
    for key, ctr, out in [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
                          ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
                          ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]:
        got = _threefry2x32_reference(key, np.array([ctr[0]]), np.array([ctr[1]]))
        assert (int(got[0][0]), int(got[1][0])) == out


@pytest.mark.parametrize("shape", [(7,), (6, 5)])
def test_paired_normals_are_both_words_of_threefry_mapped_as_jax_maps_bits_to_normals(shape):
    """Values: the first words of counters (0, 0 .. m-1), then their second words (m = ceil(n/2)), mapped to a
    uniform in (-1, 1) by the top 23 bits and through sqrt(2) erfinv (float tolerance: erfinv's own rounding)."""
    from scipy.special import erfinv

    key = jax.random.PRNGKey(42)
    n = int(np.prod(shape))
    first, second = _threefry2x32_reference(np.asarray(key), np.zeros((n + 1) // 2), np.arange((n + 1) // 2))
    bits = np.concatenate([first, second])[:n]
    uniform = ((bits >> 9) | np.uint32(0x3F800000)).view(np.float32).astype(np.float64) - 1.0
    lo = np.nextafter(np.float32(-1), np.float32(0))
    expected = np.sqrt(2) * erfinv(np.maximum(lo, uniform * (1.0 - lo) + lo)).reshape(shape)
    got = jax.jit(paired_normals, static_argnums=1)(key, shape)
    assert got.shape == shape and got.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(paired_normals(jax.random.key(42), shape), got)  # a typed key: the same


def test_paired_normals_are_standard_normal_and_fall_back_for_other_generators():
    draws = np.asarray(paired_normals(jax.random.PRNGKey(0), (200_000,)))
    assert abs(draws.mean()) < 0.01 and abs(draws.std() - 1.0) < 0.01  # 4.5 and 3.2 standard errors
    assert abs(np.mean(draws[:100_000] * draws[100_000:])) < 0.01  # the two words of a counter uncorrelated
    rbg = jax.random.key(0, impl="rbg")
    np.testing.assert_array_equal(paired_normals(rbg, (5,)), jax.random.normal(rbg, (5,)))
