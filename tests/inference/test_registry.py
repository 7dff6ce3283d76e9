"""`inference.registry.Registry`, the one registration mechanism of guides, families, entries and data sets."""
import pytest

import inference
import zoo
from inference.registry import Registry
from base.errors import InputError


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
    """GUIDES, FAMILIES, the catalogue's entries and the data sets are Registries; the data sets' metadata sit in
    one record each, and the old tables are views of it."""
    from zoo.data.registry import DATASETS
    from zoo.registry import DATA_SHAPES, ENTRIES, NAMED_DATA, TFDS_DATA

    for registry in (inference.GUIDES, inference.registry.FAMILIES, ENTRIES, DATASETS):
        assert isinstance(registry, Registry)
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
