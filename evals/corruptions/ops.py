"""Batched image operations shared by the corruption families.

All functions take NHWC float arrays and work on the whole batch at once.
"""

import math

import numpy as np
from PIL import Image
from scipy import fft, ndimage

# ITU-R BT.601 luma weights, used to turn an RGB colour into a grey level.
LUMA = np.array([0.299, 0.587, 0.114])


def blur(images, sigma, mode="nearest", truncate=4.0):
    """Gaussian blur over H and W of ``images`` (N, H, W, C) with std ``sigma`` pixels.

    Sampled kernel of radius ``int(truncate * sigma + 0.5)`` (scipy/skimage convention);
    ``sigma <= 0`` returns the input. Returns (N, H, W, C).
    """
    if sigma <= 0:
        return images
    return ndimage.gaussian_filter(images, sigma=(0, sigma, sigma, 0), mode=mode, truncate=truncate)


def blur_maps(maps, sigma, mode="nearest", truncate=4.0):
    """Gaussian blur over H and W of single-channel ``maps`` (N, H, W). Returns (N, H, W)."""
    return blur(maps[..., None], sigma, mode=mode, truncate=truncate)[..., 0]


def convolve2d(images, kernel, mode="mirror"):
    """Convolve every image and channel of ``images`` (N, H, W, C) with ``kernel`` (k, k)."""
    return ndimage.convolve(images, kernel[None, :, :, None], mode=mode)


def _fold(index, n, mode):
    """Map integer pixel indices outside [0, n) back inside: 'nearest' clamps, 'mirror' reflects
    about the edge pixels (d c b | a b c d | c b a, OpenCV's BORDER_REFLECT_101)."""
    if mode == "nearest" or n == 1:
        return np.clip(index, 0, n - 1)
    period = 2 * (n - 1)
    index = np.abs(index) % period
    return np.where(index > n - 1, period - index, index)


def warp(images, ys, xs, mode="nearest"):
    """Bilinear resampling: ``out[n, i, j] = images[n, ys[n, i, j], xs[n, i, j]]``.

    images (N, H, W, C); ys, xs (N, H, W) source coordinates in pixels (may be fractional or
    outside the image; ``mode`` 'nearest' or 'mirror' says how the border extends).
    Returns (N, H, W, C) float.
    """
    n, h, w, c = images.shape
    flat = images.reshape(n * h * w, c)
    base = (np.arange(n) * h)[:, None, None]
    y0 = np.floor(ys)
    x0 = np.floor(xs)
    dtype = np.result_type(images.dtype, np.float32)
    fy = (ys - y0).astype(dtype)[..., None]
    fx = (xs - x0).astype(dtype)[..., None]
    y0 = y0.astype(np.int64)
    x0 = x0.astype(np.int64)
    rows = [(base + _fold(y, h, mode)) * w for y in (y0, y0 + 1)]
    cols = [_fold(x, w, mode) for x in (x0, x0 + 1)]
    top = flat[rows[0] + cols[0]] * (1 - fx) + flat[rows[0] + cols[1]] * fx
    bottom = flat[rows[1] + cols[0]] * (1 - fx) + flat[rows[1] + cols[1]] * fx
    return top * (1 - fy) + bottom * fy


def zoom_matrix(n, zoom):
    """(n, n) bilinear interpolation matrix of a zoom by ``zoom`` into the centre of an axis of n
    pixels: output i samples input (n - 1) / 2 + (i - (n - 1) / 2) / zoom (border: nearest)."""
    centre = (n - 1) / 2
    source = np.clip(centre + (np.arange(n) - centre) / zoom, 0, n - 1)
    lower = np.floor(source).astype(np.int64)
    frac = source - lower
    matrix = np.zeros((n, n))
    matrix[np.arange(n), lower] += 1 - frac
    matrix[np.arange(n), np.minimum(lower + 1, n - 1)] += frac
    return matrix


def centre_zoom(images, zoom):
    """Zoom ``images`` (N, H, W, C) into their centre by ``zoom`` (separable bilinear, border
    nearest). Returns (N, H, W, C)."""
    rows = zoom_matrix(images.shape[1], zoom).astype(images.dtype)
    cols = zoom_matrix(images.shape[2], zoom).astype(images.dtype)
    planes = np.moveaxis(images, -1, 1)  # (N, C, H, W)
    return np.moveaxis(rows @ planes @ cols.T, 1, -1)


