"""Data sets: embedded (no-download) data; the `Dataset` container and minibatches are re-exported from
`base.data` and `inference.batches`. Every data set known by name has one record
in `DATASETS` (`zoo.data.registry`)."""

from inference.batches import minibatches
from base.data import Dataset, validate_arrays
from zoo.data.embedded import EMBEDDED, digits, regression_1d, two_moons
from zoo.data.registry import DATASETS, DatasetRecord, TfdsSpec, register_data

__all__ = ["DATASETS", "EMBEDDED", "DatasetRecord", "Dataset", "TfdsSpec", "digits", "minibatches", "register_data",
           "regression_1d", "two_moons", "validate_arrays"]
