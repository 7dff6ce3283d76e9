"""zoo.data.shifted: the shifted image sets of OOD detection, against NumPy's own operations (nothing compiles)."""

import numpy as np
import pytest

from base.errors import InputError
from zoo.data.shifted import detection_sets, pixels_shuffled, rotated_90, shifted_sets, uniform_noise


def test_shifts_keep_what_they_should_and_change_what_they_should():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(6, 5, 5, 1)).astype(np.float32)
    np.testing.assert_array_equal(rotated_90(x), np.rot90(x, 1, axes=(1, 2)))
    shuffled = pixels_shuffled(x, seed=3)
    # one permutation for every image: each image keeps its pixel values, and the same positions move in all
    np.testing.assert_array_equal(np.sort(shuffled.reshape(6, -1), 1), np.sort(x.reshape(6, -1), 1))
    order = [int(np.flatnonzero(x[0].ravel() == v)[0]) for v in shuffled[0].ravel()]
    np.testing.assert_array_equal(shuffled.reshape(6, -1), x.reshape(6, -1)[:, order])
    assert not np.array_equal(shuffled, x)
    noise = uniform_noise(x, seed=1)
    assert noise.shape == x.shape and noise.dtype == np.float32 and 0 <= noise.min() and noise.max() <= 1
    assert list(shifted_sets(x)) == ["rotated_90", "pixels_shuffled", "uniform_noise"]
    assert list(shifted_sets(x[:, :, :4])) == ["pixels_shuffled", "uniform_noise"]  # not square: no rotation
    with pytest.raises(InputError, match="^images: "):
        rotated_90(x[:, :, :4])


def test_the_corrupted_set_is_drawn_to_the_size_of_the_in_set_from_the_highest_severity():
    x = np.zeros((4, 3, 3), np.float32)
    corrupted = [("a", 1, np.full((4, 9), 1.0), None), ("a", 5, np.full((4, 9), 5.0), None),
                 ("b", 5, np.full((4, 9), 6.0), None)]
    sets = detection_sets(x, corrupted, seed=0)
    chosen = sets["corrupted_severity_5"]
    assert chosen.shape == x.shape and set(np.unique(chosen)) <= {5.0, 6.0}  # severity 5 only, both types pooled
    assert detection_sets(x, corrupted, severity=1)["corrupted_severity_1"].max() == 1.0
    assert "corrupted_severity_5" not in detection_sets(x)
