"""A data set registered by name: n points in 3 dimensions labelled by the sign of the first. It imports only
`zoo.data` (and below), so it works outside the package and as ``zoo/data/plugin_data.py`` with one import line
in ``zoo/registry.py``."""

import numpy as np

from base.data import Dataset
from zoo.data.registry import register_data


@register_data("plugin_blobs", feature_shape=(3,), num_classes=2)
def plugin_blobs(n: int = 120, seed: int = 0):
    """n points in 3 dimensions, labelled by the sign of the first; 3/4 train, 1/4 test."""
    r = np.random.default_rng(seed)
    x = r.normal(size=(n, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    cut = 3 * n // 4
    return Dataset(x[:cut], y[:cut], 2, "plugin_blobs"), Dataset(x[cut:], y[cut:], 2, "plugin_blobs")
