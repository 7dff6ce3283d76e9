"""Shifted image sets for out-of-distribution detection (`evals.detection`), built from a test set without any
download: the same images rotated by 90 degrees, their pixels shuffled by one fixed permutation, or uniform noise
images. Each keeps the input shape (and, but for the noise, the pixel histogram) of the images it is built from,
so that only what a network should have learnt (the shapes of the digits) tells them apart.

Images: (N, H, W) or (N, H, W, C) raw values in [0, 1]; every function returns float32 arrays of the same shape.
"""

from __future__ import annotations

import numpy as np

from base.errors import InputError

SHIFTS = ("rotated_90", "pixels_shuffled", "uniform_noise")


def _images(images, arg: str = "images") -> np.ndarray:
    x = np.asarray(images, np.float32)
    if x.ndim not in (3, 4) or 0 in x.shape:
        raise InputError(arg, f"<array of shape {x.shape}>", "images (N, H, W) or (N, H, W, C) with N, H, W >= 1")
    return x


def rotated_90(images) -> np.ndarray:
    """Every image rotated by 90 degrees counter-clockwise (square images: the shape is kept)."""
    x = _images(images)
    if x.shape[1] != x.shape[2]:
        raise InputError("images", f"<array of shape {x.shape}>", "square images (H == W) to rotate in place")
    return np.ascontiguousarray(np.rot90(x, k=1, axes=(1, 2)))


def pixels_shuffled(images, seed: int = 0) -> np.ndarray:
    """Every image with its pixel positions permuted by one fixed permutation (seeded, the same for all images):
    the pixel values stay, the shapes go."""
    x = _images(images)
    flat = x.reshape(len(x), x.shape[1] * x.shape[2], -1)
    order = np.random.default_rng(seed).permutation(flat.shape[1])
    return flat[:, order].reshape(x.shape)


def uniform_noise(images, seed: int = 0) -> np.ndarray:
    """Images of independent Uniform(0, 1) pixels, as many and of the shape of `images`."""
    x = _images(images)
    return np.random.default_rng(seed).uniform(0.0, 1.0, size=x.shape).astype(np.float32)


def shifted_sets(images, seed: int = 0) -> dict:
    """{name: shifted images} for every shift of `SHIFTS` (`rotated_90` only for square images)."""
    x = _images(images)
    sets = {"pixels_shuffled": pixels_shuffled(x, seed), "uniform_noise": uniform_noise(x, seed)}
    if x.shape[1] == x.shape[2]:
        sets = {"rotated_90": rotated_90(x), **sets}
    return sets


def detection_sets(images, corrupted_sets=(), severity: int | None = None, seed: int = 0) -> dict:
    """The out-of-distribution sets of `zoo run`, the image leaderboard and `zoo report`: `shifted_sets` of the
    test `images`, and, given `corrupted_sets` [(type, severity, images, labels)] (`evals.corruptions.corrupted`),
    ``corrupted_severity_<s>``: as many images as `images` drawn without replacement (seeded) from every type at
    severity `severity` (default: the highest there), so that every out set is as large as the in set (AUPR
    depends on the ratio)."""
    x = _images(images)
    sets = shifted_sets(x, seed)
    corrupted_sets = list(corrupted_sets)
    if corrupted_sets:
        severity = max(s for _, s, _, _ in corrupted_sets) if severity is None else severity
        pooled = np.concatenate([np.asarray(c, np.float32).reshape((-1, *x.shape[1:]))
                                 for _, s, c, _ in corrupted_sets if s == severity])
        pick = np.random.default_rng(seed).choice(len(pooled), size=min(len(x), len(pooled)), replace=False)
        sets[f"corrupted_severity_{severity}"] = pooled[np.sort(pick)]
    return sets
