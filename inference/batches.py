"""Fixed-size shuffled minibatch indices on the host (NumPy).

Every batch has exactly `batch_size` rows (the last partial batch is dropped), so a jitted update
step compiles once per shape and never retraces.
"""

from __future__ import annotations

import numpy as np
from base.errors import InputError


def minibatches(n: int, batch_size: int, seed: int | np.random.Generator) -> np.ndarray:
    """One epoch of shuffled index batches: int64 (n // batch_size, batch_size).

    A permutation of range(n) drawn with `np.random.default_rng(seed)`, cut into batches, the
    remaining n % batch_size indices dropped. Same seed, same batches; each index at most once.
    Passing one `np.random.Generator` to successive calls gives successive, different epochs.
    """
    if n < 1 or batch_size < 1:
        raise InputError.worded("batch_size", f"n and batch_size must be >= 1; got n={n}, batch_size={batch_size}")
    if batch_size > n:
        raise InputError.worded("batch_size",
                                f"batch_size: expected at most n={n} (the data set size); got {batch_size}")
    num_batches = n // batch_size
    order = np.random.default_rng(seed).permutation(n)
    return order[:num_batches * batch_size].reshape(num_batches, batch_size)


class MinibatchOrder:
    """The endless row order of a fit: successive epochs of `minibatches` drawn from one
    ``np.random.default_rng(seed)``, taken `count` rows at a time, that can be saved and restored mid-epoch.

    `state()` is ({bit generator state}: JSON-able, pending: int64 (P, batch_size) the drawn rows not yet
    taken); ``MinibatchOrder(n, batch_size, state=...)`` continues exactly where that order stood, so a
    resumed fit sees the batches an uninterrupted one would.
    """

    def __init__(self, n: int, batch_size: int, seed: int = 0, state: tuple | None = None):
        self.n, self.batch_size = int(n), int(batch_size)
        self.rng = np.random.default_rng(seed)
        self.pending = np.zeros((0, batch_size), np.int64)
        if state is not None:
            self.rng.bit_generator.state, self.pending = state[0], np.asarray(state[1], np.int64)

    def take(self, count: int) -> np.ndarray:
        """The next `count` rows: int32 (count, batch_size)."""
        while len(self.pending) < count:
            self.pending = np.concatenate([self.pending, minibatches(self.n, self.batch_size, self.rng)])
        out, self.pending = self.pending[:count], self.pending[count:]
        return out.astype(np.int32)

    def state(self) -> tuple:
        """(bit generator state dict, pending rows int64 (P, batch_size)): what `__init__` restores."""
        return self.rng.bit_generator.state, self.pending

    def blocks(self, steps: int, block: int):
        """Yield the next `steps` rows `block` at a time: int32 (count, batch_size), count = `block` except
        for the last; rows are taken only as each block is asked for."""
        for start in range(0, steps, block):
            yield self.take(min(block, steps - start))


def minibatch_blocks(n: int, batch_size: int, steps: int, seed: int, block: int):
    """The `steps` minibatch index rows of a fit, `block` rows at a time: yields int32 (count, batch_size)
    arrays, count = `block` except for the last. Rows are successive epochs of `minibatches` drawn from one
    ``np.random.default_rng(seed)`` (each epoch a fresh permutation), drawn as they are needed, so memory
    holds one epoch and one block however many steps there are (`MinibatchOrder`)."""
    return MinibatchOrder(n, batch_size, seed).blocks(steps, block)
