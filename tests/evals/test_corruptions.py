"""Corruptions: identity at severity 0, change growing with severity, range/dtype, seeds, names."""

import functools

import numpy as np
import pytest
from scipy import ndimage

from evals.corruptions import (
    ALIASES,
    BENCHMARK_CORRUPTIONS,
    CORRUPTIONS,
    corrupt,
    corrupted,
)
from evals.corruptions import ops
from evals.corruptions.digital import displacement_field
from evals.corruptions.noise import impulse_count, poisson_quantile
from evals.corruptions.registry import REGISTRY
from evals.corruptions.scale import canvas_factor, from_canvas, spatial_scale, to_canvas
from evals.corruptions.textures import plasma_fractal

SHAPES = [(8, 1), (8, 3), (28, 1), (28, 3), (32, 1), (32, 3)]
COPIES = 8
# Kinds whose table parameters do not order the mean absolute change; each has its own test of
# the weaker property documented in evals/corruptions/__init__.py.
WEAKER = {"saturate", "frost", "elastic_transform", "motion_blur", "glass_blur", "snow", "spatter", "zoom_blur"}


def fixed_image(side, channels):
    """A smooth, textured image in about [0.2, 0.8] (no clipping at the start), channels differing;
    COPIES copies, so that random kinds are measured over COPIES independent draws."""
    yy, xx = np.mgrid[0:side, 0:side] / side
    grey = 0.5 + 0.3 * np.sin(6 * xx + 3 * yy) * (0.6 + 0.4 * np.cos(4 * yy))
    image = np.repeat(grey[..., None], channels, axis=-1)
    if channels == 3:
        image[..., 1] *= 0.8
        image[..., 2] = 1 - image[..., 2]
    return np.repeat(image.astype(np.float32)[None], COPIES, axis=0)


@functools.lru_cache(maxsize=None)
def changes(side, channels):
    """{kind: mean |corrupt(x, kind, s) - x| for s = 1..5} on the fixed image."""
    x = fixed_image(side, channels)
    return {k: np.array([np.abs(corrupt(x, k, s, seed=0).astype(np.float64) - x).mean() for s in range(1, 6)]) for k in CORRUPTIONS}


def test_names():
    assert len(CORRUPTIONS) == 19 and len(set(CORRUPTIONS)) == 19
    assert BENCHMARK_CORRUPTIONS == CORRUPTIONS[:15]
    assert set(CORRUPTIONS) - set(BENCHMARK_CORRUPTIONS) == {"speckle_noise", "gaussian_blur", "spatter", "saturate"}
    assert ALIASES == {"frosted_glass_blur": "glass_blur", "elastic": "elastic_transform"}
    assert all(len(c.params) == 5 for c in REGISTRY.values())


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_severity_zero_is_identity(kind):
    x = fixed_image(8, 3)
    out = corrupt(x, kind, 0, seed=3)
    assert out is not x and out.dtype == x.dtype
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("side,channels", SHAPES)
@pytest.mark.parametrize("kind", sorted(set(CORRUPTIONS) - WEAKER))
def test_change_grows_strictly_with_severity(kind, side, channels):
    change = changes(side, channels)[kind]
    assert change[0] > 0
    assert np.all(np.diff(change) > 0), change


@pytest.mark.parametrize("side,channels", SHAPES)
def test_weaker_orders(side, channels):
    c = changes(side, channels)
    assert np.all(np.array([c[k] for k in WEAKER - {"saturate"}]) > 0)
    # motion_blur: 3 -> 4 only lengthens a sigma-2 trail from 13 to 17 taps (weights < 1e-9).
    m = c["motion_blur"]
    assert m[0] < m[1] < m[2] < m[4] and m[3] < m[4] and abs(m[3] - m[2]) < 1e-6
    # glass_blur: two shuffle rounds (4, 5) change more than one (1-3) on average.
    g = c["glass_blur"]
    assert g[3:].mean() > g[:3].mean()
    # snow: 2 -> 3 keeps the blend and trades small flakes for fewer large ones.
    s = c["snow"]
    assert s[0] < s[1] and s[0] < s[2] < s[3] < s[4] and s[1] < s[3]
    # zoom_blur: the generator's whole-pixel crop shifts the image at 1.04-1.06, which outweighs
    # severity 2's longer zoom range on this smooth image (natural images: tests/evals/test_corruption_magnitudes.py).
    z = c["zoom_blur"]
    assert z[1] < z[2] < z[3] < z[4] and z[0] < z[2]
    # spatter: water at 1-3, mud at 4-5.
    p = c["spatter"]
    assert p[0] < p[1] < p[2] and p[3] < p[4]


