"""Blur corruptions: gaussian, defocus, glass, motion, zoom.

Spatial: they run on the canvas of :mod:`evals.corruptions.scale`, and every length in pixels is
multiplied by ``scale``. Signature ``fn(images, param, rng, scale) -> images``, images
(N, H, W, C) in [0, 1]. Random draws never depend on ``param`` (severities share them).
"""

import numpy as np

from evals.corruptions.ops import blur, clipped_zoom, convolve2d, motion_trail, rescale_kernel


def gaussian_blur(images, sigma, rng, scale):
    """Gaussian filter of std ``sigma * scale`` pixels (border: nearest)."""
    return blur(images, sigma * scale)


def disk_kernel(radius, alias_sigma):
    """Defocus kernel (k, k): the pixels within ``radius`` of the centre, smoothed by a Gaussian
    of std ``alias_sigma`` (anti-aliasing), normalised to sum 1."""
    half = int(np.ceil(radius)) + 2
    ys, xs = np.mgrid[-half : half + 1, -half : half + 1]
    disk = (ys**2 + xs**2 <= radius**2).astype(np.float64)
    kernel = blur(disk[None, :, :, None], alias_sigma, mode="constant")[0, :, :, 0]
    return kernel / kernel.sum()


def defocus_blur(images, param, rng, scale):
    """Convolution with :func:`disk_kernel` ``(radius, alias sigma)`` drawn on the 32-px grid and
    resampled by ``scale`` (:func:`rescale_kernel`; a disk drawn at the scaled radius would order
    the severities differently, the 32-px pixel grid is part of the reference's kernels).
    Border: mirror."""
    radius, alias_sigma = param
    return convolve2d(images, rescale_kernel(disk_kernel(radius, alias_sigma), scale))


def local_shuffle(images, delta, rng):
    """Move every pixel at most ``delta`` pixels: a random permutation of the pixels inside each
    (delta + 1)-square tile of a tiling with a random offset (edge strips that do not fill a tile
    stay). A vectorised stand-in for the reference's sequential raster-order neighbour swaps.
    images (N, H, W, C) -> (N, H, W, C)."""
    n, h, w, c = images.shape
    t = delta + 1
    oy, ox = rng.integers(0, t, size=2)
    th, tw = (h - oy) // t, (w - ox) // t
    keys = rng.uniform(size=(n, th, tw, t * t))
    out = images.copy()
    block = images[:, oy : oy + th * t, ox : ox + tw * t]
    tiles = block.reshape(n, th, t, tw, t, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, th, tw, t * t, c)
    order = np.argsort(keys, axis=-1)[..., None]
    tiles = np.take_along_axis(tiles, order, axis=3)
    out[:, oy : oy + th * t, ox : ox + tw * t] = (
        tiles.reshape(n, th, tw, t, t, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, th * t, tw * t, c)
    )
    return out


def glass_blur(images, param, rng, scale):
    """Blur (std ``sigma * scale``), ``iterations`` rounds of :func:`local_shuffle` within
    ``max(1, round(delta * scale))`` pixels, blur again."""
    sigma, delta, iterations = param
    out = blur(images, sigma * scale)
    for _ in range(iterations):
        out = local_shuffle(out, max(1, int(round(delta * scale))), rng)
    return blur(out, sigma * scale)


def motion_blur(images, param, rng, scale):
    """One-sided Gaussian motion trail (``(radius, sigma) * scale``) at a random angle per image,
    uniform in [-45, 45] degrees."""
    radius, sigma = param
    angles = rng.uniform(-45, 45, size=images.shape[0])
    return motion_trail(images, radius * scale, sigma * scale, angles)


def zoom_factors(end):
    """The generator's zoom factors ``np.arange(1, end, 0.01)`` (K,). Its floating-point end keeps
    ``end`` itself for 1.06 and 1.11: 7, 12, 16, 21, 26 factors for the five severities, from
    1.00 up to 1.06, 1.11, 1.15, 1.20, 1.25."""
    return np.arange(1, end, 0.01)


def zoom_blur(images, end, rng, scale):
    """Mean of the image and its :func:`~evals.corruptions.ops.clipped_zoom` by every factor of
    :func:`zoom_factors` (CIFAR-10-C's zoom blur). Factors are relative, so ``scale`` is not used;
    on a canvas the whole-pixel crop is taken on the canvas grid."""
    zooms = zoom_factors(end)
    out = images.astype(np.float64)
    for z in zooms:
        out = out + clipped_zoom(images, z)
    return out / (len(zooms) + 1)
