"""Random keys that compile cheaply: JAX's threefry with every draw made flat and reshaped.

JAX's default key (threefry2x32, partitionable) counts the random bits of a draw of shape (d1, ..., dn) with an
n-dimensional 64-bit iota; XLA's CPU backend compiles that slowly for multi-dimensional shapes, and a flat draw
of the same number of values quickly (a sampler that draws every site of a guide compiles several times faster
with `flat_key`).

The flat draw reshaped is the same array bit for bit (the partitionable counter of an element is its flat
index; the original threefry generates flat bits and reshapes), so `flat_key` changes compile time only,
never a number. The library's compiled programs that draw (the SVI update and guide initialisation, Haiku's
initialiser, posterior draws, the ELBO-draw and gradient diagnostics) wrap their raw keys with it inside jit.
"""

from __future__ import annotations

import math

import jax
import jax.extend.random as jax_random
import jax.numpy as jnp
import numpy as np
from jax import lax


def _flat_random_bits(key_data, bit_width, shape):
    """threefry2x32's random bits for one raw key (2,) uint32, drawn as (prod(shape),) and reshaped to `shape`."""
    threefry = jax_random.threefry_prng_impl
    return threefry.random_bits(key_data, bit_width, (math.prod(shape),)).reshape(shape)


def _flat_threefry():
    """JAX's threefry2x32 implementation with `_flat_random_bits` in place of its random bits."""
    threefry = jax_random.threefry_prng_impl
    return jax_random.define_prng_impl(key_shape=threefry.key_shape, seed=threefry.seed, split=threefry.split,
                                       random_bits=_flat_random_bits, fold_in=threefry.fold_in,
                                       name="threefry2x32_flat", tag="fryflat")


FLAT_THREEFRY = _flat_threefry()


def flat_key(key):
    """A typed key of `FLAT_THREEFRY` holding the same bits as `key`: draws from it equal draws from `key`
    exactly and compile faster (module docstring).

    key: a raw threefry key, uint32 (..., 2) (``jax.random.PRNGKey``), or a typed threefry key (...,)
    (``jax.random.key``); traceable (use it inside jit). A typed key of another implementation (e.g. "rbg")
    is returned unchanged.
    """
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if str(jax.random.key_impl(key)) != jax_random.threefry_prng_impl.name:
            return key
        key = jax.random.key_data(key)
    return jax.random.wrap_key_data(key, impl=FLAT_THREEFRY)


OWN_HASH_FROM = 2 ** 15
"""`normal_draws` hashes a draw of this many values or more on its own (module docstring of `normal_draws`)."""

def _bits_to_normal(bits, scale=None):
    """uint32 random bits (n,) -> float32 standard normals (n,), as ``jax.random.normal``: a uniform in
    (nextafter(-1, 0), 1) from the top 23 bits, then sqrt(2) erfinv. With a constant `scale` (a Python or NumPy
    number): the normals times `scale`, as XLA compiles ``jax.random.normal(k, s) * scale``: erfinv times the one
    float32 constant sqrt(2) * scale (which can differ from the normals times `scale` by an ulp)."""
    lo = np.nextafter(np.array(-1.0, np.float32), np.array(0.0, np.float32), dtype=np.float32)
    hi = np.array(1.0, np.float32)
    float_bits = lax.shift_right_logical(bits, jnp.array(32 - 23, jnp.uint32))
    float_bits = lax.bitwise_or(float_bits, jnp.asarray(np.array(1.0, np.float32).view(np.uint32), jnp.uint32))
    floats = lax.bitcast_convert_type(float_bits, jnp.float32) - jnp.array(1.0, jnp.float32)
    lo_b, hi_b = lax.convert_element_type(lo, jnp.float32), lax.convert_element_type(hi, jnp.float32)
    uniform = lax.max(lo_b, floats * (hi_b - lo_b) + lo_b)
    sqrt2 = np.array(np.sqrt(2), np.float32)
    if scale is None:
        return lax.mul(sqrt2, lax.erf_inv(uniform))
    return lax.mul(lax.erf_inv(uniform), sqrt2 * np.float32(scale))


def _key_words(keys):
    """[(2,) uint32] raw words of threefry keys (raw or typed), or None for a key of another implementation."""
    words = []
    for key in keys:
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
            if str(jax.random.key_impl(key)) not in (jax_random.threefry_prng_impl.name, str(FLAT_THREEFRY)):
                return None
            key = jax.random.key_data(key)
        if key.shape != (2,) or key.dtype != jnp.uint32:
            return None
        words.append(key)
    return words


