"""Corrupted test sets: the 15 CIFAR-10-C benchmark corruptions and the 4 extras, 5 severities.

``corrupt(images, kind, severity, seed)`` applies one corruption to NHWC images of any size, grey
or colour; ``corrupted(test_set, ...)`` yields every (type, severity) set of a test set. Kind names
are the CIFAR-10-C file names; TFDS's ``frosted_glass_blur`` and ``elastic`` are aliases.

Magnitudes follow CIFAR-10-C (the 32x32 generator), not ImageNet-C. zoom_blur and pixelate
reproduce the generator's own steps at 32 px (whole-pixel crop + scipy zoom; Pillow BOX down and
up); frost's texture is procedural with the grey-level statistics of the generator's frost crops
(:mod:`evals.corruptions.textures`).

Parameters: those of the CIFAR-10-C generation script at 32x32 (listed per kind in
:mod:`evals.corruptions.registry`); how spatial ones carry
over to 8x8 or 28x28 images is the rule of :mod:`evals.corruptions.scale` (run on a canvas blown
up ``ceil(32 / side)`` times, lengths times ``canvas_side / 32``). Photometric ones carry over.

Randomness: ``np.random.default_rng([seed, crc32(kind), chunk])`` per chunk of 1024 images, so the
same seed gives the same set, kinds draw independent numbers, and the draws do not depend on the
severity (severities of one seed are coupled: common random numbers).

Severity and the mean absolute change |corrupt(x) - x| on a fixed image (tested in
tests/evals/test_corruptions.py at 8, 28 and 32 px, grey and colour): it grows strictly from
severity 1 to 5 for 11 kinds. For the other 8 the table's own parameters do not order it that way;
what is tested instead:

* saturate: (a, b) = (.3, 0), (.1, 0), (1.5, 0), (2, .1), (2.5, .2) desaturates at 1-2 and
  oversaturates at 3-5; strictly growing within 1-2 and within 3-5. Identity on grey images.
* frost: a x + b f with a falling (.9 -> .85 -> .75 at 3 -> 5) while b stays near .4 dims the
  image under the same texture, so the change shrinks after severity 3, as in CIFAR-10-C (tested
  against the generator's blend with its texture statistics in test_corruption_magnitudes.py).
  The texture weight b / a, the mean of |out / a - x| over unclipped pixels, grows strictly.
* zoom_blur: the generator's whole-pixel crop (:func:`evals.corruptions.ops.clipped_zoom`) shifts
  the image by up to a pixel at factors 1.04-1.06, so on a smooth image severity 1 can change
  more than 2; strictly growing from 2 to 5, and from 1 to 5 on natural images at 32 px.
* elastic_transform: the global affine part shrinks (.08 -> .03 of the side) while the local
  displacement grows; the change on smooth images falls. The rms displacement grows strictly.
* motion_blur: 3 -> 4 is (6, 2) -> (8, 2): only the trail's length limit moves, at tap weights
  below 1e-9; equal within 1e-6 there, strictly growing elsewhere.
* glass_blur: the change comes from the pixel shuffles (1 round at 1-3, 2 at 4-5); more blur
  within a round smooths part of it away. Tested: the mean over 4-5 exceeds the mean over 1-3.
* snow: 2 -> 3 keeps the blend (.9) and trades small dense flakes for fewer larger ones; all
  other steps grow strictly, and 3 > 1, 4 > 2.
* spatter: water at 1-3, mud at 4-5 (different effects); strictly growing within each.
"""

import zlib

import numpy as np

from evals.corruptions.registry import (
    ALIASES,
    BENCHMARK_CORRUPTIONS,
    CORRUPTIONS,
    EXTRA_CORRUPTIONS,
    REGISTRY,
    resolve,
    tfds_name,
)
from evals.corruptions.scale import canvas_factor, from_canvas, spatial_scale, to_canvas
from base.validation import check_seed
from base.errors import ArgumentTypeError, InputError

__all__ = [
    "ALIASES",
    "BENCHMARK_CORRUPTIONS",
    "CORRUPTIONS",
    "EXTRA_CORRUPTIONS",
    "SEVERITIES",
    "corrupt",
    "corrupted",
    "resolve",
    "tfds_name",
]

SEVERITIES = (1, 2, 3, 4, 5)
CHUNK = 1024


def _check_images(images):
    """`images` as a NumPy array, checked: (N, H, W, C) with H, W >= 1 and C 1 or 3, float, finite, in [0, 1].
    A JAX array (or anything else NumPy converts without copying semantics changing) is accepted as its
    values; lists and other objects are refused (InputError / ArgumentTypeError naming ``images``)."""
    if not isinstance(images, np.ndarray) and hasattr(images, "__array__") and hasattr(images, "shape"):
        images = np.asarray(images)  # a JAX array: its values on the host
    if not isinstance(images, np.ndarray):
        raise ArgumentTypeError("images", f"<{type(images).__name__}>", "a NumPy or JAX array (N, H, W, C)")
    if images.ndim != 4 or images.shape[-1] not in (1, 3) or 0 in images.shape[1:3]:
        raise InputError("images", f"<array of shape {images.shape}>",
                         "images (N, H, W, C) with H, W >= 1 and C 1 (grey) or 3 (RGB)")
    if not np.issubdtype(images.dtype, np.floating):
        raise InputError("images", f"<array of dtype {images.dtype}>", "a float array in [0, 1]",
                         "scale integer pixels first, e.g. images / 255")
    if images.size and not (np.isfinite(images).all() and images.min() >= 0 and images.max() <= 1):
        raise InputError("images", f"<values in [{np.nanmin(images):.4g}, {np.nanmax(images):.4g}]"
                         + (", some NaN/inf" if not np.isfinite(images).all() else "") + ">", "finite values in [0, 1]")
    return images


