"""Multilayer perceptrons and the deep linear network (Haiku)."""

from __future__ import annotations

from typing import Sequence

import haiku as hk
import jax
import jax.numpy as jnp
from base.errors import InputError

ACTIVATIONS = {
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "leaky_relu": jax.nn.leaky_relu,
    "gelu": jax.nn.gelu,
    "softplus": jax.nn.softplus,
    "linear": lambda z: z,
}


def activation_fn(name: str):
    """The activation called `name` (one of ACTIVATIONS)."""
    if name not in ACTIVATIONS:
        raise InputError.worded("activation",
                                f"activation: unknown name {name!r}; expected one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def mlp(hidden: Sequence[int], num_outputs: int, activation: str = "relu", with_bias: bool = True,
        name: str = "mlp"):
    """A network function x (B, D) -> (B, num_outputs): Linear layers of widths `hidden`, then `num_outputs`.

    Sites (via the bridge): ``{name}/~/linear_{i}/w`` (fan_in, fan_out) and ``.../b`` (fan_out,).
    """
    hidden = tuple(int(h) for h in hidden)
    if any(h <= 0 for h in hidden) or num_outputs <= 0:
        raise InputError.worded("hidden/num_outputs",
                                f"hidden/num_outputs: expected positive widths, got hidden={hidden}, "
                                f"num_outputs={num_outputs}")
    act = activation_fn(activation)

    def network(x):
        x = x.reshape(x.shape[0], -1)
        return hk.nets.MLP(hidden + (num_outputs,), activation=act, with_bias=with_bias, name=name)(x)

    return network


def deep_linear(depth: int, width: int, num_outputs: int, name: str = "deep_linear"):
    """A deep linear network x -> x W_1 W_2 ... W_L (no biases, no activation; Liberty-or-Depth section 2).

    Layer widths: `width` for the L-1 hidden layers, `num_outputs` for the last. The product matrix
    W_1 ... W_L (D, num_outputs) is `product_matrix(params)`.
    """
    if depth < 1:
        raise InputError.worded("depth", f"depth: expected at least 1 layer, got {depth}")
    return mlp((width,) * (depth - 1), num_outputs, activation="linear", with_bias=False, name=name)


def product_matrix(params: dict, name: str = "deep_linear"):
    """The product W_1 W_2 ... W_L of a deep linear network's weight sites {site: (..., m, n)}.

    Leading (sample) axes broadcast: draws (S, m, n) per layer give (S, D, num_outputs).
    """
    layers = sorted(
        (k for k in params if k.startswith(f"{name}/~/linear_") and k.endswith("/w")),
        key=lambda k: int(k.split("linear_")[1].split("/")[0]),
    )
    if not layers:
        raise InputError.worded("params", f"params: no weight sites named {name}/~/linear_i/w")
    product = params[layers[0]]
    for k in layers[1:]:
        product = jnp.matmul(product, params[k])
    return product
