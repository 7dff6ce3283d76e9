"""Rank-1 layers as Equinox modules: `Rank1Linear` and `Rank1Conv`, the Equinox counterparts of
`models.rank1.Rank1Dense` and `models.rank1.Rank1Conv2D` (Dusenberry et al., 2020, section 3, eq. 3): one weight
W shared by K components, per component k an input-side alpha_k and output-side gamma_k and a bias b_k, computed
as ((x_k o alpha_k) W) o gamma_k + b_k (never K weight matrices).

Unlike Equinox's own layers these take the whole batch, tiled component-major (`models.rank1.tile_components`:
rows [k n, (k+1) n) are component k's), and say so by ``batched = True``, the class attribute the Equinox adapter
(`models.adapters.equinox`) reads to call the module on the batch instead of mapping it over examples. A network
built of them is batched too: give its class ``batched: ClassVar[bool] = True``. Convolutions are NHWC, as in
Haiku and NNX.

Sites through the bridge: ``weight`` (W: (in, out) or (kh, kw, in, out), stored inputs first, so the adapter
keeps it as it is), ``alpha`` (K, in), ``gamma`` (K, out), ``bias`` (K, out): the names `models.rank1.rank1_prior`
and the rank-1 mixture guide (``inference.rank1_mixture``, sites ``*/alpha`` and ``*/gamma``) look for.
Importing this module needs equinox (``pip install 'bnn-zoo[equinox]'``; `base.errors.MissingDependencyError`
otherwise).
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from base.errors import InputError
from models.adapters import require
from models.rank1 import DRAW_CLIP, conv_nhwc, random_sign_init, rank1_apply, rank1_dense_apply, rank1_kernel_init

require("equinox")  # MissingDependencyError naming the extra where equinox is not installed
import equinox as eqx  # noqa: E402

__all__ = ["Rank1Linear", "Rank1Conv"]


def _factors(key, c_in: int, c_out: int, num_components: int, with_bias: bool, sign_init: float):
    """(alpha (K, c_in), gamma (K, c_out)) by ``random_sign_init(sign_init)``, and bias (K, c_out) zeros or None."""
    if not isinstance(num_components, int) or num_components < 1:
        raise InputError("num_components", num_components, "a positive integer")
    init = random_sign_init(sign_init)
    k_alpha, k_gamma = jax.random.split(key)
    bias = jnp.zeros((num_components, c_out)) if with_bias else None
    return init(k_alpha, (num_components, c_in)), init(k_gamma, (num_components, c_out)), bias


class _Rank1Layer(eqx.Module):
    """The fields of a batched rank-1 layer: the shared ``weight`` W, ``alpha`` (K, in), ``gamma`` (K, out),
    ``bias`` (K, out) or None, and the clip of the factors (`models.rank1.rank1_apply`)."""

    batched: ClassVar[bool] = True
    weight: jax.Array
    alpha: jax.Array
    gamma: jax.Array
    bias: jax.Array | None
    clip: float | None = eqx.field(static=True)


class Rank1Linear(_Rank1Layer):
    """Dense rank-1 layer: x (K n, in_features) -> (K n, out_features), ``weight`` (in_features, out_features)
    (the `models.rank1.Rank1Dense` of Equinox; the same derivative, `models.rank1.rank1_dense_apply`)."""

    def __init__(self, in_features: int, out_features: int, num_components: int, *, with_bias: bool = True,
                 sign_init: float = 0.5, clip=DRAW_CLIP, key):
        k_weight, k_factors = jax.random.split(key)
        self.alpha, self.gamma, self.bias = _factors(k_factors, in_features, out_features, num_components,
                                                     with_bias, sign_init)
        self.weight = rank1_kernel_init(k_weight, (in_features, out_features), in_features)
        self.clip = clip

    def __call__(self, x):
        return rank1_dense_apply(x, self.alpha, self.gamma, self.bias, self.weight, self.clip)


class Rank1Conv(_Rank1Layer):
    """2-D rank-1 convolution, NHWC: x (K n, H, W, in_features) -> (K n, H', W', out_features), ``weight``
    (kh, kw, in_features, out_features), `padding` "SAME" or "VALID" (the `models.rank1.Rank1Conv2D` of Equinox)."""

    strides: tuple = eqx.field(static=True)
    padding: str = eqx.field(static=True)

    def __init__(self, in_features: int, out_features: int, kernel_size, num_components: int, *, strides=1,
                 padding: str = "SAME", with_bias: bool = True, sign_init: float = 0.5, clip=DRAW_CLIP, key):
        if padding not in ("SAME", "VALID"):
            raise InputError("padding", padding, "'SAME' or 'VALID'")
        k_weight, k_factors = jax.random.split(key)
        self.alpha, self.gamma, self.bias = _factors(k_factors, in_features, out_features, num_components,
                                                     with_bias, sign_init)
        shape = ((kernel_size,) * 2 if isinstance(kernel_size, int) else tuple(kernel_size)) + (in_features,
                                                                                               out_features)
        self.weight = rank1_kernel_init(k_weight, shape, int(np.prod(shape[:-1])))
        self.strides = (strides,) * 2 if isinstance(strides, int) else tuple(strides)
        self.padding = padding
        self.clip = clip

    def __call__(self, x):
        return rank1_apply(x, self.alpha, self.gamma, self.bias, conv_nhwc(self.weight, self.strides, self.padding),
                           self.clip)
