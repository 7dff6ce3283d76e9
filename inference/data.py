"""The `Dataset` container and its validation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Dataset:
    """A labelled data set held as host NumPy arrays.

    Attributes:
      x: float32 inputs, shape (N, *feature_shape).
      y: labels. Classification: int32 (N,) in [0, num_classes). Regression: float32 (N,) or (N, D).
      num_classes: number of classes, or None for regression.
      name: a short name used in tables and file names.
      image_shape: (H, W, C) when the rows of `x` are flattened images, else None.
    """

    x: np.ndarray
    y: np.ndarray
    num_classes: int | None
    name: str = "data"
    image_shape: tuple[int, int, int] | None = None

    def __post_init__(self):
        x = np.asarray(self.x, dtype=np.float32)
        y = np.asarray(self.y)
        y = y.astype(np.int32) if self.num_classes is not None else y.astype(np.float32)
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)
        validate_arrays(x, y, self.num_classes, name=self.name)

    def __len__(self) -> int:
        return self.x.shape[0]

    @property
    def feature_shape(self) -> tuple[int, ...]:
        """Shape of one input, x.shape[1:]."""
        return tuple(self.x.shape[1:])

    def subset(self, index) -> "Dataset":
        """The rows `index` (slice or integer array) as a new Dataset of the same kind."""
        return Dataset(self.x[index], self.y[index], self.num_classes, self.name, self.image_shape)


def validate_arrays(x, y, num_classes, *, name="data", feature_shape=None, arg="x"):
    """Check inputs and labels; raise ValueError naming the argument and what was expected.

    Args:
      x: inputs (N, ...).
      y: labels (N,) (classification) or (N,)/(N, D) (regression), or None when only inputs are checked.
      num_classes: int for classification, None for regression.
      feature_shape: if given, the expected x.shape[1:].
      arg: the argument name used in error messages for `x` (labels are reported as `y`).
    """
    x = np.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"{arg} of {name!r}: expected shape (N, features...), got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.floating) and not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"{arg} of {name!r}: expected a numeric array, got dtype {x.dtype}")
    if feature_shape is not None and tuple(x.shape[1:]) != tuple(feature_shape):
        raise ValueError(
            f"{arg} of {name!r}: expected feature shape {tuple(feature_shape)} "
            f"(the shape the model was built for), got {tuple(x.shape[1:])}"
        )
    finite = np.isfinite(x)
    if not finite.all():
        bad = int(np.size(x) - finite.sum())
        raise ValueError(f"{arg} of {name!r}: expected finite values, found {bad} NaN/inf entries")
    if y is None:
        return
    y = np.asarray(y)
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"y of {name!r}: expected {x.shape[0]} labels (one per row of {arg}), got {y.shape[0]}")
    if num_classes is None:
        if not np.isfinite(y).all():
            raise ValueError(f"y of {name!r}: expected finite regression targets, found NaN/inf")
        return
    if not (np.issubdtype(y.dtype, np.integer) or np.all(np.mod(y, 1) == 0)):
        raise ValueError(f"y of {name!r}: expected integer class labels, got dtype {y.dtype}")
    if y.ndim != 1:
        raise ValueError(f"y of {name!r}: expected shape (N,), got {y.shape}")
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(
            f"y of {name!r}: expected labels in [0, {num_classes}), got values in [{y.min()}, {y.max()}]"
        )
