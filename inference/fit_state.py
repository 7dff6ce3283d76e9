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
chunk size, a fingerprint of the optimiser's behaviour over the whole run (`optimizer_fingerprint`: every
update of all `steps`, so another learning rate, schedule or optimiser differs), of the data and of the
initial parameters) and the pytree structure against the run being resumed, and refuses another run naming
the first difference (the settings a user passes before what is derived from them), so a resumed fit
continues exactly the run it saved.

The folder is the package's own (`base.atomic_dir`): a fit state is never written over a saved
posterior or the user's files, and an empty folder holds no fit state.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from base.atomic_dir import atomic_directory, folder_kind, readable_path, verify_directory
from inference.model_identity import array_fingerprint
from inference.per_example import check_estimator
from base.value_key import Static
from base.errors import CheckpointError

FORMAT = 2  # 2: the estimator in the run identity (was per_example_noise)
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


def run_identity(model, guide, optimizer, x, y, *, feature_shape, steps, batch_size, seed, kl_warmup,
                 num_particles, chunk_size, init_params, temperature=1.0, estimator="standard",
                 kl_schedule=None) -> dict:
    """JSON-able {what: value} that identifies a fit: a checkpoint resumes only the run whose identity equals
    the one it stored.

    x (N, ...), y (N,): the training data (fingerprinted, `array_fingerprint`); `init_params`: the
    unconstrained start {name: array} or None (fingerprinted); the optimiser by `optimizer_fingerprint` over
    the `steps` updates;
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
        "temperature": float(temperature), "estimator": check_estimator(estimator),
        "num_particles": num_particles, "chunk_size": chunk_size,
        "optimizer": optimizer_fingerprint(optimizer, steps),
        "data": {"x": array_fingerprint(x), "y": array_fingerprint(y)},
        "init_params": None if init_params is None else
        {k: array_fingerprint(v) for k, v in sorted(init_params.items())},
    }
    if kl_schedule is not None:
        identity["kl_schedule"] = kl_schedule
    return json.loads(json.dumps(identity, default=_json_default))  # tuples -> lists, as they load back


PROBE_PARAMS = np.array([0.5, -1.0, 2.0], np.float32)
PROBE_GRADS = np.array([[1.0, -2.0, 0.25], [-0.5, 0.1, 3.0], [0.0, 1.0, -1.0]], np.float32)
PROBE_CHUNK = 256  # updates per compiled call of the probe


def optimizer_fingerprint(optimizer, steps: int) -> str | None:
    """A fingerprint of what an optax GradientTransformation does over a run of `steps` updates, or None when
    it cannot run on the probe (e.g. one that needs the guide's parameter names; the state's structure is
    still checked when the state is read).

    The optimiser runs `steps` updates of a 3-vector (starting at (0.5, -1, 2)) whose gradients cycle through
    three fixed vectors; the fingerprint is a BLAKE2b digest of its state's pytree structure (the optax
    transformations it chains) and of every update, each rounded to 20 significant bits (so that float
    rounding of another compiler setting does not count as a difference). Any learning rate or schedule that
    differs at some step, or another optimiser, gives another fingerprint. A scan of `PROBE_CHUNK` updates run as
    often as needed, compiled once per optimiser (jitted with the optimiser as a static argument compared by its
    value key, `base.value_key`: the same object or an equal value object)."""
    try:
        params = {"w": jnp.asarray(PROBE_PARAMS)}
        state = optimizer.init(params)
        digest = hashlib.blake2b(str(jax.tree_util.tree_structure(state)).encode(), digest_size=16)
        static = Static(optimizer)
        done = 0
        while done < steps:
            params, state, updates = _probe_chunk(static, params, state, jnp.int32(done))
            digest.update(_rounded(np.asarray(updates)[:steps - done]).tobytes())
            done += PROBE_CHUNK
    except Exception:  # noqa: BLE001 - any optimiser that cannot run on the probe is simply not fingerprinted
        return None
    return digest.hexdigest()


@functools.partial(jax.jit, static_argnums=0)
def _probe_chunk(static: Static, params, state, start):
    """(params, state, updates (PROBE_CHUNK, 3)): `PROBE_CHUNK` updates of the optimiser ``static.obj`` from
    update number `start` on."""
    import optax

    optimizer, grads = static.obj, jnp.asarray(PROBE_GRADS)

    def one(carry, t):
        params, state = carry
        update, state = optimizer.update({"w": grads[t % len(PROBE_GRADS)]}, state, params)
        return (optax.apply_updates(params, update), state), update["w"]

    (params, state), updates = jax.lax.scan(one, (params, state), start + jnp.arange(PROBE_CHUNK))
    return params, state, updates


def _rounded(values: np.ndarray) -> np.ndarray:
    """`values` (float) with their mantissas rounded to 20 bits, as float64."""
    mantissa, exponent = np.frexp(np.asarray(values, np.float64))
    return np.ldexp(np.round(mantissa * 2.0 ** 20) / 2.0 ** 20, exponent)


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
        raise CheckpointError(path, f"fit state format {meta.get('format')!r}, expected {FORMAT}", STATE_JSON)
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
WHAT_DIFFERS = {"optimizer": " (another optimiser, learning rate or schedule: the fingerprint covers every update "
                             "of the run)"}


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
