"""Time of one SVI step of `inference.fit`, with the compile left out (k-tied Normal paper, Table 4; used by
benchmarks/bench_guide_steps.py and `zoo reproduce k-tied`)."""

from __future__ import annotations

import warnings

from inference.convergence import ConvergenceWarning
from inference.fit import fit
from inference.run_info import FitInfo
from base.validation import check_positive_ints
from base.errors import InputError

__all__ = ["fit_step_ms"]


def fit_step_ms(model, guide, data, *, steps: int = 1200, batch_size: int = 128, chunk_size: int = 200,
                seed: int = 0) -> float:
    """Milliseconds per SVI step of ``fit(model, guide, data, ...)``: (fit_s - first_step_s) / (steps -
    chunk_size), i.e. every step after the first chunk (which holds the guide's initialisation and the
    compile; `inference.run_info.FitInfo`). steps: more than `chunk_size`. Wall-clock time: on a shared machine,
    interleave the guides you compare and repeat."""
    check_positive_ints(steps=steps, batch_size=batch_size, chunk_size=chunk_size)
    if steps <= chunk_size:
        raise InputError("steps", steps, f"more than chunk_size = {chunk_size} (the first chunk is not timed)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a timing run, not a fit to use
        post = fit(model, guide, data, steps=steps, batch_size=batch_size, chunk_size=chunk_size, progress=False,
                   seed=seed)
    info = post.info
    assert isinstance(info, FitInfo) and info.first_step_s is not None and info.fit_s is not None  # fit records them
    return 1000 * (info.fit_s - info.first_step_s) / (steps - chunk_size)
