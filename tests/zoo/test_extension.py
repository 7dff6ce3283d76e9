"""Extending the package: a guide (and its family), a network and a data set.

From outside, it touches no file of the package: registered from one test-local module (extension_example.py,
which loads the modules under extension/) they are used the way a user would: `zoo list` sizes the network on
the data set's declared shape, `zoo.get` builds the entry on it, `fit` trains the guide, `save` / `zoo.load`
round-trip the posterior (the guide rebuilt by name), `evals.score` scores it the same and the `zoo` CLI lists the
entry (tests/experiments/test_run_guides.py: `zoo run`'s digits table gets a row for the guide from its registered
example options)."""

import os
import subprocess
import sys
from pathlib import Path

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


REPO = Path(__file__).resolve().parents[2]
EXTENSION = Path(__file__).parent / "extension"
ENTRY = """

from models.networks.plugin_network import plugin_mlp  # noqa: E402


@register("plugin_net", default_data="plugin_blobs", description="one hidden layer of `width` tanh units")
def build_plugin_net(train, width=4, prior_scale=1.0):
    return bnn(plugin_mlp(width, train.num_classes), priors.normal(prior_scale), likelihoods.categorical(),
               name="plugin_net")
"""
# {what is added: {file: ("new", source) | ("append", text)}}: each addition inside the package, in at most 2 files
ADDITIONS = {
    "guide": {"inference/plugin_guide.py": ("new", EXTENSION / "plugin_guide.py"),
              "inference/__init__.py": ("append", "import inference.plugin_guide  # noqa: E402,F401\n")},
    "network": {"models/networks/plugin_network.py": ("new", EXTENSION / "plugin_network.py"),
                "zoo/entries.py": ("append", ENTRY)},
    "data set": {"zoo/data/plugin_data.py": ("new", EXTENSION / "plugin_data.py"),
                 "zoo/registry.py": ("append", "import zoo.data.plugin_data  # noqa: E402,F401\n")},
}
CHECK = """
import inference, zoo
from zoo.registry import guides
entry = zoo.get("plugin_net")  # its default data set, registered inside the package
assert (len(entry.train), len(entry.test), entry.train.feature_shape, entry.train.num_classes) == (90, 30, (3,), 2)
assert entry.num_weights() == 3 * 4 + 4 + 4 * 2 + 2
assert inference.registry.FAMILIES["plugin_laplace"].__name__ == "PluginLaplaceFamily"
assert "plugin_laplace" in guides(entry.model, (3,))  # the entry's guide list: derived, no list edited
guide = inference.make_guide("plugin_laplace", entry.model, laplace_sites=["*/w"])
assert (guide.config["name"], guide.config["laplace_sites"]) == ("plugin_laplace", ["*/w"]), guide.config
print("ok")
"""


def _package_with(root: Path, changes: dict) -> None:
    """At `root` (a new folder), the repository with `changes` ({relative path: text}) applied, without copying it:
    every folder on the way to a changed file is a real folder of links to the repository's entries, the rest are
    links."""
    for path, text in changes.items():
        parts = Path(path).parts
        for depth in range(len(parts)):
            folder = root.joinpath(*parts[:depth])
            if folder.is_symlink():
                folder.unlink()
            if not folder.is_dir():
                folder.mkdir()
                for item in REPO.joinpath(*parts[:depth]).iterdir():
                    (folder / item.name).symlink_to(item)
        target = root / path
        if target.is_symlink():
            target.unlink()
        target.write_text(text)


def test_adding_a_guide_a_network_or_a_data_set_to_the_package_touches_at_most_2_files_each(tmp_path):
    """Inside the package, each addition is a new module and one edit of an existing file (docs/add-a-guide.md,
    docs/add-a-network.md, docs/your-own-data.md): the same modules as above, placed in the package, work by
    name in a fresh process (the catalogue lists the entry with the new guide, derived from its registration)."""
    changes = {}
    for what, files in ADDITIONS.items():
        assert len(files) <= 2, what
        for path, (how, content) in files.items():
            assert (how == "new") != (REPO / path).exists(), path  # a new module, or an edit of one file there is
            changes[path] = content.read_text() if how == "new" else (REPO / path).read_text() + content
    root = tmp_path / "repository"
    _package_with(root, changes)
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}  # the repository untouched
    done = subprocess.run([sys.executable, "-c", CHECK], env=env, cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ["ok"], done.stderr[-3000:]
    assert not any((REPO / path).exists() for files in ADDITIONS.values() for path, (how, _) in files.items()
                   if how == "new")
