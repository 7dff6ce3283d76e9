"""`save` / `load` of a Posterior: arrays in ``arrays.npz`` (exact float round trip) and, in
``posterior.json``, the site shapes, the model's ``spec`` (with its ``origin``), the model's ``identity``
(network and its arguments, prior, likelihood, training data; see `inference.model_identity`) and the guide
config that rebuilds the guide. `load` attaches the posterior to a model the caller passes and refuses a model
whose identity or site shapes differ; ``zoo.load`` rebuilds a catalogue entry's model from the stored origin
first.

Crashes lose nothing: a checkpoint is written into a staging folder and moved into place at once
(`base.atomic_dir.atomic_directory`), so a process killed mid-save leaves the previous checkpoint (or the
new one) readable. ``MANIFEST.json`` holds each file's size and SHA-256; a missing, truncated or edited file
raises `base.errors.CheckpointError` naming it, as does a folder without a manifest.

A checkpoint folder is the package's own: `save` replaces only an absent or empty folder or an earlier saved
posterior (never a folder of the user's files, nor a resumable fit state), checks before writing that the
place is writable and the disk has room (a probe file, the free space), and holds the folder's lock while it
writes, so concurrent saves into one folder follow one another (`base.atomic_dir`).

``Posterior.info`` is stored as {field: value} with its type's name ("FitInfo" / "NutsInfo") and loads
back as that NamedTuple (`inference.run_info.info_from_record`).

The format (``"format": 1``) is the one `save` writes: every field of `FIELDS` in ``posterior.json``, every
file listed in ``MANIFEST.json``. A checkpoint of another format, or one lacking a field, a setting of its guide
or its manifest (folders written by pre-release versions of 0.1.0), raises `CheckpointError` naming the path
and what is expected: fit and save it again."""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any

import numpy as np

from base.atomic_dir import atomic_directory, check_folder, check_writable, readable_path, verify_directory
from inference.model_identity import first_difference, model_identity
from inference.laplace_posterior import LaplacePosterior
from inference.posterior import MCMCPosterior, Posterior, SVIPosterior
from inference.registry import make_guide, saved_settings
from inference.run_info import info_from_record, info_record
from base.errors import ArgumentTypeError, CheckpointError, InputError

FORMAT = 1
ARRAYS = "arrays.npz"
META = "posterior.json"
FIELDS = ("kind", "feature_shape", "site_shapes", "model", "identity", "guide", "config", "info_type", "info",
          "training_data")  # the fields of posterior.json, all of them written by `save` (values may be null)
SLACK_BYTES = 1 << 16  # the archive's and the manifest's own bytes, beyond the arrays and the metadata


def save(posterior: Posterior, path) -> str:
    """Write `posterior` to the directory `path` (str or os.PathLike; created, or replaced as a whole when it
    holds a checkpoint). Returns `path`.

    Stored: kind, feature shape, site shapes {site: shape}, the model's spec (its origin included) and
    identity, the guide and posterior configs, guide params {name: array} or MCMC samples {site: (chains,
    draws, *shape)} or a Laplace posterior's theta* and curvature blocks (`Posterior.checkpoint_arrays`,
    `Posterior.checkpoint_record`), losses (steps,), sample stats {name: (chains, draws)}, network state, the training-data
    fingerprint (``training_data``) and ``info`` as
    {field: value} with its type's name in ``info_type``. The write is atomic (see the module docstring).

    Raises ArgumentTypeError for a `posterior` that is not a Posterior or a `path` that is not a path;
    `base.errors.FolderNotOwnedError` (an InputError) when `path` is a file, a folder holding files bnn-zoo
    did not write, or a saved fit state (saving replaces the whole folder); `base.errors.UnwritableError`
    when the place is read-only or the disk has no room for it (checked before writing, or met while writing:
    the earlier checkpoint stays); `base.errors.FolderLockedError` when a fit of another process holds the
    folder. Nothing is written in any of these cases.
    """
    if not isinstance(posterior, Posterior):
        raise ArgumentTypeError("posterior", posterior, "an inference.Posterior")
    target = _path_arg(path)
    check_folder(target, "posterior", "path")
    arrays: dict[str, Any] = {}  # {name: array}, passed to np.savez as keywords
    for group, values in (("params", posterior.params), ("samples", posterior.samples),
                          ("sample_stats", posterior.sample_stats)):
        for k, v in (values or {}).items():
            arrays[f"{group}::{k}"] = np.asarray(v)
    arrays.update(posterior.checkpoint_arrays())
    if posterior.losses is not None:
        arrays["losses"] = np.asarray(posterior.losses)
    for k, v in posterior.model.flatten_state(posterior.state or {}).items():
        arrays[f"state::{k}"] = np.asarray(v)
    info_type, info = info_record(posterior.info)
    meta = {
        "format": FORMAT,
        "kind": posterior.kind,
        "feature_shape": list(posterior.feature_shape),
        "site_shapes": {k: list(v) for k, v in posterior.model.site_shapes(posterior.feature_shape).items()},
        "model": posterior.model.spec,
        "identity": model_identity(posterior.model),
        "guide": posterior.checkpoint_record(),
        "config": posterior.config,
        "info_type": info_type,
        "info": info,
        "training_data": posterior.training_data,
    }
    text = json.dumps(meta, indent=2, default=_json_default)  # before anything is written: errors leave no trace
    check_writable(target, "path", needed_bytes=sum(a.nbytes for a in arrays.values()) + len(text) + SLACK_BYTES)
    with atomic_directory(target, "posterior", "path") as staging:
        np.savez(os.path.join(staging, ARRAYS), **arrays)
        with open(os.path.join(staging, META), "w") as f:
            f.write(text)
    return path


