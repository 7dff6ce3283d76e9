"""Bad inputs that were silently wrong or unclear (issue 31, its non-filesystem half): each is refused before
any work with the package's own error naming the argument, the value and what was expected, or gives the
right result. One test per case; `test_property_numeric_arguments` then tries the public entry points' numeric
arguments at random (hypothesis), every refusal before anything is compiled.
"""

from __future__ import annotations

import ast
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import evals
import inference
import zoo
from evals.corruptions import corrupt, corrupted
from inference.convergence import ConvergenceWarning, judge
from base.data import Dataset
from base.validation import MAX_SEED
from base.errors import ArgumentTypeError, CheckpointError, InputError, ZooError
from zoo.cli import EXIT_BUG, EXIT_INTERRUPTED, EXIT_USAGE, main
from inference.predictive_density import log_predictive_density, predictive_density_table

ROOT = Path(__file__).resolve().parent.parent
X2 = np.random.default_rng(0).normal(size=(6, 2)).astype(np.float32)


def refused(call, error=InputError, argument=None, *says):
    """Run `call`, assert it raises `error` (a ZooError) naming `argument` with every text of `says` in the
    message; return the error."""
    with pytest.raises(error) as info:
        call()
    err = info.value
    assert isinstance(err, ZooError)
    if argument is not None:
        assert err.argument == argument, str(err)
        assert str(err).startswith(f"{argument}: "), str(err)
    for text in says:
        assert text in str(err), str(err)
    return err


@pytest.fixture(scope="module")
def wider():
    """An MLP 2-8-2 on the same two moons: another model of the same feature shape as `moons_tiny`."""
    return zoo.get("mlp", data="two_moons", hidden=(8,), data_kwargs={"n": 100})


@pytest.fixture(scope="module")
def wider_draws(wider):
    """A hand-built MCMC posterior of `wider` (zeros, 1 chain x 3 draws): draws of another model, no compile."""
    shapes = wider.model.site_shapes((2,))
    return inference.MCMCPosterior(model=wider.model, feature_shape=(2,),
                               samples={k: np.zeros((1, 3) + tuple(s), np.float32) for k, s in shapes.items()})


# ----- silently wrong, now refused or right ---------------------------------------------------------------
def test_zero_features_are_refused():
    refused(lambda: Dataset(np.zeros((5, 0)), [0, 1, 0, 1, 1], 2), InputError, "x", "at least one feature")
    y = np.array([0, 1, 0, 1, 1])
    refused(lambda: zoo.get("mlp", data=(np.zeros((5, 0)), y, np.zeros((5, 0)), y), hidden=(4,)), InputError,
            "x_train", "at least one feature", "(5, 0)")


def test_log_uniform_sites_matching_no_site_are_refused():
    err = refused(lambda: zoo.get("mlp", data="two_moons", hidden=(4,), log_uniform_sites=["mlp/~/linear_9/w"]),
                  InputError, "log_uniform_sites", "['mlp/~/linear_9/w']", "'mlp/~/linear_0/w'")
    assert "each matching a latent site" in str(err)
    with pytest.raises(ZooError, match="log_uniform_sites"):  # one string is not read letter by letter
        zoo.get("mlp", data="two_moons", hidden=(4,), log_uniform_sites="mlp/~/linear_0/w")
    entry = zoo.get("mlp", data="two_moons", hidden=(4,), log_uniform_sites=["mlp/~/linear_0/w"])
    priors = entry.model.site_priors((2,))
    assert innermost(priors["mlp/~/linear_0/w"]) == "LogUniform" and innermost(priors["mlp/~/linear_1/w"]) == "Normal"


def innermost(distribution) -> str:
    """The class name of a distribution under its Independent / Expanded wrappers."""
    while hasattr(distribution, "base_dist"):
        distribution = distribution.base_dist
    return type(distribution).__name__


@pytest.mark.parametrize("count", [0, -1, 2.5, True, "3"])
def test_draws_refuse_what_predict_refuses(moons_tiny_svi, count):
    refused(lambda: moons_tiny_svi.draws(count), InputError, "num_samples", "a positive integer")
    refused(lambda: moons_tiny_svi.predict(X2, num_samples=count), InputError, "num_samples")


