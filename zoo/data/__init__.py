"""Data sets: the `Dataset` container and embedded (no-download) data."""

from zoo.data.dataset import Dataset, validate_arrays
from zoo.data.embedded import EMBEDDED, digits, regression_1d, two_moons

__all__ = ["Dataset", "validate_arrays", "EMBEDDED", "digits", "two_moons", "regression_1d"]
