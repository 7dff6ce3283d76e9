"""CIFAR-10-C from TFDS (zoo.data.cifar10_c) under `tfds.testing.mock_data`: names, severities, scoring."""

import numpy as np
import pytest

from evals import ood
from evals.corruptions import CORRUPTIONS, tfds_name


def test_tfds_names_match_the_tfds_loader():
    from zoo.data.tfds_loaders import CIFAR10_CORRUPTIONS

    assert {tfds_name(k) for k in CORRUPTIONS} == set(CIFAR10_CORRUPTIONS)


def test_tfds_cifar10_corrupted_plugs_into_scoring():
    tfds = pytest.importorskip("tensorflow_datasets")
    from zoo.data.cifar10_c import tfds_corrupted

    with tfds.testing.mock_data(num_examples=6):
        sets = list(tfds_corrupted(types=["frosted_glass_blur", "elastic_transform"], severities=(1, 5)))
    assert [(t, s) for t, s, _, _ in sets] == [("glass_blur", 1), ("glass_blur", 5), ("elastic_transform", 1),
                                               ("elastic_transform", 5)]
    assert sets[0][2].shape == (6, 32, 32, 3) and 0 <= sets[0][2].min() and sets[0][2].max() <= 1
    results = ood.score_sets({"point_estimate": lambda v: np.full((len(v), 10), 0.1)}, sets)
    assert len(results.table) == 4 and results.table["nll"].to_numpy() == pytest.approx(np.log(10))
    with pytest.raises(ValueError, match="severities"):
        next(tfds_corrupted(severities=(0,)))
