"""Data sets that ship with the install (no network): digits, two-moons, 1-D regression.

Each returns a (train, test) pair of `Dataset`s with a fixed, seeded split, and registers itself by name
(`zoo.data.registry.register_data`: its feature shape, classes and image shape beside the loader).
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

from base.data import Dataset
from base.validation import check_memory, check_real, check_seed, is_int
from base.errors import InputError
from zoo.data.registry import DATASETS, register_data


@register_data("digits", feature_shape=(64,), num_classes=10, image_shape=(8, 8, 1))
def digits(test_fraction: float = 0.25, seed: int = 0, standardise: bool = True, size: int = 8):
    """scikit-learn's 8x8 digits (1797 images, 10 classes), split with a fixed seed.

    Returns:
      (train, test): x float32 (N, size * size), y int32 (N,); `size` 8 (the originals) or larger: each image
      resampled to size x size by linear interpolation (`upsample`; the same split). With `standardise`,
      pixels are centred and scaled by the training set's global pixel mean and sd (one scalar each,
      `digits_standardiser`); a per-pixel sd would blow up small changes of nearly constant border pixels,
      which makes the network fragile to corruptions. Without it, pixels are in [0, 1].
    """
    if not is_int(size) or int(size) < 8:
        raise InputError("size", size, "an integer image side >= 8 (the digits are 8 x 8)")
    size = int(size)
    x, y = digits_arrays()
    x = x.astype(np.float32) / 16.0
    if size != 8:
        x = upsample(x.reshape(-1, 8, 8), size).reshape(len(x), size * size)
    train_idx, test_idx = _split(len(x), test_fraction, seed)
    xtr, xte = x[train_idx], x[test_idx]
    name = "digits" if size == 8 else f"digits_{size}"
    if standardise:
        mu, sd = digits_standardiser(xtr)
        xtr, xte = (xtr - mu) / sd, (xte - mu) / sd
    return (
        Dataset(xtr, y[train_idx], 10, name, image_shape=(size, size, 1)),
        Dataset(xte, y[test_idx], 10, name, image_shape=(size, size, 1)),
    )


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """``sklearn.datasets.load_digits(return_X_y=True)``: x (1797, 64) float64 pixel counts 0..16, y (1797,) int.

    Read from the data file scikit-learn installs (``sklearn/datasets/data/digits.csv.gz``, parsed as
    ``load_digits`` parses it) without importing scikit-learn, whose import (SciPy's stats, pandas) costs about
    0.5 s of a fresh process's start; when the file is not where it is expected, ``load_digits`` itself."""
    spec = importlib.util.find_spec("sklearn")  # finds the package without importing it
    path = (Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
            if spec is not None and spec.submodule_search_locations else None)
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits

        return load_digits(return_X_y=True)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1], data[:, -1].astype(int, copy=False)


@register_data("digits_28", feature_shape=(784,), num_classes=10, image_shape=(28, 28, 1))
def digits_28(test_fraction: float = 0.25, seed: int = 0, standardise: bool = True):
    """The digits resampled to 28 x 28 (784 inputs, MNIST's shape; 1797 images): an MNIST-shaped stand-in that
    ships with the install. (train, test): x float32 (N, 784), y int32 (N,); as `digits(size=28)`."""
    return digits(test_fraction, seed, standardise, size=28)


def upsample(images: np.ndarray, size: int) -> np.ndarray:
    """(N, h, h) -> (N, size, size) float32 by linear (order-1 spline) interpolation, corners aligned, clipped to the
    input's range."""
    from scipy.ndimage import zoom

    factor = size / images.shape[-1]  # scipy maps the first and last pixel centres onto each other
    out = zoom(images, (1, factor, factor), order=1)
    if out.shape[1:] != (size, size):
        raise InputError("size", size, f"a side that {images.shape[-1]} px resample to exactly")
    return np.clip(out, images.min(), images.max()).astype(np.float32)


def digits_standardiser(x_train: np.ndarray):
    """The global pixel mean and sd (scalars) of raw [0, 1] digits training pixels x_train (N, 64)."""
    return np.float32(x_train.mean()), np.float32(x_train.std())


@register_data("two_moons", feature_shape=(2,), num_classes=2)
def two_moons(n: int = 10_000, noise: float = 0.1, test_fraction: float = 0.2, seed: int = 0):
    """scikit-learn's two interleaving half-moons (the Liberty-or-Depth paper: noise 0.1, 10,000 points).

    Returns:
      (train, test): x float32 (N, 2), y int32 (N,) in {0, 1}.
    """
    from sklearn.datasets import make_moons

    _check_points(n, noise, seed)
    x, y = make_moons(n_samples=n, noise=noise, random_state=seed)
    train_idx, test_idx = _split(n, test_fraction, seed)
    return (
        Dataset(x[train_idx], y[train_idx], 2, "two_moons"),
        Dataset(x[test_idx], y[test_idx], 2, "two_moons"),
    )


@register_data("regression_1d", feature_shape=(1,), num_classes=None)
def regression_1d(n: int = 500, noise: float = 0.1, test_fraction: float = 0.2, seed: int = 0):
    """A 1-D synthetic regression set y = sin(3x) + x/2 + noise, x ~ U(-2, 2), with a gap in (-0.5, 0.5).

    Returns:
      (train, test): x float32 (N, 1), y float32 (N,).
    """
    _check_points(n, noise, seed)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, size=4 * n)
    x = x[np.abs(x) > 0.5][:n]
    y = np.sin(3 * x) + 0.5 * x + noise * rng.normal(size=x.shape)
    train_idx, test_idx = _split(len(x), test_fraction, seed)
    return (
        Dataset(x[train_idx, None], y[train_idx], None, "regression_1d"),
        Dataset(x[test_idx, None], y[test_idx], None, "regression_1d"),
    )


BYTES_PER_POINT = 160  # what a synthetic set holds per point while it is made: float64 draws, copies, the split


def _check_points(n, noise, seed) -> None:
    """A synthetic set's arguments: n an integer >= 10 whose arrays fit in memory, noise >= 0, a seed in
    [0, 2**32 - 1]; InputError naming the first bad one."""
    if not is_int(n) or n < 10:
        raise InputError("n", n, "an integer number of points >= 10")
    check_real("noise", noise, low=0.0, low_open=False)
    check_seed(seed)
    check_memory("n", n, BYTES_PER_POINT * float(n), f"a data set of {n:,} points")


def _split(n: int, test_fraction: float, seed: int):
    check_real("test_fraction", test_fraction, low=0.0, high=1.0)
    check_seed(seed)
    perm = np.random.default_rng(seed).permutation(n)
    n_test = int(round(n * test_fraction))
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


EMBEDDED = DATASETS.view(lambda record: record.loader, where=lambda record: record.loader.__module__ == __name__)
"""{name: loader} of the data sets this module registers (a live view of `zoo.data.registry.DATASETS`)."""
