"""TFDS data sets through `tfds.data_source` (random access, no TensorFlow needed to read).

Supported names, what comes back (a `Dataset`; x float32, y int32 labels):

| name | x | y | validation split (papers) |
|---|---|---|---|
| mnist, fashion_mnist | (N, 28, 28, 1) in [-1, 1] (k-tied paper) | 10 classes | last 10,000 of train |
| cifar10 | (N, 32, 32, 3) in [0, 1] | 10 classes | none (k-tied ResNet-18 trains on all 50,000) |
| cifar100 | (N, 32, 32, 3) in [0, 1] | 100 (fine) classes | last 10,000 of train |
| cifar10_corrupted/{type}_{1..5} | (N, 32, 32, 3) in [0, 1] | 10 classes | test split only |
| imdb_reviews | (N, maxlen) token ids (integers 0 .. vocab_size-1) | 2 classes | last 5,000 of train |

(Fashion-MNIST is in no paper; it follows MNIST.) Splits: "train" (the training split minus the
validation examples), "validation", "train+validation" (the whole training split), "test".
IMDB tokens: TFDS 4.9 ships only the `plain_text` config of imdb_reviews (the subword configs are
gone), so reviews are tokenised here (`zoo.data.tokens`) with a vocabulary built from the "train"
part; pass `vocabulary=imdb_vocabulary(...)` to reuse one across splits.

Nothing is downloaded: a data set that is not prepared on this machine raises
`DatasetNotPreparedError` saying how to prepare it elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from base.data import Dataset
from base.errors import InputError, MissingDependencyError, ZooError
from zoo.data import tokens as tokens_lib
from zoo.data.registry import DATASETS, TfdsSpec, register_data

CIFAR10_CORRUPTIONS = (
    "brightness", "contrast", "defocus_blur", "elastic", "fog", "frost", "frosted_glass_blur",
    "gaussian_blur", "gaussian_noise", "impulse_noise", "jpeg_compression", "motion_blur",
    "pixelate", "saturate", "shot_noise", "snow", "spatter", "speckle_noise", "zoom_blur",
)
SEVERITIES = (1, 2, 3, 4, 5)
SPLITS = ("train", "validation", "train+validation", "test")


CORRUPTED = TfdsSpec(num_validation=0, scaling="unit")
"""cifar10_corrupted/<type>_<severity>: CIFAR-10's test images, corrupted (test split only; CIFAR-10's classes).
Not a data set of its own (`zoo.data.cifar10_c` reads it beside CIFAR-10's record)."""


def tfds_pair(name: str):
    """The `DatasetRecord` loader of the TFDS data set `name`: (train, test) `load_tfds` parts under the same
    arguments (see `load_tfds`; `vocab_size`, `maxlen`, `vocabulary` matter for IMDB only)."""

    def load(data_dir=None, *, num_validation: int | None = None, vocab_size: int = 20_000, maxlen: int = 80,
             vocabulary: Mapping[str, int] | None = None):
        kwargs: dict[str, Any] = {"num_validation": num_validation, "vocab_size": vocab_size, "maxlen": maxlen,
                  "vocabulary": vocabulary}
        return load_tfds(name, "train", data_dir, **kwargs), load_tfds(name, "test", data_dir, **kwargs)

    load.__name__ = load.__qualname__ = f"load_{name}"
    return load


for _name, _shape, _classes, _validation, _scaling in (
        ("mnist", (28, 28, 1), 10, 10_000, "pm1"),
        ("fashion_mnist", (28, 28, 1), 10, 10_000, "pm1"),
        ("cifar10", (32, 32, 3), 10, 0, "unit"),
        ("cifar100", (32, 32, 3), 100, 10_000, "unit"),
        ("imdb_reviews", (80,), 2, 5_000, "text")):  # IMDB: token ids of maxlen=80 (the loader's default)
    register_data(_name, tfds_pair(_name), feature_shape=_shape, num_classes=_classes,
                  tfds=TfdsSpec(_validation, _scaling))


class DatasetNotPreparedError(ZooError, FileNotFoundError):
    """A TFDS data set is not prepared (in a random-access format) in the data directory."""


def plain_names() -> list[str]:
    """The TFDS data sets of `zoo.data.registry.DATASETS` (those with a `TfdsSpec`), in registration order."""
    return [name for name, record in DATASETS.items() if record.tfds is not None]


def tfds_names() -> list[str]:
    """Every name `load_tfds` accepts: the 5 plain names and the 95 cifar10_corrupted configs."""
    corrupted = [f"cifar10_corrupted/{c}_{s}" for c in CIFAR10_CORRUPTIONS for s in SEVERITIES]
    return plain_names() + corrupted


def num_classes(name: str) -> int:
    """Number of classes of a supported data set name."""
    return _spec(name)[0]


def default_num_validation(name: str) -> int:
    """The papers' validation size for `name` (examples taken from the end of the train split)."""
    return _spec(name)[1].num_validation


def _spec(name: str) -> tuple[int, TfdsSpec]:
    """(classes, `TfdsSpec`) of a name of `tfds_names()`: from its `DatasetRecord` record, or for a cifar10_corrupted
    config, CIFAR-10's classes and `CORRUPTED`."""
    base, _, config = name.partition("/")
    plain = plain_names()
    if (base not in plain and base != "cifar10_corrupted") or (base == "cifar10_corrupted") != bool(config):
        raise InputError("name", name, f"one of {plain} or 'cifar10_corrupted/<type>_<severity>'",
                         "unknown TFDS data set")
    if config:
        corruption, _, severity = config.rpartition("_")
        if corruption not in CIFAR10_CORRUPTIONS or severity not in {str(s) for s in SEVERITIES}:
            raise InputError("name", name, f"cifar10_corrupted/<type>_<1..5> with type one of "
                             f"{list(CIFAR10_CORRUPTIONS)}", "unknown cifar10_corrupted config")
        return DATASETS["cifar10"].num_classes, CORRUPTED
    return DATASETS[base].num_classes, DATASETS[base].tfds


def _not_prepared_message(name: str, data_dir) -> str:
    """One line (the `zoo` CLI prints errors on one line) saying where the set was looked for and how to prepare it."""
    where = data_dir if data_dir is not None else "the default TFDS data directory " \
        "(TFDS_DATA_DIR or ~/tensorflow_datasets)"
    return (
        f"TFDS data set {name!r} is not prepared in a random-access format under {where}, and "
        "bnn-zoo never downloads data at run time. Prepare it on a machine with TensorFlow and "
        "network access: `pip install tensorflow tensorflow-datasets`, then "
        f"`tfds build {name} --file_format=array_record --data_dir=DIR`; copy DIR to this machine and pass "
        "data_dir=DIR (or set TFDS_DATA_DIR=DIR). A data set prepared in the default TFRecord format cannot "
        "be read without TensorFlow: rebuild it with --file_format=array_record."
    )


def _source(name: str, split: str, data_dir):
    """The TFDS random-access source of one base split ("train" or "test")."""
    try:
        import tensorflow_datasets as tfds
    except ImportError as err:
        raise MissingDependencyError("load_tfds needs tensorflow-datasets: pip install 'bnn-zoo[tfds]'") from err
    try:
        return tfds.data_source(name, split=split, data_dir=data_dir, download=False)
    except (NotImplementedError, FileNotFoundError, AssertionError, KeyError) as err:
        # KeyError: TFDS finds the data set's folder (e.g. left by an interrupted build) with no splits in it
        raise DatasetNotPreparedError(_not_prepared_message(name, data_dir)) from err


def _index_range(name: str, split: str, n_train: int, num_validation: int) -> range:
    """Rows of the TFDS train split that make up `split` (train / validation / train+validation)."""
    if not 0 <= num_validation < n_train:
        raise InputError("num_validation", num_validation,
                         f"0 <= num_validation < {n_train} (the size of {name}'s train split)")
    if split == "validation" and num_validation == 0:
        raise InputError("split", split, f"a split {name} has here (num_validation=0: no validation split)",
                         "pass num_validation > 0 to carve one from the end of train")
    cut = n_train - num_validation
    return {"train": range(0, cut), "validation": range(cut, n_train),
            "train+validation": range(0, n_train)}[split]


def _records(name: str, split: str, data_dir, num_validation: int) -> list[Mapping]:
    """Decoded TFDS examples (dicts) of one of SPLITS, in TFDS order."""
    if split == "test":
        source = _source(name, "test", data_dir)
        rows = range(len(source))
    else:
        if name.startswith("cifar10_corrupted/"):
            raise InputError("split", split, "'test'", f"{name} has only a 'test' split")
        source = _source(name, "train", data_dir)
        rows = _index_range(name, split, len(source), num_validation)
    return [source[i] for i in rows]


def _images(records: list[Mapping], kind: str) -> np.ndarray:
    """uint8 images -> float32 (N, H, W, C) in [-1, 1] ("pm1") or [0, 1] ("unit")."""
    raw = np.stack([np.asarray(r["image"], dtype=np.uint8) for r in records]).astype(np.float32)
    return raw / 127.5 - 1.0 if kind == "pm1" else raw / 255.0


def imdb_vocabulary(data_dir=None, vocab_size: int = 20_000, num_validation: int = 5_000) -> dict:
    """{word: id} built from the IMDB "train" part (train split minus its last `num_validation`)."""
    records = _records("imdb_reviews", "train", data_dir, num_validation)
    return tokens_lib.build_vocabulary((r["text"] for r in records), vocab_size)


def load_tfds(name: str, split: str = "train", data_dir=None, *, num_validation: int | None = None,
              vocab_size: int = 20_000, maxlen: int = 80,
              vocabulary: Mapping[str, int] | None = None) -> Dataset:
    """Load one split of a TFDS data set as a `Dataset` of host NumPy arrays (see the module table).

    Args:
      name: one of `tfds_names()`.
      split: "train", "validation", "train+validation" or "test".
      data_dir: TFDS data directory (None: TFDS_DATA_DIR or ~/tensorflow_datasets).
      num_validation: examples taken from the end of the train split for "validation";
        None uses the papers' size (`default_num_validation(name)`).
      vocab_size, maxlen, vocabulary: IMDB only; token ids lie in [0, vocab_size), sequences have
        length maxlen; `vocabulary` (from `imdb_vocabulary`) skips rebuilding it.

    Returns:
      Dataset(x, y, num_classes, name): images x float32 (N, H, W, C); IMDB x (N, maxlen) integer
      token ids; y int32 (N,).

    Raises:
      ValueError for an unknown name or split or a bad num_validation; DatasetNotPreparedError when
      the data set is not prepared under data_dir; ImportError without tensorflow-datasets.
    """
    classes, spec = _spec(name)
    if split not in SPLITS:
        raise InputError("split", split, f"one of {SPLITS}")
    n_val = spec.num_validation if num_validation is None else int(num_validation)
    records = _records(name, split, data_dir, n_val)
    if spec.scaling == "text":
        if vocabulary is None:
            vocabulary = imdb_vocabulary(data_dir, vocab_size, n_val)
        x = tokens_lib.encode((r["text"] for r in records), vocabulary, maxlen)
        if x.size and x.max() >= vocab_size:
            raise InputError("vocabulary", f"<a vocabulary with ids up to {x.max()}>", f"ids < vocab_size={vocab_size}")
    else:
        x = _images(records, spec.scaling)
    y = np.asarray([r["label"] for r in records], dtype=np.int32)
    return Dataset(x, y, classes, name=name)