def test_draws_of_a_valid_count_are_that_many(moons_tiny_svi):
    draws = moons_tiny_svi.draws(3)
    assert {v.shape[0] for v in draws.values()} == {3}
    np.testing.assert_array_equal(draws["mlp/~/linear_0/w"], moons_tiny_svi.draws(50)["mlp/~/linear_0/w"][:3])


def test_nuts_from_another_models_posterior_is_refused(moons_tiny, wider_draws):
    refused(lambda: inference.nuts(moons_tiny.model, moons_tiny.train, init=wider_draws, num_warmup=1,
                                   draws_per_chain=1, progress=False),
            InputError, "init", "'mlp/~/linear_0/w' is (2, 8) in the init posterior, (2, 4) in this model",
            "every latent site of this model at its shape")


def test_an_init_posterior_may_hold_sites_this_model_keeps_fixed():
    """NUTS on a model that holds some sites fixed (zoo run's rank-1 NUTS: the factors, W fixed) starts from the
    whole model's posterior: extra sites are allowed there, missing sites and other shapes are not."""
    from base.validation import site_mismatch

    want, whole = {"r": (4,), "s": (2,)}, {"r": (4,), "s": (2,), "w": (2, 4)}
    assert site_mismatch(want, whole, extra_ok=True) is None
    assert "'w'" in site_mismatch(want, whole)
    assert "missing" in site_mismatch(want, {"r": (4,), "w": (2, 4)}, extra_ok=True)
    assert "'s' is (3,) in it, (2,) in this model" in site_mismatch(want, {"r": (4,), "s": (3,)}, extra_ok=True)


def test_predict_with_another_models_draws_is_refused(moons_tiny_svi, wider_draws):
    refused(lambda: moons_tiny_svi.predict(X2, draws=wider_draws.draws()), InputError, "draws",
            "'mlp/~/linear_0/w' is (2, 8) in draws, (2, 4) in this model")
    refused(lambda: moons_tiny_svi.predict(X2, draws={"mlp/~/linear_0/w": np.zeros((2, 2, 4))}), InputError,
            "draws", "are missing")
    refused(lambda: moons_tiny_svi.predict(X2, draws=[1, 2]), ArgumentTypeError, "draws", "dict")