def clipped_zoom(images, zoom):
    """Zoom ``images`` (N, H, W, C) into their centre by ``zoom`` >= 1 on the whole-pixel grid, as
    the CIFAR-10-C generator does: crop the central window of ``ceil(H / zoom)`` x ``ceil(W / zoom)``
    pixels (top-left corner ``(H - ch) // 2``, rounding down), stretch it with
    ``scipy.ndimage.zoom(order=1)`` to ``round(ch * zoom)`` pixels (end pixels aligned, so the
    effective factor is ``(out - 1) / (ch - 1)``), and trim ``(out - H) // 2`` from the top/left.
    The whole-pixel crop and the rounding shift the zoom centre by up to a pixel: at 32 px 1.01 is
    the identity and 1.02-1.03 stretch the whole image to 33 pixels about its top-left corner.
    Returns (N, H, W, C) float64."""
    _, h, w, _ = images.shape
    ch, cw = math.ceil(h / zoom), math.ceil(w / zoom)
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = np.asarray(images[:, top : top + ch, left : left + cw], dtype=np.float64)
    # channel by channel: the same numbers as one 4-D zoom by (1, zoom, zoom, 1) (the unit factors interpolate at
    # whole positions, weights 1 and 0), 2.5-4x faster (scipy interpolates over 2^rank corners per pixel)
    out = np.stack([ndimage.zoom(crop[..., c], (1, zoom, zoom), order=1) for c in range(crop.shape[-1])], axis=-1)
    top, left = (out.shape[1] - h) // 2, (out.shape[2] - w) // 2
    return out[:, top : top + h, left : left + w]


def grid(n, h, w):
    """Pixel coordinate grids ``ys, xs`` of shape (n, h, w) (float64)."""
    ys, xs = np.meshgrid(np.arange(h, dtype=np.float64), np.arange(w, dtype=np.float64), indexing="ij")
    return np.broadcast_to(ys, (n, h, w)), np.broadcast_to(xs, (n, h, w))


def trail_kernels(radius, sigma, angles):
    """Per-image motion kernels (N, k, k), k = 2 R + 1, R = ceil(2 radius) + 1: taps at distances
    t = 0 .. ceil(2 radius) pixels along ``angles`` (N,) degrees, weights exp(-t^2 / (2 sigma^2))
    normalised (ImageMagick's one-sided motion blur, as used by the reference), each tap splatted
    bilinearly onto the pixel grid."""
    taps = np.arange(int(np.ceil(2 * radius)) + 1, dtype=np.float64)
    weights = np.exp(-(taps**2) / (2 * sigma**2))
    weights /= weights.sum()
    half = int(taps[-1]) + 1
    n = len(angles)
    y = half + taps[None, :] * np.sin(np.deg2rad(angles))[:, None]
    x = half + taps[None, :] * np.cos(np.deg2rad(angles))[:, None]
    y0, x0 = np.floor(y), np.floor(x)
    fy, fx = y - y0, x - x0
    kernels = np.zeros((n, 2 * half + 1, 2 * half + 1))
    batch = np.broadcast_to(np.arange(n)[:, None], y.shape)
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            rows, cols = (y0 + dy).astype(np.int64), (x0 + dx).astype(np.int64)
            np.add.at(kernels, (batch, rows, cols), weights * wy * wx)
    return kernels


def convolve_each(images, kernels):
    """Convolve image n of ``images`` (N, H, W, C) with its own kernel ``kernels[n]`` (k, k), k odd,
    by FFT; the border extends as 'nearest'. Returns (N, H, W, C)."""
    n, h, w, _ = images.shape
    half = kernels.shape[1] // 2
    padded = np.pad(images, ((0, 0), (half, half), (half, half), (0, 0)), mode="edge")
    shape = tuple(fft.next_fast_len(size, real=True) for size in padded.shape[1:3])
    # kernel centre at index 0 (circular), so that out(p) = sum_q K(q) x(p - q); the padding
    # keeps the circular wrap away from the crop.
    centred = np.zeros((n, *shape))
    centred[:, : kernels.shape[1], : kernels.shape[2]] = kernels
    spectrum = fft.rfft2(np.roll(centred, (-half, -half), axis=(1, 2)), axes=(1, 2))
    out = fft.irfft2(fft.rfft2(padded, s=shape, axes=(1, 2)) * spectrum[..., None], s=shape, axes=(1, 2))
    return out[:, half : half + h, half : half + w]


