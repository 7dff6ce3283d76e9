"""Data sets: embedded (no-download) data; the `Dataset` container and minibatches are re-exported from
`inference` (they live there, beside `fit`, which consumes them). Every data set known by name has one record
in `DATASETS` (`zoo.data.registry`)."""

from inference.batches import minibatches
from base.data import Dataset, validate_arrays
from zoo.data.embedded import EMBEDDED, digits, regression_1d, two_moons
from zoo.data.registry import DATASETS, DataSet, TfdsSpec, register_data

__all__ = ["DATASETS", "EMBEDDED", "DataSet", "Dataset", "TfdsSpec", "digits", "minibatches", "register_data",
           "regression_1d", "two_moons", "validate_arrays"]
