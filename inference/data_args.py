"""Turning user data into validated arrays for a model (fit, nuts, predict, log_likelihood, score)."""

from __future__ import annotations

import numpy as np

from base.data import Dataset, validate_arrays
from base.validation import model_feature_shape
from base.errors import ArgumentTypeError, InputError


def as_arrays(data, *, arg: str = "data"):
    """(x, y, num_classes, name) from a `Dataset` or an (x, y) tuple; y may be None. Tuples are returned
    as given (unchecked, uncast): `check_model_data` checks them."""
    if isinstance(data, Dataset):
        return data.x, data.y, data.num_classes, data.name
    if isinstance(data, (tuple, list)) and len(data) == 2:
        x, y = data
        return x, y, None, arg
    raise ArgumentTypeError(arg, data, "an base.data.Dataset or an (x, y) tuple")


def check_model_data(model, x, y, num_classes=None, *, arg="data", feature_shape=None):
    """Validate x (N, *features) and y (N,) (or None) against `model` and return them as (x float32, y int32
    (classification) / float32 (regression) / None).

    Checked: x real, finite, N >= 1, of `feature_shape` (default: the shape the model was built for,
    `base.validation.model_feature_shape`, when it records one); labels integer-valued, of length N and
    within the network's output classes (`num_classes`: the data's own class count, refused when the
    network outputs fewer logits). Raises `base.errors.InputError` naming `arg` and what was expected.
    """
    x_arg = f"{arg}.x" if arg != "x" else "x"
    if feature_shape is None:
        feature_shape = model_feature_shape(model)
    classification = model.likelihood.classification
    x, _ = validate_arrays(x, None, None, name=arg, feature_shape=feature_shape, arg=x_arg, allow_empty=False)
    if y is None:
        return x, None
    if not classification:
        return validate_arrays(x, y, None, name=arg, arg=x_arg)
    out = model.output_width(x.shape[1:])
    if num_classes is not None and num_classes > out:
        raise InputError(arg, f"<data of {num_classes} classes>", f"at most {out} classes (the network outputs "
                         f"{out} logits)")
    return validate_arrays(x, y, out, name=arg, arg=x_arg)


def labelled_arrays(model, data, purpose: str) -> tuple[np.ndarray, np.ndarray]:
    """(x float32 (N, *feature_shape), y (N,)) of `data` (a `Dataset` or (x, y)), checked against `model`
    (`check_model_data`). Raises InputError when the labels are missing (naming `purpose`, e.g. "training")
    or do not fit the model."""
    x, y, num_classes, _ = as_arrays(data)
    if y is None:
        raise InputError("data", "<(x, None)>", f"labels y for {purpose}")
    return check_model_data(model, x, y, num_classes, arg="data")
