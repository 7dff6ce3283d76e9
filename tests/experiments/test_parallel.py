"""zoo.experiments.parallel: tasks in worker processes give the results of running them here, in task order; a failing task
is named; bad arguments are refused."""

import numpy as np
import pytest

from zoo.experiments.parallel import Task, TaskError, run_parallel


def _draw_mean(seed, n):
    """A small JAX program (compiled in the worker): the mean of n standard normals."""
    import jax

    return float(jax.random.normal(jax.random.PRNGKey(seed), (n,)).mean()), __import__("os").getpid()


def _fail(message):
    raise ValueError(message)


def test_workers_give_the_results_of_running_here_in_task_order():
    tasks = [Task(f"draw {s}", _draw_mean, {"seed": s, "n": 1000 + s}) for s in range(3)]
    here = run_parallel(tasks, workers=1, log=None)
    lines = []
    there = run_parallel(tasks, workers=2, log=lines.append)
    np.testing.assert_array_equal([r[0] for r in there], [r[0] for r in here])
    assert all(r[1] != __import__("os").getpid() for r in there)  # ran in worker processes
    assert sorted(line.split(":")[0] for line in lines) == ["[parallel] draw 0", "[parallel] draw 1", "[parallel] draw 2"]


def test_a_failing_task_is_named_with_its_traceback():
    tasks = [Task("fine", _draw_mean, {"seed": 0, "n": 10}), Task("broken", _fail, {"message": "bad value 7"})]
    with pytest.raises(TaskError, match="task 'broken'(.|\n)*bad value 7"):
        run_parallel(tasks, workers=2, log=None)
    with pytest.raises(ValueError, match="bad value 7"):  # here: the exception itself
        run_parallel(tasks, workers=1, log=None)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="fn: task 'l' needs a function defined at a module's top level"):
        Task("l", lambda: 1)
    with pytest.raises(TypeError, match="fn: expected a function"):
        Task("n", 3)
    with pytest.raises(ValueError, match="workers: expected a positive integer, got 0"):
        run_parallel([Task("a", _fail, {"message": "x"})], workers=0)
    with pytest.raises(TypeError, match="tasks: expected zoo.experiments.parallel.Task items"):
        run_parallel([(_fail, {})], workers=1)


def test_workers_from_the_environment(monkeypatch):
    from zoo.experiments.parallel import default_workers

    monkeypatch.setenv("BNN_ZOO_WORKERS", "3")
    assert default_workers() == 3
    monkeypatch.setenv("BNN_ZOO_WORKERS", "two")
    with pytest.raises(ValueError, match="BNN_ZOO_WORKERS: expected a positive integer, got 'two'"):
        default_workers()


def test_run_parallel_moves_the_line_task_by_task():
    from base.errors import InputError
    from zoo.progress_line import ProgressLine

    lines: list = []
    line = ProgressLine(3, log=lines.append, clock=lambda: 0.0)
    tasks = [Task(name, dict, {"name": name}) for name in ("two moons", "digits a", "digits b")]
    assert run_parallel(tasks, workers=1, log=line.log, progress=line) == [{"name": t.name} for t in tasks]
    assert [text.split(" · ")[0] for text in lines if "/3] " in text] == [
        "[1/3] two moons", "[2/3] digits a", "[3/3] digits b"]
    assert lines[1] == "[parallel] two moons: 0 s"  # the task's own line, through the progress line
    with pytest.raises(InputError, match="progress: expected one of 2 parts"):
        run_parallel(tasks[:2], workers=1, progress=line)
