"""Bad inputs to the SVI core (issue 45): `inference.svi.init` / `step` refuse them by name, at trace time (shapes,
dtypes, the state's structure) or on the host (Python scalars, concrete labels), and a guide never keeps a tracer.

One compiled step of the smallest entry (`moons_tiny`, tests/conftest.py) serves every case; a refused input
raises before anything is compiled.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import optax
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inference
import zoo
from base.errors import InputError
from inference import svi


@pytest.fixture(scope="module")
def tiny(moons_tiny):
    return moons_tiny


def test_jitting_init_three_times_leaves_no_tracer_in_the_guide_and_fit_gives_the_same_numbers(tiny, moons_tiny_svi):
    """docs/svi.md's pattern, ``jax.jit(algorithm.init)``, used to cache a tracer in ``guide.sites`` (made by the
    network's initialiser inside the trace): the second jit of init and any later fit raised UnexpectedTracerError."""
    guide = inference.mean_field(tiny.model)
    x, y = tiny.train.x[:16], tiny.train.y[:16]
    algorithm = svi.build(tiny.model, guide, optax.adam(1e-2), n_data=len(tiny.train.x))
    states = [jax.jit(algorithm.init)(jax.random.PRNGKey(0), (x, y)) for _ in range(3)]
    leaves = jax.tree.leaves([tuple(site) for site in guide.sites.values()])
    assert leaves and not any(isinstance(leaf, jax.core.Tracer) for leaf in leaves)
    for state in states[1:]:
        jax.tree.map(np.testing.assert_array_equal, state.params, states[0].params)
    # the same fit as the session's 20-step fixture, with the guide jitted above: the very same numbers
    post = inference.fit(tiny.model, guide, tiny.train, steps=20, batch_size=16, optimizer=optax.adam(1e-2),
                         progress=False)
    assert set(post.params) == set(moons_tiny_svi.params)
    for name, value in moons_tiny_svi.params.items():
        np.testing.assert_array_equal(post.params[name], value)
    np.testing.assert_array_equal(post.losses, moons_tiny_svi.losses)


# ----- svi.init / svi.step: one test per bad input of the issue --------------------------------------------------
B = 16


@pytest.fixture(scope="module")
def core(tiny):
    """The moons_tiny model's mean-field pair, a state from the jitted init, the jitted step and a minibatch."""
    guide = inference.mean_field(tiny.model)
    x, y = np.asarray(tiny.train.x[:B]), np.asarray(tiny.train.y[:B])
    algorithm = svi.build(tiny.model, guide, optax.adam(1e-2), n_data=len(tiny.train.x))
    state = jax.jit(algorithm.init)(jax.random.PRNGKey(0), (x, y))

    @functools.partial(jax.jit, static_argnames="num_particles")
    def run(state, batch, key, n_data, beta, temperature, num_particles=1):
        """The one compiled step (per num_particles) of the tests that run one: n_data, beta, temperature traced."""
        return svi.step(state, batch, key, model=tiny.model, guide=guide, optimizer=optax.adam(1e-2), n_data=n_data,
                        beta=beta, temperature=temperature, num_particles=num_particles)

    return dict(model=tiny.model, guide=guide, algorithm=algorithm, state=state, step=jax.jit(algorithm.step),
                run=run, x=x, y=y, key=jax.random.PRNGKey(1))


def _refused(call, argument: str) -> InputError:
    with pytest.raises(InputError) as caught:
        call()
    assert caught.value.argument == argument, str(caught.value)
    assert str(caught.value).startswith(argument), str(caught.value)
    return caught.value


def _build(c, **kwargs):
    return svi.build(c["model"], c["guide"], kwargs.pop("optimizer", optax.adam(1e-2)),
                     n_data=kwargs.pop("n_data", 80), **kwargs)


