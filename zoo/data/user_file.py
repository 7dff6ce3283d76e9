"""The user's own data from a file: ``load_user_data(path, target=None)`` reads an .npz or a .csv into the four
arrays ``zoo.get(entry, data=(x_train, y_train, x_test, y_test))`` takes (what ``zoo fit / nuts / score --data
PATH`` use).

Accepted files:
  - .npz with arrays ``x`` (N, *features) and ``y`` (N,), split here (`SPLIT_RULE`), or ``x_train``,
    ``y_train``, ``x_test``, ``y_test``: the file's own split, used as it is.
  - .csv with a header row: the column named `target` holds the labels / targets, every other column is a
    numeric feature; split here (`SPLIT_RULE`).

The split: a permutation of the N rows drawn with ``numpy.random.default_rng(SPLIT_SEED)``; its last
``ceil(N * TEST_FRACTION)`` rows are the test set. The seed is fixed (not the fit's ``--seed``), so the same file
gives the same split in every command and ``zoo score`` finds the posterior's training rows again.

The task: integer labels mean classification, float targets regression (as ``zoo.get`` reads arrays); in a CSV a
column of whole numbers written without a decimal point ("3") is integer, "3.0" is float. ``task`` overrides it.
Class labels must be 0..C-1 with every class present in the file; C is then
given to ``zoo.get`` (``data_kwargs={"num_classes": C}``), so a class that the split leaves out of the training
rows still has its output.

Every refusal is a `base.errors.InputError` (`PathNotFoundError` for a missing file) naming `argument` (default
"--data"), the file and what was expected.
"""

from __future__ import annotations

import math
import os
import zipfile
from dataclasses import dataclass

import numpy as np

from base.errors import ArgumentTypeError, InputError, PathNotFoundError
from base.validation import check_integer_labels

__all__ = ["SPLIT_RULE", "SPLIT_SEED", "TEST_FRACTION", "TASKS", "UserData", "is_data_file", "load_user_data"]

SPLIT_SEED = 0
TEST_FRACTION = 0.2
SPLIT_RULE = (f"the last {TEST_FRACTION:.0%} of the rows after a shuffle with seed {SPLIT_SEED} are the test set "
              "(ceil(N * 0.2) rows)")
TASKS = ("classification", "regression")
SUFFIXES = (".npz", ".csv")
_SPLIT_KEYS = ("x_train", "y_train", "x_test", "y_test")


@dataclass(frozen=True)
class UserData:
    """The arrays of a user's file, split.

    Attributes:
      x_train, x_test: float32 inputs (N, *features), (M, *features).
      y_train, y_test: int64 class labels (N,), (M,) for classification, float32 targets for regression.
      num_classes: C for classification, None for regression.
      path: the file read.
      split: one sentence saying how train and test were made (printed by the commands).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int | None
    path: str
    split: str

    def arrays(self) -> tuple:
        """(x_train, y_train, x_test, y_test), what ``zoo.get(entry, data=...)`` and ``zoo.load(path, data=...)``
        take."""
        return self.x_train, self.y_train, self.x_test, self.y_test

    def data_kwargs(self) -> dict:
        """``zoo.get``'s data_kwargs for these arrays: the class count (classification), else none."""
        return {} if self.num_classes is None else {"num_classes": self.num_classes}


def is_data_file(text) -> bool:
    """Whether a ``--data`` value names a file rather than a catalogue data set: it ends in .npz or .csv (any
    case), contains a path separator, or is an existing file."""
    if not isinstance(text, str) or not text:
        return False
    return text.lower().endswith(SUFFIXES) or os.sep in text or "/" in text or os.path.isfile(text)


