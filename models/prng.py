"""Random keys that compile cheaply: JAX's threefry with every draw made flat and reshaped.

JAX's default key (threefry2x32, partitionable) counts the random bits of a draw of shape (d1, ..., dn) with an
n-dimensional 64-bit iota; XLA's CPU backend compiles that slowly for multi-dimensional shapes. Measured here
(JAX 0.10, one compile of ``jax.random.bits(key, shape)``): (50, 64) 0.36 s, (50, 64, 64) 0.78 s, (50, 64, 10)
2.5 s, but (204,800,) 0.27 s; a mean-field sampler of the digits MLP 64-64 (50 draws of its six sites) compiled
in 5.4 s, and in 1.2 s with `flat_key`.

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


def normal_draws(keys, shapes, scales=None) -> list | None:
    """``[jax.random.normal(k, s) for k, s in zip(keys, shapes)]`` (float32), the same numbers bit for bit, from
    ONE threefry hash over all the draws instead of one hash per draw, or None when that cannot be promised.

    Each draw of shape s is n = prod(s) values of JAX's partitionable threefry (the hash of key k and the
    counters 0 .. n-1, xor-ed halves; `flat_key` draws it so), mapped to a uniform in (-1, 1) and through
    sqrt(2) erfinv, all elementwise. Hashing every draw's counters with its own key broadcast along them, in one
    vector, gives each draw's bits exactly; the compiled program holds one hash where a guide with S sites held S
    (measured: S = 38 hashes were half of a tiny ResNet-18 mean-field update's 7.5 s compile).

    keys: threefry keys, raw (2,) uint32 or typed (``jax.random.key``, `flat_key`); shapes: tuples. Returns a list
    of float32 arrays of `shapes`, or None (the caller draws one by one) when a key is of another
    implementation, 64-bit floats are on, JAX's threefry is not partitionable or the draws hold 2**32 values or more.

    scales: None, or one constant (a Python or NumPy number) per draw: draw i is then ``eps_i * scales[i]``
    as XLA compiles ``jax.random.normal(k, s) * scale`` with a constant scale: it folds sqrt(2) * scale into
    one float32 constant (``erfinv(u) * (sqrt(2) * scale)``), which can differ from ``eps_i * scale`` by an ulp;
    so a prior ``Normal(loc, scale)``'s ``loc + draw`` equals numpyro's ``sample`` of it bit for bit.
    """
    if jax.config.jax_enable_x64 or not jax.config.jax_threefry_partitionable:
        return None
    words = []
    for key in keys:
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
            if str(jax.random.key_impl(key)) not in (jax_random.threefry_prng_impl.name, str(FLAT_THREEFRY)):
                return None
            key = jax.random.key_data(key)
        if key.shape != (2,) or key.dtype != jnp.uint32:
            return None
        words.append(key)
    sizes = [math.prod(s) for s in shapes]
    if sum(sizes) >= 2 ** 32:
        return None
    if not sizes or sum(sizes) == 0:
        return [jnp.zeros(s, jnp.float32) for s in shapes]
    ends = np.cumsum(sizes).astype(np.uint32)
    flat = lax.iota(jnp.uint32, int(ends[-1]))
    draw = jnp.searchsorted(jnp.asarray(ends), flat, side="right")  # which draw each value belongs to
    key_words = jnp.stack(words)
    counts = flat - jnp.asarray(ends - np.asarray(sizes, np.uint32))[draw]  # 0 .. n-1 within each draw
    # (built from one iota and gathers: concatenating S pieces compiled 1.6x slower, S separate hashes 3.6x)
    bits1, bits2 = jax_random.threefry2x32_p.bind(key_words[draw, 0], key_words[draw, 1], jnp.zeros_like(counts),
                                                  counts)  # the counters' (high, low) words
    bits = bits1 ^ bits2
    # jax.random.uniform(minval = nextafter(-1, 0), maxval = 1), then jax.random.normal's sqrt(2) erfinv
    lo = np.nextafter(np.array(-1.0, np.float32), np.array(0.0, np.float32), dtype=np.float32)
    hi = np.array(1.0, np.float32)
    float_bits = lax.shift_right_logical(bits, jnp.array(32 - 23, jnp.uint32))
    float_bits = lax.bitwise_or(float_bits, jnp.asarray(np.array(1.0, np.float32).view(np.uint32), jnp.uint32))
    floats = lax.bitcast_convert_type(float_bits, jnp.float32) - jnp.array(1.0, jnp.float32)
    lo_b, hi_b = lax.convert_element_type(lo, jnp.float32), lax.convert_element_type(hi, jnp.float32)
    uniform = lax.max(lo_b, floats * (hi_b - lo_b) + lo_b)
    sqrt2 = np.array(np.sqrt(2), np.float32)
    if scales is None:
        normal = lax.mul(sqrt2, lax.erf_inv(uniform))
        return [part.reshape(s) for part, s in zip(jnp.split(normal, ends[:-1]), shapes)]
    parts = jnp.split(lax.erf_inv(uniform), ends[:-1])
    return [lax.mul(part.reshape(s), sqrt2 * np.float32(scale)) for part, s, scale in zip(parts, shapes, scales)]
