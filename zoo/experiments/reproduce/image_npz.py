"""A user's image set for `zoo reproduce k-tied | variance-networks --data PATH` (the papers used MNIST).

`load_image_npz` reads an .npz holding ``imgs`` (N, H, W) gray images (uint8 0..255, or floats in [0, 1]) and
``labs`` (N,) integer labels (the USPS layout; MNIST arrays saved so work too), resizes the images to 28 x 28
(`zoo.data.embedded.upsample`: linear interpolation, corners aligned) and makes the fixed split the jobs use:
a permutation seeded by ``seed`` (default 0), its first ``1 - test_fraction`` (80 %) the training set, the rest the
test set. The jobs carve their validation set out of the training set (k-tied: its last 20 %); the test set is
scored once, at the end. Pixels are standardised by the training set's global mean and sd.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from base.errors import InputError

__all__ = ["load_image_npz", "IMAGE_SIDE"]

IMAGE_SIDE = 28
"""The side the images are resized to (MNIST's, the papers' input)."""


def load_image_npz(path, size: int = IMAGE_SIDE, test_fraction: float = 0.2, seed: int = 0):
    """(x_train, y_train, x_test, y_test) of the .npz at `path`: x float32 (N, size, size, 1) standardised by
    the training pixels' mean and sd, y int32 (N,); the split is a ``seed``-ed permutation, the last
    ``test_fraction`` of it the test set (module docstring). Refuses (InputError) a missing file, missing keys,
    images that are not (N, H, W), labels that are not N integers, or a ``test_fraction`` outside (0, 1)."""
    from zoo.data.embedded import upsample

    path = Path(path)
    if not path.is_file():
        raise InputError("--data", str(path), "an existing .npz file with arrays 'imgs' (N, H, W) and 'labs' (N,)")
    if not 0 < test_fraction < 1:
        raise InputError("test_fraction", test_fraction, "a fraction in (0, 1)")
    with np.load(path) as f:
        missing = [k for k in ("imgs", "labs") if k not in f.files]
        if missing:
            raise InputError("--data", str(path), "an .npz with arrays 'imgs' (N, H, W) and 'labs' (N,)",
                             f"it holds {f.files}, not {missing}")
        imgs, labs = f["imgs"], f["labs"]
    if imgs.ndim != 3 or labs.shape != imgs.shape[:1] or not np.issubdtype(labs.dtype, np.integer):
        raise InputError("--data", str(path), "'imgs' of shape (N, H, W) and N integer 'labs'",
                         f"imgs {imgs.shape} {imgs.dtype}, labs {labs.shape} {labs.dtype}")
    x = imgs.astype(np.float32) / (255.0 if imgs.dtype == np.uint8 else 1.0)
    if x.shape[1:] != (size, size):
        x = upsample(x, size) if x.shape[1] == x.shape[2] else _resize(x, size)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = max(1, int(round(test_fraction * len(x))))
    tr, te = order[: len(x) - n_test], order[len(x) - n_test:]
    mu, sd = x[tr].mean(), x[tr].std()
    x = ((x - mu) / (sd if sd > 0 else 1.0))[..., None].astype(np.float32)
    y = labs.astype(np.int32)
    return x[tr], y[tr], x[te], y[te]


def _resize(x, size):
    """(N, H, W) -> (N, size, size) by linear interpolation (non-square images)."""
    from scipy.ndimage import zoom

    out = zoom(x, (1, size / x.shape[1], size / x.shape[2]), order=1)
    return out[:, :size, :size].astype(np.float32)
