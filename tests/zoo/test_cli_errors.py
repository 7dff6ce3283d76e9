"""The `zoo` CLI's errors: one line ``zoo <cmd>: error: ...`` on stderr, exit status 2 for a bad argument or
input, 1 for a run that could not complete, 3 for a NaN loss (each ZooError class's ``exit_status``: the status
follows the error's type), 70 plus the traceback for a bug; ``--debug`` adds the traceback. Every bad argument
here fails before any training (no compile)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from base.errors import ArgumentTypeError, CheckpointError, InputError, ZooError
from zoo import cli
from zoo.cli import (
    EXIT_BUG,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_NON_FINITE,
    EXIT_USAGE,
    main,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIT = ["fit", "mlp", "--data", "two_moons", "--n", "100", "--hidden", "4", "--steps", "2", "--quiet"]
NUTS = ["nuts", "mlp", "--data", "two_moons", "--n", "100", "--hidden", "4", "--quiet"]


def one_error_line(capsys, prefix: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("args, says", [
    (["--lr", "-0.1"], "argument --lr: expected a learning rate > 0"),
    (["--lr", "0"], "argument --lr: expected a learning rate > 0"),
    (["--lr", "nan"], "argument --lr: expected a learning rate > 0"),
    (["--lr", "inf"], "argument --lr: expected a learning rate > 0"),
    (["--lr", "fast"], "argument --lr: expected a learning rate > 0"),
    (["--steps", "0"], "argument --steps: expected a positive integer, got '0'"),
    (["--steps", "1.5"], "argument --steps: expected a positive integer"),
    (["--batch-size", "-8"], "argument --batch-size: expected a positive integer"),
    (["--kl-warmup", "-1"], "argument --kl-warmup: expected a non-negative integer"),
    (["--particles", "0"], "argument --particles: expected a positive integer"),
    (["--hidden", "64,x"], "argument --hidden: expected comma-separated positive integers"),
    (["--hidden", "0"], "argument --hidden: expected comma-separated positive integers"),
    (["--prior-scale", "-1"], "argument --prior-scale: expected a finite number > 0"),
    (["--n", "0"], "argument --n: expected a positive integer"),
    (["--depth", "0"], "argument --depth: expected a positive integer"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_fit_usage_errors_are_one_line_with_status_2(args, says, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(FIT + ["--out", str(tmp_path / "out")] + args)
    assert exit_.value.code == EXIT_USAGE
    line = one_error_line(capsys, "zoo fit: error: ")
    assert says in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, prefix, says", [
    (NUTS + ["--warmup", "-1"], "zoo nuts: error: ", "argument --warmup: expected a non-negative integer"),
    (NUTS + ["--chains", "0"], "zoo nuts: error: ", "argument --chains: expected a positive integer"),
    (NUTS + ["--draws-per-chain", "0"], "zoo nuts: error: ", "argument --draws-per-chain: expected a positive"),
    (["score", "somewhere", "--samples", "0"], "zoo score: error: ", "argument --samples: expected a positive"),
    (["reproduce", "liberty-or-depth", "--seeds", "-1"], "zoo reproduce: error: ", "argument --seeds"),
    (["nope"], "zoo: error: ", "argument command: invalid choice: 'nope'"),
    ([], "zoo: error: ", "the following arguments are required: command"),
])
def test_other_usage_errors(argv, prefix, says, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv + (["--out", str(tmp_path / "o")] if argv[:1] == ["nuts"] else []))
    assert exit_.value.code == EXIT_USAGE
    assert says in one_error_line(capsys, prefix)


@pytest.mark.parametrize("argv, says", [
    (["fit", "nope"], "zoo fit: error: name: expected one of"),
    (["fit", "mlp", "--data", "two_moons", "--n", "5"], "zoo fit: error: n: expected an integer number of points >= 10, got 5"),
    (["fit", "mlp", "--data", "mnist2"], "zoo fit: error: --data: expected one of"),
    (["fit", "mlp", "--guide", "magic"], "zoo fit: error: guide: unknown name 'magic'"),
])
def test_bad_input_found_by_the_package_is_one_line_with_status_2(argv, says, tmp_path, capsys):
    assert main(argv + ["--out", str(tmp_path / "out"), "--quiet"]) == EXIT_USAGE
    assert one_error_line(capsys, says)


def test_a_missing_checkpoint_is_one_line(tmp_path, capsys):
    assert main(["score", str(tmp_path / "missing")]) == EXIT_USAGE
    assert str(tmp_path / "missing") in one_error_line(capsys, "zoo score: error: ")


def test_an_unprepared_tfds_set_is_a_runtime_failure(tmp_path, capsys, monkeypatch):
    pytest.importorskip("tensorflow_datasets")
    from zoo.data import tfds_loaders

    original = tfds_loaders._source
    monkeypatch.setattr(tfds_loaders, "_source", lambda name, split, data_dir: original(name, split, str(tmp_path)))
    assert main(["fit", "mlp", "--data", "mnist", "--out", str(tmp_path / "out")]) == EXIT_FAILURE
    line = one_error_line(capsys, "zoo fit: error: TFDS data set 'mnist' is not prepared")
    assert "tfds build mnist --file_format=array_record" in line


@pytest.fixture
def failing_list(monkeypatch):
    """Make `zoo list` raise the exception in `raise_[0]`."""
    raise_ = [None]

    def cmd_list(args):
        raise raise_[0]

    monkeypatch.setitem(cli.COMMANDS, "list", cmd_list)
    return raise_


class _OwnStatus(ZooError):
    """A ZooError subclass with a status of its own: the CLI reads it from the class."""

    exit_status = 5


def error_cases():
    """(the exception a command raises, the exit status `zoo` must give) for every error type the packages
    define, a subclass with its own status, and exceptions that are not the package's (bugs, Ctrl-C)."""
    from inference.fit import NonFiniteLossError
    from base.errors import (
        FolderLockedError,
        FolderNotOwnedError,
        MissingDependencyError,
        PathNotFoundError,
        UnwritableError,
    )
    from zoo.data.tfds_loaders import DatasetNotPreparedError

    return [(InputError("x", 1, "2"), EXIT_USAGE),
            (ArgumentTypeError("seed", "3", "an integer"), EXIT_USAGE),
            (PathNotFoundError.worded("path", "path: no posterior at '/nonexistent'"), EXIT_USAGE),
            (FolderNotOwnedError("--out", "/tmp/a", "a folder of the package's own"), EXIT_USAGE),
            (FolderLockedError("--out", "/tmp/a", "a folder no other process writes", pid=7), EXIT_USAGE),
            (UnwritableError("--out", "/tmp/a", "a writable folder"), EXIT_USAGE),
            (CheckpointError("/tmp/c", "truncated", file="meta.json"), EXIT_FAILURE),
            (DatasetNotPreparedError("cifar10 is not prepared\nin DIR"), EXIT_FAILURE),
            (MissingDependencyError("load_tfds needs tensorflow-datasets: pip install 'bnn-zoo[tfds]'"), EXIT_FAILURE),
            (NonFiniteLossError("loss is NaN at step 3.", None, 3), EXIT_NON_FINITE),
            (ZooError("a run that could not complete"), EXIT_FAILURE),
            (_OwnStatus("its own status"), 5),
            (ValueError("a plain error"), EXIT_BUG),
            (OSError(28, "No space left on device"), EXIT_BUG),
            (KeyboardInterrupt(), EXIT_INTERRUPTED)]


