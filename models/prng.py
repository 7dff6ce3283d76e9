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