def motion_trail(images, radius, sigma, angles):
    """One-sided Gaussian motion blur of ``images`` (N, H, W, C) along per-image directions
    ``angles`` (N,) degrees: pixel p becomes sum_t w_t x(p - t d) (see :func:`trail_kernels`).
    Returns (N, H, W, C)."""
    return convolve_each(images, trail_kernels(radius, sigma, angles))


def overlap_matrix(out_edges, in_edges):
    """(n_out, n_in) lengths of the overlaps of intervals [out_edges[i], out_edges[i + 1]) and
    [in_edges[j], in_edges[j + 1])."""
    lo = np.maximum(out_edges[:-1, None], in_edges[None, :-1])
    hi = np.minimum(out_edges[1:, None], in_edges[None, 1:])
    return np.clip(hi - lo, 0, None)


def _rows_normalised(matrix):
    return matrix / matrix.sum(axis=1, keepdims=True)


def box_resize(images, height, width):
    """Pillow's BOX resize of ``images`` (N, H, W, C) to (N, height, width, C), each plane in 32-bit
    float mode ('F', no 8-bit rounding). Pillow's box filter weighs each source pixel 0 or 1 by
    whether its centre falls in the output pixel's box (width max(n_in / n_out, 1)), then
    normalises: not an exact-overlap average. Returns float32."""
    n, _, _, c = images.shape
    out = np.empty((n, height, width, c), dtype=np.float32)
    for i in range(n):
        for k in range(c):
            plane = Image.fromarray(np.ascontiguousarray(images[i, :, :, k], dtype=np.float32))
            out[i, :, :, k] = np.asarray(plane.resize((width, height), Image.BOX))
    return out


def cell_average_matrix(n, cell):
    """(n, n) matrix that replaces each of n pixels by the mean of the cells of width ``cell``
    pixels that it overlaps, weighted by overlap: exact-area box-downsampling to n / cell cells
    (fractional) and back. The cell grid is centred on the image, so the cut cells at the two
    borders are equal; ``cell = 1`` and integer n gives the identity. (Pillow's BOX filter, by
    contrast, weighs pixels 0 or 1 by their centres: see :func:`box_resize`.)"""
    pixels = np.arange(n + 1, dtype=np.float64)
    k = int(np.ceil(n / cell / 2)) + 1
    cells = np.unique(np.clip(n / 2 + np.arange(-k, k + 1) * cell, 0, n))
    overlap = overlap_matrix(cells, pixels)
    return _rows_normalised(overlap.T) @ _rows_normalised(overlap)


def pixelate_cells(images, cell):
    """Pixelate ``images`` (N, H, W, C) with square cells of ``cell`` pixels (see
    :func:`cell_average_matrix`). Returns (N, H, W, C)."""
    rh = cell_average_matrix(images.shape[1], cell)
    rw = cell_average_matrix(images.shape[2], cell)
    return np.einsum("ij,njkc,lk->nilc", rh, images, rw, optimize=True)


def rescale_kernel(kernel, scale):
    """Resample a (k, k) kernel drawn on the 32-px grid to a grid ``scale`` times finer: each
    kernel cell becomes a ``scale``-pixel square, integrated over the new pixels; renormalised.
    ``scale == 1`` returns the kernel. Returns (k', k'), k' odd."""
    if scale == 1:
        return kernel
    k = kernel.shape[0]
    half = int(np.ceil(k * scale / 2))
    cells = (np.arange(k + 1) - k / 2) * scale
    pixels = np.arange(-half, half + 2) - 0.5
    overlap = overlap_matrix(pixels, cells)
    out = overlap @ kernel @ overlap.T
    return out / out.sum()


def colour(rgb, channels):
    """An RGB colour (3,) in [0, 1] as a pixel of ``channels`` (1: its luma, 3: itself), shape (C,)."""
    rgb = np.asarray(rgb, dtype=np.float64)
    return rgb if channels == 3 else np.array([LUMA @ rgb])


def grey(images):
    """Luma (N, H, W, 1) of ``images`` (N, H, W, C); grey images are returned as they are."""
    return images if images.shape[-1] == 1 else (images @ LUMA)[..., None]
