"""`zoo.data.user_file.load_user_data` and ``zoo fit / score --data PATH`` (issue 47, item 7): an .npz or a CSV of
the user's own, the split stated, and a named error (base.errors) for every file it cannot use."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from base.errors import InputError, PathNotFoundError
from zoo.cli import EXIT_USAGE, main
from zoo.data.user_file import is_data_file, load_user_data

N = 53  # ceil(0.2 * 53) = 11 test rows


@pytest.fixture(scope="module")
def arrays():
    r = np.random.default_rng(1)
    x = r.normal(size=(N, 3)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64) + 2 * (x[:, 1] > 0)  # 4 classes 0..3


def _csv(path, x, y, target="label"):
    frame = pd.DataFrame(x, columns=["f0", "f1", "f2"])
    frame.insert(1, target, y)  # the target need not be the last column
    frame.to_csv(path, index=False)
    return str(path)


def test_npz_and_csv_give_the_same_split_of_every_row(arrays, tmp_path):
    x, y = arrays
    np.savez(tmp_path / "d.npz", x=x, y=y)
    a = load_user_data(str(tmp_path / "d.npz"))
    b = load_user_data(_csv(tmp_path / "d.csv", x, y), "label")
    n_test = math.ceil(0.2 * N)
    assert (len(a.x_train), len(a.x_test)) == (N - n_test, n_test) == (42, 11)
    assert a.num_classes == b.num_classes == 4 and a.y_train.dtype == np.int64
    for u, v in zip(a.arrays(), b.arrays()):
        np.testing.assert_array_equal(u, v)  # float32 features survive the CSV's text exactly
    # every row once, each with its own label: the split is a permutation, not a resampling
    rows = np.concatenate([a.x_train, a.x_test])
    order = np.lexsort(rows.T)
    np.testing.assert_array_equal(rows[order], x[np.lexsort(x.T)])
    np.testing.assert_array_equal(np.concatenate([a.y_train, a.y_test])[order], y[np.lexsort(x.T)])
    assert "42 train, 11 test rows" in a.split and "classification into 4 classes" in a.split
    again = load_user_data(str(tmp_path / "d.npz"))
    np.testing.assert_array_equal(again.x_test, a.x_test)  # a fixed seed: score finds the same split
    # the file's own split is kept as it is
    np.savez(tmp_path / "s.npz", x_train=x[:40], y_train=y[:40], x_test=x[40:], y_test=y[40:])
    own = load_user_data(str(tmp_path / "s.npz"))
    np.testing.assert_array_equal(own.x_test, x[40:])
    assert own.split == "the file's own x_train / x_test split; integer labels: classification into 4 classes"
    # float targets: regression; --task overrides the dtype's reading
    reg = load_user_data(_csv(tmp_path / "r.csv", x, x[:, 0] * 1.5), "label")
    assert reg.num_classes is None and reg.y_train.dtype == np.float32
    assert load_user_data(str(tmp_path / "d.npz"), task="regression").num_classes is None
    assert is_data_file("my.NPZ") and is_data_file("runs/x") and not is_data_file("digits")


def _bad_files(tmp_path, x, y):
    """{case: (path, target, error class, words of its message)} of files load_user_data refuses."""
    (tmp_path / "folder.npz").mkdir()
    (tmp_path / "junk.npz").write_text("not a zip")
    (tmp_path / "text.txt").write_text("x")
    (tmp_path / "empty.csv").write_text("")
    np.savez(tmp_path / "keys.npz", inputs=x, labels=y)
    np.savez(tmp_path / "lengths.npz", x=x, y=y[:-1])
    np.savez(tmp_path / "shapes.npz", x_train=x, y_train=y, x_test=x[:, :2], y_test=y)
    np.savez(tmp_path / "nan.npz", x=np.where(x > 2, np.nan, x), y=y)
    np.savez(tmp_path / "gap.npz", x=x, y=np.where(y == 1, 3, y))  # no class 1
    np.savez(tmp_path / "one.npz", x=x, y=y + 1)  # 1..4, no class 0
    np.savez(tmp_path / "neg.npz", x=x, y=y - 1)
    text = pd.DataFrame({"f0": x[:, 0], "colour": ["red"] * N, "label": y})
    text.to_csv(tmp_path / "text.csv", index=False)
    words = pd.DataFrame({"f0": x[:, 0], "label": ["cat"] * N})
    words.to_csv(tmp_path / "words.csv", index=False)
    holes = pd.DataFrame({"f0": x[:, 0], "f1": x[:, 1], "label": y})
    holes.loc[7, "f1"] = None
    holes.to_csv(tmp_path / "holes.csv", index=False)
    csv = _csv(tmp_path / "d.csv", x, y)
    p = str(tmp_path)
    return {
        "missing": (p + "/absent.csv", "label", PathNotFoundError, "no such file"),
        "folder": (p + "/folder.npz", None, InputError, "it is a folder"),
        "suffix": (p + "/text.txt", None, InputError, "a file ending in .npz or .csv"),
        "not a zip": (p + "/junk.npz", None, InputError, "not a zip archive"),
        "empty csv": (p + "/empty.csv", "label", InputError, "pandas could not read it"),
        "keys": (p + "/keys.npz", None, InputError, "it holds ['inputs', 'labels']"),
        "lengths": (p + "/lengths.npz", None, InputError, f"they have {N} and {N - 1} rows"),
        "feature shapes": (p + "/shapes.npz", None, InputError, "(3,) and (2,)"),
        "nan": (p + "/nan.npz", None, InputError, "holds NaN or inf"),
        "class gap": (p + "/gap.npz", None, InputError, "no row has class 1"),
        "labels 1..C": (p + "/one.npz", None, InputError, "no row has class 0"),
        "negative": (p + "/neg.npz", None, InputError, "labels >= 0"),
        "text feature": (p + "/text.csv", "label", InputError, "columns 'colour' hold text (e.g. 'red'"),
        "text labels": (p + "/words.csv", "label", InputError, "it holds 'cat'"),
        "empty cell": (p + "/holes.csv", "label", InputError, "the first in 'f1', data row 8"),
        "no column": (csv, "y", InputError, "its columns are 'f0', 'label', 'f1', 'f2'"),
        "no target": (csv, None, InputError, "--target: expected the name of the column"),
        "target for npz": (p + "/keys.npz", "label", InputError, "no --target for an .npz"),
    }


def test_every_file_it_cannot_use_is_a_named_error(arrays, tmp_path):
    x, y = arrays
    for case, (path, target, error, says) in _bad_files(tmp_path, x, y).items():
        with pytest.raises(error) as caught:
            load_user_data(path, target)
        assert says in str(caught.value), (case, str(caught.value))
        assert str(caught.value).startswith(("--data", "--target")), (case, str(caught.value))


def test_cli_builds_on_a_csv_and_scores_its_posterior(tmp_path, capsys):
    """``zoo fit / nuts --data FILE.csv --target`` build the entry on the file's split (`cli._entry`, no training
    here); ``zoo score --data`` scores a posterior of that entry on the file's test rows: all-zero weights predict
    1/2 for each class, so the NLL is ln 2. Without the file, or with a name that is neither a data set nor a file,
    one line and exit status 2."""
    import inference
    from zoo import cli

    x = np.random.default_rng(2).normal(size=(100, 2)).astype(np.float32)
    csv = str(tmp_path / "mine.csv")
    pd.DataFrame({"f0": x[:, 0], "label": (x[:, 0] > 0).astype(np.int64), "f1": x[:, 1]}).to_csv(csv, index=False)
    out = str(tmp_path / "post")
    args = cli.build_parser().parse_args(["fit", "mlp", "--data", csv, "--target", "label", "--hidden", "2",
                                          "--out", out])
    entry = cli._entry(args)
    assert "80 train, 20 test rows; integer labels: classification into 2 classes" in capsys.readouterr().out
    mine = load_user_data(csv, "label")
    np.testing.assert_array_equal(entry.train.x, mine.x_train)
    np.testing.assert_array_equal(entry.test.y, mine.y_test)
    assert "data" not in entry.config and entry.config["data_kwargs"] == {"num_classes": 2}
    zeros = {k: np.zeros((2, 2) + s, np.float32) for k, s in entry.model.site_shapes((2,)).items()}
    inference.save(inference.MCMCPosterior(model=entry.model, samples=zeros, feature_shape=(2,)), out)
    assert main(["score", out, "--samples", "4", "--data", csv, "--target", "label"]) == 0
    scored = capsys.readouterr().out
    assert "80 train, 20 test rows" in scored
    header = next(line.split() for line in scored.splitlines() if "nll" in line)
    row = next(line.split() for line in scored.splitlines() if line.startswith("nuts "))
    assert abs(float(row[header.index("nll") + 1]) - np.log(2)) < 1e-4, scored  # +1: the row's name first
    for command in (["score", out, "--samples", "4"], ["report", out]):  # the file is asked for before any work
        assert main(command) == EXIT_USAGE
        assert f"zoo {command[0]}: error: --data: expected the .npz / .csv file the posterior was fitted on" in \
            capsys.readouterr().err
    assert main(["fit", "mlp", "--data", "my_data", "--out", str(tmp_path / "o2"), "--quiet"]) == EXIT_USAGE
    assert "or a path to an .npz or .csv file, got 'my_data'" in capsys.readouterr().err
