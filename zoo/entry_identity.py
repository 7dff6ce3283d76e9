"""The identity ``zoo.get`` gives the model of a catalogue entry: its build arguments and its training data.

`inference.load` compares it with a checkpoint's (see `zoo.checkpoints`). Kept apart from `zoo.registry`
(which calls it) and `zoo.checkpoints` (which calls the registry), so that neither imports the other.
"""

from __future__ import annotations

import inspect
import json

from inference.model_identity import data_fingerprint

# Data set arguments that say where the files are, not what the data are (left out of the identity).
LOCATION_KWARGS = ("data_dir",)


def set_entry_identity(model, build, kwargs: dict, train, data_name: str | None, data_kwargs: dict) -> None:
    """Set ``model.arguments`` and ``model.data_identity`` (see `models.BNN`) for an entry built by ``zoo.get``.

    Args:
      model: the BNN ``build(train, **kwargs)`` returned.
      build: the entry's build function; its defaults complete `kwargs`, so that an argument left at its
        default and the same value passed explicitly give the same identity.
      kwargs: the architecture arguments the caller passed.
      train: the training `Dataset` (its x (N, *feature_shape) and y (N,) are fingerprinted for user arrays).
      data_name: the named data set, or None for the user's own arrays.
      data_kwargs: the data set's arguments (where-the-files-are ones such as ``data_dir`` are left out).
    """
    arguments = {}
    for name, p in list(inspect.signature(build).parameters.items())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if name in kwargs:
            arguments[name] = kwargs[name]
        elif p.default is not p.empty:
            arguments[name] = p.default
    arguments.update({k: v for k, v in kwargs.items() if k not in arguments})
    model.arguments = json.loads(json.dumps(arguments, default=_described))
    if data_name is None:
        model.data_identity = {"fingerprint": data_fingerprint(train.x, train.y)}
    else:
        kept = {k: v for k, v in (data_kwargs or {}).items() if k not in LOCATION_KWARGS}
        model.data_identity = {"name": data_name, "kwargs": json.loads(json.dumps(kept, default=_described))}


def _described(value):
    """JSON stand-in for an argument JSON cannot hold: an array as nested lists, a function by its module and
    name, another object by its type (never a repr holding a memory address)."""
    if hasattr(value, "shape") and hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (tuple, set)):
        return list(value)
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    return f"<{type(value).__module__}.{type(value).__qualname__}>"
