"""KL schedules for `inference.fit`: the weight beta_t of the KL term at step t,

    loss_t = -( E_q[log p(y | x, w)] * N/B / T  -  beta_t * KL(q || p) )          (`inference.elbo`)

A schedule is any callable ``schedule(t) -> beta`` on step numbers t = 0, 1, ... (an int or an int array; like an
optax schedule). `fit` evaluates it on the host for every step before training (`schedule_betas`) and hands the
betas to the compiled update as data, so neither another schedule nor another value ever recompiles it.

- `linear(warmup_steps)`: beta_t = min(1, (t + 1) / warmup_steps), `fit`'s ``kl_warmup``.
- `stepwise_linear(per_batch, every=100)`: the k-tied Normal paper's annealing (Swiatkowski et al., ICML 2020,
  appendix D.4): beta grows linearly by `per_batch` per batch, raised in steps every `every` batches,
  beta_t = min(1, per_batch * every * floor(t / every)); the paper picks per_batch from {5e-5, 5e-6}.
  With 5e-5 beta reaches 1 after 20,000 batches, with 5e-6 after 200,000: a shorter fit ends below 1
  (``posterior.info.final_kl_weight`` records where).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from base.errors import InputError

__all__ = ["linear", "stepwise_linear", "schedule_betas", "betas_digest"]


@dataclass(frozen=True)
class linear:  # noqa: N801 - a schedule constructor, named like optax's
    """beta_t = min(1, (t + 1) / warmup_steps) (float32): the KL reaches full weight at step warmup_steps - 1
    (`fit`'s ``kl_warmup``). warmup_steps: a positive number of steps."""

    warmup_steps: float

    def __post_init__(self):
        if not (isinstance(self.warmup_steps, (int, float, np.integer, np.floating)) and self.warmup_steps > 0
                and np.isfinite(self.warmup_steps)):
            raise InputError("warmup_steps", self.warmup_steps, "a positive finite number of steps")

    def __call__(self, t):
        """beta at step(s) t (int or int array; float32 of t's shape)."""
        t1 = np.asarray(t).astype(np.float32) + np.float32(1)
        return np.minimum(np.float32(1), t1 / np.float32(self.warmup_steps))


@dataclass(frozen=True)
class stepwise_linear:  # noqa: N801
    """The k-tied paper's KL annealing (appendix D.4): beta_t = min(1, per_batch * every * floor(t / every)),
    a linear slope of `per_batch` per batch applied in steps every `every` batches (beta 0 for the first
    `every` steps). per_batch > 0 (the paper: 5e-5 or 5e-6); every: a positive integer (the paper: 100)."""

    per_batch: float
    every: int = 100

    def __post_init__(self):
        if not (isinstance(self.per_batch, (int, float, np.integer, np.floating)) and self.per_batch > 0
                and np.isfinite(self.per_batch)):
            raise InputError("per_batch", self.per_batch, "a positive finite KL slope per batch (e.g. 5e-5)")
        if isinstance(self.every, bool) or not isinstance(self.every, (int, np.integer)) or self.every < 1:
            raise InputError("every", self.every, "a positive integer number of batches")

    def __call__(self, t):
        """beta at step(s) t (int or int array; float32 of t's shape)."""
        level = np.floor_divide(np.asarray(t, np.int64), self.every) * float(self.every) * float(self.per_batch)
        return np.minimum(1.0, level).astype(np.float32)


def schedule_betas(schedule, steps: int) -> np.ndarray:
    """beta_t for t = 0 .. steps - 1 as float32 (steps,): ``schedule(np.arange(steps))`` when the schedule takes
    an array, else one call per step. Raises InputError (argument ``kl_schedule``) unless every beta is a finite
    number >= 0, or when the schedule is not callable or fails."""
    if not callable(schedule):
        raise InputError("kl_schedule", schedule, "a callable step -> beta (e.g. inference.kl_schedules.linear(1000))")
    t = np.arange(steps)
    try:
        betas = np.asarray(schedule(t), np.float64)
        if betas.shape != t.shape:
            betas = np.array([float(np.asarray(schedule(int(s)))) for s in t])
    except Exception as err:  # noqa: BLE001 - any failure of the user's callable is reported against it
        raise InputError("kl_schedule", schedule, "a callable step -> beta that takes integer steps",
                         f"calling it failed: {err!r}") from err
    bad = ~np.isfinite(betas) | (betas < 0)
    if bad.any():
        first = int(np.argmax(bad))
        raise InputError("kl_schedule", schedule, "finite betas >= 0 at every step",
                         f"step {first} gives {betas[first]!r}")
    return betas.astype(np.float32)


def betas_digest(betas: np.ndarray) -> str:
    """A BLAKE2b digest of the float32 betas (a fit's identity: a resumed fit must anneal as the saved one)."""
    return hashlib.blake2b(np.asarray(betas, np.float32).tobytes(), digest_size=16).hexdigest()
