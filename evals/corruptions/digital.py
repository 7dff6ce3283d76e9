"""Digital and geometric corruptions: brightness, contrast, saturate, pixelate, jpeg_compression,
elastic_transform.

brightness, contrast and saturate are photometric (no canvas); pixelate, jpeg_compression and
elastic_transform are spatial and run on the canvas of :mod:`evals.corruptions.scale`.
Signature ``fn(images, param, rng, scale) -> images``, images (N, H, W, C) in [0, 1].

Grey images and HSV: a grey pixel v is the HSV colour (h, s, v) = (0, 0, v). Brightness adds to
V, so on grey it is ``x + delta``. Saturation a s + b gives a grey pixel the saturation b with an
undefined hue; the project takes the HSV value V = max(R, G, B) back as the grey level, which is
v unchanged: **saturate is the identity on grey images** at every severity.
"""

import io

import numpy as np
from matplotlib.colors import hsv_to_rgb, rgb_to_hsv
from PIL import Image
from scipy import ndimage

from evals.corruptions.ops import box_resize, grid, pixelate_cells, warp


def _edit_hsv(images, channel, a, b):
    """Set HSV channel ``channel`` (1: S, 2: V) of colour ``images`` (N, H, W, 3) to
    ``clip(a * it + b, 0, 1)``; grey images (C = 1) are treated as V only."""
    if images.shape[-1] == 1:
        return np.clip(a * images + b, 0, 1) if channel == 2 else images
    hsv = rgb_to_hsv(np.clip(images, 0, 1))
    hsv[..., channel] = np.clip(a * hsv[..., channel] + b, 0, 1)
    return hsv_to_rgb(hsv)


def brightness(images, delta, rng, scale):
    """HSV value + ``delta`` (grey: ``x + delta``)."""
    return _edit_hsv(images, 2, 1.0, delta)


def saturate(images, param, rng, scale):
    """HSV saturation ``a s + b`` (identity on grey images, see the module docstring)."""
    a, b = param
    return _edit_hsv(images, 1, a, b)


def contrast(images, c, rng, scale):
    """``(x - mean) c + mean`` with the mean per image and channel."""
    mean = images.mean(axis=(1, 2), keepdims=True)
    return (images - mean) * c + mean


PILLOW_MIN_SIDE = 16


def pixelate(images, factor, rng, scale):
    """CIFAR-10-C's pixelate, relative to the image size.

    Sides of 16 px and more: the generator's rule, Pillow BOX resize down to ``int(H factor)`` x
    ``int(W factor)`` and back up (:func:`~evals.corruptions.ops.box_resize`); at 32 px 30, 28,
    27, 24, 20 cells of 1.07-1.6 px, each pixel the mean of the pixels whose centres share its
    cell; at 28 px 26, 25, 23, 21, 18 cells; at 16 px 15, 14, 13, 12, 10.

    Smaller sides: ``int(8 factor)`` gives 7, 7, 6, 6, 5 cells (severities merge), and a canvas
    averages commensurate cells away (32 -> 24 cells on the 4x canvas of an 8 px image is the
    identity once viewed at 8 px). There each pixel becomes the exact-overlap average of cells of
    the 32-px sizes, ``32 / int(32 factor)`` px, on a grid centred on the image
    (:func:`~evals.corruptions.ops.pixelate_cells`). Runs on the image's own grid (no canvas)."""
    _, h, w, _ = images.shape
    if min(h, w) >= PILLOW_MIN_SIDE:
        return box_resize(box_resize(images, int(h * factor), int(w * factor)), h, w)
    return pixelate_cells(images, 32 / int(32 * factor))


def jpeg_compression(images, quality, rng, scale):
    """JPEG round trip at ``quality`` with Pillow (8-bit, per image; grey as mode 'L')."""
    pixels = np.round(np.clip(images, 0, 1) * 255).astype(np.uint8)
    out = np.empty(images.shape, dtype=np.float64)
    for i, image in enumerate(pixels):
        buffer = io.BytesIO()
        Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(buffer, "JPEG", quality=quality)
        decoded = np.asarray(Image.open(buffer), dtype=np.float64) / 255
        out[i] = decoded.reshape(image.shape)
    return out


def affine_maps(rng, n, side, amount):
    """Random affine maps (n, 2, 3) acting on (x, y) pixel coordinates: the three points
    centre + (s, s), centre + (s, -s), centre - s (s = side // 3) move by U(-amount, amount)
    each (OpenCV's getAffineTransform of the reference). The uniforms are drawn for amount 1 and
    scaled, so different amounts share them."""
    centre, s = side // 2, side // 3
    source = np.array([[centre + s, centre + s], [centre + s, centre - s], [centre - s, centre - s]], dtype=np.float64)
    target = source + amount * rng.uniform(-1, 1, size=(n, 3, 2))
    design = np.concatenate([source, np.ones((3, 1))], axis=1)
    return np.linalg.solve(design[None], target).transpose(0, 2, 1)


def displacement_field(rng, n, h, w, alpha, sigma):
    """Elastic displacements (2, n, h, w) in pixels (dy, dx): ``alpha * gaussian(U(-1, 1), sigma)``
    (border: reflect, truncate 3); zero where ``alpha`` is 0."""
    field = rng.uniform(-1, 1, size=(2, n, h, w))
    if sigma > 0:
        field = ndimage.gaussian_filter(field, sigma=(0, 0, sigma, sigma), mode="reflect", truncate=3)
    return alpha * field


def elastic_transform(images, param, rng, scale):
    """Random affine warp (:func:`affine_maps`), then :func:`displacement_field`; bilinear, border:
    mirror. ``(alpha, sigma, affine)`` are fractions of the image side (the table's numbers
    divided by 32), so they scale with the image by themselves. The table moves weight from the
    global affine part (.08 -> .03 of the side) to the local elastic part (rms displacement grows)."""
    n, h, w, _ = images.shape
    alpha, sigma, amount = (fraction * h for fraction in param)
    maps = affine_maps(rng, n, min(h, w), amount)
    dy, dx = displacement_field(rng, n, h, w, alpha, sigma)
    ys, xs = grid(n, h, w)
    ys, xs = ys + dy, xs + dx
    # output pixel p takes the source pixel M^-1 p of the forward affine map M.
    linear = np.linalg.inv(maps[:, :, :2])
    offset = -np.einsum("nij,nj->ni", linear, maps[:, :, 2])
    src_x = linear[:, 0, 0, None, None] * xs + linear[:, 0, 1, None, None] * ys + offset[:, 0, None, None]
    src_y = linear[:, 1, 0, None, None] * xs + linear[:, 1, 1, None, None] * ys + offset[:, 1, None, None]
    return warp(images, src_y, src_x, mode="mirror")
