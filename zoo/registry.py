"""The catalogue: named, ready-made BNNs (architecture + prior + likelihood + data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from zoo.data.dataset import Dataset
from zoo.data.embedded import EMBEDDED


@dataclass
class Entry:
    """A ready-made BNN: `model` is the NumPyro model (a `models.BNN`), `train`/`test` its data.

    `config` is the JSON-able spec that rebuilds this entry: ``zoo.get(**entry.config)``.
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
      data: the name of a shipped data set ("digits", "two_moons", "regression_1d"), or the user's own
        arrays ``(x_train, y_train, x_test, y_test)``: integer labels mean classification, float labels
        regression. Default: the entry's default data set.
      data_kwargs: keyword arguments of the data set function (e.g. ``{"n": 2000, "noise": 0.1}``).
      **kwargs: the architecture's arguments (widths, depth, activation, prior_scale, ...).
    """
    s = spec(name)
    data = s.default_data if data is None else data
    train, test, data_name = load_data(data, data_kwargs or {})
    model = s.build(train, **kwargs)
    config = {"name": name, "data": data_name, "data_kwargs": dict(data_kwargs or {}), **_jsonable(kwargs)}
    if data_name is None:
        config.pop("data")
    return Entry(name, model, train, test, config, s.description)


def load_data(data, data_kwargs: dict):
    """(train, test, name) from a shipped data set's name or a user's 4-tuple of arrays (name None)."""
    if isinstance(data, str):
        if data not in EMBEDDED:
            raise ValueError(f"data: unknown data set {data!r}; expected one of {sorted(EMBEDDED)} "
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


def list_entries() -> list:
    """One dict per entry: name, description, default data, weight count on it, applicable guides."""
    rows = []
    for n in names():
        s = _REGISTRY[n]
        entry = get(n)
        rows.append({"name": n, "data": s.default_data, "weights": entry.num_weights(),
                     "guides": ", ".join(s.guides), "description": s.description})
    return rows


def _jsonable(kwargs):
    return {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}
