"""Rank-1 layers as Flax NNX modules: `Rank1Linear` and `Rank1Conv`, the NNX counterparts of
`models.rank1.Rank1Dense` and `models.rank1.Rank1Conv2D` (Dusenberry et al., 2020, section 3, eq. 3): one
weight W shared by K components, per component k an input-side alpha_k and output-side gamma_k and a bias b_k,
computed as ((x_k o alpha_k) W) o gamma_k + b_k by `models.rank1.rank1_apply` (never K weight matrices).

Batches are tiled component-major (`models.rank1.tile_components`): rows [k n, (k+1) n) are component k's. Sites
through the bridge (`models.adapters.nnx`): ``kernel`` (W: (in, out) or (kh, kw, in, out)), ``alpha`` (K, in),
``gamma`` (K, out), ``bias`` (K, out): the names `models.rank1.rank1_prior` and the rank-1 mixture guide
(``inference.rank1_mixture``, sites ``*/alpha`` and ``*/gamma``) look for. Importing this module needs flax
(``pip install 'bnn-zoo[flax]'``; `base.errors.MissingDependencyError` otherwise).

The variance layers of Neklyudov et al. (2018) need no layer of their own: they are a guide
(``inference.zero_mean.variance_layers``) over the kernels of ordinary ``nnx.Linear`` / ``nnx.Conv`` layers with the
log-uniform prior (`models.variance.log_uniform_prior`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from base.errors import InputError, MissingDependencyError
from models.rank1 import DRAW_CLIP, conv_nhwc, random_sign_init, rank1_apply, rank1_kernel_init

try:
    from flax import nnx
except ImportError as err:
    raise MissingDependencyError("models.nnx_rank1 needs flax: pip install 'bnn-zoo[flax]'") from err

__all__ = ["Rank1Linear", "Rank1Conv"]

class _Rank1Factors(nnx.Module):
    """alpha (K, c_in) and gamma (K, c_out) by ``random_sign_init(sign_init)``, bias (K, c_out) zeros (or none)."""

    def __init__(self, c_in: int, c_out: int, num_components: int, with_bias: bool, sign_init: float, clip,
                 rngs):
        if not isinstance(num_components, int) or num_components < 1:
            raise InputError("num_components", num_components, "a positive integer")
        init = random_sign_init(sign_init)
        self.num_components = num_components
        self.clip = clip
        self.alpha = nnx.Param(init(rngs.params(), (num_components, c_in)))
        self.gamma = nnx.Param(init(rngs.params(), (num_components, c_out)))
        self.bias = nnx.Param(jnp.zeros((num_components, c_out))) if with_bias else None

    def _apply(self, x, linear_map):
        bias = None if self.bias is None else self.bias[...]
        return rank1_apply(x, self.alpha[...], self.gamma[...], bias, linear_map, self.clip)


class Rank1Linear(_Rank1Factors):
    """Dense rank-1 layer: x (K n, in_features) -> (K n, out_features), ``kernel`` (in_features, out_features)
    (the `models.rank1.Rank1Dense` of NNX)."""

    def __init__(self, in_features: int, out_features: int, num_components: int, *, with_bias: bool = True,
                 sign_init: float = 0.5, clip=DRAW_CLIP, rngs):
        self.kernel = nnx.Param(rank1_kernel_init(rngs.params(), (in_features, out_features), in_features))
        super().__init__(in_features, out_features, num_components, with_bias, sign_init, clip, rngs)

    def __call__(self, x):
        w = self.kernel[...]
        return self._apply(x, lambda z: z @ w)


class Rank1Conv(_Rank1Factors):
    """2-D rank-1 convolution, NHWC: x (K n, H, W, in_features) -> (K n, H', W', out_features), ``kernel``
    (kh, kw, in_features, out_features), `padding` "SAME" or "VALID" (the `models.rank1.Rank1Conv2D` of NNX)."""

    def __init__(self, in_features: int, out_features: int, kernel_size, num_components: int, *, strides=1,
                 padding: str = "SAME", with_bias: bool = True, sign_init: float = 0.5, clip=DRAW_CLIP, rngs):
        if padding not in ("SAME", "VALID"):
            raise InputError("padding", padding, "'SAME' or 'VALID'")
        self.kernel_size = (kernel_size,) * 2 if isinstance(kernel_size, int) else tuple(kernel_size)
        self.strides = (strides,) * 2 if isinstance(strides, int) else tuple(strides)
        self.padding = padding
        shape = self.kernel_size + (in_features, out_features)
        self.kernel = nnx.Param(rank1_kernel_init(rngs.params(), shape, int(np.prod(shape[:-1]))))
        super().__init__(in_features, out_features, num_components, with_bias, sign_init, clip, rngs)

    def __call__(self, x):
        return self._apply(x, conv_nhwc(self.kernel[...], self.strides, self.padding))
