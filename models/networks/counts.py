"""Parameter shapes and counts of a Haiku network on an input shape, via `jax.eval_shape` (no compile).

Site names follow the bridge's convention `"{module path}/{param}"`, e.g. `"lenet5/conv1/w"`.
Only parameters are counted; batch-norm moving statistics are Haiku state and are not.
"""

from __future__ import annotations

from collections.abc import Callable

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np


def param_shapes(network_fn: Callable, input_shape: tuple[int, ...],
                 dtype=jnp.float32) -> dict[str, tuple[int, ...]]:
    """{site name: shape} of `network_fn`'s parameters for inputs of `input_shape` (batch first).

    network_fn(x) -> output builds Haiku modules; integer `dtype` for token inputs (the LSTM).
    Nothing is compiled or run: Haiku's init is traced abstractly with `jax.eval_shape`.
    """
    transformed = hk.transform_with_state(network_fn)
    x = jax.ShapeDtypeStruct(tuple(input_shape), jnp.dtype(dtype))
    params, _ = jax.eval_shape(transformed.init, jax.random.key(0), x)
    return {f"{module}/{name}": tuple(leaf.shape)
            for module, leaves in params.items() for name, leaf in leaves.items()}


def param_count(network_fn: Callable, input_shape: tuple[int, ...], dtype=jnp.float32) -> int:
    """Total number of parameters of `network_fn` on inputs of `input_shape` (see param_shapes)."""
    return int(sum(np.prod(s, dtype=np.int64) for s in param_shapes(network_fn, input_shape,
                                                                    dtype).values()))
