"""``zoo.load(path)``: read a saved Posterior of a catalogue entry, rebuilding the entry's model first.

`inference.load` needs the model a checkpoint was saved from. A model built by ``zoo.get`` carries the
entry's arguments as its ``origin``, which `inference.save` stores in the model spec; an older checkpoint
names the entry in its posterior config (``config["entry"]``, as `zoo fit` writes it). Either rebuilds
the entry with ``zoo.get``.
"""

from __future__ import annotations

import inference
from inference.checkpoint import read_meta
from zoo.registry import get


def entry_spec(path: str) -> dict:
    """The ``zoo.get`` keyword arguments of the entry whose posterior is saved at `path`.

    ``config["entry"]`` if the checkpoint has it, else the stored model spec's ``origin``. Raises
    FileNotFoundError when `path` holds no checkpoint and ValueError when the checkpoint names no
    rebuildable entry (a model built outside the catalogue, or an entry built on the user's own arrays).
    """
    meta = read_meta(path)
    spec = (meta.get("config") or {}).get("entry") or (meta.get("model") or {}).get("origin")
    if not spec:
        raise ValueError(f"path: the checkpoint at {str(path)!r} names no zoo entry (its model was not built "
                         "by zoo.get); load it with inference.load(path, model=...) and the model it was saved from")
    if "data" not in spec:
        raise ValueError(f"path: the checkpoint at {str(path)!r} is of entry {spec.get('name')!r} built on the "
                         "user's own arrays, which it does not store; rebuild the entry with zoo.get(..., data=arrays) "
                         "and load it with inference.load(path, model=entry.model)")
    return dict(spec)


def load_entry(path: str):
    """(entry, posterior): the rebuilt zoo `Entry` (its model, train and test data) and the `inference.Posterior`
    saved at `path`, attached to ``entry.model``.

    Rebuilds the entry with ``zoo.get(**entry_spec(path))`` and calls ``inference.load(path, model=entry.model)``,
    which checks the site shapes (a model of other shapes raises ValueError).
    """
    entry = get(**entry_spec(path))
    return entry, inference.load(path, model=entry.model)


def load(path: str):
    """The `inference.Posterior` saved at `path`, attached to a freshly built model of its zoo entry
    (see `load_entry`). Params / samples round-trip exactly, so predictions equal the saved posterior's."""
    return load_entry(path)[1]
