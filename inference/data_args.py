"""Turning user data into validated device arrays for a model."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from zoo.data.dataset import Dataset, validate_arrays


def as_arrays(data, *, arg: str = "data"):
    """(x, y, num_classes, name) from a `Dataset` or an (x, y) tuple; y may be None."""
    if isinstance(data, Dataset):
        return data.x, data.y, data.num_classes, data.name
    if isinstance(data, (tuple, list)) and len(data) == 2:
        x, y = data
        return np.asarray(x, np.float32), None if y is None else np.asarray(y), None, arg
    raise ValueError(f"{arg}: expected a zoo.data.Dataset or an (x, y) tuple, got {type(data).__name__}")


def check_model_data(model, x, y, num_classes=None, *, arg="data", feature_shape=None):
    """Validate (x, y) against `model`: finite x, the feature shape, labels within the output classes.

    Raises ValueError naming `arg` and what was expected.
    """
    if num_classes is None and y is not None and model.likelihood.classification:
        num_classes = output_dim(model, np.shape(x)[1:])
    validate_arrays(x, y, num_classes if model.likelihood.classification else None,
                    name=arg, feature_shape=feature_shape, arg=f"{arg}.x" if arg != "x" else "x")
    if model.likelihood.classification and y is not None:
        out = output_dim(model, np.shape(x)[1:])
        if num_classes is not None and num_classes > out:
            raise ValueError(f"{arg}: has {num_classes} classes but the network outputs {out} logits")
        if np.size(y) and np.max(y) >= out:
            raise ValueError(f"{arg}.y: expected labels in [0, {out}), got a label {int(np.max(y))}")


def output_dim(model, feature_shape) -> int:
    """The network's output width for inputs of `feature_shape` (by jax.eval_shape, no compile; cached on
    the model per input shape, since tracing a large network takes seconds)."""
    cache = model.__dict__.setdefault("_output_dim_cache", {})
    key = tuple(int(d) for d in feature_shape)
    if key not in cache:
        x = jax.ShapeDtypeStruct((1,) + key, jnp.float32)
        tree, state = jax.eval_shape(model.init_fn, jax.random.PRNGKey(0), x)
        cache[key] = int(jax.eval_shape(model.transformed.apply, tree, state, x)[0].shape[-1])
    return cache[key]