@pytest.mark.parametrize("err, status", error_cases(), ids=lambda v: type(v).__name__ if isinstance(v, BaseException)
                         else str(v))
def test_the_cli_maps_each_error_type_to_its_exit_status(err, status, monkeypatch, capsys):
    """Each type's status and output: a ZooError one line ``zoo list: error: <message on one line>`` (with
    ``--debug`` its traceback too), a bug its traceback and a last line naming its type, Ctrl-C one line."""

    def command(args):
        raise err

    monkeypatch.setitem(cli.COMMANDS, "list", command)
    assert main(["list"]) == status
    lines = capsys.readouterr().err.strip().splitlines()
    if isinstance(err, ZooError):
        assert lines == [f"zoo list: error: {' '.join(str(err).split(chr(10)))}"]
        assert main(["--debug", "list"]) == status
        assert capsys.readouterr().err.startswith("Traceback")
    elif isinstance(err, KeyboardInterrupt):
        assert lines == ["zoo list: interrupted"]
    else:
        assert lines[0].startswith("Traceback") and lines[-1] == \
            f"zoo list: internal error (a bug, please report it with the traceback above): {type(err).__name__}: {err}"


def test_the_cli_cases_cover_every_error_type_and_usage_errors_exit_2(capsys):
    """`error_cases` holds every ZooError subclass defined in the packages (found in their source), so a new
    error type comes with its exit status tested; argparse's usage errors exit with InputError's status."""
    bases = {}
    for path in sorted(p for package in ("base", "models", "inference", "evals", "zoo") for p in (ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
    defined, grown = {"ZooError"}, True
    while grown:
        more = {name for name, of in bases.items() if of & defined} - defined
        defined, grown = defined | more, bool(more)
    covered = {type(err).__name__ for err, _ in error_cases() if isinstance(err, ZooError)} - {"_OwnStatus"}
    assert covered == defined and len(defined) == 11
    assert EXIT_USAGE == InputError.exit_status == 2 and EXIT_FAILURE == ZooError.exit_status == 1
    with pytest.raises(SystemExit) as exit_:
        main(["list", "--no-such-option"])
    assert exit_.value.code == EXIT_USAGE
    assert capsys.readouterr().err.strip() == \
        "zoo list: error: unrecognized arguments: --no-such-option (see zoo list --help)"


def test_debug_prints_the_traceback_and_keeps_the_status(failing_list, capsys):
    failing_list[0] = CheckpointError("runs/x", "posterior.json was edited", "posterior.json")
    for argv in (["--debug", "list"], ["list", "--debug"]):
        assert main(argv) == EXIT_FAILURE
        err = capsys.readouterr().err
        assert "Traceback" in err and "CheckpointError" in err
        assert err.rstrip().splitlines()[-1] == ("zoo list: error: checkpoint 'runs/x/posterior.json': "
                                                 "posterior.json was edited")


def test_a_bug_keeps_its_traceback(failing_list, capsys):
    failing_list[0] = ZeroDivisionError("division by zero")
    assert main(["list"]) == EXIT_BUG
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith(
        "zoo list: internal error (a bug, please report it with the traceback above): ZeroDivisionError")


def test_a_value_error_from_a_library_is_a_bug_but_from_the_package_bad_input(failing_list, capsys):
    import numpy as np

    failing_list[0] = None

    def library_error(args):
        np.reshape(np.arange(3), (2, 2))  # a ValueError raised inside NumPy

    cli.COMMANDS["list"] = library_error
    assert main(["list"]) == EXIT_BUG
    assert "Traceback" in capsys.readouterr().err

    def package_error(args):
        import zoo

        zoo.get("mlp", data="mnist2")

    cli.COMMANDS["list"] = package_error
    assert main(["list"]) == EXIT_USAGE
    one_error_line(capsys, "zoo list: error: data: expected one of")
