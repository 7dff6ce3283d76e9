"""Extending the package touches no file of it: a guide (and its family), a network and a data set registered
from one test-local module (extension_example.py) are used the way a user would: `zoo list` sizes the network on
the data set's declared shape, `zoo.get` builds the entry on it, `fit` trains the guide, `save` / `zoo.load`
round-trip the posterior (the guide rebuilt by name), `evals.score` scores it the same and the `zoo` CLI lists the
entry (tests/experiments/test_run_guides.py: `zoo run`'s digits table gets a row for the guide from its registered
example options)."""

import numpy as np
import optax
import pytest

import evals
import inference
import zoo
from zoo.cli import main


def test_a_guide_network_and_data_set_from_one_module_work_end_to_end(request, tmp_path, capsys):
    assert "plugin_laplace" not in inference.GUIDES and "plugin_net" not in zoo.names()
    request.getfixturevalue("extension_example")  # imported after the check above

    (row,) = [r for r in zoo.list() if r["name"] == "plugin_net"]  # sized on the declared shape, nothing loaded
    assert row["data"] == "plugin_blobs" and row["weights"] == 3 * 4 + 4 + 4 * 2 + 2
    assert main(["list"]) == 0 and "plugin_net" in capsys.readouterr().out

    entry = zoo.get("plugin_net")  # default data: the registered loader
    assert entry.config == {"name": "plugin_net", "data": "plugin_blobs", "data_kwargs": {}}
    assert (len(entry.train), len(entry.test), entry.train.feature_shape) == (90, 30, (3,))
    guide = inference.make_guide("plugin_laplace", entry.model, laplace_sites=["*/w"])
    with pytest.warns(inference.ConvergenceWarning):  # 20 steps: too few to judge
        post = inference.fit(entry.model, guide, entry.train, steps=20, batch_size=30, optimizer=optax.adam(1e-2),
                             progress=False)
    assert guide.num_params_formula() == guide.num_free_params(post.params) == 2 * 26
    assert {type(guide.family_of(site)).__name__ for site in guide.sites} == {"PluginLaplaceFamily", "NormalFamily"}
    assert type(guide.family_of("mlp/~/linear_0/w")).__name__ == "PluginLaplaceFamily"

    loaded = zoo.load(inference.save(post, tmp_path / "plugin"))  # entry, data and guide rebuilt by name
    assert loaded.guide.config == guide.config
    for name, value in post.params.items():
        np.testing.assert_array_equal(loaded.params[name], value)
    scores = evals.score(post, entry.test, num_samples=8, verbose=False).iloc[0]
    again = evals.score(loaded, entry.test, num_samples=8, verbose=False).iloc[0]
    assert 0.0 <= scores["accuracy"] <= 1.0 and 0.0 < scores["nll"] < 5.0
    assert (again["accuracy"], again["nll"]) == (scores["accuracy"], scores["nll"])


def test_the_registrations_of_a_test_are_undone_after_it():
    assert "plugin_laplace" not in inference.GUIDES and "plugin_laplace" not in inference.registry.FAMILIES
    assert "plugin_net" not in zoo.names() and "plugin_blobs" not in zoo.data.DATASETS
