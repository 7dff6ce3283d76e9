"""`save` / `load` of a Posterior: arrays in ``arrays.npz`` (exact float round trip) and, in
``posterior.json``, the site shapes, the model's ``spec`` (with its ``origin``) and the guide config that
rebuilds the guide. `load` attaches the posterior to a model the caller passes; ``zoo.load`` rebuilds a
catalogue entry's model from the stored origin first.

``Posterior.info`` is stored as {field: value} with its type's name ("FitInfo" / "NutsInfo") and loads
back as that NamedTuple; a checkpoint from before those types (a plain dict) fills the matching fields
and leaves the missing ones None (`inference.run_info.info_from_record`)."""

from __future__ import annotations

import json
import os

import numpy as np

from inference.posterior import Posterior
from inference.run_info import info_from_record, info_record
from models.bridge import flatten_params, unflatten_params

FORMAT = 1


def save(posterior: Posterior, path: str) -> str:
    """Write `posterior` to the directory `path` (created). Returns the path.

    Stored: kind, feature shape, site shapes, the model's spec (its origin included), the guide and
    posterior configs, guide params or MCMC samples, losses and sample stats, and ``info`` as
    {field: value} with its type's name in ``info_type``.
    """
    os.makedirs(path, exist_ok=True)
    arrays = {}
    for group, values in (("params", posterior.params), ("samples", posterior.samples),
                          ("sample_stats", posterior.sample_stats)):
        for k, v in (values or {}).items():
            arrays[f"{group}::{k}"] = np.asarray(v)
    if posterior.losses is not None:
        arrays["losses"] = np.asarray(posterior.losses)
    for k, v in flatten_params(posterior.state or {}).items():
        arrays[f"state::{k}"] = np.asarray(v)
    np.savez(os.path.join(path, "arrays.npz"), **arrays)
    info_type, info = info_record(posterior.info)
    meta = {
        "format": FORMAT,
        "kind": posterior.kind,
        "feature_shape": list(posterior.feature_shape),
        "site_shapes": {k: list(v) for k, v in posterior.model.site_shapes(posterior.feature_shape).items()},
        "model": posterior.model.spec,
        "guide": getattr(posterior.guide, "config", None) if posterior.guide is not None else None,
        "config": posterior.config,
        "info_type": info_type,
        "info": info,
    }
    with open(os.path.join(path, "posterior.json"), "w") as f:
        json.dump(meta, f, indent=2, default=_json_default)
    return path


def read_meta(path: str) -> dict:
    """The metadata ``posterior.json`` of the checkpoint at `path`: kind, feature_shape, site_shapes, model
    (the BNN's ``spec``, with its ``origin``), guide, config, info.

    Raises FileNotFoundError when `path` holds no checkpoint, ValueError for another format version.
    """
    meta_path = os.path.join(path, "posterior.json")
    if not os.path.exists(meta_path):
        raise FileNotFoundError(f"path: no checkpoint at {path!r} (expected {meta_path})")
    with open(meta_path) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT:
        raise ValueError(f"path: checkpoint format {meta.get('format')} is not {FORMAT}")
    return meta


def load(path: str, model=None) -> Posterior:
    """Read a Posterior written by `save`, attached to `model`.

    `model`: the BNN the checkpoint was saved from (a model of the same sites and shapes). It is required:
    None raises ValueError (``zoo.load(path)`` rebuilds a catalogue entry's model from the checkpoint).
    A model whose sites differ from the stored ones raises ValueError naming the first mismatch.
    """
    meta = read_meta(path)
    if model is None:
        raise ValueError(f"model: expected the BNN the checkpoint at {str(path)!r} was saved from, got None; "
                         "pass model=..., or use zoo.load(path) to rebuild a catalogue entry's model")
    config = meta["config"]
    feature_shape = tuple(meta["feature_shape"])
    stored = {k: tuple(v) for k, v in meta["site_shapes"].items()}
    current = dict(model.site_shapes(feature_shape))
    if stored != current:
        diff = sorted(set(stored.items()) ^ set(current.items()))
        raise ValueError(f"model: the checkpoint was saved from another model; first differing site {diff[0]}")
    with np.load(os.path.join(path, "arrays.npz")) as z:
        groups: dict = {"params": {}, "samples": {}, "sample_stats": {}, "state": {}}
        losses = None
        for key in z.files:
            if key == "losses":
                losses = z[key]
            else:
                group, name = key.split("::", 1)
                groups[group][name] = z[key]
    guide = None
    if meta["kind"] == "svi":
        from inference.registry import make_guide

        guide_cfg = dict(meta["guide"] or {})
        name = guide_cfg.pop("name", None)
        if name is None:
            raise ValueError("path: the checkpoint has no guide config to rebuild its guide from")
        guide = make_guide(name, model, **guide_cfg)
        guide.setup(np.zeros((1,) + feature_shape, np.float32))
    return Posterior(model=model, kind=meta["kind"], guide=guide,
                     params=groups["params"] or None, samples=groups["samples"] or None,
                     sample_stats=groups["sample_stats"] or None, losses=losses,
                     feature_shape=feature_shape, state=unflatten_params(groups["state"]) or None,
                     config=config, info=info_from_record(meta.get("info_type"), meta.get("info"), meta["kind"]))


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (tuple, set)):
        return list(o)
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")
