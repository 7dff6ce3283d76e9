"""Fixed-size shuffled minibatch indices on the host (NumPy).

Every batch has exactly `batch_size` rows (the last partial batch is dropped), so a jitted update
step compiles once per shape and never retraces.
"""

from __future__ import annotations

import numpy as np


def minibatches(n: int, batch_size: int, seed: int | np.random.Generator) -> np.ndarray:
    """One epoch of shuffled index batches: int64 (n // batch_size, batch_size).

    A permutation of range(n) drawn with `np.random.default_rng(seed)`, cut into batches, the
    remaining n % batch_size indices dropped. Same seed, same batches; each index at most once.
    Passing one `np.random.Generator` to successive calls gives successive, different epochs.
    """
    if n < 1 or batch_size < 1:
        raise ValueError(f"n and batch_size must be >= 1; got n={n}, batch_size={batch_size}")
    if batch_size > n:
        raise ValueError(f"batch_size: expected at most n={n} (the data set size); got {batch_size}")
    num_batches = n // batch_size
    order = np.random.default_rng(seed).permutation(n)
    return order[:num_batches * batch_size].reshape(num_batches, batch_size)


def minibatch_blocks(n: int, batch_size: int, steps: int, seed: int, block: int):
    """The `steps` minibatch index rows of a fit, `block` rows at a time: yields int32 (count, batch_size)
    arrays, count = `block` except for the last. Rows are successive epochs of `minibatches` drawn from one
    ``np.random.default_rng(seed)`` (each epoch a fresh permutation), drawn as they are needed, so memory
    holds one epoch and one block however many steps there are."""
    rng = np.random.default_rng(seed)
    pending = np.zeros((0, batch_size), np.int64)
    for start in range(0, steps, block):
        count = min(block, steps - start)
        while len(pending) < count:
            pending = np.concatenate([pending, minibatches(n, batch_size, rng)])
        out, pending = pending[:count], pending[count:]
        yield out.astype(np.int32)
