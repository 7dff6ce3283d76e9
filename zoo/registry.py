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
    return Entry(name, model, train, test, config, s.description)


def load_data(data, data_kwargs: dict):
    """(train, test, name) from a shipped data set's name or a user's 4-tuple of arrays (name None)."""
    if isinstance(data, str):
        if data in TFDS_DATA:
            from zoo.data.tfds_loaders import load_tfds

            return load_tfds(data, "train", **data_kwargs), load_tfds(data, "test", **data_kwargs), data
        if data not in EMBEDDED:
            raise ValueError(f"data: unknown data set {data!r}; expected one of {sorted(EMBEDDED) + list(TFDS_DATA)} "
                             "or a tuple (x_train, y_train, x_test, y_test)")
        train, test = EMBEDDED[data](**data_kwargs)
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
