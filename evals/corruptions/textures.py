"""Procedural textures: plasma fractals (fog) and frost.

No texture files ship with the project, so frost is generated: a plasma haze plus a layer of thin
bright ice needles, seeded. The random numbers drawn depend only on the number and size of the
maps, never on the roughness parameter, so severities share their randomness.
"""

import numpy as np

from evals.corruptions.ops import blur_maps


def plasma_fractal(rng, n, size, decay):
    """Diamond-square plasma maps (as in the CIFAR-10-C fog), normalised to [0, 1] each.

    ``size`` is rounded up to a power of two and the maps are cropped back; ``decay`` is the
    wibble decay per octave (larger: smoother). Returns (n, size, size) float64.
    """
    mapsize = 1 << max(1, int(np.ceil(np.log2(size))))
    maps = np.zeros((n, mapsize, mapsize))
    step, wibble = mapsize, 100.0
    while step >= 2:
        half = step // 2
        corners = maps[:, 0:mapsize:step, 0:mapsize:step]
        square = corners + np.roll(corners, -1, axis=1)
        square = square + np.roll(square, -1, axis=2)
        maps[:, half::step, half::step] = square / 4 + wibble * rng.uniform(-wibble, wibble, square.shape)
        centres = maps[:, half::step, half::step]
        corners = maps[:, 0:mapsize:step, 0:mapsize:step]
        left = centres + np.roll(centres, 1, axis=1) + corners + np.roll(corners, -1, axis=2)
        maps[:, 0:mapsize:step, half::step] = left / 4 + wibble * rng.uniform(-wibble, wibble, left.shape)
        top = centres + np.roll(centres, 1, axis=2) + corners + np.roll(corners, -1, axis=1)
        maps[:, half::step, 0:mapsize:step] = top / 4 + wibble * rng.uniform(-wibble, wibble, top.shape)
        step //= 2
        wibble /= decay
    maps = maps[:, :size, :size]
    maps -= maps.min(axis=(1, 2), keepdims=True)
    return maps / np.maximum(maps.max(axis=(1, 2), keepdims=True), 1e-12)


def frost_texture(rng, n, size, scale):
    """Frost textures (n, size, size) in [0, 1]: a bright plasma haze (about 0.25-0.6) with
    ``~size^2 / 40`` thin needles of length 2-8 px (times ``scale``) at random angles on top,
    softened by a 0.5 px blur. Mean about 0.5, like the reference frost photographs."""
    haze = 0.25 + 0.35 * plasma_fractal(rng, n, size, decay=2.0)
    count = max(4, size * size // 40)
    points = 12
    starts = rng.uniform(0, size, (n, count, 2))
    angles = rng.uniform(0, np.pi, (n, count))
    lengths = scale * rng.uniform(2, 8, (n, count))
    brightness = rng.uniform(0.3, 0.6, (n, count))
    steps = np.linspace(0, 1, points)
    direction = np.stack([np.sin(angles), np.cos(angles)], axis=-1)
    path = starts[:, :, None, :] + (lengths[..., None] * steps)[..., None] * direction[:, :, None, :]
    iy = np.clip(path[..., 0].astype(np.int64), 0, size - 1)
    ix = np.clip(path[..., 1].astype(np.int64), 0, size - 1)
    ib = np.broadcast_to(np.arange(n)[:, None, None], iy.shape)
    needles = np.zeros((n, size, size))
    np.maximum.at(needles, (ib, iy, ix), np.broadcast_to(brightness[..., None], iy.shape))
    return np.clip(haze + blur_maps(needles, 0.5 * scale), 0, 1)
