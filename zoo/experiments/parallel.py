"""Independent parts of a job in worker processes, one per CPU core: ``run_parallel(tasks, workers)``.

XLA compiles a program on one thread, and the small programs of this library (an MLP's SVI step, a NUTS
transition) run on one thread too, so a job of independent fits keeps one core of two busy. A `Task` is a
module-level function and its keyword arguments; `run_parallel` runs the tasks in fresh worker processes
(``spawn``: JAX cannot be forked once it has started) that share this process's persistent compilation cache
(`zoo.compilation_cache`), and returns their results in task order. With one worker (or one task) the tasks
run here, one after the other, with the same results.

The number of workers: the ``workers`` argument, else the environment variable ``BNN_ZOO_WORKERS``, else the
CPU cores this process may use. A worker's own `run_parallel` calls run in that worker (no nested pools).
A task's arguments and result cross a process boundary: pass data, settings and paths, return tables and
numbers (or write files and return their paths), not closures or NumPyro models.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from base.errors import ArgumentTypeError, InputError
from zoo.progress_line import ProgressLine

__all__ = ["Task", "TaskError", "run_parallel", "default_workers", "WORKERS_ENV"]

WORKERS_ENV = "BNN_ZOO_WORKERS"


@dataclass(frozen=True)
class Task:
    """One independent part of a job: ``fn(**kwargs)``. name: shown in progress lines and errors; fn: a function
    defined at the top level of an importable module (the worker imports it by name)."""

    name: str
    fn: Callable[..., Any]
    kwargs: dict = field(default_factory=dict)

    def __post_init__(self):
        if not callable(self.fn):
            raise ArgumentTypeError.worded("fn",
                                           f"fn: expected a function, got {type(self.fn).__name__} {self.fn!r} (task {self.name!r})")
        if "<locals>" in getattr(self.fn, "__qualname__", "") or getattr(self.fn, "__name__", "") == "<lambda>":
            raise InputError.worded("fn",
                                    f"fn: task {self.name!r} needs a function defined at a module's top level, got "
                                    f"{self.fn.__qualname__!r} (a worker process imports it by name)")


class TaskError(RuntimeError):
    """A task failed in a worker process; the message names the task and carries the worker's traceback."""


def default_workers() -> int:
    """``BNN_ZOO_WORKERS`` if set (a positive integer), else the CPU cores this process may use."""
    value = os.environ.get(WORKERS_ENV, "").strip()
    if value:
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n < 1:
            raise InputError.worded(WORKERS_ENV, f"{WORKERS_ENV}: expected a positive integer, got {value!r}")
        return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _worker_init(cache_dir, xla_flags):
    """Runs first in every worker: the parent's XLA flags and compilation cache, no nested pools, quiet plots."""
    os.environ[WORKERS_ENV] = "1"
    if xla_flags is not None:
        os.environ["XLA_FLAGS"] = xla_flags
    os.environ.setdefault("MPLBACKEND", "Agg")
    from zoo import compilation_cache

    compilation_cache.configure(cache_dir if cache_dir else False)


def _run_in_worker(task: Task):
    start = time.perf_counter()
    try:
        result = task.fn(**task.kwargs)
    except BaseException:  # the traceback as text: some exceptions do not pickle
        import traceback

        raise TaskError(f"task {task.name!r} failed in a worker process:\n{traceback.format_exc()}") from None
    finally:
        sys.stdout.flush()
    return result, time.perf_counter() - start


def run_parallel(tasks: Sequence[Task], workers: int | None = None, log: Callable[[str], None] | None = print,
                 progress: ProgressLine | None = None) -> list:
    """Run `tasks` in up to `workers` processes and return their results in task order.

    Args:
      tasks: the `Task`s; put the longest first (a free worker takes the next task in order).
      workers: processes to use (default `default_workers()`); 1 runs every task here, in order.
      log: gets one line per finished task (its name and seconds); None: silent.
      progress: a `zoo.progress_line.ProgressLine` of len(tasks) parts, updated as tasks start and finish (the
        tasks running now, the time left) and closed at the end (on a terminal, give a `log` that prints through
        its ``log``, so that the lines print above it).
    Returns:
      [task.fn(**task.kwargs) for task in tasks], computed in parallel.
    Raises:
      TaskError naming the first failed task (in task order) with the worker's traceback; the other tasks finish.
    """
    tasks = list(tasks)
    for t in tasks:
        if not isinstance(t, Task):
            raise ArgumentTypeError.worded("tasks",
                                           f"tasks: expected zoo.experiments.parallel.Task items, got {type(t).__name__} {t!r}")
    workers = default_workers() if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError.worded("workers", f"workers: expected a positive integer, got {workers!r}")
    say = log or (lambda line: None)
    if progress is not None:
        if progress.total != len(tasks):
            raise InputError("progress", f"<a ProgressLine of {progress.total} parts>", f"one of {len(tasks)} parts, "
                             "one per task")
    workers = min(workers, len(tasks))
    if workers <= 1:
        results: list = []
        try:
            for i, t in enumerate(tasks):
                if progress is not None:
                    progress.update(i, t.name)
                start = time.perf_counter()
                results.append(t.fn(**t.kwargs))
                say(f"[parallel] {t.name}: {time.perf_counter() - start:.0f} s")
        finally:  # the line ends (a failure's message starts a line of its own)
            if progress is not None:
                progress.close(len(results))
        return results

    import multiprocessing

    import jax

    # jax's Config holds its flags as dynamic attributes, which its type information does not declare:
    cache_dir = jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]
    results, errors = [None] * len(tasks), {}
    sys.stdout.flush()
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_worker_init, initargs=(cache_dir, os.environ.get("XLA_FLAGS"))) as pool:
        futures = {pool.submit(_run_in_worker, t): i for i, t in enumerate(tasks)}
        finished: set = set()

        def show():  # a free worker takes the next task in order: the first `workers` unfinished ones run
            if progress is not None and len(finished) < len(tasks):
                running = [t.name for j, t in enumerate(tasks) if j not in finished][:workers]
                progress.update(len(finished), "; ".join(running))

        show()
        for future in as_completed(futures):
            i = futures[future]
            finished.add(i)
            show()
            try:
                results[i], seconds = future.result()
                say(f"[parallel] {tasks[i].name}: {seconds:.0f} s in a worker")
            except Exception as err:  # TaskError, or a worker that died (BrokenProcessPool)
                errors[i] = err
    if progress is not None:
        progress.close(len(finished))
    if errors:
        i = min(errors)
        failure = errors[i]
        if isinstance(failure, TaskError):
            raise failure
        raise TaskError(f"task {tasks[i].name!r} failed in a worker process: {type(failure).__name__}: {failure}"
                        ) from failure
    return results
