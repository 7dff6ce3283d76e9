"""The data sets known by name: one `DatasetRecord` each in `DATASETS` (a `base.registry` registry), filled by
`register_data`. (The data themselves are `base.data.Dataset` containers; a record describes a named set.)

A record holds everything the package knows about a data set: its loader, the feature shape and class count
``zoo list`` sizes networks with (nothing is loaded), the image shape of flat image rows, and for a TFDS data
set its TFDS facts (`TfdsSpec`). Each loader registers itself where it is defined (``zoo.data.embedded``,
``zoo.data.tfds_loaders``, ``zoo.data.uci``); a user's loader registers the same way (``zoo.register_data``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from base.registry import DATASETS
from base.errors import ArgumentTypeError, InputError

__all__ = ["DATASETS", "DatasetRecord", "TfdsSpec", "register_data"]


@dataclass(frozen=True)
class TfdsSpec:
    """How a TFDS data set is read (`zoo.data.tfds_loaders.load_tfds`).

    num_validation: examples taken from the end of the TFDS train split for "validation" (the papers' size);
    scaling: "pm1" (uint8 images -> [-1, 1]), "unit" (-> [0, 1]) or "text" (token ids).
    """

    num_validation: int
    scaling: str


@dataclass(frozen=True)
class DatasetRecord:
    """What the package knows of one named data set (the data are loaded by its `loader`).

    Attributes:
      name: what ``zoo.get(entry, data=name)`` takes.
      loader: ``loader(**data_kwargs) -> (train, test)``, a pair of `zoo.data.Dataset` with inputs
        (N, *feature_shape) and `num_classes` classes.
      feature_shape: the input shape under the loader's default arguments (what ``zoo list`` sizes an entry's
        network with); None where it depends on the arguments (``uci``: the data set folder chosen).
      num_classes: classes, None for regression.
      image_shape: (H, W, C) of inputs given as flat rows (the digits), for image networks; None otherwise.
      tfds: a `TfdsSpec` for a TFDS data set (prepared on this machine, never downloaded); None otherwise.
    """

    name: str
    loader: Callable
    feature_shape: tuple | None
    num_classes: int | None
    image_shape: tuple | None = None
    tfds: TfdsSpec | None = None


def register_data(name: str, loader: Callable | None = None, *, feature_shape, num_classes: int | None,
                  image_shape=None, tfds: TfdsSpec | None = None):
    """Make a data set available by name: ``zoo.get(entry, data=name, data_kwargs={...})`` then calls
    ``loader(**data_kwargs)``, which returns a (train, test) pair of `Dataset` with inputs of shape
    (N, *feature_shape) and `num_classes` classes (None: regression). Without `loader`, a decorator. Returns
    `loader`.

    feature_shape: a tuple of positive integers (None only when it depends on the loader's arguments: then
    ``zoo list`` cannot size an entry on it and the loaded data are not checked against it); image_shape:
    (H, W, C) of flat image rows, or None; tfds: a `TfdsSpec` for a TFDS data set. A registration replaces an
    earlier one of the same name. Raises InputError (ArgumentTypeError for a loader that is not callable).
    """
    if loader is None:
        return lambda decorated: register_data(name, decorated, feature_shape=feature_shape,
                                               num_classes=num_classes, image_shape=image_shape, tfds=tfds)
    if not isinstance(name, str) or not name:
        raise InputError("name", name, "a non-empty data set name")
    if not callable(loader):
        raise ArgumentTypeError("loader", loader, "a function (**data_kwargs) -> (train, test)")
    shape = None if feature_shape is None else _positive_shape("feature_shape", feature_shape)
    if image_shape is not None:
        image_shape = _positive_shape("image_shape", image_shape)
    if num_classes is not None and (not isinstance(num_classes, int) or isinstance(num_classes, bool)
                                    or num_classes < 2):
        raise InputError("num_classes", num_classes, "an integer >= 2 or None (regression)")
    if tfds is not None and not isinstance(tfds, TfdsSpec):
        raise ArgumentTypeError("tfds", tfds, "None or a zoo.data.registry.TfdsSpec")
    DATASETS.register(name, DatasetRecord(name, loader, shape, num_classes, image_shape, tfds))
    return loader


def _positive_shape(arg: str, shape) -> tuple:
    """`shape` as a non-empty tuple of positive integers; InputError naming `arg` otherwise."""
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else ()
    if not dims or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise InputError(arg, shape, "a tuple of positive integers")
    return dims