def read_meta(path) -> dict:
    """The metadata ``posterior.json`` of the checkpoint at `path`: kind, feature_shape, site_shapes, model
    (the BNN's ``spec``, with its ``origin``), identity (None for a model without one), guide, config,
    info_type, info, training_data.

    Every file is checked against the manifest first. Raises FileNotFoundError when `path` holds no
    checkpoint, `CheckpointError` (a ValueError) naming the file for a missing, truncated, edited or
    unreadable file, a folder without a manifest, another format version or a lacking field.
    """
    return _read(_path_arg(path))[1]


def check_guide_config(folder: str, config: dict) -> None:
    """Raise `CheckpointError` naming `folder` when the saved guide config {"name": ..., **kwargs} lacks a setting
    its guide registered as ``saved_settings`` (rebuilt with today's default it would be another guide than the one
    fitted; `inference.registry.saved_settings`)."""
    required = saved_settings(config.get("name"))
    missing = [k for k in required if k not in config]
    if missing:
        raise CheckpointError(folder, f"its {config['name']} guide config lacks {missing}: it was written by a "
                                      f"pre-release version; this version reads guide configs that name "
                                      f"{list(required)}. Fit and save it again", META)


def load(path, model=None) -> Posterior:
    """Read a Posterior written by `save`, attached to `model`.

    `model`: the BNN the checkpoint was saved from (one built by hand without a ``feature_shape`` gets the saved
    one: the guide is rebuilt for it). It is required: None raises InputError (``zoo.load(path)``
    rebuilds a catalogue entry's model from the checkpoint). A model whose identity differs from the stored
    one (network name or arguments such as the activation, prior or likelihood spec, training data) raises
    `CheckpointError` naming the first difference, e.g. "activation: saved relu, model tanh"; parts unknown on
    either side are not compared. Damaged files, a missing ``MANIFEST.json`` and checkpoints of another format
    raise `CheckpointError` naming the path (see `read_meta`).
    """
    target = _path_arg(path)
    folder, meta = _read(target)
    if model is None:
        raise InputError("model", None, f"the BNN the checkpoint at {target!r} was saved from",
                         "pass model=..., or use zoo.load(path) to rebuild a catalogue entry's model")
    if not callable(getattr(model, "site_shapes", None)):
        raise ArgumentTypeError("model", model, "a models.BNN (the model the checkpoint was saved from)")
    feature_shape = tuple(meta["feature_shape"])
    _check_model(target, meta, model, feature_shape)
    groups, losses = _read_arrays(folder)
    common = {"model": model, "feature_shape": feature_shape, "state": model.unflatten_state(groups["state"]) or None,
              "config": meta["config"], "training_data": meta.get("training_data"), "losses": losses,
              "info": _info(folder, meta)}
    if meta["kind"] == "mcmc":
        return MCMCPosterior(samples=groups["samples"], sample_stats=groups["sample_stats"] or None, **common)
    if meta["kind"] == "laplace":
        return LaplacePosterior.from_checkpoint(meta["guide"], groups, **common)
    if meta["kind"] != "svi":
        raise CheckpointError(folder, f"has kind {meta['kind']!r}; expected 'svi', 'mcmc' or 'laplace'", META)
    guide_cfg = dict(meta["guide"] or {})
    check_guide_config(folder, guide_cfg)
    name = guide_cfg.pop("name", None)
    if name is None:
        raise CheckpointError(folder, "has no guide config to rebuild the SVI posterior's guide from", META)
    if getattr(model, "feature_shape", None) is None:  # a model built by hand learns the input shape it was fitted on
        model.feature_shape = feature_shape
    guide = make_guide(name, model, **guide_cfg)
    return SVIPosterior(guide=guide, params=groups["params"], **common)


