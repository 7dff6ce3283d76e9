"""Turning user data into validated device arrays for a model."""

from __future__ import annotations

import numpy as np

from inference.data import Dataset, validate_arrays


def as_arrays(data, *, arg: str = "data"):
    """(x, y, num_classes, name) from a `Dataset` or an (x, y) tuple; y may be None."""
    if isinstance(data, Dataset):
        return data.x, data.y, data.num_classes, data.name
    if isinstance(data, (tuple, list)) and len(data) == 2:
        x, y = data
        return np.asarray(x, np.float32), None if y is None else np.asarray(y), None, arg
    raise ValueError(f"{arg}: expected an inference.data.Dataset or an (x, y) tuple, got {type(data).__name__}")


def check_model_data(model, x, y, num_classes=None, *, arg="data", feature_shape=None):
    """Validate (x, y) against `model`: finite x, the feature shape, labels within the output classes.

    Raises ValueError naming `arg` and what was expected.
    """
    if num_classes is None and y is not None and model.likelihood.classification:
        num_classes = model.output_width(np.shape(x)[1:])
    validate_arrays(x, y, num_classes if model.likelihood.classification else None,
                    name=arg, feature_shape=feature_shape, arg=f"{arg}.x" if arg != "x" else "x")
    if model.likelihood.classification and y is not None:
        out = model.output_width(np.shape(x)[1:])
        if num_classes is not None and num_classes > out:
            raise ValueError(f"{arg}: has {num_classes} classes but the network outputs {out} logits")
        if np.size(y) and np.max(y) >= out:
            raise ValueError(f"{arg}.y: expected labels in [0, {out}), got a label {int(np.max(y))}")

