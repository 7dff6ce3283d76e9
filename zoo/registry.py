"""The catalogue: named, ready-made BNNs (architecture + prior + likelihood + data).

Two registries of `base.registry` (where every registry of the package lives), filled where their items are
defined: `ENTRIES` (``@register`` on a builder, ``zoo.entries``) and the data sets, `DATASETS` (`register_data`;
the shipped loaders register themselves in ``zoo.data``). Everything else here is derived from them and from the
guides' own registrations: `DATA_SHAPES`, `TFDS_DATA` and `NAMED_DATA` are live views, never tables of their
own, and an entry's guides (``zoo list``) are those whose registered ``suits`` accepts its model
(``inference.registry.guides_for``).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import zoo.data.embedded  # registers the shipped data sets
import zoo.data.tfds_loaders  # registers the TFDS data sets
import zoo.data.uci  # noqa: F401  (registers "uci")
from base.data import Dataset
from base.registry import DATASETS, ENTRIES
from inference.registry import guides_for
from base.validation import (as_array, check_inputs, check_num_classes, check_real, infer_num_classes,
                                  is_int)
from models import priors
from models.bridge import BNN
from base.errors import ArgumentTypeError, InputError
from base.value_key import Identity, frozen
from zoo.data.registry import register_data  # noqa: F401  (zoo.registry.register_data, as before)
from zoo.entry_identity import set_entry_identity

DATA_SHAPES = DATASETS.view(lambda record: (record.feature_shape, record.num_classes),
                            where=lambda record: record.feature_shape is not None)
"""{name: (feature shape, classes)} of the named data sets whose shape is known without loading them (a view of
`DATASETS`), so that `zoo.list` counts parameters without loading (or having prepared) the data."""
TFDS_DATA = DATASETS.view(lambda record: record.tfds, where=lambda record: record.tfds is not None)
"""{name: `zoo.data.registry.TfdsSpec`} of the TFDS data sets (a view of `DATASETS`)."""
NAMED_DATA = DATASETS.view(lambda record: record.loader, where=lambda record: record.tfds is None)
"""{name: ``loader(**data_kwargs) -> (train, test)``} of the named data sets besides TFDS (a view of `DATASETS`)."""
# Entry arguments checked by their own rules (InputError naming them), not by the kind of their default.
PRIOR_CHECKS = {"prior": priors.check_kind, "prior_scale": priors.check_scale}


@dataclass
class Entry:
    """A ready-made BNN: `model` is the NumPyro model (a `models.BNN`), `train`/`test` its data.

    `config` is the JSON-able spec that rebuilds this entry: ``zoo.get(**entry.config)``; a copy is the
    model's ``origin`` (so checkpoints of its posteriors name the entry, see ``zoo.load``).
    """

    name: str
    model: BNN
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


def register(name: str, *, default_data: str, description: str):
    """Decorator adding ``build(train: Dataset, **kwargs) -> BNN`` to the catalogue as `name` (`ENTRIES`).

    default_data: a data set name of `DATASETS` (e.g. "digits") the entry is built on unless ``zoo.get`` is
    given other data; description: one line for ``zoo list``. The guides ``zoo list`` shows for the entry are
    derived from the guides' registrations (`guides`), never listed here."""

    def wrap(build):
        if not callable(build):
            raise ArgumentTypeError("build", build, "a function build(train, **kwargs) -> BNN")
        return ENTRIES.register(name, Spec(name, build, default_data, description))

    return wrap


def names() -> list:
    """The catalogue's entry names, sorted."""
    return sorted(ENTRIES)


def spec(name: str) -> Spec:
    """The `Spec` registered as `name`; unknown names raise InputError listing the known ones."""
    return ENTRIES[name]


