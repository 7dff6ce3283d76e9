"""Per-stage wall time and XLA compile count of a `zoo reproduce` job (each quick job has a 10-minute budget).

``with stage("table 2", log, "rank1") as s: ...`` logs ``[rank1] table 2: 123.4 s, 7 compiles (45.6 s compiling)`` at
the end of the block and keeps the numbers in ``s`` (`StageTimes`). Compiles are counted with JAX's
monitoring events (``/jax/core/compile/backend_compile_duration``, one per program handed to the XLA backend;
one served from the persistent compilation cache counts too, with its short load time as its seconds).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass

import jax.monitoring

__all__ = ["StageTimes", "stage", "COMPILE_EVENT"]

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@dataclass
class StageTimes:
    """name; prefix: the job's tag in log lines; seconds: wall time of the block; compiles: XLA backend compiles
    inside it; compile_s: their seconds."""

    name: str
    prefix: str = "zoo"
    seconds: float = 0.0
    compiles: int = 0
    compile_s: float = 0.0

    def line(self) -> str:
        """The log line ``[prefix] name: S s, N compiles (C s compiling)``."""
        return (f"[{self.prefix}] {self.name}: {self.seconds:.1f} s, {self.compiles} compiles "
                f"({self.compile_s:.1f} s compiling)")


@contextmanager
def stage(name: str, log=print, prefix: str = "zoo", into: StageTimes | None = None):
    """Time the block and count its XLA compiles; log `StageTimes.line` at its end (``log=None``: silent).
    Yields the `StageTimes`, filled when the block ends; ``into``: add to these (a stage entered many times,
    e.g. every fit of one method) instead of new ones."""
    times = into if into is not None else StageTimes(name, prefix)

    def listener(event: str, duration_secs: float, **_: str | int) -> None:
        if event == COMPILE_EVENT:
            times.compiles += 1
            times.compile_s += float(duration_secs)

    jax.monitoring.register_event_duration_secs_listener(listener)
    t0 = time.perf_counter()
    try:
        yield times
    finally:
        times.seconds += time.perf_counter() - t0
        jax.monitoring.unregister_event_duration_listener(listener)
        if log is not None:
            log(times.line())
