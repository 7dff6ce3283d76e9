"""VGG-like CIFAR network (Zagoruyko 2015), the variance-networks paper's CIFAR-10/100 model.

Five stages of 3x3 "same" convolutions (64x2, 128x2, 256x3, 512x3, 512x3), each convolution
followed by batch norm and the activation, each stage by 2x2 max pooling; then flatten -> dense 512
-> BN -> activation -> dense classes. The reference's dropout layers are left out: in the Bayesian
models the weight noise plays that role (variance networks replace them by variance layers: the
first dense layer and the last three convolutions, i.e. sites `vgg/conv5_*` and `vgg/dense1`).

Sites: `vgg/conv{stage}_{i}/w` (no conv bias: BN follows), `vgg/bn{stage}_{i}/{scale,offset}`,
`vgg/dense1/{w,b}`, `vgg/bn_dense1/...`, `vgg/dense2/{w,b}`.
"""

from __future__ import annotations

from collections.abc import Sequence

import haiku as hk
import jax

from models.networks.layers import (PLAIN, Activation, Layers, batch_norm, check_image_batch,
                                    max_pool2)
from base.errors import InputError

VGG_WIDTHS = (64, 128, 256, 512, 512)
VGG_DEPTHS = (2, 2, 3, 3, 3)


class VGG(hk.Module):
    """VGG-like network; see the module docstring. Widths are scaled by `width_multiplier`."""

    def __init__(self, num_outputs: int = 10, widths: Sequence[int] = VGG_WIDTHS,
                 depths: Sequence[int] = VGG_DEPTHS, hidden: int = 512,
                 width_multiplier: float = 1.0, activation: Activation = jax.nn.relu,
                 layers: Layers = PLAIN, name: str = "vgg"):
        super().__init__(name=name)
        if len(widths) != len(depths):
            raise InputError.worded("widths", f"widths and depths must have equal lengths; got {widths}, {depths}")
        self.num_outputs = num_outputs
        self.widths = tuple(max(1, round(w * width_multiplier)) for w in widths)
        self.depths = tuple(depths)
        self.hidden = max(1, round(hidden * width_multiplier))
        self.activation = activation
        self.layers = layers

    def __call__(self, x: jax.Array, is_training: bool = False) -> jax.Array:
        """(N, H, W, C_in) float32 -> logits (N, num_outputs) ((K N, ...) with rank-1 layers).

        32x32 inputs pool down to 1x1.
        """
        check_image_batch(x, self.module_name)
        h = self.layers.tile(x)
        for stage, (width, depth) in enumerate(zip(self.widths, self.depths), start=1):
            for i in range(1, depth + 1):
                h = self.layers.conv(width, 3, with_bias=False, name=f"conv{stage}_{i}")(h)
                h = self.activation(batch_norm(h, is_training, name=f"bn{stage}_{i}"))
            h = max_pool2(h)
        h = self.layers.dense(self.hidden, name="dense1")(hk.Flatten()(h))
        h = self.activation(batch_norm(h, is_training, name="bn_dense1"))
        return self.layers.dense(self.num_outputs, name="dense2")(h)


def vgg(num_outputs: int = 10, widths: Sequence[int] = VGG_WIDTHS,
        depths: Sequence[int] = VGG_DEPTHS, hidden: int = 512, width_multiplier: float = 1.0,
        activation: Activation = jax.nn.relu, num_components: int | None = None):
    """VGG-like CIFAR net. Returns `network_fn(x, is_training=False) -> logits (N, num_outputs)`.

    x: (N, 32, 32, 3) float32 on CIFAR. `width_multiplier=0.25` gives a small variant
    (16-32-64-128-128, dense 128). num_components=K: rank-1 layers, logits (K N, num_outputs).
    """
    layers = Layers(num_components)

    def network_fn(x: jax.Array, is_training: bool = False) -> jax.Array:
        return VGG(num_outputs, widths, depths, hidden, width_multiplier, activation,
                   layers)(x, is_training)

    return network_fn
