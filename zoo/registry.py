"""The catalogue: named, ready-made BNNs (architecture + prior + likelihood + data)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from inference.data import Dataset
from zoo.data.embedded import EMBEDDED

# Input shape and classes of every named data set (None classes: regression), so that `zoo.list` can
# count parameters without loading (or having prepared) the data.
DATA_SHAPES = {
    "digits": ((64,), 10),
    "two_moons": ((2,), 2),
    "regression_1d": ((1,), None),
    "mnist": ((28, 28, 1), 10),
    "fashion_mnist": ((28, 28, 1), 10),
    "cifar10": ((32, 32, 3), 10),
    "cifar100": ((32, 32, 3), 100),
    "imdb_reviews": ((80,), 2),
}
TFDS_DATA = ("mnist", "fashion_mnist", "cifar10", "cifar100", "imdb_reviews")
NAMED_DATA: dict[str, Callable] = dict(EMBEDDED)
"""Loaders of the data sets known by name besides TFDS: {name: ``loader(**data_kwargs) -> (train, test)``}."""


@dataclass
class Entry:
    """A ready-made BNN: `model` is the NumPyro model (a `models.BNN`), `train`/`test` its data.

    `config` is the JSON-able spec that rebuilds this entry: ``zoo.get(**entry.config)``; a copy is the
    model's ``origin`` (so checkpoints of its posteriors name the entry, see ``zoo.load``).
    """

    name: str
    model: object
    train: Dataset
    test: Dataset
    config: dict = field(default_factory=dict)
    description: str = ""

    def num_weights(self) -> int:
        """Number of scalar latent values of the model on this entry's inputs."""
        return self.model.num_weights(self.train.feature_shape)


@dataclass(frozen=True)
class Spec:
    """How to build one catalogue entry: ``build(train, **kwargs) -> BNN``."""

    name: str
    build: Callable
    default_data: str
    description: str
    guides: tuple = ("mean_field",)


_REGISTRY: dict[str, Spec] = {}


def register(name: str, *, default_data: str, description: str, guides=("mean_field",)):
    """Decorator adding ``build(train: Dataset, **kwargs) -> BNN`` to the catalogue as `name`."""

    def wrap(build):
        _REGISTRY[name] = Spec(name, build, default_data, description, tuple(guides))
        return build

    return wrap


def names() -> list:
    """The catalogue's entry names, sorted."""
    return sorted(_REGISTRY)


def spec(name: str) -> Spec:
    """The `Spec` registered as `name`; unknown names raise ValueError listing the known ones."""
    if name not in _REGISTRY:
        raise ValueError(f"name: unknown zoo entry {name!r}; expected one of {names()}")
    return _REGISTRY[name]


def get(name: str, data=None, data_kwargs: dict | None = None, **kwargs) -> Entry:
    """Build the catalogue entry `name` on `data`.

    Args:
      name: an entry of `zoo.list()` (e.g. "mlp", "deep_linear").
      data: the name of a shipped data set ("digits", "two_moons", "regression_1d"), of a TFDS data set
        prepared on this machine ("mnist", "fashion_mnist", "cifar10", "cifar100", "imdb_reviews":
        train = the papers' training part, test = the test split), or the user's own arrays
        ``(x_train, y_train, x_test, y_test)``: integer labels mean classification, float labels
        regression. Default: the entry's default data set.
      data_kwargs: keyword arguments of the data set function (e.g. ``{"n": 2000, "noise": 0.1}``;
        TFDS: ``{"data_dir": ...}`` and the loader's options).
      **kwargs: the architecture's arguments (widths, depth, activation, prior_scale, ...).
    """
    s = spec(name)
    data = s.default_data if data is None else data
    train, test, data_name = load_data(data, data_kwargs or {})
    model = s.build(train, **kwargs)
    config = {"name": name, "data": data_name, "data_kwargs": dict(data_kwargs or {}), **_jsonable(kwargs)}
    if data_name is None:
        config.pop("data")
    model.origin = _json_copy(config)  # the model knows the entry that built it (checkpoints store it)
    from zoo.checkpoints import set_entry_identity  # here: zoo.checkpoints imports this module

    set_entry_identity(model, s.build, kwargs, train, data_name, data_kwargs)  # compared when a checkpoint loads
    return Entry(name, model, train, test, config, s.description)


