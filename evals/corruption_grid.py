"""Draw every corruption type x severity for one image: ``python -m evals.corruption_grid``.

The grid has one row per corruption (19) and one column per severity 0 (the image) .. 5.
"""

import argparse
import os

import numpy as np

from evals.corruptions import CORRUPTIONS, SEVERITIES, corrupt
from base import validation
from base.errors import ArgumentTypeError, InputError

DESCRIPTION = "Draw every corruption type x severity for one image (a PNG grid)."


def plot_corruption_grid(image, path, seed=0, kinds=CORRUPTIONS):
    """Save a len(kinds) x 6 grid of ``image`` corrupted by every kind at severities 0..5 to ``path``.

    image: (H, W), (H, W, 1) or (H, W, 3) float in [0, 1]. path: PNG file name (missing folders are made). Returns the
    matplotlib Figure (already saved).
    """
    from matplotlib.figure import Figure  # the object API: no pyplot, the backend is left alone

    image = np.asarray(image, dtype=np.float32)
    batch = (image[..., None] if image.ndim == 2 else image)[None]
    fig = Figure(figsize=(1.3 * (1 + len(SEVERITIES)) + 1.5, 1.3 * len(kinds)))
    axes = fig.subplots(len(kinds), 1 + len(SEVERITIES), squeeze=False)
    for row, kind in enumerate(kinds):
        for col, severity in enumerate((0, *SEVERITIES)):
            out = corrupt(batch, kind, severity, seed)[0]
            ax = axes[row, col]
            if out.shape[-1] == 1:
                ax.imshow(out[..., 0], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            else:
                ax.imshow(out, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(f"severity {severity}", fontsize=9)
            if col == 0:
                ax.set_ylabel(kind, rotation=0, ha="right", va="center", fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=80)
    return fig


def load_image(data, index, *, arg_data="data", arg_index="index"):
    """One image (H, W, C) in [0, 1] from ``data``: 'digits' (sklearn, 8x8x1, pixels / 16),
    'sample' (sklearn's china.jpg box-averaged to 32x32x3; index 0 only), or any TFDS name (prepared
    locally; its test split's 'image' feature, scaled by 1/255). ``index``: an integer in [0, size of the set).
    Raises InputError naming `arg_data` for a data set it cannot read and `arg_index` for an index out of
    range (a negative one would count from the end)."""
    if not validation.is_int(index):
        raise ArgumentTypeError(arg_index, index, "an integer index >= 0")
    if data == "digits":
        from sklearn.datasets import load_digits

        images = load_digits().images
        _check_index(index, len(images), arg_index, data)
        return (images[index] / 16.0).astype(np.float32)[..., None]
    if data == "sample":
        from sklearn.datasets import load_sample_image

        _check_index(index, 1, arg_index, data)
        photo = load_sample_image("china.jpg")[:, 100:527] / 255.0
        side = photo.shape[0]
        rows = np.linspace(0, side, 33).astype(int)
        return np.stack([[photo[a:b, c:d].mean(axis=(0, 1)) for c, d in zip(rows, rows[1:])] for a, b in zip(rows, rows[1:])]).astype(np.float32)
    source = _tfds_test_split(data, arg_data)
    _check_index(index, len(source), arg_index, data)
    record = source[index]
    if "image" not in record:
        raise InputError(arg_data, data, "a data set with an 'image' feature")
    image = np.asarray(record["image"], dtype=np.float32) / 255.0
    return image[..., None] if image.ndim == 2 else image


def _check_index(index, size: int, arg: str, data: str) -> None:
    if not 0 <= index < size:
        raise InputError(arg, index, f"an index in [0, {size}) ({data!r} has {size} image"
                         + ("s" if size != 1 else "") + ")")


def _tfds_test_split(name: str, arg: str):
    """TFDS's random-access test split of `name`, or InputError naming `arg` when it cannot be read."""
    expected = "'digits', 'sample' or the name of a TFDS data set prepared locally"
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise InputError(arg, name, expected, "tensorflow-datasets is not installed") from None
    try:
        return tfds.data_source(name, split="test")
    except Exception as err:  # noqa: BLE001 - TFDS's errors (unknown name, not prepared) vary by version
        raise InputError(arg, name, expected, f"TFDS cannot read it: {type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''}") from None


def _index(text):
    """--index: an integer >= 0 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer index >= 0, got {text!r}")
    return value


def _seed(text):
    """--seed: an integer in [0, 2**32 - 1] (argparse type)."""
    try:
        return validation.check_seed(int(text), "--seed")
    except (ValueError, InputError):
        raise argparse.ArgumentTypeError(f"expected an integer seed in [0, {validation.MAX_SEED}], got {text!r}") \
            from None


_index.__name__, _seed.__name__ = "an integer index >= 0", "an integer seed"


def add_arguments(parser):
    """Add the grid's options to an argparse `parser` (``zoo corruptions`` and ``python -m
    evals.corruption_grid`` share them): --data, --index, --out, --seed. Returns the parser."""
    parser.add_argument("--data", default="digits", help="digits, sample, or a prepared TFDS data set name")
    parser.add_argument("--index", type=_index, default=0, help="which test image (0 .. the test set's size - 1)")
    parser.add_argument("--out", default="corruptions.png", help="PNG to write")
    parser.add_argument("--seed", type=_seed, default=0, help="seed of the random corruptions")
    return parser


def run(args):
    """Draw the grid for parsed `args` (see `add_arguments`) and say where it went."""
    plot_corruption_grid(load_image(args.data, args.index, arg_data="--data", arg_index="--index"), args.out,
                         seed=args.seed)
    print(f"wrote {args.out}")


def main(argv=None):
    """CLI: ``--data digits|sample|<tfds name> --index I --out grid.png --seed S``."""
    parser = argparse.ArgumentParser(description=DESCRIPTION, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    run(add_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    main()
