"""ResNet-18 with the CIFAR stem (He et al. 2016; the k-tied paper's CIFAR-10 ResNet-18).

Stem: conv 64 3x3 stride 1 -> BN -> ReLU (no 7x7 conv, no max pool). Four stages of two basic
blocks, widths 64, 128, 256, 512 (times `width_multiplier`), strides 1, 2, 2, 2. Basic block
(post-activation): conv3x3(stride) -> BN -> ReLU -> conv3x3 -> BN, plus the shortcut (identity,
or conv1x1(stride) -> BN when the shape changes), then ReLU. Global average pool -> dense classes.
With width_multiplier=1 and 10 classes: 11,173,962 parameters (BN scale/offset included).

Sites: `resnet18/stem_conv/w`, `resnet18/stem_bn/{scale,offset}`,
`resnet18/stage{s}_block{b}/conv{1,2}/w`, `.../bn{1,2}/...`, `.../shortcut_conv/w`,
`.../shortcut_bn/...`, `resnet18/logits/{w,b}`.
"""

from __future__ import annotations

from collections.abc import Sequence

import haiku as hk
import jax

from models.networks.layers import (PLAIN, Layers, ResidualBlock, batch_norm, check_image_batch,
                                    global_avg_pool)
from base.errors import InputError


class BasicBlock(ResidualBlock):
    """Post-activation residual block: (N, H, W, C_in) -> (N, H/stride, W/stride, channels)."""

    def __call__(self, x: jax.Array, is_training: bool) -> jax.Array:
        """Residual block forward pass; see the class docstring for shapes."""
        h = self.layers.conv(self.channels, 3, self.stride, with_bias=False, name="conv1")(x)
        h = jax.nn.relu(batch_norm(h, is_training, name="bn1"))
        h = self.layers.conv(self.channels, 3, with_bias=False, name="conv2")(h)
        h = batch_norm(h, is_training, name="bn2")
        shortcut = x
        if self.needs_projection(x):
            shortcut = self.layers.conv(self.channels, 1, self.stride, with_bias=False,
                                        name="shortcut_conv")(x)
            shortcut = batch_norm(shortcut, is_training, name="shortcut_bn")
        return jax.nn.relu(h + shortcut)


class ResNet(hk.Module):
    """CIFAR ResNet of basic blocks; `blocks=(2, 2, 2, 2)` is ResNet-18."""

    def __init__(self, num_outputs: int = 10, blocks: Sequence[int] = (2, 2, 2, 2),
                 widths: Sequence[int] = (64, 128, 256, 512), width_multiplier: float = 1.0,
                 layers: Layers = PLAIN, name: str = "resnet18"):
        super().__init__(name=name)
        if len(blocks) != len(widths):
            raise InputError.worded("blocks", f"blocks and widths must have equal lengths; got {blocks}, {widths}")
        self.num_outputs = num_outputs
        self.blocks = tuple(blocks)
        self.widths = tuple(max(1, round(w * width_multiplier)) for w in widths)
        self.layers = layers

    def __call__(self, x: jax.Array, is_training: bool = False) -> jax.Array:
        """(N, H, W, C_in) float32 -> logits (N, num_outputs)."""
        check_image_batch(x, self.module_name)
        h = self.layers.conv(self.widths[0], 3, with_bias=False,
                             name="stem_conv")(self.layers.tile(x))
        h = jax.nn.relu(batch_norm(h, is_training, name="stem_bn"))
        for stage, (n_blocks, width) in enumerate(zip(self.blocks, self.widths), start=1):
            for b in range(1, n_blocks + 1):
                stride = 2 if stage > 1 and b == 1 else 1
                h = BasicBlock(width, stride, self.layers, name=f"stage{stage}_block{b}")(
                    h, is_training)
        return self.layers.dense(self.num_outputs, name="logits")(global_avg_pool(h))


def resnet18(num_outputs: int = 10, width_multiplier: float = 1.0,
             num_components: int | None = None, blocks: Sequence[int] = (2, 2, 2, 2)):
    """ResNet-18 (CIFAR stem). Returns `network_fn(x, is_training=False) -> logits`.

    `blocks`: basic blocks per stage; (2, 2, 2, 2) is ResNet-18, (1, 1, 1, 1) the same code at depth 10.
    x: (N, 32, 32, 3) float32 on CIFAR; logits (N, num_outputs), or (K N, num_outputs) with rank-1
    layers (num_components=K). Batch-norm statistics are Haiku state: transform with
    `hk.transform_with_state`.
    """
    layers = Layers(num_components)

    def network_fn(x: jax.Array, is_training: bool = False) -> jax.Array:
        return ResNet(num_outputs, blocks=blocks, width_multiplier=width_multiplier, layers=layers)(x, is_training)

    return network_fn
