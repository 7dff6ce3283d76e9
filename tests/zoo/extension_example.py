"""A user's extension, outside the package: a guide (with its family), a network and a data set, registered with
the package's own mechanism and nothing else (tests/zoo/test_extension.py imports this module and uses them the
way a user would). The guide, the network and the data set are the modules under extension/ (the same files
test_extension.py puts inside the package); this module loads them and registers the catalogue entry. Nothing of
the package is edited."""

import importlib.util
from pathlib import Path

import models
import zoo


def _load(name: str):
    """The module extension/<name>.py, run (it registers what it defines)."""
    spec = importlib.util.spec_from_file_location(f"extension_{name}", Path(__file__).parent / "extension" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plugin_guide, plugin_network, plugin_data = _load("plugin_guide"), _load("plugin_network"), _load("plugin_data")


@zoo.register("plugin_net", default_data="plugin_blobs", description="one hidden layer of `width` tanh units")
def build_plugin_net(train, width=4, prior_scale=1.0):
    return models.bnn(plugin_network.plugin_mlp(width, train.num_classes), models.priors.normal(prior_scale),
                      models.likelihoods.categorical(), name="plugin_net")