def get(name: str, data=None, data_kwargs: dict | None = None, **kwargs) -> Entry:
    """Build the catalogue entry `name` on `data`.

    Args:
      name: an entry of `zoo.list()` (e.g. "mlp", "deep_linear").
      data: the name of a shipped data set ("digits", "two_moons", "regression_1d"), of a TFDS data set
        prepared on this machine ("mnist", "fashion_mnist", "cifar10", "cifar100", "imdb_reviews":
        train = the papers' training part, test = the test split), a UCI regression set in the standard
        layout ("uci" with data_kwargs ``{"name": "yacht", "split": K, "root": DIR}``, root None: the four
        shipped sets; `zoo.data.uci`), a pair ``(name, data_kwargs)`` (e.g. ``("uci", {"name": "yacht",
        "split": 3})``), or the user's own arrays ``(x_train, y_train, x_test, y_test)``: integer labels mean
        classification, float labels regression. Default: the entry's default data set.
      data_kwargs: keyword arguments of the data set function (e.g. ``{"n": 2000, "noise": 0.1}``;
        TFDS: ``{"data_dir": ...}`` and the loader's options).
        User arrays take ``{"num_classes": K}`` only: without it K is inferred from the labels and refused
        when that looks wrong (`base.validation.infer_num_classes`).
      **kwargs: the architecture's arguments (widths, depth, activation, prior_scale, ...), checked against
        the builder's signature (`check_entry_kwargs`: e.g. ``hidden=64`` is refused, ``hidden=(64,)`` meant).

    The model records the feature shape it was built for (``model.feature_shape``), so that `inference.fit`,
    `nuts` and `predict` refuse data of another shape instead of training another network.
    Raises InputError (ArgumentTypeError for a wrong type) naming the argument.
    """
    s = spec(name)
    if data_kwargs is not None and not isinstance(data_kwargs, dict):
        raise ArgumentTypeError("data_kwargs", data_kwargs, "a dict of the data set's keyword arguments or None")
    check_entry_kwargs(name, s.build, kwargs)
    data = s.default_data if data is None else data
    data, data_kwargs = named_pair(data, data_kwargs)
    train, test, data_name = load_data(data, data_kwargs or {})
    model = s.build(train, **kwargs)
    model.feature_shape = train.feature_shape  # what fit / nuts / predict check inputs against
    config = {"name": name, "data": data_name, "data_kwargs": dict(data_kwargs or {}), **_jsonable(kwargs)}
    if data_name is None:
        config.pop("data")
    model.origin = _json_copy(config)  # the model knows the entry that built it (checkpoints store it)
    set_entry_identity(model, s.build, kwargs, train, data_name, data_kwargs)  # compared when a checkpoint loads
    # the model as a value (`base.value_key`): another zoo.get with equal arguments reuses its compiled code
    model.build_key = (Identity(s.build), frozen(kwargs), frozen(data_name), frozen(dict(data_kwargs or {})),
                       frozen(model.data_identity))
    return Entry(name, model, train, test, config, s.description)


def load_data(data, data_kwargs: dict):
    """(train, test, name) from a shipped data set's name, a (name, data_kwargs) pair or a user's 4-tuple of
    arrays (name None)."""
    data, data_kwargs = named_pair(data, data_kwargs)
    if isinstance(data, str):
        if data not in DATASETS:
            raise InputError("data", data, f"one of {list(DATASETS)} or a tuple (x_train, y_train, x_test, y_test)",
                             "unknown data set")
        record = DATASETS[data]
        check_entry_kwargs(data, record.loader, data_kwargs, skip=0, what="data set")
        train, test = record.loader(**data_kwargs)
        _check_named(record, train, test, data_kwargs)
        return train, test, data
    if isinstance(data, (tuple, list)) and len(data) == 4:
        check_entry_kwargs("user arrays", user_arrays, data_kwargs, skip=4, what="data")
        train, test = user_arrays(*data, **data_kwargs)
        return train, test, None
    raise ArgumentTypeError("data", f"<{type(data).__name__}>" if not isinstance(data, (tuple, list)) else
                            f"<a {type(data).__name__} of {len(data)} items>",
                            "a data set name or a tuple (x_train, y_train, x_test, y_test)")


def named_pair(data, data_kwargs):
    """(name, data_kwargs) of a pair ``data = (name, {...})``; any other `data` comes back unchanged. A pair
    with `data_kwargs` also given, or whose second item is no dict, is refused."""
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[0], str)):
        return data, data_kwargs
    if data_kwargs:
        raise InputError("data_kwargs", data_kwargs, "None when data is a (name, data_kwargs) pair")
    if not isinstance(data[1], dict):
        raise ArgumentTypeError("data", f"<({data[0]!r}, {type(data[1]).__name__})>",
                                "a pair (data set name, dict of its keyword arguments)")
    return data[0], dict(data[1])


def user_arrays(x_train, y_train, x_test, y_test, num_classes: int | None = None):
    """(train, test) `Dataset`s of a user's arrays: integer (or bool) labels mean classification with
    `num_classes` classes (None: inferred from the labels, refused when that looks wrong, see
    `base.validation.infer_num_classes`; the inference is logged at INFO on the "zoo" logger), float
    labels regression. x_train (N, *features), x_test (M, *features) of the same feature shape, N, M >= 1."""
    x_tr = check_inputs(x_train, arg="x_train", allow_empty=False)
    x_te = check_inputs(x_test, arg="x_test", allow_empty=False)
    if x_tr.shape[1:] != x_te.shape[1:]:
        raise InputError("x_test", f"<features {x_te.shape[1:]}>", f"x_test features equal to x_train's, {x_tr.shape[1:]}")
    y_tr, y_te = as_array(y_train, "y_train"), as_array(y_test, "y_test")
    classification = any(np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_ for y in (y_tr, y_te))
    if num_classes is not None:
        num_classes = check_num_classes(num_classes, "data_kwargs['num_classes']")
    elif classification:
        num_classes, note = infer_num_classes(y_tr, y_te)
        logging.getLogger("zoo").info("zoo.get: %s", note)
    return (Dataset(x_tr, y_tr, num_classes, "train"), Dataset(x_te, y_te, num_classes, "test"))


