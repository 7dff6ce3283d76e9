"""The rescale rule: how the 32x32 corruption parameters carry over to other image sizes.

The parameter table (the CIFAR-10-C generation script's, listed in :mod:`evals.corruptions.registry`) is
written for 32x32 images (CIFAR-10-C). Two kinds of corruption are told apart:

* **Photometric, per pixel** (gaussian/shot/impulse/speckle noise, brightness, contrast, saturate):
  the parameters carry over unchanged and the corruption runs on the image as it is.
* **Spatial** (every blur, snow, frost, fog, spatter, elastic_transform, jpeg_compression):
  lengths in pixels (blur radii and sigmas, pixel-shuffle distance, elastic displacements, motion
  trails) are multiplied by ``scale = canvas_side / 32``; relative quantities (zoom factors,
  fractions of the image size, JPEG quality, blend weights) carry over. So a corruption covers
  the same fraction of the image at any size.
* **pixelate** is relative (``int(side factor)`` cells, the generator's rule, from 16 px up; cells
  of the 32-px sizes below that) and runs on the image as it is: see
  :func:`evals.corruptions.digital.pixelate`.
* **zoom_blur** zooms by relative factors, and its whole-pixel crop is taken on the canvas grid.

Sub-pixel kernels (a 0.4 px blur at 32 px is a 0.1 px blur at 8 px) cannot be sampled on the small
grid, so spatial corruptions of images smaller than 32 px run on a **canvas**: the image is blown up
``m = ceil(32 / side)`` times by pixel replication (exact for box-averaged images such as sklearn's
digits, which are 4x4 block sums of 32x32 bitmaps), corrupted there with
``scale = m * side / 32``, and block-averaged back down by ``m``. For 8x8 digits this means the
CIFAR-10-C parameters applied at 32x32 exactly and viewed at 8x8; for 28x28 MNIST it means a 56x56
canvas with ``scale = 1.75``; images of 32 px and more use ``m = 1`` and ``scale = side / 32``.
"""

import math

import numpy as np

REFERENCE_SIDE = 32


def canvas_factor(side):
    """Integer blow-up factor ``m = ceil(32 / side)`` (1 for ``side >= 32``) of the canvas rule."""
    return max(1, math.ceil(REFERENCE_SIDE / side))


def spatial_scale(canvas_side):
    """Length multiplier ``canvas_side / 32`` for spatial parameters given in 32-px units."""
    return canvas_side / REFERENCE_SIDE


def to_canvas(images, m):
    """Blow ``images`` (N, H, W, C) up to (N, m H, m W, C) by pixel replication."""
    if m == 1:
        return images
    return np.repeat(np.repeat(images, m, axis=1), m, axis=2)


def from_canvas(images, m):
    """Block-average a canvas (N, m H, m W, C) back down to (N, H, W, C)."""
    if m == 1:
        return images
    n, hm, wm, c = images.shape
    return images.reshape(n, hm // m, m, wm // m, m, c).mean(axis=(2, 4))
