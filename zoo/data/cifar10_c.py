"""CIFAR-10-C from TFDS (``cifar10_corrupted/<type>_<severity>``) in the form of `evals.corruptions.corrupted`,
so that the benchmark's own corrupted test sets go through the same scoring (`evals.ood.score_sets`)."""

from __future__ import annotations

from evals.corruptions import CORRUPTIONS, SEVERITIES, resolve, tfds_name
from base.errors import InputError
from zoo.data.tfds_loaders import load_tfds


def tfds_corrupted(types=None, severities=SEVERITIES, data_dir=None):
    """Yield ``(type, severity, images (N, 32, 32, 3) float32 in [0, 1], labels (N,) int32)`` for every type in
    ``types`` and severity, read through `zoo.data.tfds_loaders.load_tfds` (test split).

    types: names or aliases of `evals.corruptions.CORRUPTIONS` (default: all 19), yielded under canonical
    names. severities: ints in 1..5 (TFDS has no severity 0). data_dir: the TFDS data directory.
    Nothing downloads: a set that is not prepared raises `DatasetNotPreparedError`; a bad severity raises
    ValueError naming `severities`.
    """
    names = [resolve(t) for t in (CORRUPTIONS if types is None else types)]
    for severity in severities:
        if severity not in SEVERITIES:
            raise InputError("severities", severity, "TFDS severities 1..5")
    for name in names:
        for severity in severities:
            data = load_tfds(f"cifar10_corrupted/{tfds_name(name)}_{severity}", "test", data_dir)
            yield name, severity, data.x, data.y