def load_data(data, data_kwargs: dict):
    """(train, test, name) from a shipped data set's name or a user's 4-tuple of arrays (name None)."""
    if isinstance(data, str):
        if data in TFDS_DATA:
            from zoo.data.tfds_loaders import load_tfds

            return load_tfds(data, "train", **data_kwargs), load_tfds(data, "test", **data_kwargs), data
        if data not in NAMED_DATA:
            raise ValueError(f"data: unknown data set {data!r}; expected one of {sorted(NAMED_DATA) + list(TFDS_DATA)} "
                             "or a tuple (x_train, y_train, x_test, y_test)")
        train, test = NAMED_DATA[data](**data_kwargs)
        _check_named(data, train, test)
        return train, test, data
    if isinstance(data, (tuple, list)) and len(data) == 4:
        x_tr, y_tr, x_te, y_te = (np.asarray(a) for a in data)
        classification = np.issubdtype(y_tr.dtype, np.integer) or np.issubdtype(y_tr.dtype, np.bool_)
        num_classes = int(max(y_tr.max(), y_te.max()) + 1) if classification else None
        if x_tr.shape[1:] != x_te.shape[1:]:
            raise ValueError(f"data: x_train features {x_tr.shape[1:]} and x_test features {x_te.shape[1:]} differ")
        return (Dataset(x_tr, y_tr, num_classes, "train"), Dataset(x_te, y_te, num_classes, "test"), None)
    raise ValueError("data: expected a data set name or a tuple (x_train, y_train, x_test, y_test), "
                     f"got {type(data).__name__}")


def register_data(name: str, loader: Callable, *, feature_shape, num_classes: int | None) -> None:
    """Make a data set available by name: ``zoo.get(entry, data=name, data_kwargs={...})`` then calls
    ``loader(**data_kwargs)``, which returns a (train, test) pair of `Dataset` with inputs of shape
    (N, *feature_shape) and `num_classes` classes (None: regression). The shape and class count let
    `zoo.list` size networks without loading anything; a loader whose data disagree is refused.
    """
    if not isinstance(name, str) or not name or name in TFDS_DATA:
        raise ValueError(f"name: expected a new data set name (not a TFDS one: {list(TFDS_DATA)}), got {name!r}")
    if not callable(loader):
        raise ValueError(f"loader: expected a function (**data_kwargs) -> (train, test), got {loader!r}")
    shape = tuple(feature_shape)
    if not shape or not all(isinstance(d, int) and d > 0 for d in shape):
        raise ValueError(f"feature_shape: expected a tuple of positive integers, got {feature_shape!r}")
    if num_classes is not None and (not isinstance(num_classes, int) or num_classes < 2):
        raise ValueError(f"num_classes: expected an integer >= 2 or None (regression), got {num_classes!r}")
    NAMED_DATA[name] = loader
    DATA_SHAPES[name] = (shape, num_classes)


def _check_named(name: str, train, test) -> None:
    """Refuse a loader's (train, test) that are not Datasets of the registered feature shape and classes."""
    if not (isinstance(train, Dataset) and isinstance(test, Dataset)):
        raise ValueError(f"data: the loader of {name!r} must return a (train, test) pair of Dataset, got "
                         f"({type(train).__name__}, {type(test).__name__})")
    if name in DATA_SHAPES:
        shape, classes = DATA_SHAPES[name]
        for part, ds in (("train", train), ("test", test)):
            if ds.feature_shape != shape or ds.num_classes != classes:
                raise ValueError(f"data: {name!r} was registered with feature shape {shape} and {classes} classes; "
                                 f"its loader's {part} set has {ds.feature_shape} and {ds.num_classes}")


def placeholder_data(data: str) -> Dataset:
    """A one-row Dataset shaped like the named data set (for building a model without its data)."""
    shape, num_classes = DATA_SHAPES[data]
    y = np.zeros(1, np.int32) if num_classes is not None else np.zeros(1, np.float32)
    return Dataset(np.zeros((1,) + shape, np.float32), y, num_classes, data,
                   image_shape=(8, 8, 1) if data == "digits" else None)


def list_entries() -> list:
    """One dict per entry: name, description, default data, weight count on it (counted from shapes,
    nothing is loaded), applicable guides."""
    rows = []
    for n in names():
        s = _REGISTRY[n]
        train = placeholder_data(s.default_data)
        model = s.build(train)
        rows.append({"name": n, "data": s.default_data, "weights": model.num_weights(train.feature_shape),
                     "guides": ", ".join(s.guides), "description": s.description})
    return rows


def _jsonable(kwargs):
    """Entry kwargs as JSON values: tuples -> lists, arrays (e.g. rank1_mlp's `fixed` weights) -> nested lists."""
    def convert(v):
        if isinstance(v, tuple):
            return list(v)
        if isinstance(v, dict):
            return {k: convert(x) for k, x in v.items()}
        if hasattr(v, "shape") and hasattr(v, "tolist"):
            return np.asarray(v).tolist()
        return v

    return {k: convert(v) for k, v in kwargs.items()}


def _json_copy(config: dict) -> dict | None:
    """A JSON round trip of `config` (a deep copy, tuples as lists), or None when an argument is not JSON-able
    (e.g. a callable activation): then the model names no entry and checkpoints of it still save."""
    try:
        return json.loads(json.dumps(config))
    except (TypeError, ValueError):
        return None