def _check_severity(severity, arg="severity"):
    if isinstance(severity, bool) or not isinstance(severity, (int, np.integer)) or not 0 <= severity <= 5:
        raise InputError(arg, severity, "an int in 0..5")


def _names(types):
    """Canonical corruption names of `types` (None: all 19); a single string is refused, not iterated."""
    if types is None:
        return list(CORRUPTIONS)
    if isinstance(types, (str, bytes)) or not hasattr(types, "__iter__"):
        raise ArgumentTypeError("types", types, "a list of corruption names (e.g. ['fog']) or None (all)")
    return [resolve(t) for t in types]


def _severities(severities):
    """`severities` (any iterable of ints) as a list of ints in 0..5; a single int is refused (pass [3])."""
    if isinstance(severities, (str, bytes)) or not hasattr(severities, "__iter__"):
        raise ArgumentTypeError("severities", severities, "a list of severities in 0..5 (e.g. [3])")
    for i, severity in enumerate(severities):
        _check_severity(severity, f"severities[{i}]")
    return list(severities)


def corrupt(images, kind, severity, seed=0):
    """Apply corruption ``kind`` at ``severity`` to ``images``.

    images: (N, H, W, C) float array in [0, 1] (NumPy, or a JAX array: its values), C = 1 (grey) or 3 (RGB),
    any H, W >= 1.
    kind: a name of ``CORRUPTIONS`` or an alias of ``ALIASES``. severity: 0 (identity) .. 5.
    seed: an integer in [0, 2**32 - 1]; the same seed gives the same output.
    Returns a NumPy array of the same shape and dtype, clipped to [0, 1].
    InputError (a ValueError) naming the argument for a bad ``images``, ``kind``, ``severity`` or ``seed``.
    """
    images = _check_images(images)
    corruption = REGISTRY[resolve(kind)]
    _check_severity(severity)
    seed = check_seed(seed)
    if severity == 0:
        return images.copy()
    param = corruption.params[severity - 1]
    m = canvas_factor(min(images.shape[1:3])) if corruption.spatial else 1
    scale = spatial_scale(m * min(images.shape[1:3]))
    out = np.empty_like(images)
    for start in range(0, len(images), CHUNK):
        rng = np.random.default_rng([seed, zlib.crc32(corruption.name.encode()), start // CHUNK])
        canvas = to_canvas(images[start : start + CHUNK], m)
        result = from_canvas(corruption.fn(canvas, param, rng, scale), m)
        out[start : start + CHUNK] = np.clip(result, 0, 1)
    return out


def corrupted(test_set, types=None, severities=SEVERITIES, seed=0, image_shape=None):
    """An iterator of ``(type, severity, images, labels)`` for every type in ``types`` and severity.

    test_set: any object with ``.x`` (N, H, W, C) float in [0, 1] (or (N, D) flat features with
    ``image_shape`` = (H, W, C) given or set on ``test_set.image_shape`` as on base.data.Dataset;
    images then come back flat, (N, D)) and ``.y`` (N,) labels. Standardised features are not
    images: corrupt the raw pixels and standardise in the predictor.
    types: a list of names or aliases (default: all 19 ``CORRUPTIONS``); yielded under canonical names.
    severities: a list of ints in 1..5 (0 gives the clean set). Same ``seed``, same sets. Every argument is
    checked before the first set is made (InputError / ArgumentTypeError naming it).
    """
    x, y = np.asarray(test_set.x), np.asarray(test_set.y)
    flat = x.ndim == 2
    image_shape = image_shape if image_shape is not None else getattr(test_set, "image_shape", None)
    if flat:
        if image_shape is None or int(np.prod(image_shape)) != x.shape[1]:
            raise InputError("image_shape", image_shape, f"(H, W, C) with H * W * C = {x.shape[1]} for flat "
                             f"features (N, {x.shape[1]})")
        x = x.reshape((len(x), *image_shape))
    names, severities = _names(types), _severities(severities)
    x = _check_images(x)
    return _sets(x, y, names, severities, check_seed(seed), flat)


def _sets(x, y, names, severities, seed, flat):
    """The generator `corrupted` returns once its arguments are checked."""
    for name in names:
        for severity in severities:
            images = corrupt(x, name, severity, seed)
            yield name, severity, images.reshape(len(images), -1) if flat else images, y