def check_entry_kwargs(name: str, build: Callable, kwargs: dict, *, skip: int = 1, what: str = "entry") -> None:
    """Check `zoo.get`'s architecture arguments against the entry builder's signature: unknown names are
    refused (unless the builder takes **kwargs), and a value must have the kind of its default: a tuple
    default (e.g. ``hidden=(64, 64)``) wants a tuple or list (of positive integers when the default holds
    integers), an integer default an integer, a float default a finite number (None is always passed on).
    `skip`: leading parameters that are not the user's (an entry builder's first is the training data);
    `what`: "entry" or "data set", for the message."""
    params = dict(list(inspect.signature(build).parameters.items())[skip:])
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for key, value in kwargs.items():
        if key not in params:
            if open_ended:
                continue
            raise ArgumentTypeError(key, value, f"one of {what} {name!r}'s arguments {sorted(params)}",
                                    "unknown argument")
        if what == "entry" and key in PRIOR_CHECKS:  # a kind / scale, or one per site pattern
            PRIOR_CHECKS[key](value)
            continue
        default = params[key].default
        if value is None or default is inspect.Parameter.empty:
            continue
        if isinstance(default, tuple):
            if not isinstance(value, (tuple, list)):
                example = f" such as {tuple(default)!r}" if default else ""
                raise ArgumentTypeError(key, value, f"a tuple{example}",
                                        f"for one layer write {key}=({value!r},)" if is_int(value) else "")
            if default and all(is_int(d) for d in default) and not all(is_int(v) and v > 0 for v in value):
                raise InputError(key, value, "a tuple of positive integers")
        elif isinstance(default, bool):
            if not isinstance(value, (bool, np.bool_)):
                raise ArgumentTypeError(key, value, "True or False")
        elif isinstance(default, int):
            if not is_int(value):
                raise ArgumentTypeError(key, value, "an integer")
        elif isinstance(default, float):
            check_real(key, value)


def _check_named(record, train, test, data_kwargs: dict) -> None:
    """Refuse a loader's (train, test) that are not Datasets of the registered classes, or, under the loader's
    default arguments (no `data_kwargs`: what ``zoo list`` sizes networks for), of another feature shape."""
    name = record.name
    if not (isinstance(train, Dataset) and isinstance(test, Dataset)):
        raise ArgumentTypeError("data", f"<the loader of {name!r} returned ({type(train).__name__}, "
                                f"{type(test).__name__})>", "a (train, test) pair of Dataset")
    shape = record.feature_shape if not data_kwargs else None
    for part, ds in (("train", train), ("test", test)):
        if ds.num_classes != record.num_classes or (shape is not None and ds.feature_shape != shape):
            expected = f"{record.num_classes} classes" if shape is None else \
                f"feature shape {shape} and {record.num_classes} classes"
            raise InputError("data", f"<the loader of {name!r} gave a {part} set of feature shape "
                             f"{ds.feature_shape} and {ds.num_classes} classes>", f"{expected} (as registered)")


def placeholder_data(data: str) -> Dataset:
    """A one-row Dataset shaped like the named data set (its `DATASETS` record: feature shape, classes, image
    shape), for building a model without its data. InputError for a data set whose shape depends on its
    arguments (feature_shape None, e.g. "uci")."""
    record = DATASETS[data]
    if record.feature_shape is None:
        raise InputError("data", data, "a data set whose feature shape is known without loading it",
                         "its shape depends on its arguments (feature_shape=None)")
    y = np.zeros(1, np.int32) if record.num_classes is not None else np.zeros(1, np.float32)
    return Dataset(np.zeros((1,) + record.feature_shape, np.float32), y, record.num_classes, data,
                   image_shape=record.image_shape)


def guides(model: BNN, feature_shape: tuple) -> list:
    """The names of the registered guides meant for `model` on inputs of `feature_shape`: those whose
    registered ``suits`` accepts its latent sites {name: shape} (``inference.registry.guides_for``; e.g. a plain mlp's
    mean_field, point_estimate, k_tied, ...; a rank-1 mlp's rank1_mixture)."""
    return guides_for(model.site_shapes(feature_shape))


def list_entries() -> list:
    """One dict per entry: name, description, default data, weight count on it (counted from shapes,
    nothing is loaded), applicable guides, and its default prior in words (`models.priors.describe`)."""
    rows = []
    for n in names():
        s = ENTRIES[n]
        train = placeholder_data(s.default_data)
        model = s.build(train)
        rows.append({"name": n, "data": s.default_data, "weights": model.num_weights(train.feature_shape),
                     "guides": ", ".join(guides(model, train.feature_shape)), "description": s.description,
                     "prior": priors.describe(getattr(model.prior, "spec", None))})
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
