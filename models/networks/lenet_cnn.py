"""The k-tied paper's LeNet CNN (appendix D, CIFAR-100).

conv 32 3x3 -> ReLU -> maxpool 2 -> conv 64 3x3 -> ReLU -> maxpool 2 -> dense 512 -> ReLU ->
dense classes. The paper names no pooling or padding; "same" convolutions with 2x2 pooling are the
choice whose weight count matches its Table 1: on 32x32x3 inputs 896 + 18,496 + 2,097,664 + 51,300
= 2,168,356 weights W, and the table's mean-field (4,405k) and 1-tied (2,262k) counts differ by
2,143k = W minus the 25,224 standard deviations that the 1-tied guide keeps (19,392 untied conv,
(4096 + 512) + (512 + 100) tied dense, 612 dense bias).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax

from models.networks.layers import Activation, Layers
from models.networks.lenet5 import LeNet


def lenet_cnn(num_outputs: int = 100, channels: Sequence[int] = (32, 64), hidden: int = 512,
              kernel: int = 3, activation: Activation = jax.nn.relu, batch_norm: bool = False,
              num_components: int | None = None):
    """k-tied LeNet CNN. Returns `network_fn(x, is_training=False) -> logits`.

    x: (N, H, W, C) float32, 32x32x3 on CIFAR; logits: (N, num_outputs) ((K N, num_outputs) with
    rank-1 layers, num_components=K).
    Module path "lenet_cnn"; conv1, conv2 (the paper keeps these mean-field), dense1, dense2
    (the paper's k-tied layers).
    """

    layers = Layers(num_components)

    def network_fn(x: jax.Array, is_training: bool = False) -> jax.Array:
        return LeNet(num_outputs, channels, kernel, (hidden,), padding="SAME",
                     activation=activation, batch_norm=batch_norm, layers=layers,
                     name="lenet_cnn")(x, is_training)

    return network_fn
