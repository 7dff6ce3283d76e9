"""inference.svi: the pure init / step the user jits, and fit as a runner over them (its callbacks)."""

import jax
import numpy as np
import optax
import pytest
from jax import monitoring

import inference
import zoo
from inference import svi
from inference.fit import minibatch_indices
from base.errors import InputError
from base.prng import flat_key

COMPILES = []


def _count(event, seconds, **kwargs):
    if "backend_compile" in event or "cache_retrieval" in event:
        COMPILES.append(kwargs.get("fun_name", event))


monitoring.register_event_duration_secs_listener(_count)
B = 16


@pytest.fixture(scope="module")
def entry():
    return zoo.get("mlp", data="two_moons", hidden=(6,), data_kwargs={"n": 96, "noise": 0.1})


def test_the_module_docstring_example_runs_and_trains(entry):
    namespace: dict = {}
    example = svi.__doc__.split("Example (runs as written")[1].split("::\n", 1)[1].split("\n\nBoth functions")[0]
    exec(compile("\n".join(line[4:] for line in example.splitlines()), "svi docstring", "exec"), namespace)
    state, info, params = namespace["state"], namespace["info"], namespace["params"]
    assert isinstance(state, svi.SVIState) and isinstance(info, svi.StepInfo)
    assert not bool(state.stopped) and bool(info.finite) and np.isfinite(float(info.loss))
    scales = [v for k, v in params.items() if k.endswith("_scale")]
    assert scales and all(np.all(np.asarray(s) > 0) for s in scales)  # constrained: softplus-positive


def test_fit_is_a_runner_over_svi_step(entry):
    """The losses of `fit` are those of svi.step called in a Python loop with fit's minibatches and keys."""
    N = len(entry.train.x)
    steps, seed, optimizer = 12, 3, optax.adam(1e-2)
    post = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=steps, batch_size=B,
                         optimizer=optimizer, seed=seed, kl_warmup=5, temperature=0.7, progress=False, chunk_size=8)
    guide = inference.mean_field(entry.model)
    x, y = np.asarray(entry.train.x), np.asarray(entry.train.y)
    algorithm = svi.build(entry.model, guide, optimizer, n_data=N)
    init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    state = jax.jit(algorithm.init)(init_key, (x[:B], y[:B]))
    step = jax.jit(algorithm.step)
    losses = []
    for t, rows in enumerate(minibatch_indices(N, B, steps, seed)):
        beta = np.float32(min(1.0, (t + 1) / 5))
        state, info = step(state, (x[rows], y[rows]), jax.random.fold_in(flat_key(run_key), t), beta=beta,
                           temperature=np.float32(0.7))
        losses.append(float(info.loss))
    np.testing.assert_allclose(losses, post.losses, rtol=2e-5)
    constraints = svi.param_constraints(guide, (x[:B], y[:B]), N)
    for k, v in svi.constrain(constraints, state.params).items():
        np.testing.assert_allclose(v, post.params[k], rtol=1e-4, atol=1e-6)


def test_run_is_the_loop_of_step_in_one_scan(entry):
    """`svi.run`: num_steps steps of the bound step in one lax.scan, step t's key fold_in(flat_key(k), t) (k the
    first half of the key) and, with batch_size, rows drawn from the second half; the loop of svi.step with those
    keys and rows gives the same losses and parameters."""
    N = len(entry.train.x)
    x, y = np.asarray(entry.train.x), np.asarray(entry.train.y)
    algorithm = svi.build(entry.model, inference.mean_field(entry.model), inference.optimizers.adam(learning_rate=1e-2),
                          n_data=N)
    state = jax.jit(algorithm.init)(jax.random.PRNGKey(0), (x[:B], y[:B]))
    key, steps = jax.random.PRNGKey(4), 6
    ran, infos = jax.jit(algorithm.run, static_argnums=3, static_argnames="batch_size")(
        state, (x, y), key, steps, batch_size=B, beta=np.linspace(0.2, 1.0, steps, dtype=np.float32))
    step_key, rows_key = jax.random.split(key)
    step, looped, losses = jax.jit(algorithm.step), state, []
    for t in range(steps):
        rows = np.asarray(jax.random.permutation(jax.random.fold_in(rows_key, t), N))[:B]
        looped, info = step(looped, (x[rows], y[rows]), jax.random.fold_in(flat_key(step_key), t),
                            beta=np.float32(np.linspace(0.2, 1.0, steps)[t]))
        losses.append(float(info.loss))
    assert infos.loss.shape == (steps,) and bool(np.all(infos.finite))
    np.testing.assert_allclose(infos.loss, losses, rtol=1e-5)
    for k in looped.params:
        np.testing.assert_allclose(ran.params[k], looped.params[k], rtol=1e-5, atol=1e-6)