@pytest.mark.parametrize("side", [8, 28, 32])
def test_saturate(side):
    grey = fixed_image(side, 1)
    for s in range(1, 6):
        np.testing.assert_array_equal(corrupt(grey, "saturate", s), grey)
    c = changes(side, 3)["saturate"]
    assert 0 < c[0] < c[1] and 0 < c[2] < c[3] < c[4]


@pytest.mark.parametrize("side,channels", SHAPES)
def test_frost_texture_weight_grows(side, channels):
    x = fixed_image(side, channels).astype(np.float64)
    outs = [corrupt(x, "frost", s, seed=1) for s in range(1, 6)]
    a = np.array([p[0] for p in REGISTRY["frost"].params])
    inside = np.all([(o > 0) & (o < 1) for o in outs], axis=0)
    weight = [np.abs(o / ai - x)[inside].mean() for o, ai in zip(outs, a)]
    assert np.all(np.diff(weight) > 0), weight


def test_elastic_displacement_grows():
    rms = []
    for alpha, sigma, _ in REGISTRY["elastic_transform"].params:
        field = displacement_field(np.random.default_rng(0), 4, 32, 32, alpha * 32, sigma * 32)
        rms.append(np.sqrt(np.mean(field**2)))
    assert rms[0] == 0 and np.all(np.diff(rms) > 0), rms


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_range_dtype_shape(kind):
    for x in (fixed_image(8, 1)[:2], np.random.default_rng(0).uniform(size=(2, 28, 28, 3)).astype(np.float32)):
        out = corrupt(x, kind, 5, seed=0)
        assert out.shape == x.shape and out.dtype == np.float32
        assert out.min() >= 0 and out.max() <= 1
    x64 = fixed_image(8, 3)[:2].astype(np.float64)
    assert corrupt(x64, kind, 2).dtype == np.float64


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_seeds(kind):
    x = fixed_image(8, 3)[:2]
    a, b, c = (corrupt(x, kind, 3, seed=s) for s in (7, 7, 8))
    np.testing.assert_array_equal(a, b)
    assert REGISTRY[kind].random == (not np.array_equal(a, c))


def test_aliases():
    x = fixed_image(8, 1)[:2]
    for alias, name in ALIASES.items():
        np.testing.assert_array_equal(corrupt(x, alias, 4, seed=2), corrupt(x, name, 4, seed=2))


def test_bad_arguments():
    x = fixed_image(8, 1)[:1]
    with pytest.raises(ValueError, match="kind"):
        corrupt(x, "rain", 1)
    for severity in (-1, 6, 2.5, True, "3"):
        with pytest.raises(ValueError, match="severity"):
            corrupt(x, "fog", severity)
    for images in (x[0], x.astype(np.uint8), x * 2, np.full((1, 8, 8, 2), 0.5)):
        with pytest.raises(ValueError, match="images"):
            corrupt(images, "fog", 1)


def test_photometric_numbers():
    x = np.array([0.2, 0.4, 0.6, 0.8], dtype=np.float32).reshape(1, 2, 2, 1)
    np.testing.assert_allclose(corrupt(x, "contrast", 2), (x - 0.5) * 0.5 + 0.5, atol=1e-7)
    np.testing.assert_allclose(corrupt(x, "brightness", 5), np.minimum(x + 0.3, 1), atol=1e-7)
    assert list(impulse_count((0.01, 0.02, 0.03, 0.05, 0.07), 64)) == [1, 2, 3, 4, 5]
    assert list(impulse_count((0.01, 0.02, 0.03, 0.05, 0.07), 3072)) == [31, 61, 92, 154, 215]
    grey = np.full((1, 8, 8, 1), 0.5, dtype=np.float32)
    hit = corrupt(grey, "impulse_noise", 1) != 0.5
    assert hit.sum() == 1


def test_poisson_quantile_is_scipys_ppf():
    from scipy import stats

    rng = np.random.default_rng(0)
    u, rate = rng.uniform(size=5000), rng.uniform(0, 500, size=5000) * rng.integers(0, 2, size=5000) + 1e-12
    np.testing.assert_array_equal(poisson_quantile(u, rate), stats.poisson.ppf(u, rate))


def test_shot_noise_is_unbiased():
    x = np.full((1, 64, 64, 3), 0.3, dtype=np.float32)
    out = corrupt(x, "shot_noise", 5, seed=0)
    assert abs(out.mean() - 0.3) < 0.005
    assert abs(out.std() - np.sqrt(0.3 / 50)) < 0.005


