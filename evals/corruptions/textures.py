"""Procedural textures: plasma fractals (fog) and frost.

No texture files ship with the project, so frost is generated, seeded: a Gaussian haze with a
power-law spectrum plus a layer of thin bright ice needles, mapped to fixed grey-level statistics.
The random numbers drawn depend only on the number and size of the maps, never on a severity.

Frost's target statistics, and where they come from. The CIFAR-10-C generator blends
``a x + b frost`` ((a, b) per severity in :mod:`evals.corruptions.registry`) with a random 32 px crop
of one of its frost photographs, resized by a fixed factor first. The photographs are not used
here, nor their pixels or the generator's code. Issue 14 gives the grey-level statistics of such
crops, measured from the generator's own output: mean 0.64, sd 0.19 (per pixel, pooled over
crops, grey level in [0, 1]); the texture is set to them (clipping at 1 leaves about 0.637, 0.183).
The crops' spectrum was not available: the target taken is that of natural photographs, a
radially averaged power falling as 1 / f^2 (slope -2; :func:`power_spectrum_slope` measures about
-1.85 on 32 px maps and -2.0 on 56 px canvases, the needles adding fine detail). That slope is an
assumption about the frost photographs, not a measurement of them.
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


# Grey-level statistics of 32 px crops of the CIFAR-10-C generator's frost photographs (mean, sd
# per pixel, pooled over crops; see the module docstring for where they come from).
FROST_MEAN, FROST_SD = 0.64, 0.19
# Natural-image power law: radially averaged power ~ f^FROST_SLOPE.
FROST_SLOPE = -2.0
NEEDLE_WEIGHT = 0.5


def power_law_field(rng, n, size, slope):
    """Gaussian random fields (n, size, size), periodic, with radially averaged power ~ f^slope:
    white noise filtered in Fourier space by |f|^(slope / 2) (|f| floored at one cycle per map, the
    mean removed). Standardised to mean 0, sd 1 per map."""
    fy = np.fft.fftfreq(size)[:, None]
    fx = np.fft.rfftfreq(size)[None, :]
    radius = np.maximum(np.hypot(fy, fx), 1 / size)
    gain = radius ** (slope / 2)
    gain[0, 0] = 0
    field = np.fft.irfft2(np.fft.rfft2(rng.standard_normal((n, size, size))) * gain, s=(size, size))
    return _standardised(field)


def _standardised(maps):
    maps = maps - maps.mean(axis=(1, 2), keepdims=True)
    return maps / np.maximum(maps.std(axis=(1, 2), keepdims=True), 1e-12)


def ice_needles(rng, n, size, scale):
    """Thin bright needles (n, size, size) >= 0: ``~size^2 / 40`` straight strokes of length 2-8 px
    (times ``scale``) at random angles and brightness 0.3-0.6, softened by a ``0.5 scale`` px blur."""
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
    return blur_maps(needles, 0.5 * scale)


def frost_texture(rng, n, size, scale):
    """Frost grey levels (n, size, size) in [0, 1]: a power-law haze (:func:`power_law_field`, slope
    ``FROST_SLOPE``) plus :func:`ice_needles` (weight ``NEEDLE_WEIGHT``), standardised per map and
    set to mean ``FROST_MEAN``, sd ``FROST_SD``, clipped to [0, 1] (the clip trims about 3 % of
    the pixels and lowers the mean by about 0.005)."""
    haze = power_law_field(rng, n, size, FROST_SLOPE)
    texture = _standardised(haze + NEEDLE_WEIGHT * _standardised(ice_needles(rng, n, size, scale)))
    return np.clip(FROST_MEAN + FROST_SD * texture, 0, 1)


def power_spectrum_slope(maps):
    """Slope of the log-log least-squares line through the radially averaged power spectrum of
    ``maps`` (n, size, size) (mean removed per map, no window; power averaged over the maps in
    rings of integer radius k = 1 .. size // 2 cycles per map). Natural photographs give about -2."""
    size = maps.shape[-1]
    power = (np.abs(np.fft.fft2(maps - maps.mean(axis=(1, 2), keepdims=True))) ** 2).mean(axis=0)
    k = np.fft.fftfreq(size) * size
    ring = np.rint(np.hypot(k[:, None], k[None, :])).astype(np.int64)
    radii = np.arange(1, size // 2 + 1)
    mean_power = np.array([power[ring == r].mean() for r in radii])
    return float(np.polyfit(np.log(radii), np.log(mean_power), 1)[0])
