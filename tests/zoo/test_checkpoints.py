"""zoo.load: the README quick start's save / load round trip, the model's origin, the CLI's use of it."""

import numpy as np
import optax
import pytest

import inference
import models
import zoo
from models.networks.mlp import mlp
from zoo.cli import main


@pytest.fixture(scope="module")
def tiny():
    """A tiny entry and a 20-step mean-field fit of it, with no config naming the entry (as in the README)."""
    entry = zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})
    post = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=20, batch_size=16,
                         optimizer=optax.adam(1e-2), progress=False)
    return entry, post


def test_the_model_knows_its_entry(tiny):
    entry, post = tiny
    assert entry.model.origin == entry.config
    assert entry.model.spec["origin"] == entry.config
    assert zoo.get(**entry.model.origin).model.site_shapes((2,)) == entry.model.site_shapes((2,))
    assert "entry" not in post.config


def test_an_entry_with_arguments_json_cannot_hold_names_no_origin():
    from zoo.registry import _json_copy

    assert _json_copy({"name": "custom", "fn": len}) is None
    config = {"name": "mlp", "hidden": [4], "data_kwargs": {"n": 100}}
    copied = _json_copy(config)
    assert copied == config and copied["data_kwargs"] is not config["data_kwargs"]


@pytest.mark.smoke
def test_readme_quick_start_round_trip(tiny, tmp_path):
    _, post = tiny
    inference.save(post, tmp_path / "mlp")
    back = zoo.load(tmp_path / "mlp")
    assert isinstance(back, inference.SVIPosterior) and set(back.params) == set(post.params)
    for k in post.params:
        np.testing.assert_array_equal(np.asarray(post.params[k]), back.params[k])
    np.testing.assert_array_equal(post.losses, back.losses)
    x = tiny[0].test.x[:5]
    np.testing.assert_array_equal(post.predict(x, 10, seed=1), back.predict(x, 10, seed=1))


def test_zoo_load_refuses_checkpoints_that_name_no_entry(tiny, tmp_path):
    entry, post = tiny
    outside = models.bnn(mlp((4,), 2), feature_shape=entry.train.feature_shape)  # same sites, but built outside the catalogue: no origin
    fitted = inference.fit(outside, inference.mean_field(outside), entry.train, steps=2, batch_size=16,
                           progress=False)
    inference.save(fitted, tmp_path / "outside")
    with pytest.raises(ValueError, match="path: .* names no zoo entry"):
        zoo.load(tmp_path / "outside")
    assert inference.load(tmp_path / "outside", model=outside).model is outside
    own = zoo.get("mlp", data=(entry.train.x, entry.train.y, entry.test.x, entry.test.y), hidden=(4,))
    inference.save(inference.SVIPosterior(model=own.model, guide=post.guide, params=post.params,
                                       feature_shape=(2,), config={}), tmp_path / "own")
    with pytest.raises(ValueError, match="user's own arrays"):
        zoo.load(tmp_path / "own")
    with pytest.raises(FileNotFoundError, match="path: no checkpoint"):
        zoo.load(tmp_path / "missing")


def test_cli_nuts_init_loads_the_svi_posterior_with_zoo_load(tmp_path, capsys):
    from zoo.cli import _init_posterior

    fit_out = tmp_path / "fit"
    assert main(["fit", "mlp", "--data", "two_moons", "--n", "100", "--hidden", "4", "--steps", "20",
                 "--batch-size", "16", "--quiet", "--out", str(fit_out)]) == 0
    entry = zoo.get("mlp", data="two_moons", data_kwargs={"n": 100}, hidden=(4,))
    init = _init_posterior(str(fit_out), entry)  # what `zoo nuts --init` starts its chains from
    saved = zoo.load(fit_out)
    assert isinstance(init, inference.SVIPosterior) and init.model.origin == entry.config
    for k in saved.params:
        np.testing.assert_array_equal(init.params[k], saved.params[k])
    capsys.readouterr()
    assert main(["nuts", "mlp", "--data", "two_moons", "--n", "100", "--hidden", "8", "--init", str(fit_out),
                 "--quiet", "--out", str(tmp_path / "other")]) == 2
    assert "--init: the posterior at" in capsys.readouterr().err


# ----- model identity (issue 12, must-hold 3) ----------------------------------------------------------------
def test_a_checkpoint_refuses_a_model_with_another_activation_or_prior_scale(tiny, tmp_path):
    """Only site shapes were compared before: a relu posterior loaded into a tanh network silently."""
    from base.errors import CheckpointError

    _, post = tiny
    inference.save(post, tmp_path / "relu")
    moons = {"data": "two_moons", "hidden": (4,), "data_kwargs": {"n": 100}}
    with pytest.raises(CheckpointError, match="model: the checkpoint was saved from another model; "
                                              "activation: saved relu, model tanh"):
        inference.load(tmp_path / "relu", model=zoo.get("mlp", activation="tanh", **moons).model)
    with pytest.raises(CheckpointError, match="prior_scale: saved 1.0, model 0.5"):
        inference.load(tmp_path / "relu", model=zoo.get("mlp", prior_scale=0.5, **moons).model)
    with pytest.raises(CheckpointError, match=r"data: saved the data set 'two_moons' with \{'n': 100\}, model the "
                                              r"data set 'two_moons' with \{'n': 200\}"):
        inference.load(tmp_path / "relu", model=zoo.get("mlp", **{**moons, "data_kwargs": {"n": 200}}).model)
    explicit = zoo.get("mlp", activation="relu", prior_scale=1.0, **moons)  # the defaults, passed: the same model
    assert explicit.model.arguments["activation"] == "relu" and explicit.model.arguments["noise"] == 0.1
    back = inference.load(tmp_path / "relu", model=explicit.model)
    for k in post.params:
        np.testing.assert_array_equal(np.asarray(post.params[k]), back.params[k])