def load_user_data(path, target: str | None = None, *, task: str | None = None,
                   argument: str = "--data") -> UserData:
    """Read the user's .npz or .csv at `path` into train and test arrays (the module's docstring: keys, columns,
    split, task).

    Args:
      path: an .npz (``x`` / ``y`` or ``x_train`` / ``y_train`` / ``x_test`` / ``y_test``) or a .csv with a header.
      target: the CSV's column of labels / targets (required for a CSV; refused for an .npz, whose ``y`` is it).
      task: "classification" or "regression"; None: integer labels mean classification, float regression.
      argument: the name errors give the path (the CLI's ``--data``).
    Returns:
      a `UserData`: x_train (N, *features), y_train (N,), x_test (M, *features), y_test (M,), the class count and
      the split in words.
    Raises:
      PathNotFoundError for a missing file; InputError for another suffix, a file that cannot be read, missing
      keys or column, mismatched lengths, non-numeric or non-finite features, labels that are not 0..C-1.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ArgumentTypeError(argument, path, "a path to an .npz or .csv file")
    path = os.fspath(path)
    if task is not None and task not in TASKS:
        raise InputError("--task", task, f"one of {list(TASKS)} or None (integer labels: classification)")
    if not os.path.exists(path):
        raise PathNotFoundError(argument, path, "an existing .npz or .csv file", "no such file")
    if not os.path.isfile(path):
        raise InputError(argument, path, "an .npz or .csv file", "it is a folder, not a file")
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SUFFIXES:
        raise InputError(argument, path, "a file ending in .npz or .csv", f"its suffix is {suffix or 'none'!r}")
    if suffix == ".npz":
        if target is not None:
            raise InputError("--target", target, "no --target for an .npz file (its labels are the array 'y' or "
                                                 "'y_train' / 'y_test')")
        arrays, split = _read_npz(path, argument)
    else:
        if target is None:
            raise InputError("--target", None, f"the name of the column of labels / targets in {path!r}")
        arrays, split = _read_csv(path, target, argument)
    return _checked(arrays, split, path, task, argument)


def _read_npz(path: str, argument: str):
    """(x_train, y_train, x_test, y_test) and the split sentence of the .npz at `path`."""
    if not zipfile.is_zipfile(path):
        raise InputError(argument, path, "a readable .npz file (numpy.savez) of numeric arrays",
                         "it is not a zip archive, which numpy.savez writes")
    try:
        with np.load(path, allow_pickle=False) as npz:
            stored = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise InputError(argument, path, "a readable .npz file (numpy.savez) of numeric arrays",
                         f"numpy could not read it: {type(err).__name__}: {err}") from None
    if all(key in stored for key in _SPLIT_KEYS):
        return tuple(stored[key] for key in _SPLIT_KEYS), "the file's own x_train / x_test split"
    if "x" in stored and "y" in stored:
        _same_length(stored["x"], stored["y"], path, argument, "arrays x and y")
        return _split(stored["x"], stored["y"])
    raise InputError(argument, path, "an .npz with arrays 'x' and 'y', or 'x_train', 'y_train', 'x_test' and "
                                     "'y_test'", f"it holds {sorted(stored) or 'no arrays'}")


def _read_csv(path: str, target: str, argument: str):
    """(x_train, y_train, x_test, y_test) and the split sentence of the CSV at `path`, column `target` the labels."""
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise InputError(argument, path, "a readable CSV file with a header row",
                         f"pandas could not read it: {type(err).__name__}: {err}") from None
    columns = [str(c) for c in frame.columns]
    if target not in columns:
        raise InputError("--target", target, f"a column of {path!r}", f"its columns are {_listed(columns)}")
    features = [c for c in frame.columns if str(c) != target]
    if not features:
        raise InputError(argument, path, "at least one feature column besides the target",
                         f"it has only the column {target!r}")
    text = [str(c) for c in features if not pd.api.types.is_numeric_dtype(frame[c])]
    if text:
        first = frame[text[0]][pd.to_numeric(frame[text[0]], errors="coerce").isna()].iloc[0]
        raise InputError(argument, path, "numeric feature columns",
                         f"columns {_listed(text)} hold text (e.g. {first!r} in {text[0]!r}); encode them as "
                         "numbers first")
    empty = [str(c) for c in features if frame[c].isna().any()]
    if empty:
        row = int(np.flatnonzero(frame[empty[0]].isna().to_numpy())[0])
        raise InputError(argument, path, "a value in every feature cell",
                         f"columns {_listed(empty)} have empty cells (the first in {empty[0]!r}, data row {row + 1})")
    labels = frame[target]
    if pd.api.types.is_bool_dtype(labels):
        labels = labels.astype(np.int64)
    elif not pd.api.types.is_numeric_dtype(labels):
        bad = labels[pd.to_numeric(labels, errors="coerce").isna() & labels.notna()]
        shown = bad.iloc[0] if len(bad) else labels.iloc[0]
        raise InputError("--target", target, "a column of numbers: class labels 0..C-1 or regression targets",
                         f"it holds {shown!r}; encode the classes as 0..C-1 first")
    if labels.isna().any():
        row = int(np.flatnonzero(labels.isna().to_numpy())[0])
        raise InputError("--target", target, "a label in every row", f"data row {row + 1} has none")
    return _split(frame[features].astype(np.float64).to_numpy(), labels.to_numpy())


def _split(x, y):
    """The rows of `x`, `y` shuffled with `SPLIT_SEED`, the last ceil(N * TEST_FRACTION) as test (at least one row
    of each), and the sentence saying so."""
    n = len(x)
    if n < 2:
        raise InputError("--data", f"<{n} rows>", "at least 2 rows (one to train on, one to test on)")
    n_test = min(n - 1, max(1, math.ceil(n * TEST_FRACTION)))
    order = np.random.default_rng(SPLIT_SEED).permutation(n)
    train, test = order[:n - n_test], order[n - n_test:]
    return ((x[train], y[train], x[test], y[test]),
            f"split: {SPLIT_RULE}: {n - n_test} train, {n_test} test rows")


def _checked(arrays, split: str, path: str, task: str | None, argument: str) -> UserData:
    """`UserData` of the four arrays, each checked (numeric, finite, lengths, labels 0..C-1)."""
    x_train, y_train, x_test, y_test = (np.asarray(a) for a in arrays)
    for name, x in (("x_train", x_train), ("x_test", x_test)):
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_) or np.iscomplexobj(x):
            raise InputError(argument, path, "numeric features", f"{name} has dtype {x.dtype}")
        if x.ndim < 2:
            raise InputError(argument, path, "features of shape (N, features...)",
                             f"{name} has shape {x.shape}" + ("; a column vector is x[:, None]" if x.ndim == 1 else ""))
        if x.size and not np.isfinite(x.astype(np.float64)).all():
            raise InputError(argument, path, "finite features", f"{name} holds NaN or inf")
    _same_length(x_train, y_train, path, argument, "x_train and y_train")
    _same_length(x_test, y_test, path, argument, "x_test and y_test")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise InputError(argument, path, "x_train and x_test of one feature shape",
                         f"{x_train.shape[1:]} and {x_test.shape[1:]}")
    for name, y in (("y_train", y_train), ("y_test", y_test)):
        if not (np.issubdtype(y.dtype, np.number) or y.dtype == np.bool_) or np.iscomplexobj(y):
            raise InputError(argument, path, "numeric labels / targets", f"{name} has dtype {y.dtype}")
        if y.ndim != 1:
            raise InputError(argument, path, "labels / targets of shape (N,)", f"{name} has shape {y.shape}")
    integer = all(np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_ for y in (y_train, y_test))
    task = task or ("classification" if integer else "regression")
    if task == "regression":
        return UserData(x_train.astype(np.float32), y_train.astype(np.float32), x_test.astype(np.float32),
                        y_test.astype(np.float32), None, path, split + "; float targets: regression")
    labels = f"{argument} {os.path.basename(path)} labels"
    both = check_integer_labels(np.concatenate([y_train, y_test]), arg=labels)
    present = np.unique(both)
    num_classes = int(present[-1]) + 1
    if num_classes < 2 or len(present) != num_classes:
        missing = sorted(set(range(num_classes)) - set(present.tolist()))
        raise InputError(labels, f"<labels {_listed(present.tolist())}>",
                         "class labels 0..C-1 with every class present (at least 2 classes)",
                         (f"no row has class {_listed(missing)}; " if missing else "") + "renumber the classes "
                         "0..C-1 (or give --task regression for numeric targets)")
    return UserData(x_train.astype(np.float32), y_train.astype(np.int64), x_test.astype(np.float32),
                    y_test.astype(np.int64), num_classes, path,
                    split + f"; integer labels: classification into {num_classes} classes")


def _same_length(x, y, path: str, argument: str, what: str) -> None:
    if len(x) != len(y):
        raise InputError(argument, path, f"{what} of one length (one label per row)",
                         f"they have {len(x)} and {len(y)} rows")


def _listed(names: list, most: int = 8) -> str:
    shown = ", ".join(repr(n) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