@pytest.mark.parametrize("n_data", [8, 80.5, "80", 0, -80, True])
def test_n_data_that_is_no_integer_at_least_the_batch_is_refused(core, n_data):
    err = _refused(lambda: _build(core, n_data=n_data).step(core["state"], (core["x"], core["y"]), core["key"]),
                   "n_data")
    assert repr(n_data) in str(err)
    if n_data == 8:
        assert "batch size 16" in str(err)


def test_a_batch_with_an_extra_feature_column_is_refused_for_a_model_built_for_two(core):
    wide = np.c_[core["x"], core["x"][:, :1]]
    err = _refused(lambda: core["step"](core["state"], (wide, core["y"]), core["key"]), "batch[0]")
    assert "(3,)" in str(err) and "(2,)" in str(err)
    _refused(lambda: core["algorithm"].init(core["key"], (wide, core["y"])), "batch[0]")


def test_a_batch_of_another_width_meets_a_guide_set_up_for_two_features(core):
    """A guide is built for its model's 2 features; should the model no longer say its width (feature_shape
    None: its data are not checked), the guide itself refuses x of 3 (it would otherwise meet a 3-input network
    with its 2-input parameters)."""
    model = zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100}).model
    guide = inference.mean_field(model)
    model.feature_shape = None
    wide = np.c_[core["x"], core["x"][:, :1]]
    err = _refused(lambda: svi.init(core["key"], (wide, core["y"]), model=model, guide=guide,
                                    optimizer=optax.adam(1e-2), n_data=80), "x")
    assert "(3,)" in str(err) and "(2,)" in str(err)


@pytest.mark.parametrize("labels", ["column", "float", "short", "out_of_range"])
def test_labels_of_another_shape_dtype_length_or_range_are_refused(core, labels):
    """y (B, 1) broadcast to B x B (loss 909 against 233 before), float labels, 8 labels for 16 rows, label 5 of a
    2-class network (loss inf before)."""
    x, y = core["x"], core["y"]
    bad = {"column": y[:, None], "float": y.astype(np.float32), "short": y[:8], "out_of_range": y + 5}[labels]
    step = core["algorithm"].step if labels == "out_of_range" else core["step"]  # concrete labels: range checked
    err = _refused(lambda: step(core["state"], (x, bad), core["key"]), "batch[1]")
    assert {"column": "(16, 1)", "float": "float32", "short": "(8,)", "out_of_range": "[0, 2)"}[labels] in str(err)


def test_out_of_range_labels_inside_jit_give_a_step_that_is_not_applied(core):
    """Inside jit the labels' values are unknown (documented): the loss is infinite, the update not applied."""
    state, info = core["run"](core["state"], (core["x"], core["y"] + 5), core["key"], 80, 1.0, 1.0)
    assert not bool(info.finite) and bool(state.stopped)
    jax.tree.map(np.testing.assert_array_equal, state.params, core["state"].params)


def test_an_empty_batch_is_refused(core):
    _refused(lambda: core["step"](core["state"], (core["x"][:0], core["y"][:0]), core["key"]), "batch")


@pytest.mark.parametrize("argument, value", [("temperature", -1.0), ("temperature", 0), ("beta", -5.0),
                                             ("beta", float("nan"))])
def test_a_temperature_at_most_zero_or_a_negative_kl_weight_is_refused(core, argument, value):
    _refused(lambda: core["algorithm"].step(core["state"], (core["x"], core["y"]), core["key"], **{argument: value}),
             argument)


def test_a_traced_negative_kl_weight_stops_the_step_instead_of_training(core):
    state, info = core["run"](core["state"], (core["x"], core["y"]), core["key"], 80, -5.0, 1.0)
    assert not bool(info.finite) and bool(state.stopped) and np.isfinite(float(info.loss))
    jax.tree.map(np.testing.assert_array_equal, state.params, core["state"].params)
    state, info = core["run"](core["state"], (core["x"], core["y"]), core["key"], 80, 0.5, 1.0)
    assert bool(info.finite) and not bool(state.stopped)