def test_rescale_rule():
    assert [canvas_factor(s) for s in (8, 16, 28, 32, 64)] == [4, 2, 2, 1, 1]
    assert spatial_scale(56) == 1.75
    x = fixed_image(8, 3)[:2]
    np.testing.assert_allclose(from_canvas(to_canvas(x, 4), 4), x, rtol=1e-6)


def test_ops():
    x = fixed_image(32, 3)[:2]
    for z in (1.0, 1.01):  # the whole image, stretched to round(32 z) = 32 pixels
        np.testing.assert_allclose(ops.clipped_zoom(x, z), x, atol=1e-6)
    # 1.03: the whole image stretched to 33 pixels, the first 32 kept: anchored at the top-left
    zoomed = ops.clipped_zoom(x, 1.03)
    np.testing.assert_allclose(zoomed[:, 0, 0], x[:, 0, 0], atol=1e-6)
    for z in (1.03, 1.2):  # channel by channel = scipy's one 4-D zoom of the crop, bit for bit
        ch = int(np.ceil(32 / z))
        top = (32 - ch) // 2
        whole = ndimage.zoom(x[:, top:top + ch, top:top + ch].astype(np.float64), (1, z, z, 1), order=1)
        cut = (whole.shape[1] - 32) // 2
        np.testing.assert_array_equal(ops.clipped_zoom(x, z), whole[:, cut:cut + 32, cut:cut + 32])
    assert np.abs(zoomed[:, -1, -1] - x[:, -1, -1]).max() > 1e-3
    np.testing.assert_allclose(ops.cell_average_matrix(6, 1.0), np.eye(6), atol=1e-12)
    np.testing.assert_allclose(ops.cell_average_matrix(4, 2.0), np.kron(np.eye(2), np.full((2, 2), 0.5)), atol=1e-12)
    np.testing.assert_allclose(ops.box_resize(x, 32, 32), x, atol=1e-6)
    np.testing.assert_allclose(ops.box_resize(x, 16, 16), x.reshape(2, 16, 2, 16, 2, 3).mean(axis=(2, 4)), atol=1e-6)
    kernels = ops.trail_kernels(2.0, 1.0, np.array([0.0, 90.0]))
    np.testing.assert_allclose(kernels.sum(axis=(1, 2)), 1)
    centre = kernels.shape[1] // 2
    assert kernels[0, centre, centre + 1] > 0 and kernels[0, centre + 1, centre] == 0
    image = np.zeros((1, 9, 9, 1))
    image[0, 4, 4] = 1
    np.testing.assert_allclose(ops.convolve_each(image, kernels[:1])[0, 4, 4:8, 0], kernels[0, centre, centre : centre + 4], atol=1e-12)
    ys, xs = ops.grid(1, 9, 9)
    np.testing.assert_allclose(ops.warp(image, ys + 0.5, xs), 0.5 * (image + np.roll(image, -1, axis=1)), atol=1e-12)
    maps = plasma_fractal(np.random.default_rng(0), 2, 8, 2.0)
    assert maps.shape == (2, 8, 8) and np.allclose(maps.min(axis=(1, 2)), 0) and np.allclose(maps.max(axis=(1, 2)), 1)


class _Flat:
    def __init__(self, x, y, image_shape=None):
        self.x, self.y, self.image_shape = x, y, image_shape


def test_corrupted_sets():
    x = fixed_image(8, 1)[:3]
    flat = _Flat(x.reshape(3, 64), np.array([0, 1, 2]))
    sets = list(corrupted(flat, types=["fog", "elastic"], severities=(1, 5), image_shape=(8, 8, 1)))
    assert [(t, s) for t, s, _, _ in sets] == [("fog", 1), ("fog", 5), ("elastic_transform", 1), ("elastic_transform", 5)]
    for kind, severity, images, labels in sets:
        assert images.shape == (3, 64)
        np.testing.assert_array_equal(images.reshape(x.shape), corrupt(x, kind, severity, seed=0))
        np.testing.assert_array_equal(labels, flat.y)
    with pytest.raises(ValueError, match="image_shape"):
        next(corrupted(flat))
    assert next(corrupted(_Flat(flat.x, flat.y, (8, 8, 1))))[2].shape == (3, 64)
    assert len(list(corrupted(_Flat(x, flat.y), severities=(2,)))) == 19


def test_grid_plot(tmp_path):
    import matplotlib.image

    from evals.corruption_grid import plot_corruption_grid

    path = tmp_path / "grid.png"
    plot_corruption_grid(fixed_image(8, 1)[0], path, kinds=("fog", "contrast"))
    height, width = matplotlib.image.imread(path).shape[:2]
    assert width > 2 * height  # 2 rows x 6 severities
