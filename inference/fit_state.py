"""The saved state of a fit in progress: what `inference.fit` writes to ``checkpoint_dir`` and resumes from.

A fit state is a folder written all at once by `base.atomic_dir.atomic_directory` (a process killed
mid-save leaves the previous state readable) with two files besides the manifest:

- ``fit_state.npz``: every leaf of the `SVIState` pytree (``leaf_00000`` ...: the unconstrained guide
  parameters, the optimiser state, the model's mutable state, the stop flag), the loss of every step done
  (``losses``, (step,) float32) and its gradient norm (``grad_norms``, (step,) float32), the run's PRNG key (``rng_key``) and the minibatch rows
  drawn but not yet used (``order_pending``, int64 (P, batch_size)).
- ``fit_state.json``: the format, the number of steps done, the pytree structure (``treedef``, its string)
  and every leaf's shape and dtype, the minibatch generator's state, and the run's identity (`run_identity`).

Resuming checks the identity (model spec and site shapes, guide config, steps, batch size, seed, KL
warm-up, likelihood temperature, estimator, particles,
chunk size, the optimiser's configuration and the structure and hyper-parameters of its state
(`inference.optimizers.optimizer_identity`), fingerprints of the data and of the initial parameters) and the pytree structure against the run being resumed, and refuses another run naming
the first difference (the settings a user passes before what is derived from them), so a resumed fit
continues exactly the run it saved.

The folder is the package's own (`base.atomic_dir`): a fit state is never written over a saved
posterior or the user's files, and an empty folder holds no fit state.
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple

import jax
import numpy as np

from base.atomic_dir import atomic_directory, folder_kind, readable_path, verify_directory
from inference.model_identity import array_fingerprint
from inference.estimators import as_estimator
from inference.optimizers import optimizer_identity
from base.errors import CheckpointError

FORMAT = 3  # 3: the optimiser by its configuration and state (was a probe's fingerprint); 2: the estimator
FORMATS = {2: "format 2 (before the optimiser records: the optimiser fingerprinted by running it)"}
"""Formats this version refuses, by what they were (a state of one cannot be resumed: fit again)."""
STATE_JSON = "fit_state.json"
STATE_NPZ = "fit_state.npz"


class FitState(NamedTuple):
    """A fit resumed from disk. state: the SVIState pytree (leaves as NumPy arrays); step: steps done;
    losses: (step,) float32; rng_key: the run's key (uint32 array); order: the `MinibatchOrder` state
    (generator state dict, pending rows int64 (P, batch_size)); grad_norms: (step,) float32, the gradient
    norm of every step done (NaN where unknown)."""

    state: object
    step: int
    losses: np.ndarray
    rng_key: np.ndarray
    order: tuple
    grad_norms: np.ndarray


def run_identity(model, guide, optimizer, opt_state, x, y, *, feature_shape, steps, batch_size, seed, kl_warmup,
                 num_particles, chunk_size, init_params, temperature=1.0, estimator="standard",
                 kl_schedule=None) -> dict:
    """JSON-able {what: value} that identifies a fit: a checkpoint resumes only the run whose identity equals
    the one it stored.

    x (N, ...), y (N,): the training data (fingerprinted, `array_fingerprint`); `init_params`: the
    unconstrained start {name: array} or None (fingerprinted); the optimiser by
    `inference.optimizers.optimizer_identity` (a record's configuration, the structure of its state `opt_state`
    and the hyper-parameters that state holds; nothing is run);
    the model by its ``spec`` (name, prior, likelihood, origin) and site shapes; the guide by its ``config``;
    `kl_schedule`: a digest of the betas of a ``fit(kl_schedule=...)`` (`inference.kl_schedules.betas_digest`),
    stored only when given (a run without a schedule has no such entry).
    """
    site_shapes = model.site_shapes(feature_shape) if hasattr(model, "site_shapes") else {}
    identity = {
        "model": getattr(model, "spec", None) or type(model).__qualname__,
        "site_shapes": {k: list(v) for k, v in site_shapes.items()},
        "guide": getattr(guide, "config", None) or type(guide).__qualname__,
        "steps": steps, "batch_size": batch_size, "seed": seed, "kl_warmup": kl_warmup,
        "temperature": float(temperature), "estimator": as_estimator(estimator).name,
        "num_particles": num_particles, "chunk_size": chunk_size,
        "optimizer": optimizer_identity(optimizer, opt_state),
        "data": {"x": array_fingerprint(x), "y": array_fingerprint(y)},
        "init_params": None if init_params is None else
        {k: array_fingerprint(v) for k, v in sorted(init_params.items())},
    }
    if kl_schedule is not None:
        identity["kl_schedule"] = kl_schedule
    return json.loads(json.dumps(identity, default=_json_default))  # tuples -> lists, as they load back


def saved_step(path: str) -> int | None:
    """Steps done in the fit state at `path` (or its previous version after a crash mid-save), or None when
    there is none."""
    if folder_kind(path) != "fit state":
        return None
    try:
        folder = readable_path(path)
    except FileNotFoundError:
        return None
    try:
        with open(os.path.join(folder, STATE_JSON)) as f:
            return int(json.load(f)["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_fit_state(path: str, identity: dict, state, step: int, losses: np.ndarray, rng_key, order: tuple,
                   grad_norms: np.ndarray | None = None) -> None:
    """Write the fit state to the folder `path` atomically (see the module docstring).

    state: the SVIState pytree after `step` steps; losses: (step,) float32; rng_key: the run's key;
    order: `MinibatchOrder.state()` after `step` rows; grad_norms: (step,) float32 or None (unknown: NaN).
    """
    leaves, treedef = jax.tree_util.tree_flatten(jax.device_get(state))
    leaves = [np.asarray(v) for v in leaves]
    arrays = {f"leaf_{i:05d}": v for i, v in enumerate(leaves)}
    norms = np.full(np.shape(losses), np.nan, np.float32) if grad_norms is None else grad_norms
    arrays.update(losses=np.asarray(losses, np.float32), grad_norms=np.asarray(norms, np.float32),
                  rng_key=np.asarray(jax.device_get(rng_key)), order_pending=np.asarray(order[1], np.int64))
    meta = {"format": FORMAT, "step": int(step), "treedef": str(treedef),
            "leaves": [[list(v.shape), str(v.dtype)] for v in leaves],
            "order_state": order[0], "identity": identity}
    with atomic_directory(path, "fit state", "checkpoint_dir") as staging:
        np.savez(os.path.join(staging, STATE_NPZ), **arrays)
        with open(os.path.join(staging, STATE_JSON), "w") as f:
            json.dump(meta, f, indent=1, default=_json_default)


def load_fit_state(path: str, identity: dict, template) -> FitState | None:
    """The fit state saved at `path`, checked against the run resuming it; None when `path` holds none (absent,
    or an empty folder).

    identity: the resuming run's `run_identity`; template: its initial SVIState (the pytree structure,
    shapes and dtypes the saved leaves must have).
    Raises CheckpointError naming the file when a file is missing, truncated or edited, and naming the
    first difference when the state was saved by another run (another identity or pytree structure).
    """
    if folder_kind(path) is None:
        return None
    folder = readable_path(path)
    verify_directory(folder, required=(STATE_JSON, STATE_NPZ))
    with open(os.path.join(folder, STATE_JSON)) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT:
        what = FORMATS.get(meta.get("format"), f"format {meta.get('format')!r}")
        raise CheckpointError(path, f"a fit state of {what}, this version resumes format {FORMAT} only: fit again "
                                    "(a saved posterior, inference.save, still loads)", STATE_JSON)
    check_identity(path, meta["identity"], identity)
    leaves, treedef = jax.tree_util.tree_flatten(template)
    if meta["treedef"] != str(treedef):
        raise CheckpointError(path, "its state has another structure (guide parameters, optimiser or mutable "
                                    f"state) than this run's: saved {meta['treedef'][:300]}, here "
                                    f"{str(treedef)[:300]}", STATE_JSON)
    with np.load(os.path.join(folder, STATE_NPZ)) as z:
        saved = [z[f"leaf_{i:05d}"] for i in range(len(leaves))]
        losses, rng_key, pending = z["losses"], z["rng_key"], z["order_pending"]
        if "grad_norms" not in z.files:
            raise CheckpointError(path, "it holds no gradient norms (a fit state of a pre-release format): fit again",
                                  STATE_NPZ)
        norms = z["grad_norms"]
    for i, (have, want) in enumerate(zip(saved, leaves)):
        want_dtype = np.dtype(want.dtype) if hasattr(want, "dtype") else np.asarray(want).dtype
        if have.shape != np.shape(want) or have.dtype != want_dtype:
            raise CheckpointError(path, f"state leaf {i} is {have.shape} {have.dtype}, this run's is "
                                        f"{np.shape(want)} {want_dtype}", STATE_NPZ)
    step = int(meta["step"])
    if losses.shape != (step,):
        raise CheckpointError(path, f"holds {losses.shape[0]} losses for {step} steps", STATE_NPZ)
    if norms.shape != (step,):
        raise CheckpointError(path, f"holds {norms.shape[0]} gradient norms for {step} steps", STATE_NPZ)
    return FitState(jax.tree_util.tree_unflatten(treedef, saved), step, losses, rng_key,
                    (meta["order_state"], pending), norms)


# what is derived from the settings a user passes, compared after them: the default optimiser's schedule
# depends on `steps`, so another `steps` is named as such rather than as another optimiser
DERIVED = ("optimizer", "model", "site_shapes", "guide", "init_params", "data")
WHAT_DIFFERS = {"optimizer": " (another optimiser, learning rate or schedule)"}


def check_identity(path: str, saved: dict, current: dict) -> None:
    """Raise CheckpointError naming the first entry where the `saved` run identity differs from `current`: the
    settings (steps, seed, batch size, ...) in name order first, then what derives from them (`DERIVED`)."""
    keys = set(saved) | set(current)
    for key in sorted(keys - set(DERIVED)) + [k for k in DERIVED if k in keys]:
        if saved.get(key) != current.get(key):
            raise CheckpointError(
                path, f"it holds the state of another run: {key} differs{WHAT_DIFFERS.get(key, '')} (saved "
                      f"{_short(saved.get(key))}, this call {_short(current.get(key))}); resume with the settings "
                      "and data it was started with, or pass another checkpoint_dir", STATE_JSON)


def _short(value) -> str:
    text = json.dumps(value, default=_json_default)
    return text if len(text) <= 160 else text[:157] + "..."


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, (tuple, set)):
        return list(o)
    return f"<{type(o).__qualname__}>"  # never a repr with an address: identities must match across processes
