"""`base.registry.Registry`, the one registration mechanism of guides, families, priors, estimators, corruptions,
entries and data sets; the guides an entry suits, derived from the guides' registrations; the size of
`inference.__all__`."""
import importlib

import pytest

import base.registry
import evals.corruptions
import inference
import zoo
from base.errors import InputError
from base.registry import Registry
from inference.registry import guides_for
from models import priors

import numpy as np
import numpyro.distributions as dist


def test_register_as_call_or_decorator_with_facts_views_and_snapshots():
    things = Registry("thing", "thing")
    assert things.register("a", 1, colour="red") == 1

    @things.register("b")
    def b():
        return 2

    things["c"] = 3  # item assignment registers, as when the registries were dicts
    assert list(things) == ["a", "b", "c"] and things["b"] is b and len(things) == 3
    assert things.info("a") == {"colour": "red"} and things.info("b") == {}
    odd = things.view(lambda item: item * 10, where=lambda item: isinstance(item, int) and item % 2 == 1)
    assert dict(odd) == {"a": 10, "c": 30}
    saved = things.snapshot()
    things.register("d", 5)
    assert dict(odd) == {"a": 10, "c": 30, "d": 50}  # a view follows the registry
    things.restore(saved)
    assert list(things) == ["a", "b", "c"] and "d" not in odd
    with pytest.raises(InputError, match=r"thing: expected one of \['a', 'b', 'c'\], got 'zz'; unknown thing"):
        things["zz"]
    with pytest.raises(InputError, match="name: expected a non-empty string naming the thing"):
        things.register("", 1)
    with pytest.raises(TypeError, match="read-only"):
        odd["e"] = 1


def test_every_built_in_is_registered_by_the_same_mechanism():
    """Every registry lives in `base.registry` and is the one its package reads: guides, families, priors,
    estimators, corruptions, data sets, entries; the data sets' metadata sit in one record each, and the old
    tables are views of it."""
    from zoo.data.registry import DATASETS
    from zoo.registry import DATA_SHAPES, ENTRIES, NAMED_DATA, TFDS_DATA

    names = ("GUIDES", "FAMILIES", "PRIORS", "ESTIMATORS", "CORRUPTIONS", "DATASETS", "ENTRIES")
    assert all(isinstance(getattr(base.registry, n), Registry) for n in names)
    read = (inference.GUIDES, inference.registry.FAMILIES, DATASETS, ENTRIES, evals.corruptions.REGISTRY)
    assert all(a is b for a, b in zip(read, (base.registry.GUIDES, base.registry.FAMILIES, base.registry.DATASETS,
                                             base.registry.ENTRIES, base.registry.CORRUPTIONS)))
    assert list(base.registry.PRIORS) == ["normal", "fan_in_normal", "he_normal", "cauchy", "per_site", "log_uniform"]
    w = np.array([0.5, -1.0, 3.0], np.float32)
    np.testing.assert_allclose(priors.from_spec({"kind": "cauchy", "scale": 2.0})("w", (3,)).log_prob(w),
                               dist.Cauchy(0.0, 2.0).log_prob(w), rtol=1e-6)
    assert tuple(base.registry.CORRUPTIONS)[:19] == evals.corruptions.CORRUPTIONS and len(evals.corruptions.CORRUPTIONS) == 19
    assert set(inference.GUIDES) == {"mean_field", "point_estimate", "k_tied", "zero_mean", "variance_layers",
                                     "rank1_mixture", "full_covariance", "low_rank", "block_diagonal", "by_site",
                                     "binary_dropout"}
    assert inference.GUIDES["binary_dropout"] is inference.dropout.binary_dropout
    assert inference.registry.FAMILIES["binary_dropout"] is inference.dropout.BinaryDropoutFamily
    digits = DATASETS["digits"]
    assert (digits.feature_shape, digits.num_classes, digits.image_shape) == ((64,), 10, (8, 8, 1))
    assert DATA_SHAPES["cifar100"] == ((32, 32, 3), 100) and "uci" not in DATA_SHAPES  # uci: shape from its folder
    assert list(TFDS_DATA) == ["mnist", "fashion_mnist", "cifar10", "cifar100", "imdb_reviews"]
    assert TFDS_DATA["mnist"].num_validation == 10_000 and NAMED_DATA["two_moons"] is zoo.data.two_moons
    assert zoo.registry.placeholder_data("digits_28").image_shape == (28, 28, 1)


def test_a_registered_corruption_is_known_by_name_and_a_prior_kind_rebuilds_from_its_spec(registries_restored):
    flip = evals.corruptions.registry.Corruption("flip", lambda x, p, rng, scale: x[:, ::-1], (0,) * 5, False, False)
    evals.corruptions.registry.register_corruption(flip)
    x = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3) / 12
    np.testing.assert_array_equal(evals.corruptions.corrupt(x, "flip", 1), x[:, ::-1])
    with pytest.raises(InputError, match="five params"):
        evals.corruptions.registry.register_corruption(flip._replace(params=(0,)))
    with pytest.raises(InputError, match="unknown corruption 'nope'"):
        evals.corruptions.corrupt(x, "nope", 1)
    base.registry.PRIORS.register("unit_laplace", lambda: lambda name, shape: dist.Laplace(0.0, 1.0).expand(shape))
    assert isinstance(priors.from_spec({"kind": "unit_laplace"})("w", (2,)).base_dist, dist.Laplace)


def test_an_entrys_guides_are_derived_from_the_guides_registrations(registries_restored):
    """An entry's guides (``zoo list``; tests/zoo/test_catalogue.py checks the catalogue's) are those whose
    registered ``suits`` accepts the model's sites: a guide registered later joins the lists it suits."""
    shapes = {"mlp/~/linear_0/w": (4, 3), "mlp/~/linear_0/b": (3,)}
    rank1 = {"r1/w": (4, 3), "r1/alpha": (2, 4), "r1/gamma": (2, 3)}
    inference.register_guide("rank1_only", lambda model: None, suits=inference.registry.has_rank1_factors)
    inference.register_guide("mine", lambda model: None)  # default: plain models
    assert guides_for(shapes)[-1] == "mine" and guides_for(rank1) == ["rank1_mixture", "rank1_only"]
    with pytest.raises(InputError, match="suits: expected a callable"):
        inference.register_guide("bad", lambda model: None, suits="plain")


# what a user needs at the top level; everything else from its module (the core adds a few: room up to 30)
TOP_LEVEL_BOUND = 30


def test_inference_offers_at_most_30_top_level_names_and_the_rest_from_their_modules():
    assert len(inference.__all__) <= TOP_LEVEL_BOUND and len(set(inference.__all__)) == len(inference.__all__)
    assert all(hasattr(inference, name) for name in inference.__all__)
    moved = {"inference.k_tied": ("k_tied", "KTiedFamily"), "inference.site_guide": ("SiteGuide",),
             "inference.families": ("Family", "ParamSpec"), "inference.fit": ("default_steps", "Callback", "FitRun"),
             "inference.site_names": ("arviz_name", "site_name"), "inference.laplace_posterior": ("LaplacePosterior",),
             "inference.registry": ("FAMILIES", "example_options")}
    for module, names in moved.items():
        assert all(hasattr(importlib.import_module(module), name) for name in names), module
