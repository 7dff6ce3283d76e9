"""Weather corruptions: snow, frost, fog, spatter.

Spatial: they run on the canvas of :mod:`evals.corruptions.scale` (lengths times ``scale``).
Signature ``fn(images, param, rng, scale) -> images``, images (N, H, W, C) in [0, 1]. Grey images
get the luma of the reference's colours (ice, water, mud). Random draws never depend on ``param``.
"""

import numpy as np

from evals.corruptions.ops import blur_maps, centre_zoom, colour, grey, motion_trail
from evals.corruptions.textures import frost_texture, plasma_fractal

FROST_TINT = (0.92, 0.96, 1.0)
# RGB; the reference lists them in OpenCV's BGR order but adds them to RGB arrays, so these are
# the colours its images actually get: pale turquoise water, dark brown mud.
WATER = (175 / 255, 238 / 255, 238 / 255)
MUD = (63 / 255, 42 / 255, 20 / 255)


def snow(images, param, rng, scale):
    """Snow: a N(mu, sigma) layer, zoomed, thresholded, motion-blurred (``(radius, sigma) *
    scale``, angle in [-135, -45] degrees), added twice (as it is and turned 180 degrees) to the
    image whitened as ``blend x + (1 - blend) max(x, 1.5 grey(x) + 0.5)``."""
    mu, sd, zoom, threshold, radius, sigma, blend = param
    n, h, w, _ = images.shape
    layer = centre_zoom((mu + sd * rng.standard_normal((n, h, w)))[..., None], zoom)[..., 0]
    layer = np.clip(np.where(layer < threshold, 0.0, layer), 0, 1)
    angles = rng.uniform(-135, -45, size=n)
    layer = motion_trail(layer[..., None], radius * scale, sigma * scale, angles)
    whitened = blend * images + (1 - blend) * np.maximum(images, grey(images) * 1.5 + 0.5)
    return whitened + layer + layer[:, ::-1, ::-1]


def frost(images, param, rng, scale):
    """``a x + b frost`` (CIFAR-10-C's blend), frost a procedural texture (:func:`frost_texture`)
    whose grey level has the statistics of the reference's frost photographs; colour images get it
    ice-tinted with the same luma (channels clipped at 1)."""
    a, b = param
    n, h, w, c = images.shape
    texture = frost_texture(rng, n, max(h, w), scale)[:, :h, :w, None]
    tinted = np.minimum(texture * colour(FROST_TINT, c) / colour(FROST_TINT, 1), 1)
    return a * images + b * tinted


def fog(images, param, rng, scale):
    """``(x + strength plasma) max / (max + strength)``: plasma fractal with wibble ``decay``
    (one map per image, shared by the channels), max the image's largest value."""
    strength, decay = param
    n, h, w, _ = images.shape
    plasma = plasma_fractal(rng, n, max(h, w), decay)[:, :h, :w, None]
    top = images.max(axis=(1, 2, 3), keepdims=True)
    return (images + strength * plasma) * top / (top + strength)


def spatter(images, param, rng, scale):
    """Liquid splashes. A N(mu, sigma) layer blurred by ``blur * scale`` and cut at ``threshold``.
    Water: the remaining layer, divided by its maximum and times ``k``, adds pale turquoise
    (the reference shades it with Canny edges and a distance transform; here the layer's own
    height is the shading). Mud: the cut mask blurred by ``k * scale`` and kept where >= 0.8
    replaces the image with mud brown by that weight."""
    mu, sd, blur_sigma, threshold, k, mode = param
    n, h, w, c = images.shape
    liquid = blur_maps(mu + sd * rng.standard_normal((n, h, w)), blur_sigma * scale)
    liquid = np.where(liquid >= threshold, liquid, 0.0)
    if mode == "water":
        top = np.maximum(liquid.max(axis=(1, 2), keepdims=True), 1e-12)
        return images + (k * liquid / top)[..., None] * colour(WATER, c)
    weight = blur_maps((liquid > 0).astype(np.float64), k * scale)
    weight = np.where(weight >= 0.8, weight, 0.0)[..., None]
    return images * (1 - weight) + weight * colour(MUD, c)