def _read(path: str) -> tuple[str, dict]:
    """(folder, metadata) of the checkpoint at `path`, its files verified against the manifest."""
    folder = readable_path(path)
    verify_directory(folder, required=(META, ARRAYS))
    try:
        with open(os.path.join(folder, META), encoding="utf-8") as f:
            meta = json.load(f)
    except (UnicodeDecodeError, ValueError) as err:
        raise CheckpointError(folder, f"is not valid JSON ({err})", META) from None
    if not isinstance(meta, dict):
        raise CheckpointError(folder, f"holds a JSON {type(meta).__name__}, expected an object", META)
    if meta.get("format") != FORMAT:
        raise CheckpointError(folder, f"has checkpoint format {meta.get('format')!r}; this version reads format "
                                      f"{FORMAT}", META)
    missing = [k for k in FIELDS if k not in meta]
    if missing:
        raise CheckpointError(folder, f"lacks the fields {missing}: it was written by a pre-release version; this "
                                      f"version reads format {FORMAT} with the fields {list(FIELDS)}. Fit and save "
                                      "it again", META)
    return folder, meta


def _info(folder: str, meta: dict):
    """The posterior's info rebuilt from the record; a record of another shape raises `CheckpointError`."""
    try:
        return info_from_record(meta["info_type"], meta["info"])
    except InputError as err:
        raise CheckpointError(folder, f"{err}. Fit and save it again", META) from None


def _check_model(path: str, meta: dict, model, feature_shape: tuple) -> None:
    """Refuse `model` when its identity or its site shapes differ from the checkpoint's."""
    saved = meta.get("identity")
    if isinstance(saved, dict):
        difference = first_difference(saved, model_identity(model) or {})
        if difference:
            raise CheckpointError(path, f"model: the checkpoint was saved from another model; {difference}")
    stored = {k: tuple(v) for k, v in meta["site_shapes"].items()}
    current = {k: tuple(v) for k, v in model.site_shapes(feature_shape).items()}
    if stored != current:
        raise CheckpointError(path, f"model: the checkpoint was saved from another model; {_site_difference(stored, current)}")


def _site_difference(stored: dict, current: dict) -> str:
    for name, shape in stored.items():
        if name not in current:
            return f"site {name!r} {shape} is not in the model"
        if current[name] != shape:
            return f"site {name!r}: saved shape {shape}, model {current[name]}"
    extra = next(k for k in current if k not in stored)
    return f"the model has site {extra!r} {current[extra]}, the checkpoint does not"


def _read_arrays(folder: str) -> tuple[dict, np.ndarray | None]:
    """({group: {name: array}}, losses) from ``arrays.npz``; a damaged archive raises CheckpointError."""
    groups: dict = {"params": {}, "samples": {}, "sample_stats": {}, "state": {}, "mean": {}, "curvature": {}}
    losses = None
    try:
        with np.load(os.path.join(folder, ARRAYS)) as z:
            for key in z.files:
                if key == "losses":
                    losses = z[key]
                    continue
                group, name = key.split("::", 1)
                groups[group][name] = z[key]
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as err:
        raise CheckpointError(folder, f"cannot be read as the checkpoint's arrays ({type(err).__name__}: {err})",
                              ARRAYS) from None
    return groups, losses


def _path_arg(path) -> str:
    """`path` (str or os.PathLike) as a str; anything else raises ArgumentTypeError."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise ArgumentTypeError("path", path, "a directory path (str or os.PathLike)") from None
    if not isinstance(text, str) or not text:
        raise InputError("path", path, "a non-empty directory path")
    return text


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (tuple, set)):
        return list(o)
    raise ArgumentTypeError.worded("config", f"config: expected JSON-able values, got a {type(o).__name__}")


def check_config(config, arg: str = "config") -> dict:
    """`config` (None or a dict) as the dict `save` will write, checked to be JSON-able the way `save` writes it
    (NumPy scalars, tuples and sets are converted); raises ArgumentTypeError naming `arg` and the first value
    that is not, so that `fit` / `nuts` refuse it before any work rather than `save` after it."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ArgumentTypeError(arg, config, "None or a JSON-able dict")
    try:
        json.dumps(config, default=_json_default)
    except (TypeError, ValueError) as err:
        raise ArgumentTypeError(arg, f"<a dict holding a value JSON cannot write ({err})>",
                                "a JSON-able dict (str, numbers, bool, None, lists and dicts of them)") from None
    return dict(config)
