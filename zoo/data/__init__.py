"""Data sets: embedded (no-download) data; the `Dataset` container and minibatches are re-exported from
`inference` (they live there, beside `fit`, which consumes them)."""

from inference.batches import minibatches
from inference.data import Dataset, validate_arrays
from zoo.data.embedded import EMBEDDED, digits, regression_1d, two_moons

__all__ = ["Dataset", "validate_arrays", "minibatches", "EMBEDDED", "digits", "two_moons", "regression_1d"]