def test_a_kl_weight_or_temperature_is_data_and_a_bad_step_stops(entry):
    N = len(entry.train.x)
    algorithm = svi.build(entry.model, inference.mean_field(entry.model), optax.sgd(1e-3), n_data=N)
    x, y = entry.train.x[:B], entry.train.y[:B]
    step = jax.jit(algorithm.step)
    state = jax.jit(algorithm.init)(jax.random.PRNGKey(0), (x, y))
    key = jax.random.PRNGKey(1)
    full, info_full = step(state, (x, y), key, beta=1.0, temperature=1.0)
    before = len(COMPILES)
    _, info_half = step(state, (x, y), key, beta=0.5, temperature=2.0)
    assert COMPILES[before:] == []  # another beta and temperature: the same program
    assert float(info_half.loss) < float(info_full.loss)  # -(log_lik / 2 - KL / 2) < -(log_lik - KL) here
    bad = np.array(x)
    bad[0, 0] = np.nan
    stopped, info = step(full, (bad, y), key)
    assert not bool(info.finite) and bool(stopped.stopped) and np.isnan(float(info.loss))
    for k in full.params:  # the non-finite step's update was not applied
        np.testing.assert_array_equal(stopped.params[k], full.params[k])


def test_estimators_and_init_params_are_checked(entry):
    N = len(entry.train.x)
    with pytest.raises(InputError, match=r"estimator: expected one of \('standard', 'per_example', 'local'\)"):
        svi.build(entry.model, inference.mean_field(entry.model), optax.sgd(1e-3), n_data=N, estimator=True)
    guide = inference.mean_field(entry.model)
    x, y = entry.train.x[:B], entry.train.y[:B]
    own = svi.init(jax.random.PRNGKey(0), (x, y), model=entry.model, guide=guide, optimizer=optax.sgd(1e-3), n_data=N)
    shapes = svi.param_shapes(guide, (x, y), N)
    assert {k: v.shape for k, v in shapes.items()} == {k: v.shape for k, v in own.params.items()}
    start = {k: np.full(v.shape, 0.5, np.float32) for k, v in own.params.items()}
    started = svi.init(jax.random.PRNGKey(0), (x, y), model=entry.model, guide=guide, optimizer=optax.sgd(1e-3),
                       n_data=N, init_params=start)
    assert all(np.all(np.asarray(v) == 0.5) for v in started.params.values())
    name = sorted(start)[0]
    with pytest.raises(InputError, match="missing guide parameters"):
        svi.init(jax.random.PRNGKey(0), (x, y), model=entry.model, guide=guide, optimizer=optax.sgd(1e-3), n_data=N,
                 init_params={k: v for k, v in start.items() if k != name})


class _Recorder:
    """A user callback recording what fit shows it."""

    def __init__(self):
        self.calls = []

    def on_start(self, run):
        self.calls.append(("start", run.done))

    def on_chunk(self, run):
        self.calls.append(("chunk", run.done, len(run.losses())))

    def on_close(self, run, error):
        self.calls.append(("close", error))

    def on_end(self, run, posterior):
        self.calls.append(("end", posterior.info.converged))
        posterior.config["seen"] = True
        return posterior


def test_user_callbacks_follow_the_protocol(entry):
    recorder = _Recorder()
    post = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=20, batch_size=B,
                         optimizer=optax.adam(1e-2), progress=False, chunk_size=8, callbacks=[recorder])
    # after the built-ins: on_end sees the convergence judgement (False: fewer than 100 steps are not judged)
    assert recorder.calls == [("start", 0), ("chunk", 8, 8), ("chunk", 16, 16), ("chunk", 20, 20), ("close", None),
                              ("end", False)]
    assert post.config["seen"] is True
    with pytest.raises(InputError, match=r"callbacks\[0\]: expected an object with a method among"):
        inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=2, progress=False,
                      callbacks=[print])
