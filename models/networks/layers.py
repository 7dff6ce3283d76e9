"""Small building blocks shared by the networks (conv/dense layers, batch norm, pooling).

Every helper creates Haiku modules, so it must be called inside an `hk.transform`-ed function.
Names passed in become part of the Haiku module path and hence of the NumPyro sample-site name
(`"{module path}/{param}"`), so callers pass explicit, stable names.

`Layers` lets every network be built with plain layers or with the rank-1 layers of `models.rank1`
(K mixture components, batch tiled K times component-major) without a second copy of the network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp

from models.rank1 import Rank1Conv2D, Rank1Dense, tile_components
from base.errors import InputError

Activation = Callable[[jax.Array], jax.Array]

# Batch-norm settings of the reference ResNet/WRN/VGG code (momentum 0.9, eps 1e-5).
BN_DECAY = 0.9
BN_EPS = 1e-5


def conv(channels: int, kernel: int, stride: int = 1, *, with_bias: bool, name: str,
         padding: str = "SAME") -> hk.Conv2D:
    """A 2-D convolution, NHWC, He-normal (fan-in) initialised.

    Weight `w` has shape (kernel, kernel, C_in, channels); `b` (channels,) when `with_bias`.
    """
    return hk.Conv2D(channels, kernel, stride=stride, padding=padding, with_bias=with_bias,
                     w_init=hk.initializers.VarianceScaling(2.0, "fan_in", "truncated_normal"),
                     name=name)


def dense(units: int, *, name: str, with_bias: bool = True, w_init=None,
          b_init=None) -> hk.Linear:
    """A dense layer: `w` (D_in, units), He-normal (fan-in) unless `w_init`; `b` (units,) zeros
    unless `b_init`."""
    w_init = w_init or hk.initializers.VarianceScaling(2.0, "fan_in", "truncated_normal")
    return hk.Linear(units, with_bias=with_bias, w_init=w_init, b_init=b_init, name=name)


@dataclass(frozen=True)
class Layers:
    """The conv and dense layers a network is built from.

    num_components None: plain Haiku layers (`conv`, `dense`). num_components K: `Rank1Conv2D` /
    `Rank1Dense` (params `w`, `alpha` (K, fan-in), `gamma` (K, fan-out), `b` (K, fan-out) zeros;
    `w_init`/`b_init` do not apply), and the network's input must pass through `tile` first, so
    outputs have K n rows (component-major, see `models.rank1.tile_components`).
    """

    num_components: int | None = None
    sign_init: float = 0.5

    def conv(self, channels: int, kernel: int, stride: int = 1, *, with_bias: bool, name: str,
             padding: str = "SAME") -> hk.Conv2D | Rank1Conv2D:
        """A convolution (N, H, W, C_in) -> (N, H', W', channels); see `conv`."""
        if self.num_components is None:
            return conv(channels, kernel, stride, with_bias=with_bias, name=name, padding=padding)
        return Rank1Conv2D(channels, kernel, self.num_components, stride=stride, padding=padding,
                           with_bias=with_bias, sign_init=self.sign_init, name=name)

    def dense(self, units: int, *, name: str, with_bias: bool = True, w_init=None,
              b_init=None) -> hk.Linear | Rank1Dense:
        """A dense layer (N, D_in) -> (N, units); see `dense`."""
        if self.num_components is None:
            return dense(units, name=name, with_bias=with_bias, w_init=w_init, b_init=b_init)
        return Rank1Dense(units, self.num_components, with_bias=with_bias,
                          sign_init=self.sign_init, name=name)

    def tile(self, x: jax.Array) -> jax.Array:
        """(n, ...) -> (K n, ...) for rank-1 layers; unchanged for plain layers."""
        return x if self.num_components is None else tile_components(x, self.num_components)


PLAIN = Layers()


def batch_norm(x: jax.Array, is_training: bool, *, name: str) -> jax.Array:
    """Batch norm over all axes but the last: (N, ..., C) -> (N, ..., C).

    Params `scale` and `offset` of Haiku's broadcastable shape (1, ..., 1, C) (e.g. (1, 1, 1, C)
    after a convolution, (1, C) after a dense layer); the moving mean/variance are Haiku *state*, so
    they never become random variables. `is_training` selects batch statistics (and updates the
    moving averages) versus the moving averages.
    """
    bn = hk.BatchNorm(create_scale=True, create_offset=True, decay_rate=BN_DECAY, eps=BN_EPS,
                      name=name)
    return bn(x, is_training=is_training or hk.running_init())


def max_pool2(x: jax.Array) -> jax.Array:
    """2x2 max pooling with stride 2, ceil mode (Caffe): (N, H, W, C) -> (N, ceil(H/2), ceil(W/2), C)."""
    return hk.max_pool(x, window_shape=(1, 2, 2, 1), strides=(1, 2, 2, 1), padding="SAME")


def global_avg_pool(x: jax.Array) -> jax.Array:
    """Mean over the spatial axes: (N, H, W, C) -> (N, C)."""
    return jnp.mean(x, axis=(1, 2))


def check_image_batch(x: jax.Array, network: str) -> None:
    """Raise ValueError unless `x` is an NHWC image batch (rank 4)."""
    if x.ndim != 4:
        raise InputError.worded("x", f"{network}: argument x must be an image batch of shape (N, H, W, C); "
                         f"got shape {tuple(x.shape)}")


def on_flat_images(network_fn: Callable, image_shape: tuple[int, int, int]) -> Callable:
    """Wrap an image network to take flattened rows: x (N, H*W*C) -> network_fn(x (N, H, W, C)).

    For data sets that store images as rows (e.g. digits: x (N, 64), image_shape (8, 8, 1)).
    Inputs that already are (N, H, W, C) pass through unchanged.
    """

    def flat_network_fn(x: jax.Array, is_training: bool = False) -> jax.Array:
        if x.ndim == 2:
            x = x.reshape((x.shape[0],) + tuple(image_shape))
        return network_fn(x, is_training)

    return flat_network_fn


class ResidualBlock(hk.Module):
    """Base of the residual blocks: `channels` output channels, `stride` in the first convolution,
    conv layers made by `layers`."""

    def __init__(self, channels: int, stride: int, layers: Layers, name: str):
        super().__init__(name=name)
        self.channels = channels
        self.stride = stride
        self.layers = layers

    def needs_projection(self, x: jax.Array) -> bool:
        """Whether the shortcut of input x (N, H, W, C_in) needs a 1x1 projection (shape changes)."""
        return self.stride != 1 or x.shape[-1] != self.channels
