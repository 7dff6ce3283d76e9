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


def test_readme_quick_start_round_trip(tiny, tmp_path):
    _, post = tiny
    inference.save(post, tmp_path / "mlp")
    back = zoo.load(tmp_path / "mlp")
    assert back.kind == "svi" and set(back.params) == set(post.params)
    for k in post.params:
        np.testing.assert_array_equal(np.asarray(post.params[k]), back.params[k])
    np.testing.assert_array_equal(post.losses, back.losses)
    x = tiny[0].test.x[:5]
    np.testing.assert_array_equal(post.predict(x, 10, seed=1), back.predict(x, 10, seed=1))


def test_zoo_load_refuses_checkpoints_that_name_no_entry(tiny, tmp_path):
    entry, post = tiny
    outside = models.bnn(mlp((4,), 2))  # same sites, but built outside the catalogue: no origin
    fitted = inference.fit(outside, inference.mean_field(outside), entry.train, steps=2, batch_size=16,
                           progress=False)
    inference.save(fitted, tmp_path / "outside")
    with pytest.raises(ValueError, match="path: .* names no zoo entry"):
        zoo.load(tmp_path / "outside")
    assert inference.load(tmp_path / "outside", model=outside).model is outside
    own = zoo.get("mlp", data=(entry.train.x, entry.train.y, entry.test.x, entry.test.y), hidden=(4,))
    inference.save(inference.Posterior(model=own.model, kind="svi", guide=post.guide, params=post.params,
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
    assert init.kind == "svi" and init.model.origin == entry.config
    for k in saved.params:
        np.testing.assert_array_equal(init.params[k], saved.params[k])
    capsys.readouterr()
    assert main(["nuts", "mlp", "--data", "two_moons", "--n", "100", "--hidden", "8", "--init", str(fit_out),
                 "--quiet", "--out", str(tmp_path / "other")]) == 2
    assert "--init: the posterior at" in capsys.readouterr().err