def normal_draws(keys, shapes, scales=None, *, own_hash_from: int = OWN_HASH_FROM) -> list | None:
    """``[jax.random.normal(k, s) for k, s in zip(keys, shapes)]`` (float32), the same numbers bit for bit, with
    the small draws from ONE threefry hash and each large draw by ``jax.random.normal`` itself; None when the same
    numbers cannot be promised.

    Each draw of shape s is n = prod(s) values of JAX's partitionable threefry (the hash of key k and the
    counters 0 .. n-1, xor-ed halves; `flat_key` draws it so), mapped to a uniform in (-1, 1) and through
    sqrt(2) erfinv, all elementwise. Draws of fewer than `own_hash_from` values share one hash: their counters
    in one vector, each with its own key broadcast along them, which gives each draw's bits exactly; the
    compiled program then holds one hash where a guide with S sites held S (S hashes can be most of the compile
    time of a small network's update). A draw of `own_hash_from` values or more is
    ``jax.random.normal(flat_key(k), s)``: a key per value costs run time, which such a draw pays at every step,
    while one more hash costs compile time once; and a caller that uses only some draws (the local
    reparameterisation estimator ignores the weight draws) pays for no unused large one. (A hash written out
    elementwise, which XLA fuses with the code around it, was faster for the draws alone but slower in an SVI
    step: docs/speed.md.)

    keys: threefry keys, raw (2,) uint32 or typed (``jax.random.key``, `flat_key`); shapes: tuples;
    own_hash_from: a positive int. Returns a list of float32 arrays of `shapes`, or None (the caller draws one
    by one) when a key is of another implementation, 64-bit floats are on, JAX's threefry is not partitionable
    or the shared hash would count 2**32 values or more.

    scales: None, or one constant (a Python or NumPy number) per draw: draw i is then ``eps_i * scales[i]`` as
    XLA compiles ``jax.random.normal(k, s) * scale`` with a constant scale (`_bits_to_normal`), so a prior
    ``Normal(loc, scale)``'s ``loc + draw`` equals numpyro's ``sample`` of it bit for bit.
    """
    # jax.config flags are dynamic attributes that its type stubs do not declare
    if jax.config.jax_enable_x64 or not jax.config.jax_threefry_partitionable:  # type: ignore[attr-defined]
        return None
    words = _key_words(keys)
    if words is None:
        return None
    sizes = [math.prod(s) for s in shapes]
    shared = [i for i, n in enumerate(sizes) if 0 < n < own_hash_from]
    if sum(sizes[i] for i in shared) >= 2 ** 32:
        return None
    out: list = [None] * len(shapes)
    for i, n in enumerate(sizes):
        if n == 0:
            out[i] = jnp.zeros(shapes[i], jnp.float32)
        elif n >= own_hash_from:
            draw = jax.random.normal(flat_key(words[i]), shapes[i])
            out[i] = draw if scales is None else draw * np.float32(scales[i])
    if shared:
        small = np.asarray([sizes[i] for i in shared], np.uint32)
        ends = np.cumsum(small).astype(np.uint32)
        flat = lax.iota(jnp.uint32, int(ends[-1]))
        draw = jnp.searchsorted(jnp.asarray(ends), flat, side="right")  # which draw each value belongs to
        key_words = jnp.stack([words[i] for i in shared])
        counts = flat - jnp.asarray(ends - small)[draw]  # 0 .. n-1 within each draw
        # (built from one iota and gathers, which compile faster than S concatenated pieces or S separate hashes)
        # JAX's own hash primitive: with a key per value it compiles faster than the hash written out elementwise,
        # and small draws' run time is small
        bits1, bits2 = jax_random.threefry2x32_p.bind(key_words[draw, 0], key_words[draw, 1], jnp.zeros_like(counts),
                                                      counts)
        if scales is None:
            parts = jnp.split(_bits_to_normal(bits1 ^ bits2), ends[:-1])
        else:  # each draw's own constant sqrt(2) * scale
            parts = [_bits_to_normal(part, scales[i]) for i, part in zip(shared, jnp.split(bits1 ^ bits2, ends[:-1]))]
        for i, part in zip(shared, parts):
            out[i] = part.reshape(shapes[i])
    return out


def paired_normals(key, shape) -> jax.Array:
    """float32 standard normals of `shape` from threefry2x32 with BOTH output words of every counter: value i is
    from word i of the concatenated outputs (first words of counters 0 .. m-1, then their second words, m =
    ceil(n / 2)) of the hash of the counters (0, j), j = 0 .. m-1, under `key`, mapped as ``jax.random.normal``
    maps its bits (`_bits_to_normal`). Half the hashes of ``jax.random.normal`` (which xors the two words of
    one counter per value), so other numbers than it; for noise whose stream no caller pins (the local
    reparameterisation's per-example draws). key: a threefry key, raw (2,) uint32 or typed; a key of another
    implementation, or 64-bit floats on, gets ``jax.random.normal(key, shape)`` (float32) instead."""
    shape = tuple(shape)
    words = _key_words([key])
    if words is None or jax.config.jax_enable_x64:  # type: ignore[attr-defined]
        return jax.random.normal(key, shape, jnp.float32)
    n = math.prod(shape)
    counters = lax.iota(jnp.uint32, (n + 1) // 2)
    first, second = jax_random.threefry2x32_p.bind(words[0][0], words[0][1], jnp.zeros_like(counters), counters)
    return _bits_to_normal(jnp.concatenate([first, second])[:n]).reshape(shape)