@pytest.mark.parametrize("other", ["k_tied", "point_estimate"])
def test_a_mean_field_state_stepped_by_another_guide_is_refused(core, other):
    guide = inference.k_tied.k_tied(core["model"], k=1) if other == "k_tied" else inference.point_estimate.point_estimate(core["model"])
    step = svi.build(core["model"], guide, optax.adam(1e-2), n_data=80).step
    err = _refused(lambda: jax.jit(step)(core["state"], (core["x"], core["y"]), core["key"]), "state")
    assert "w_auto_scale" in str(err)


@pytest.mark.parametrize("key", [0, np.zeros(2, np.float32), np.zeros((3, 2), np.uint32)])
def test_a_key_that_is_not_a_prng_key_is_refused(core, key):
    _refused(lambda: core["step"](core["state"], (core["x"], core["y"]), key), "key")
    _refused(lambda: core["algorithm"].init(key, (core["x"], core["y"])), "key")


@pytest.mark.parametrize("num_particles", [0, -1, 2.5])
def test_num_particles_that_is_no_positive_integer_is_refused(core, num_particles):
    _refused(lambda: _build(core, num_particles=num_particles), "num_particles")
    _refused(lambda: svi.step(core["state"], (core["x"], core["y"]), core["key"], model=core["model"],
                              guide=core["guide"], optimizer=optax.adam(1e-2), n_data=80,
                              num_particles=num_particles), "num_particles")


def test_an_optimiser_given_as_a_string_is_refused(core):
    _refused(lambda: _build(core, optimizer="adam"), "optimizer")
    _refused(lambda: svi.init(core["key"], (core["x"], core["y"]), model=core["model"], guide=core["guide"],
                              optimizer="adam", n_data=80), "optimizer")


def test_nan_init_params_are_refused(core):
    start = {k: np.asarray(v) for k, v in core["state"].params.items()}
    name = sorted(start)[0]
    start[name] = np.full_like(start[name], np.nan)
    err = _refused(lambda: core["algorithm"].init(core["key"], (core["x"], core["y"]), init_params=start),
                   f"init_params[{name!r}]")
    assert "NaN" in str(err)


