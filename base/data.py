"""The `Dataset` container and its validation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from base.validation import check_inputs, check_labels, check_num_classes, check_targets


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
        # checked before any cast: labels 0.5 are refused, not truncated to 0
        x, y = validate_arrays(self.x, self.y, self.num_classes, name=self.name)
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)

    def __len__(self) -> int:
        return self.x.shape[0]

    @property
    def feature_shape(self) -> tuple[int, ...]:
        """Shape of one input, x.shape[1:]."""
        return tuple(self.x.shape[1:])

    def subset(self, index) -> "Dataset":
        """The rows `index` (slice or integer array) as a new Dataset of the same kind."""
        return Dataset(self.x[index], self.y[index], self.num_classes, self.name, self.image_shape)


def validate_arrays(x, y, num_classes, *, name="data", feature_shape=None, arg="x", allow_empty=True):
    """Check inputs and labels before any cast; raise `base.errors.InputError` (a ValueError) naming the
    argument, the value and what was expected.

    Args:
      x: inputs (N, ...): real numbers (float, integer or bool), finite.
      y: labels (N,) (classification: integer-valued, in [0, num_classes)) or targets (N,)/(N, D)
        (regression: finite), or None when only inputs are checked.
      num_classes: int >= 2 for classification, None for regression.
      name: the data set's name, quoted in messages (``x of 'train'``) unless it is "data".
      feature_shape: if given, the expected x.shape[1:].
      arg: the argument name used in error messages for `x` (labels are reported as `y`).
      allow_empty: whether N = 0 is accepted.
    Returns:
      (x float32 (N, ...), y int32 (N,) / float32 (N, ...) or None).
    """
    where = "" if name in ("data", arg) else f" of {name!r}"
    x = check_inputs(x, arg=f"{arg}{where}", feature_shape=feature_shape, allow_empty=allow_empty)
    if y is None:
        return x, None
    y_arg = f"{arg.rpartition('.')[0] + '.' if '.' in arg else ''}y{where}"
    if num_classes is None:
        return x, check_targets(y, arg=y_arg, n=x.shape[0])
    return x, check_labels(y, check_num_classes(num_classes), arg=y_arg, n=x.shape[0])
