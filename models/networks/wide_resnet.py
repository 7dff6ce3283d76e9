"""Wide ResNet WRN-depth-k (Zagoruyko & Komodakis 2016), the rank-1 paper's CIFAR model (28-10).

Stem conv 16 3x3, then three groups of n = (depth - 4) / 6 pre-activation blocks with widths 16k,
32k, 64k and strides 1, 2, 2; then BN -> ReLU -> global average pool -> dense classes. Block:
BN -> ReLU -> conv3x3(stride) -> BN -> ReLU -> conv3x3, plus the shortcut (identity, or conv1x1
(stride) of the block input when the width changes), as in the uncertainty-baselines WRN that the
rank-1 paper used. No dropout. WRN-28-10 on CIFAR-10 has 36,479,194 parameters (36.5M; the paper's
Table 2 lists 146M for an ensemble of four).

Sites: `wide_resnet/stem_conv/w`, `wide_resnet/group{g}_block{b}/{bn1,conv1,bn2,conv2}/...`,
`.../shortcut_conv/w`, `wide_resnet/final_bn/...`, `wide_resnet/logits/{w,b}`.
"""

from __future__ import annotations

import haiku as hk
import jax

from models.networks.layers import (PLAIN, Layers, ResidualBlock, batch_norm, check_image_batch,
                                    global_avg_pool)
from base.errors import InputError


class PreActBlock(ResidualBlock):
    """Pre-activation residual block: (N, H, W, C_in) -> (N, H/stride, W/stride, channels)."""

    def __call__(self, x: jax.Array, is_training: bool) -> jax.Array:
        """Residual block forward pass; see the class docstring for shapes."""
        h = jax.nn.relu(batch_norm(x, is_training, name="bn1"))
        h = self.layers.conv(self.channels, 3, self.stride, with_bias=False, name="conv1")(h)
        h = jax.nn.relu(batch_norm(h, is_training, name="bn2"))
        h = self.layers.conv(self.channels, 3, with_bias=False, name="conv2")(h)
        shortcut = x
        if self.needs_projection(x):
            shortcut = self.layers.conv(self.channels, 1, self.stride, with_bias=False,
                                        name="shortcut_conv")(x)
        return h + shortcut


def blocks_per_group(depth: int) -> int:
    """Blocks per group of a WRN of the given depth: (depth - 4) / 6; depth must be 6n + 4."""
    if depth < 10 or (depth - 4) % 6:
        raise InputError.worded("depth", f"depth must be 6n + 4 with n >= 1 (10, 16, 22, 28, ...); got {depth}")
    return (depth - 4) // 6


class WideResNet(hk.Module):
    """WRN-depth-k; see the module docstring."""

    def __init__(self, num_outputs: int = 10, depth: int = 28, k: int = 2,
                 layers: Layers = PLAIN, name: str = "wide_resnet"):
        super().__init__(name=name)
        if k < 1:
            raise InputError.worded("k", f"widen factor k must be >= 1; got {k}")
        self.num_outputs = num_outputs
        self.n = blocks_per_group(depth)
        self.widths = (16 * k, 32 * k, 64 * k)
        self.layers = layers

    def __call__(self, x: jax.Array, is_training: bool = False) -> jax.Array:
        """(N, H, W, C_in) float32 -> logits (N, num_outputs)."""
        check_image_batch(x, self.module_name)
        h = self.layers.conv(16, 3, with_bias=False, name="stem_conv")(self.layers.tile(x))
        for group, width in enumerate(self.widths, start=1):
            for b in range(1, self.n + 1):
                stride = 2 if group > 1 and b == 1 else 1
                h = PreActBlock(width, stride, self.layers, name=f"group{group}_block{b}")(
                    h, is_training)
        h = jax.nn.relu(batch_norm(h, is_training, name="final_bn"))
        return self.layers.dense(self.num_outputs, name="logits")(global_avg_pool(h))


def wide_resnet(num_outputs: int = 10, depth: int = 28, k: int = 2,
                num_components: int | None = None):
    """WRN-depth-k, default WRN-28-2 (the rank-1 paper uses k = 10, rank-1 with K = 4).

    Returns `network_fn(x, is_training=False) -> logits (N, num_outputs)` ((K N, num_outputs) with
    rank-1 layers, num_components=K); x (N, 32, 32, 3) float32 on CIFAR. Batch-norm statistics are
    Haiku state (`hk.transform_with_state`); batch norm stays shared by the K components.
    """
    layers = Layers(num_components)

    def network_fn(x: jax.Array, is_training: bool = False) -> jax.Array:
        return WideResNet(num_outputs, depth, k, layers)(x, is_training)

    return network_fn
