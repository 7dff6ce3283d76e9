"""The 19 corruptions: names, aliases, functions and their five severity parameters, registered in
`base.registry.CORRUPTIONS` (`REGISTRY` here), where a user's own corruption joins them (`register_corruption`).

Parameters are those of the CIFAR-10-C generation script at 32x32 (Hendrycks and Dietterich, 2019);
elastic_transform's are written as fractions of the image side. ``spatial`` says whether the corruption
runs on the canvas of :mod:`evals.corruptions.scale`.
"""

from typing import Any, Callable, NamedTuple

from evals.corruptions import blur, digital, noise, weather
from base.errors import InputError
from base.registry import CORRUPTIONS as REGISTRY


class Corruption(NamedTuple):
    """One corruption type: ``fn(images, param, rng, scale)`` and ``params[s - 1]`` for severity s."""

    name: str
    fn: Callable
    params: tuple[Any, ...]
    spatial: bool
    random: bool


def _prefixes(values):
    """Severity s gets values[:s] (impulse noise needs the amounts of the severities below)."""
    return tuple(tuple(values[: s + 1]) for s in range(len(values)))


_BUILT_IN = [
    Corruption("gaussian_noise", noise.gaussian_noise, (0.04, 0.06, 0.08, 0.09, 0.10), False, True),
    Corruption("shot_noise", noise.shot_noise, (500, 250, 100, 75, 50), False, True),
    Corruption("impulse_noise", noise.impulse_noise, _prefixes((0.01, 0.02, 0.03, 0.05, 0.07)), False, True),
    Corruption("defocus_blur", blur.defocus_blur, ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)), True, False),
    Corruption(
        "glass_blur",
        blur.glass_blur,
        ((0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)),
        True,
        True,
    ),
    Corruption("motion_blur", blur.motion_blur, ((6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)), True, True),
    Corruption("zoom_blur", blur.zoom_blur, (1.06, 1.11, 1.16, 1.21, 1.26), True, False),
    Corruption(
        "snow",
        weather.snow,
        (
            (0.1, 0.2, 1, 0.6, 8, 3, 0.95),
            (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
            (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
            (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
            (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8),
        ),
        True,
        True,
    ),
    Corruption("frost", weather.frost, ((1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)), True, True),
    Corruption("fog", weather.fog, ((0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)), True, True),
    Corruption("brightness", digital.brightness, (0.05, 0.1, 0.15, 0.2, 0.3), False, False),
    Corruption("contrast", digital.contrast, (0.75, 0.5, 0.4, 0.3, 0.15), False, False),
    Corruption(
        "elastic_transform",
        digital.elastic_transform,
        ((0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05), (0.1, 0.03, 0.03)),
        True,
        True,
    ),
    Corruption("pixelate", digital.pixelate, (0.95, 0.9, 0.85, 0.75, 0.65), False, False),
    Corruption("jpeg_compression", digital.jpeg_compression, (80, 65, 58, 50, 40), True, False),
    Corruption("speckle_noise", noise.speckle_noise, (0.06, 0.10, 0.12, 0.16, 0.20), False, True),
    Corruption("gaussian_blur", blur.gaussian_blur, (0.4, 0.6, 0.7, 0.8, 1.0), True, False),
    Corruption(
        "spatter",
        weather.spatter,
        (
            (0.62, 0.1, 0.7, 0.7, 0.5, "water"),
            (0.65, 0.1, 0.8, 0.7, 0.5, "water"),
            (0.65, 0.3, 1, 0.69, 0.5, "water"),
            (0.65, 0.1, 0.7, 0.69, 0.6, "mud"),
            (0.65, 0.1, 0.5, 0.68, 0.6, "mud"),
        ),
        True,
        True,
    ),
    Corruption("saturate", digital.saturate, ((0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2)), False, False),
]


def register_corruption(corruption: Corruption) -> Corruption:
    """Make `corruption` known by its name (``corrupt(x, name, severity)``, `resolve`); returns it. Raises
    InputError for anything but a `Corruption` with five severity parameters."""
    if not isinstance(corruption, Corruption) or len(corruption.params) != 5:
        raise InputError("corruption", corruption, "a Corruption(name, fn, params, spatial, random) with five params")
    return REGISTRY.register(corruption.name, corruption)


for _corruption in _BUILT_IN:
    register_corruption(_corruption)
CORRUPTIONS = tuple(c.name for c in _BUILT_IN)
"""The 19 built-in corruptions' names, in the CIFAR-10-C order (`REGISTRY` also holds any registered since)."""
BENCHMARK_CORRUPTIONS = CORRUPTIONS[:15]
EXTRA_CORRUPTIONS = CORRUPTIONS[15:]
# TFDS cifar10_corrupted config names that differ from the CIFAR-10-C file names.
TFDS_NAMES = {"glass_blur": "frosted_glass_blur", "elastic_transform": "elastic"}
ALIASES = {tfds: name for name, tfds in TFDS_NAMES.items()}


def resolve(kind):
    """Canonical name of ``kind`` (a CIFAR-10-C file name or a TFDS alias); ValueError otherwise."""
    name = ALIASES.get(kind, kind)
    if name not in REGISTRY:
        raise InputError.worded("kind",
                                f"kind: unknown corruption {kind!r}; expected one of {tuple(REGISTRY)} or aliases {tuple(ALIASES)}")
    return name


def tfds_name(kind):
    """TFDS cifar10_corrupted config stem of ``kind`` (e.g. 'glass_blur' -> 'frosted_glass_blur')."""
    name = resolve(kind)
    return TFDS_NAMES.get(name, name)
