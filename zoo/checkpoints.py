"""``zoo.load(path)``: read a saved Posterior of a catalogue entry, rebuilding the entry's model first.

`inference.load` needs the model a checkpoint was saved from. A model built by ``zoo.get`` carries the
entry's arguments as its ``origin``, which `inference.save` stores in the model spec; a posterior config may
name the entry too (``config["entry"]``, as `zoo fit` writes it). Either rebuilds the entry with ``zoo.get``.

``zoo.get`` also gives its model an identity (`zoo.entry_identity.set_entry_identity`): every argument of the entry's build
function, defaults included, and the training data (a named data set with its arguments, or a SHA-256
fingerprint of the user's own arrays). `inference.load` compares it with the checkpoint's, so a checkpoint of
a model fitted on the user's arrays is never rebuilt onto a shipped data set: ``zoo.load`` asks for the
arrays (``zoo.load(path, data=...)``) and checks them against the fingerprint.
"""

from __future__ import annotations

import os

import inference
from inference.checkpoint import read_meta
from inference.model_identity import describe_data
from base.atomic_dir import folder_kind, readable_path
from base.errors import FolderNotOwnedError, InputError, PathNotFoundError
from base.run_folder import run_folder_job
from zoo import registry
from zoo.entry_identity import set_entry_identity

__all__ = ["check_posterior_folder", "entry_spec", "load", "load_entry", "set_entry_identity"]

POSTERIOR_FOLDER = "a saved posterior (a folder written by inference.save, zoo fit --out or zoo nuts --out)"


def check_posterior_folder(path, argument: str = "path") -> None:
    """Raise InputError naming `argument` unless `path` is a folder holding a saved posterior
    (`base.atomic_dir.folder_kind`), saying what it is instead: absent (`PathNotFoundError`), a file, an empty
    folder, a fit state (a resumable fit, not a posterior), a results folder of a job (``zoo run``...), or a folder
    of other files (`FolderNotOwnedError`, naming a few). A posterior's damaged files are `inference.load`'s to
    report (CheckpointError naming the file)."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise InputError(argument, path, "a folder path (not empty)")
    path = os.fspath(path)
    kind = folder_kind(path)
    if kind == "posterior":
        return
    if kind is None:
        if not os.path.isdir(path):
            raise PathNotFoundError.worded(argument, f"{argument}: no checkpoint at {path!r} (it does not exist); "
                                                     f"expected {POSTERIOR_FOLDER}", path)
        raise InputError(argument, path, POSTERIOR_FOLDER, "it is an empty folder")
    if kind == "file":
        raise InputError(argument, path, POSTERIOR_FOLDER, "it is a file")
    if kind == "fit state":
        raise InputError(argument, path, POSTERIOR_FOLDER,
                         "it is a fit state (the resumable state of an unfinished zoo fit, its --checkpoint-dir), not "
                         "a saved posterior: finish the fit with the same zoo fit command and --resume, which saves "
                         "the posterior to its --out")
    folder = readable_path(path)
    try:
        job = run_folder_job(folder)
    except FolderNotOwnedError:
        job = None
    if job is not None:
        raise InputError(argument, path, POSTERIOR_FOLDER,
                         f"it is the results folder of {job}, not a saved posterior (the posteriors a job saves are "
                         "in folders of their own under it)")
    names = sorted(os.listdir(folder))
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    raise FolderNotOwnedError(argument, path, POSTERIOR_FOLDER,
                              f"it holds files bnn-zoo did not write ({shown}), not a saved posterior")


def entry_spec(path) -> dict:
    """The ``zoo.get`` keyword arguments of the entry whose posterior is saved at `path`.

    ``config["entry"]`` if the checkpoint has it, else the stored model spec's ``origin``; an entry built on
    the user's own arrays has no "data" key (see `load_entry`). Raises FileNotFoundError when `path` holds no
    checkpoint, CheckpointError for a damaged one, and InputError when the checkpoint names no entry (a model
    built outside the catalogue).
    """
    meta = read_meta(path)
    spec = (meta.get("config") or {}).get("entry") or (meta.get("model") or {}).get("origin")
    if not spec:
        raise InputError("path", str(path), "a checkpoint of a model built by zoo.get",
                         "the checkpoint names no zoo entry (its model was not built by zoo.get); load it with "
                         "inference.load(path, model=...) and the model it was saved from")
    return dict(spec)


def load_entry(path, data=None):
    """(entry, posterior): the rebuilt zoo `Entry` (its model, train and test data) and the `inference.Posterior`
    saved at `path`, attached to ``entry.model``.

    A folder that holds no saved posterior (a fit state, the user's files, nothing) raises InputError saying what
    it is (`check_posterior_folder`). Rebuilds the entry with ``zoo.get(**entry_spec(path))`` and calls ``inference.load(path, model=entry.model)``,
    which compares the model's identity (arguments, prior, likelihood, data) and its site shapes, and raises
    CheckpointError on a difference.

    data: only for a checkpoint of a model fitted on the user's own arrays, which it does not store: the same
      arrays as ``zoo.get`` took them, ``(x_train, y_train, x_test, y_test)``, or ``(x_train, y_train)`` (then
      the entry's test set is the training set). Their fingerprint must equal the stored one. Without them such
      a checkpoint is refused (InputError), never rebuilt on another data set; `data` for a checkpoint of a
      named data set is refused too.
    """
    check_posterior_folder(path)
    spec = entry_spec(path)
    on_own_arrays = "data" not in spec
    if on_own_arrays and data is None:
        saved = (read_meta(path).get("identity") or {}).get("data")
        what = describe_data(saved) if saved else "the user's own arrays"
        raise InputError("data", None, "the training arrays the checkpoint's model was fitted on",
                         f"the checkpoint at {str(path)!r} is of entry {spec.get('name')!r} fitted on {what}, which "
                         "it does not store; pass them: zoo.load(path, data=(x_train, y_train, x_test, y_test))")
    if not on_own_arrays and data is not None:
        shown = f"<{type(data).__name__} of length {len(data)}>" if isinstance(data, (tuple, list)) else data
        raise InputError("data", shown, f"None: the checkpoint is of the data set {spec['data']!r}, which zoo.load "
                                        "rebuilds itself")
    if on_own_arrays:
        spec["data"] = _four_arrays(data)
    entry = registry.get(**spec)
    return entry, inference.load(path, model=entry.model)


def load(path, data=None):
    """The `inference.Posterior` saved at `path`, attached to a freshly built model of its zoo entry
    (see `load_entry`; `data`: the user's own arrays of an entry built on them). Params / samples round-trip
    exactly, so predictions equal the saved posterior's."""
    return load_entry(path, data)[1]


def _four_arrays(data) -> tuple:
    """`data` as (x_train, y_train, x_test, y_test); a pair (x, y) is used as both train and test."""
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return (data[0], data[1], data[0], data[1])
    if isinstance(data, (tuple, list)) and len(data) == 4:
        return tuple(data)
    raise InputError("data", data, "a tuple (x_train, y_train, x_test, y_test) or (x_train, y_train)")