@pytest.fixture(scope="module")
def own_arrays():
    """Arrays shaped like digits (64 features, 10 classes), so that only the identity tells them apart."""
    rng = np.random.default_rng(3)
    return (rng.normal(size=(60, 64)).astype(np.float32), np.arange(60) % 10,
            rng.normal(size=(20, 64)).astype(np.float32), np.arange(20) % 10)


@pytest.fixture
def own_checkpoint(own_arrays, tmp_path):
    own = zoo.get("mlp", data=own_arrays, hidden=(4,))
    rng = np.random.default_rng(4)
    samples = {k: rng.normal(size=(1, 2) + s).astype(np.float32) for k, s in own.model.site_shapes((64,)).items()}
    post = inference.MCMCPosterior(model=own.model, samples=samples, feature_shape=(64,),
                               config={"entry": own.config})  # as `zoo fit` / `zoo nuts` write it
    inference.save(post, tmp_path / "own")
    return tmp_path / "own", post


def test_a_checkpoint_of_user_arrays_is_never_rebuilt_on_a_shipped_data_set(own_checkpoint, own_arrays, capsys):
    from base.errors import CheckpointError, InputError

    path, post = own_checkpoint
    digits = zoo.get("mlp", data="digits", hidden=(4,))
    assert digits.model.site_shapes((64,)) == post.model.site_shapes((64,))  # shapes cannot tell them apart
    with pytest.raises(CheckpointError, match=r"data: saved the user's own arrays \(x \(60, 64\) float32, y \(60,\) "
                                              r"int32, SHA-256 [0-9a-f]{12}\.\.\.\), model the data set 'digits'"):
        inference.load(path, model=digits.model)
    with pytest.raises(InputError, match=r"data: expected the training arrays .* fitted on the user's own arrays "
                                         r"\(x \(60, 64\).* pass them: zoo\.load\(path, data=\(x_train, y_train"):
        zoo.load(path)
    capsys.readouterr()
    assert main(["score", str(path)]) == 2
    assert "zoo score: error: --data: expected the .npz / .csv file the posterior was fitted on" in \
        capsys.readouterr().err


def test_zoo_load_takes_the_user_arrays_and_checks_their_fingerprint(own_checkpoint, own_arrays, tiny, tmp_path):
    from inference.model_identity import data_fingerprint
    from base.errors import CheckpointError, InputError
    from zoo.checkpoints import load_entry

    path, post = own_checkpoint
    entry, back = load_entry(path, data=own_arrays)
    np.testing.assert_array_equal(entry.test.x, own_arrays[2])
    for k in post.samples:
        np.testing.assert_array_equal(post.samples[k], back.samples[k])
    assert set(zoo.load(path, data=own_arrays[:2]).samples) == set(post.samples)  # (x_train, y_train) also works
    x, y, x_te, y_te = own_arrays
    changed = x.copy()
    changed[0, 0] += 1.0
    saved = post.model.data_identity["fingerprint"]["sha256"][:12]
    now = data_fingerprint(changed, y.astype(np.int32))["sha256"][:12]  # zoo.get's Dataset holds int32 labels
    assert now != saved
    with pytest.raises(CheckpointError, match=rf"data: saved the user's own arrays \(.*SHA-256 {saved}\.\.\.\), model "
                                              rf"the user's own arrays \(x \(60, 64\) float32, .*SHA-256 {now}\.\.\.\)"):
        zoo.load(path, data=(changed, y, x_te, y_te))
    with pytest.raises(InputError, match=r"data: expected a tuple \(x_train, y_train, x_test, y_test\)"):
        zoo.load(path, data=x)
    inference.save(tiny[1], tmp_path / "moons")
    with pytest.raises(InputError, match="data: expected None: the checkpoint is of the data set 'two_moons'"):
        zoo.load(tmp_path / "moons", data=own_arrays)


def test_the_data_fingerprint_sees_values_dtypes_and_shapes(own_arrays):
    from inference.model_identity import data_fingerprint

    x, y = own_arrays[:2]
    base = data_fingerprint(x, y)
    assert base == data_fingerprint(x.copy(), list(y)) and len(base["sha256"]) == 64
    assert base["x"] == {"shape": [60, 64], "dtype": "float32"}
    for other in ((x.astype(np.float64), y), (x.reshape(60, 8, 8), y), (x, y[::-1]), (x[:, ::-1], y)):
        assert data_fingerprint(*other)["sha256"] != base["sha256"]