def test_corruptions_index_out_of_range_and_unknown_data(tmp_path, capsys):
    out = str(tmp_path / "grid.png")
    with pytest.raises(SystemExit) as exit_:
        main(["corruptions", "--index", "-1", "--out", out])
    assert exit_.value.code == EXIT_USAGE
    assert "argument --index: expected an integer index >= 0, got '-1'" in capsys.readouterr().err
    assert main(["corruptions", "--index", "99999", "--out", out]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "zoo corruptions: error: --index: expected an index in [0, 1797) ('digits' has 1797 images), got 99999" \
        in err and "Traceback" not in err
    assert main(["corruptions", "--index", "0", "--data", "sample", "--index", "1", "--out", out]) == EXIT_USAGE
    assert "--index: expected an index in [0, 1)" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_corruptions_unknown_data_is_refused(tmp_path, capsys):
    assert main(["corruptions", "--data", "no_such_set_31", "--out", str(tmp_path / "g.png")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "zoo corruptions: error: --data: expected 'digits', 'sample' or the name of a TFDS data set" in err
    assert "'no_such_set_31'" in err and "Traceback" not in err


def test_a_learning_rate_of_0_is_not_converged(moons_tiny):
    e = moons_tiny
    guide = inference.mean_field(e.model)
    with pytest.warns(ConvergenceWarning, match="the parameters did not move in 150 steps"):
        post = inference.fit(e.model, guide, e.train, steps=150, batch_size=16, optimizer=optax.adam(0.0),
                             progress=False)
    assert post.info.converged is False and post.info.convergence["moved"] is False
    start = inference.fit(e.model, inference.mean_field(e.model), e.train, steps=1, batch_size=16,
                          optimizer=optax.adam(0.0), progress=False)
    for name, value in post.params.items():  # the initialisation
        np.testing.assert_array_equal(value, start.params[name])


def test_judge_with_parameters_that_moved_or_not():
    flat = np.random.default_rng(0).normal(10.0, 0.1, 400)
    assert judge(flat, moved=True)["converged"] is True
    out = judge(flat, moved=False)
    assert out["converged"] is False and out["moved"] is False and "did not move in 400 steps" in out["reason"]


def test_an_optimiser_record_refuses_a_rate_that_climbs_or_is_not_finite():
    refused(lambda: inference.optimizers.adam(learning_rate=-1e-3), InputError, "learning_rate",
            "a negative learning rate")
    refused(lambda: inference.optimizers.sgd(float("nan")), InputError, "learning_rate", "a finite number >= 0")
    refused(lambda: inference.optimizers.cosine_adam(1e-2, decay_steps=0), InputError, "decay_steps", "> 0")
    refused(lambda: inference.optimizers.adam(b1=1.0), InputError, "b1", "[0, 1)")
    refused(lambda: inference.optimizers.as_optimizer("adam"), ArgumentTypeError, "optimizer")

def test_a_nan_stopped_fit_says_its_posterior_predicts_nan(moons_tiny):
    e = moons_tiny
    with pytest.raises(inference.NonFiniteLossError) as info:
        inference.fit(e.model, inference.mean_field(e.model, scale_cap=None), e.train, steps=5, batch_size=16,
                      optimizer=optax.adam(1e19), progress=False)
    err = info.value
    bad, rows = err.nonfinite_rows
    assert rows == 80 and bad > 0
    assert f"it predicts NaN/inf for {bad} of 80 training inputs" in str(err) and "do not use it" in str(err)
    assert "largest |value| 1e+19" in str(err)
    probs = err.posterior.predict(e.train.x[:80], num_samples=10)
    assert (~np.isfinite(probs)).reshape(10, 80, -1).any(axis=(0, 2)).sum() == bad  # what the message says
    # scoring it names the posterior, not an argument the user never passed
    refused(lambda: evals.score(err.posterior, e.test, num_samples=4, verbose=False), InputError, "posterior",
            "a posterior predicting NaN/inf for", "a NaN-stopped fit's err.posterior?")


# ----- unclear, now clean ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [-1, 1.5, None, MAX_SEED + 1, 2**64, True])
def test_seeds_out_of_range_or_not_integers(moons_tiny, seed):
    e = moons_tiny
    error = InputError if isinstance(seed, int) and not isinstance(seed, bool) else ArgumentTypeError
    expected = "an integer seed in [0, 4294967295]"
    refused(lambda: inference.fit(e.model, inference.mean_field(e.model), e.train, seed=seed, progress=False),
            error, "seed", expected)
    refused(lambda: corrupt(np.zeros((1, 4, 4, 1), np.float32), "brightness", 1, seed=seed), error, "seed", expected)
    refused(lambda: inference.nuts(e.model, e.train, seed=seed), error, "seed", expected)


@pytest.mark.parametrize("seed", ["-1", "1.5", str(2**32)])
def test_cli_seeds(seed, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["fit", "mlp", "--data", "two_moons", "--seed", seed, "--out", str(tmp_path / "o")])
    assert exit_.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"argument --seed: expected an integer seed in [0, 4294967295], got '{seed}'" in err
    assert "Traceback" not in err


def test_a_guide_built_for_another_model_is_refused(moons_tiny, wider):
    guide = inference.mean_field(wider.model)
    refused(lambda: inference.fit(moons_tiny.model, guide, moons_tiny.train, steps=2, progress=False), InputError,
            "guide", "a guide built for another model", "'mlp/~/linear_0/w' is (2, 8) in the guide's model")


def test_corrupt_takes_a_jax_array_and_refuses_an_empty_image():
    image = np.linspace(0, 1, 16, dtype=np.float32).reshape(1, 4, 4, 1)
    out = corrupt(jnp.asarray(image), "brightness", 3, seed=1)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, corrupt(image, "brightness", 3, seed=1))
    refused(lambda: corrupt(np.zeros((1, 0, 0, 1), np.float32), "brightness", 1), InputError, "images",
            "H, W >= 1", "(1, 0, 0, 1)")
    refused(lambda: corrupt([[0.5]], "brightness", 1), ArgumentTypeError, "images")


def test_corrupted_refuses_a_single_severity_or_type_when_called():
    test_set = Dataset(np.full((2, 4, 4, 1), 0.5, np.float32), [0, 1], 2)
    refused(lambda: corrupted(test_set, severities=3), ArgumentTypeError, "severities", "e.g. [3]")
    refused(lambda: corrupted(test_set, types="fog"), ArgumentTypeError, "types", "['fog']")
    refused(lambda: corrupted(test_set, severities=[1, 6]), InputError, "severities[1]", "0..5")
    (name, severity, images, labels), = list(corrupted(test_set, types=["brightness"], severities=[2]))
    assert (name, severity) == ("brightness", 2) and images.shape == (2, 4, 4, 1) and labels.tolist() == [0, 1]


def test_resuming_with_other_steps_names_steps(moons_tiny, tmp_path):
    e = moons_tiny
    kwargs = dict(batch_size=16, progress=False, chunk_size=2, checkpoint_dir=str(tmp_path / "state"))
    inference.fit(e.model, inference.mean_field(e.model), e.train, steps=2, **kwargs)
    with pytest.raises(CheckpointError, match=r"steps differs \(saved 2, this call 4\)"):
        inference.fit(e.model, inference.mean_field(e.model), e.train, steps=4, resume=True, **kwargs)


def test_to_arviz_and_predictive_density_table_refuse_what_they_cannot_read(moons_tiny_svi):
    refused(lambda: inference.to_arviz({"mlp/~/linear_0/w": np.zeros((3, 2, 4))}), ArgumentTypeError, "posterior",
            "an inference.Posterior")
    refused(lambda: predictive_density_table({}, (X2, [0] * 6)), InputError, "posteriors",
            "a non-empty dict")
    refused(lambda: log_predictive_density({"a": 1}, (X2, [0] * 6)), ArgumentTypeError, "posterior")


def test_fit_checks_callbacks_and_config_before_any_work(moons_tiny):
    e = moons_tiny
    refused(lambda: inference.fit(e.model, inference.mean_field(e.model), e.train, callbacks=[5], progress=False),
            InputError, "callbacks[0]", "on_chunk")
    refused(lambda: inference.fit(e.model, inference.mean_field(e.model), e.train, config={"when": object()},
                                  progress=False), ArgumentTypeError, "config", "JSON")


def test_counts_whose_arrays_cannot_fit_in_memory_are_refused(moons_tiny, moons_tiny_svi, tmp_path, capsys):
    post = moons_tiny_svi
    refused(lambda: evals.score(post, moons_tiny.test, num_samples=10**9, verbose=False), InputError,
            "num_samples", "GiB available", "would need")
    refused(lambda: post.predict(X2, num_samples=10**13), InputError, "num_samples", "would need")
    refused(lambda: post.draws(10**13), InputError, "num_samples", "would need")
    path = str(tmp_path / "post")
    inference.save(post, path)
    assert main(["score", path, "--samples", "1000000000"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "zoo score: error: num_samples: expected a value whose arrays fit in memory" in err
    assert "Traceback" not in err


# ----- one convention: every refusal a ZooError, exit statuses by type ---------------------------------------
NOT_ZOO_ERRORS = {"TaskError",  # a worker's failure as text
                  "KeyboardInterrupt",  # SIGTERM in `zoo fit`, raised as Ctrl-C is (not an error)
                  "KeyError",  # a Mapping's __getitem__ of a missing name (the protocol `get` and `in` rely on)
                  "AttributeError"}  # setting a field of a frozen value (a guide), as dataclasses' FrozenInstanceError
PACKAGES = ("base", "models", "inference", "evals", "zoo")


def package_trees():
    """(path relative to the repository, parsed module) for every module of the five packages."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT), ast.parse(path.read_text())


def subclasses(cls) -> set:
    """The names of `cls` and every class derived from it (in the modules imported so far)."""
    return {cls.__name__}.union(*(subclasses(c) for c in cls.__subclasses__()))


def test_the_package_raises_no_builtin_error_of_its_own():
    """Every ``raise SomeError(...)`` / ``raise SomeError`` in models, inference, evals, zoo raises a ZooError
    subclass (which also derives from the built-in one a caller expects), not ValueError, TypeError, KeyError,
    RuntimeError...: the exceptions are named in `NOT_ZOO_ERRORS`. (``raise err`` and ``raise
    make_error(...)`` re-raise or build one of these.)"""
    import zoo.data.tfds_loaders  # noqa: F401 - defines DatasetNotPreparedError

    allowed = subclasses(ZooError) | NOT_ZOO_ERRORS
    found = []
    for path, tree in package_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                name = raised.id if isinstance(raised, ast.Name) else ""
                if name[:1].isupper() and name not in allowed:
                    found.append(f"{path}:{node.lineno}: {name}")
    assert found == []
    assert {"InputError", "CheckpointError", "NonFiniteLossError", "DatasetNotPreparedError"} <= allowed


def test_worded_refusals_name_their_argument():
    """``InputError.worded(argument, message)`` (a message in the check's own words) names `argument` in the
    message whenever `argument` is a literal."""
    unnamed = []
    for path, tree in package_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "worded" \
                    and isinstance(node.args[0], ast.Constant):
                text = "".join(c.value for c in ast.walk(node.args[1])
                               if isinstance(c, ast.Constant) and isinstance(c.value, str))
                if node.args[0].value not in text:
                    unnamed.append(f"{path}:{node.lineno}")
    assert unnamed == []


def test_package_errors_are_caught_by_zoo_error_from_every_package():
    assert zoo.ZooError is inference.ZooError is ZooError
    for call in (lambda: inference.make_guide("magic", None), lambda: evals.corrupt(X2, "fog", 1),
                 lambda: zoo.load("/nonexistent/31"), lambda: inference.fit(None, None, None, steps=0)):
        with pytest.raises(zoo.ZooError):
            call()
    with pytest.raises(FileNotFoundError):  # still a FileNotFoundError as well
        zoo.load("/nonexistent/31")


def test_exit_status_follows_the_type_not_the_file(monkeypatch, capsys):
    """A plain ValueError raised by a line of the package's own files is a bug (70), an InputError raised from
    anywhere a bad input (2)."""
    namespace = {}
    source = "def plain(args):\n    raise ValueError('a plain error')\n"
    exec(compile(source, str(ROOT / "zoo" / "cli.py"), "exec"), namespace)  # its frame lies in zoo/cli.py
    monkeypatch.setitem(zoo.cli.COMMANDS, "list", namespace["plain"])
    assert main(["list"]) == EXIT_BUG
    capsys.readouterr()

    def input_error(args):
        raise InputError("x", 1, "2")

    monkeypatch.setitem(zoo.cli.COMMANDS, "list", input_error)
    assert main(["list"]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == "zoo list: error: x: expected 2, got 1"


def test_ctrl_c_while_the_command_starts_exits_quietly(tmp_path):
    """SIGINT at several moments of `zoo fit` (imports, building the entry, training): exit status 130, one
    line, never a traceback, never a fit that runs on."""
    script = "import sys; sys.argv[0] = 'zoo'; from zoo.cli import main; sys.exit(main())"  # the console script
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for delay in (0.3, 1.5):
        argv = ["fit", "mlp", "--data", "two_moons", "--steps", "100000", "--quiet", "--out", str(tmp_path / str(delay))]
        child = subprocess.Popen([sys.executable, "-c", script, *argv], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env, cwd=str(tmp_path))
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
        assert child.returncode == EXIT_INTERRUPTED, err
        assert "Traceback" not in err and "interrupted" in err.strip().splitlines()[-1], err


# ----- hypothesis: the numeric arguments of the public entry points -----------------------------------------
NUMBERS = st.sampled_from([0, 1, 2, 3, 50, -1, -7, 2.5, 0.0, 1.0, -0.5, math.nan, math.inf, -math.inf, 10**13,
                           2**32, MAX_SEED, None, True, "3", np.int64(3), np.float32(0.5), (2,)])
PROPERTY = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def count_ok(v, low=1, high=None) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= low and (high is None or v <= high)


def real_ok(v, low=None, high=None, low_open=True, high_open=True) -> bool:
    if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool) or not math.isfinite(v):
        return False
    return (low is None or (v > low if low_open else v >= low)) and (high is None or (v < high if high_open
                                                                                      else v <= high))


def seed_ok(v) -> bool:
    return count_ok(v, 0, MAX_SEED)


def fit_call(e, **kwargs):
    # x of 3 features for a model of 2: once every argument is accepted, the data are refused ("data.x"),
    # still before anything is compiled
    return lambda: inference.fit(e.model, inference.mean_field(e.model), (np.zeros((4, 3)), [0, 1, 0, 1]),
                                 progress=False, **kwargs)


def nuts_call(e, **kwargs):
    return lambda: inference.nuts(e.model, (np.zeros((4, 3)), [0, 1, 0, 1]), progress=False, **kwargs)


@PROPERTY
@given(value=NUMBERS, target=st.sampled_from([
    ("fit", "steps", count_ok), ("fit", "batch_size", count_ok), ("fit", "chunk_size", count_ok),
    ("fit", "num_particles", count_ok), ("fit", "seed", seed_ok),
    ("fit", "kl_warmup", lambda v: real_ok(v, 0.0, low_open=False)), ("fit", "temperature", lambda v: real_ok(v, 0.0)),
    ("nuts", "num_chains", count_ok), ("nuts", "num_warmup", lambda v: count_ok(v, 0)),
    ("nuts", "draws_per_chain", count_ok), ("nuts", "seed", seed_ok),
    ("nuts", "max_tree_depth", lambda v: count_ok(v) or (isinstance(v, tuple) and all(map(count_ok, v)))),
    ("nuts", "target_accept_prob", lambda v: real_ok(v, 0.0, 1.0)),
    ("nuts", "divergence_threshold", lambda v: real_ok(v, 0.0, 1.0, False, False)),
    ("predict", "num_samples", count_ok), ("predict", "chunk_size", count_ok), ("predict", "seed", seed_ok),
    ("draws", "num_samples", lambda v: v is None or count_ok(v)), ("draws", "seed", seed_ok),
    ("score", "num_samples", count_ok), ("score", "seed", seed_ok),
    ("corrupt", "severity", lambda v: count_ok(v, 0, 5)), ("corrupt", "seed", seed_ok),
    ("two_moons", "n", lambda v: count_ok(v, 10)),
]))
def test_property_numeric_arguments(moons_tiny, moons_tiny_svi, value, target):
    """Every numeric argument of the public entry points, tried with negative, zero, fractional, NaN, huge and
    wrongly typed values: the package's error naming the argument, or (a valid value) the call goes on to the
    next check or to the right result. Valid values of fit / nuts / predict / score meet inputs of the wrong
    feature shape after them, so no example compiles anything; draws, corrupt and two_moons run."""
    where, arg, valid = target
    e, post = moons_tiny, moons_tiny_svi
    image = np.linspace(0, 1, 16, dtype=np.float32).reshape(1, 4, 4, 1)
    calls = {
        "fit": fit_call(e, **{arg: value}),
        "nuts": nuts_call(e, **{arg: value}),
        "predict": lambda: post.predict(np.zeros((2, 3)), **{arg: value}),
        "draws": lambda: post.draws(**{arg: value}),
        "score": lambda: evals.score(post, (np.zeros((2, 3)), [0, 1]), verbose=False, **{arg: value}),
        "corrupt": lambda: corrupt(image, "brightness", **{"severity": 2, "seed": 0, arg: value}),
        "two_moons": lambda: zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={arg: value}),
    }
    try:
        result = calls[where]()
    except ZooError as err:
        if valid(value):  # accepted: the refusal is the next check's (the data's feature shape), or the memory
            # the value asks for is more than there is (a valid count of 2**32 draws)
            assert getattr(err, "argument", None) in ("data.x", "x") or (
                err.argument == arg and "would need" in str(err)), str(err)
        else:
            assert getattr(err, "argument", None) == arg or str(err).startswith(f"{arg}: "), str(err)
        return
    assert valid(value) and where in ("draws", "corrupt", "two_moons"), (where, arg, value)
    if where == "draws":  # the right number of draws of the right shapes
        expected = value if arg == "num_samples" and value is not None else 100
        assert {k: v.shape for k, v in result.items()} == {k: (expected,) + tuple(s) for k, s in
                                                            post.model.site_shapes((2,)).items()}
    elif where == "corrupt":
        assert result.shape == image.shape and 0 <= result.min() and result.max() <= 1
    else:
        assert len(result.train.x) + len(result.test.x) == value