# ----- a property of svi.step's scalars: valid ones give the loss of the module docstring, invalid ones are refused
SCALARS = settings(max_examples=40, deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
BAD_SCALARS = {"n_data": st.sampled_from([0, -1, 15, 80.5, "80", None, 2.0]),
               "temperature": st.sampled_from([0, -1.0, float("nan"), float("inf"), "1", None]),
               "beta": st.sampled_from([-1e-3, -5, float("nan"), float("-inf"), "0.5", None]),
               "num_particles": st.sampled_from([0, -1, 2.5, "2", None])}


@pytest.fixture(scope="module")
def loss_terms(core):
    """{num_particles: (log-likelihood of the minibatch, KL)} of the first step at the fixture's state and key,
    read from two runs of the compiled step: loss = -(loglik * N / B / T - beta * KL)."""
    terms = {}
    for particles in (1, 2):
        batch = (core["x"], core["y"])
        at0 = float(core["run"](core["state"], batch, core["key"], B, 0.0, 1.0, num_particles=particles)[1].loss)
        at1 = float(core["run"](core["state"], batch, core["key"], B, 1.0, 1.0, num_particles=particles)[1].loss)
        terms[particles] = (-at0, at1 - at0)
    return terms


@SCALARS
@given(n_data=st.integers(B, 10**6), temperature=st.floats(1e-2, 1e2), beta=st.floats(0.0, 1e2),
       num_particles=st.sampled_from([1, 2]), bad=st.sampled_from([None, *BAD_SCALARS]), data=st.data())
def test_step_scalars_valid_give_the_loss_and_invalid_are_refused_by_name(core, loss_terms, n_data, temperature, beta,
                                                                         num_particles, bad, data):
    values = dict(n_data=n_data, temperature=temperature, beta=beta, num_particles=num_particles)
    batch = (core["x"], core["y"])
    if bad is None:
        _, info = core["run"](core["state"], batch, core["key"], n_data, beta, temperature,
                              num_particles=num_particles)
        loglik, kl = loss_terms[num_particles]
        expected = -(loglik * n_data / B / temperature - beta * kl)
        np.testing.assert_allclose(float(info.loss), expected, rtol=2e-4, atol=1e-3)
        assert bool(info.finite)
        return
    values[bad] = data.draw(BAD_SCALARS[bad])
    with pytest.raises(InputError) as caught:  # raised on the host, before anything is traced or compiled
        svi.step(core["state"], batch, core["key"], model=core["model"], guide=core["guide"],
                 optimizer=optax.adam(1e-2), **values)
    assert caught.value.argument == bad, str(caught.value)


# ----- the collapse check judges held-out rows (fit's validation_data) ------------------------------------------
@pytest.fixture(scope="module")
def shuffled_and_healthy():
    """{case: Posterior} of two MAP fits of one digits MLP (64 hidden units, 600 steps) on 1,048 training rows with
    300 held-out rows as validation_data: labels shuffled (one permutation of the whole training set), or not."""
    import warnings

    entry = zoo.get("mlp", data="digits", hidden=(64,))
    x, y = np.asarray(entry.train.x), np.asarray(entry.train.y)
    cut = len(x) - 300
    out = {}
    for case, labels in (("shuffled", np.random.default_rng(0).permutation(y)), ("healthy", y)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out[case] = inference.fit(entry.model, inference.point_estimate.point_estimate(entry.model), (x[:cut], labels[:cut]),
                                      steps=600, batch_size=128, optimizer=optax.adam(1e-2), progress=False,
                                      validation_data=(x[cut:], labels[cut:]))
        out[case + "_warned"] = any(isinstance(w.message, inference.collapse.PosteriorCollapseWarning) for w in seen)
    return out


def test_a_fit_to_shuffled_labels_is_flagged_on_held_out_rows_and_a_healthy_one_is_not(shuffled_and_healthy):
    shuffled, healthy = (shuffled_and_healthy[k].info.collapse for k in ("shuffled", "healthy"))
    # shuffled labels: the training rows are predicted well (the old rule, on training rows alone, passed it) ...
    assert shuffled["gain"] > 1.0 and shuffled["accuracy_posterior"] > 0.5
    # ... the held-out rows at chance (10 classes), below the input-free predictor: collapsed, and said so
    held = shuffled["held_out"]
    assert held["examples"] == 256 and held["gain"] < 0 and held["accuracy_posterior"] < 0.2 and held["collapsed"]
    assert shuffled["collapsed"] and shuffled_and_healthy["shuffled_warned"]
    assert "256 held-out examples" in shuffled["reason"]
    summary = shuffled_and_healthy["shuffled"].info.summary()
    assert "POSTERIOR COLLAPSED" in summary and f"held-out accuracy {held['accuracy_posterior']:.3f}" in summary
    # the true labels: both judgements healthy, held-out accuracy above 0.9
    assert not healthy["collapsed"] and not shuffled_and_healthy["healthy_warned"]
    assert healthy["held_out"]["gain"] > 1.5 and healthy["held_out"]["accuracy_posterior"] > 0.9
    # the held-out input-free predictor is the 300 rows' subsample's own class frequencies (an independent count)
    y_val = np.asarray(zoo.get("mlp", data="digits", hidden=(64,)).train.y[-300:])
    picked = y_val[np.sort(np.random.default_rng(0).choice(300, size=256, replace=False))]
    counts = np.bincount(picked, minlength=10)
    assert healthy["held_out"]["lpd_input_free"] == pytest.approx(np.mean(np.log(counts[picked] / 256)))


def test_validation_data_of_another_feature_shape_is_refused_by_name(tiny):
    with pytest.raises(InputError) as caught:
        inference.fit(tiny.model, inference.mean_field(tiny.model), tiny.train, steps=2, batch_size=16,
                      progress=False, validation_data=(np.zeros((5, 3), np.float32), np.zeros(5, np.int32)))
    assert caught.value.argument.startswith("validation_data"), str(caught.value)
