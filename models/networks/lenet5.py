"""LeNet-style convolutional networks; `lenet5` is the Caffe LeNet-5 of the variance-networks paper.

Caffe LeNet-5 (variance networks, sec. 6, on MNIST): conv 20 5x5 -> maxpool 2 -> conv 50 5x5 ->
maxpool 2 -> dense 500 -> dense classes, "valid" convolutions, an activation after every hidden
layer (ReLU as in the PyTorch ports the paper's code follows; the original Caffe prototxt has none
after the convolutions). On 28x28 inputs the flattened features are 4*4*50 = 800 and the network
has 520 + 25,050 + 400,500 + 5,010 = 431,080 parameters.

The generic `LeNet` module is shared with `lenet_cnn.py` (the k-tied paper's LeNet CNN).
Sites: `{name}/conv1/w`, `{name}/conv1/b`, ..., `{name}/dense1/w`, ..., `{name}/dense{L}/b`; with
batch_norm=True also `{name}/bn_conv1/{scale,offset}`, ..., `{name}/bn_dense1/...` (and no conv bias).
"""

from __future__ import annotations

from collections.abc import Sequence

import haiku as hk
import jax

from models.networks.layers import PLAIN, Activation, Layers, batch_norm, check_image_batch, max_pool2


def _bn_act(h: jax.Array, use_bn: bool, is_training: bool, activation: Activation,
            bn_name: str) -> jax.Array:
    """Optional batch norm (named `bn_name`), then the activation; shape unchanged."""
    return activation(batch_norm(h, is_training, name=bn_name) if use_bn else h)


class LeNet(hk.Module):
    """Conv blocks (conv -> [BN] -> activation -> 2x2 maxpool), flatten, dense layers.

    Args:
      num_outputs: width of the output layer.
      channels: output channels of each convolution (one block per entry).
      kernel: square kernel size of every convolution.
      hidden: widths of the hidden dense layers.
      padding: "VALID" (Caffe LeNet-5) or "SAME" (needed for inputs smaller than ~16 px).
      activation: non-linearity after every hidden layer (ReLU; softplus for the kappa criterion).
      batch_norm: insert batch norm after each hidden layer (the variance-networks paper's
        "variance layer -> BN -> ReLU"); convolutions then have no bias.
      layers: plain (default) or rank-1 conv/dense layers (`Layers(num_components=K)`).
    """

    def __init__(self, num_outputs: int, channels: Sequence[int], kernel: int,
                 hidden: Sequence[int], padding: str = "VALID",
                 activation: Activation = jax.nn.relu, batch_norm: bool = False,
                 layers: Layers = PLAIN, name: str | None = None):
        super().__init__(name=name)
        self.num_outputs = num_outputs
        self.channels = tuple(channels)
        self.kernel = kernel
        self.hidden = tuple(hidden)
        self.padding = padding
        self.activation = activation
        self.use_bn = batch_norm
        self.layers = layers

    def __call__(self, x: jax.Array, is_training: bool = False) -> jax.Array:
        """(N, H, W, C_in) float32 -> logits (N, num_outputs) ((K N, ...) with rank-1 layers)."""
        check_image_batch(x, self.module_name)
        h = self.layers.tile(x)
        for i, c in enumerate(self.channels, start=1):
            h = self.layers.conv(c, self.kernel, with_bias=not self.use_bn,
                                 padding=self.padding, name=f"conv{i}")(h)
            h = max_pool2(_bn_act(h, self.use_bn, is_training, self.activation, f"bn_conv{i}"))
        h = hk.Flatten()(h)
        for i, width in enumerate(self.hidden, start=1):
            h = self.layers.dense(width, name=f"dense{i}")(h)
            h = _bn_act(h, self.use_bn, is_training, self.activation, f"bn_dense{i}")
        return self.layers.dense(self.num_outputs, name=f"dense{len(self.hidden) + 1}")(h)


def lenet5(num_outputs: int = 10, channels: Sequence[int] = (20, 50), hidden: int = 500,
           kernel: int = 5, padding: str = "VALID", activation: Activation = jax.nn.relu,
           batch_norm: bool = False, num_components: int | None = None):
    """Caffe LeNet-5 (variance networks). Returns `network_fn(x, is_training=False) -> logits`.

    x: (N, H, W, C) float32, 28x28x1 by default (use padding="SAME" for 8x8 digits);
    logits: (N, num_outputs) ((K N, num_outputs) with rank-1 layers, num_components=K).
    Module path "lenet5"; conv1, conv2, dense1, dense2.
    """
    layers = Layers(num_components)

    def network_fn(x: jax.Array, is_training: bool = False) -> jax.Array:
        return LeNet(num_outputs, channels, kernel, (hidden,), padding=padding,
                     activation=activation, batch_norm=batch_norm, layers=layers,
                     name="lenet5")(x, is_training)

    return network_fn
