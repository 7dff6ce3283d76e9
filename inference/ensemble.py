"""Deep ensembles as a posterior: M point estimates from different seeds, fitted together with ``jax.vmap``, whose
members are the draws of an `MCMCPosterior` (one chain of M draws), so ``predict``, `evals.score`, `to_arviz` and
save / load take it as they take NUTS's draws (Lakshminarayanan et al. 2017, "Simple and scalable predictive
uncertainty estimation using deep ensembles": the predictive is the members' average, p(y | x) = (1/M) sum_m
p(y | x, w_m)).

Member m is exactly ``inference.fit(model, inference.point_estimate.point_estimate(model), data, seed=seed + m,
init_params=member_start(model, x, seed + m), ...)``: its own minibatch order and noise (`inference.fit`'s seed)
and its own random initialisation (the network's initialiser under key ``PRNGKey(seed + m)``; a plain `fit` of a
point estimate starts every seed at the same initial weights). All members run in one compiled program: the
scanned update of `inference.svi.run_chunk`, vmapped over the members' states, keys and minibatch rows, when
their states fit in memory (`TOGETHER_BYTES_PER_WEIGHT`); else one after another through `inference.fit`.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from base import validation
from inference import svi
from inference.batches import minibatch_blocks
from inference.optimizers import as_optimizer
from inference.fit import default_optimizer, default_steps, fit, labelled_arrays
from inference.model_identity import data_fingerprint
from inference.point_estimate import point_estimate
from inference.posterior import MCMCPosterior
from inference.run_info import FitInfo
from inference.sites import site_table
from models.bridge import constrain

__all__ = ["ensemble", "member_start", "TOGETHER_BYTES_PER_WEIGHT"]

TOGETHER_BYTES_PER_WEIGHT = 64
"""Bytes per member and weight the vmapped fit is budgeted (float32 parameters, gradients, Adam's two moments and
the copies a scanned update holds, with room to spare) against the free memory."""


def member_start(model, x, seed: int) -> dict:
    """{``{site}_auto_loc``: array} the unconstrained start of ensemble member `seed`: the network's own
    initialiser under ``PRNGKey(seed)`` (`inference.sites.site_table`), for inputs shaped like x (B, ...)."""
    sites = site_table(model, x, jax.random.PRNGKey(seed))
    return {f"{name}_auto_loc": site.init_loc for name, site in sites.items()}


def ensemble(model, data, *, members: int = 5, steps: int | None = None, batch_size: int = 128, optimizer=None,
             seed: int = 0, chunk_size: int = 500, together: bool | None = None,
             progress: bool = False) -> MCMCPosterior:
    """A deep ensemble of `members` point estimates of `model` fitted to `data`, as a Posterior of M draws.

    Args:
      model: a `models.BNN`; data: a `Dataset` or (x (N, ...), y (N,)).
      members: M >= 1; seed: member m uses seed + m (minibatches, noise, initialisation: the module docstring).
      steps, batch_size, optimizer, chunk_size: as `inference.fit` (default `inference.fit.default_steps`, 128,
        `inference.fit.default_optimizer(steps)`, 500), the same for every member.
      together: True: one vmapped program for all members; False: one `fit` after another; None (default):
        together when M x weights x `TOGETHER_BYTES_PER_WEIGHT` bytes fit in the free memory.
      progress: `fit`'s progress bars (members fitted one after another only).
    Returns:
      an `MCMCPosterior` with samples {site: (1, M, *site shape)} (one chain whose draws are the members),
      config {"name": "ensemble", "members", "seed", "steps", "batch_size"}, info a `FitInfo` (fit_s: the
      whole ensemble's seconds), losses (steps,) the members' mean loss per step.
    Raises:
      InputError naming the argument for a bad `members`, `steps`, `batch_size`, `seed` or data (`fit`'s checks).
    """
    validation.check_positive_ints(members=members, batch_size=batch_size, chunk_size=chunk_size)
    validation.check_seed(seed)
    validation.check_seed(seed + members - 1)
    x, y = labelled_arrays(model, data, "training")
    steps = default_steps(x.shape[0], batch_size) if steps is None else steps
    validation.check_positive_ints(steps=steps)
    optimizer = default_optimizer(steps) if optimizer is None else optimizer
    guide = point_estimate(model)
    feature_shape = tuple(x.shape[1:])
    if together is None:
        need = members * validation.num_latent(model, feature_shape) * TOGETHER_BYTES_PER_WEIGHT
        free = validation.available_memory()
        together = free is None or need < free
    t0 = time.perf_counter()
    seeds = [seed + m for m in range(members)]
    if together:
        locs, losses = _fit_together(model, guide, x, y, optimizer, seeds, steps, min(batch_size, len(x)), chunk_size)
    else:
        posts = [fit(model, point_estimate(model), (x, y), steps=steps, batch_size=batch_size, optimizer=optimizer,
                     seed=s, chunk_size=chunk_size, init_params=member_start(model, x[:1], s), progress=progress)
                 for s in seeds]
        starts = [p.unconstrained_params() for p in posts]
        locs = {k: np.stack([np.asarray(u[k]) for u in starts]) for k in starts[0]}
        losses = np.mean([np.asarray(p.losses) for p in posts], axis=0)
    samples = constrain(guide.sites, {name: jnp.asarray(locs[guide.param_name(name, "loc")]) for name in guide.sites})
    info = FitInfo(first_step_s=None, fit_s=time.perf_counter() - t0, traces=None)
    config = {"name": "ensemble", "members": members, "seed": seed, "steps": steps, "batch_size": batch_size}
    return MCMCPosterior(model=model, samples={k: np.asarray(v)[None] for k, v in samples.items()},
                         feature_shape=feature_shape, state=None, config=config, info=info,
                         losses=np.asarray(losses, np.float32), training_data=data_fingerprint(x, y))


def _fit_together(model, guide, x, y, optimizer, seeds, steps, batch_size, chunk_size):
    """({param name: (M, ...)} the members' final unconstrained parameters, (steps,) mean loss): `inference.fit`'s
    chunked scan of `inference.svi.run_chunk`, vmapped over the members (their keys, starts and minibatch rows)."""
    n = x.shape[0]
    xb, yb = jnp.asarray(x[:batch_size]), jnp.asarray(y[:batch_size])
    settings = svi.compiled_settings(model, guide, n)
    optimizer = as_optimizer(optimizer)
    keys = [jax.random.split(jax.random.PRNGKey(s)) for s in seeds]  # (init key, run key) as `fit` splits them
    starts = [member_start(model, xb, s) for s in seeds]
    states = [svi.initial_state(k[0], xb, yb, start, optimizer, **settings) for k, start in zip(keys, starts)]
    state = jax.tree.map(lambda *v: jnp.stack(v), *states)
    run_keys = jnp.stack([k[1] for k in keys])
    chunk = jax.jit(jax.vmap(lambda s, k, idx, ids: svi.run_chunk(s, k, x_dev, y_dev, idx, ids, np.float32(0),
                                                                  np.float32(1), optimizer, **settings),
                             in_axes=(0, 0, 0, None)))
    x_dev, y_dev = jnp.asarray(x), jnp.asarray(y)
    orders = [minibatch_blocks(n, batch_size, steps, s, chunk_size) for s in seeds]
    losses, done = [], 0
    for blocks in zip(*orders):
        count = len(blocks[0])
        idx = np.zeros((len(seeds), chunk_size, batch_size), np.int32)
        idx[:, :count] = np.stack(blocks)
        ids = np.full(chunk_size, -1, np.int32)
        ids[:count] = np.arange(done, done + count)
        state, (chunk_losses, _, _), _ = chunk(state, run_keys, idx, ids)
        losses.append(np.asarray(chunk_losses)[:, :count])
        done += count
    return jax.device_get(state.params), np.mean(np.concatenate(losses, axis=1), axis=0)
