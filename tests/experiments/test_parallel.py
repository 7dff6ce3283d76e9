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
