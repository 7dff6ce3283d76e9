"""The `zoo` CLI's errors: one line ``zoo <cmd>: error: ...`` on stderr, exit status 2 for a bad argument or
input, 1 for a run that could not complete, 3 for a NaN loss, 70 plus the traceback for a bug; ``--debug``
adds the traceback. Every bad argument here fails before any training (no compile)."""

from __future__ import annotations

import pytest

from models.errors import CheckpointError
from zoo import cli
from zoo.cli import EXIT_BUG, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_NON_FINITE, EXIT_USAGE, main

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
    (["fit", "mlp", "--data", "mnist2"], "zoo fit: error: data: expected one of"),
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


def test_exit_status_per_kind_of_error(failing_list, capsys):
    from inference import NonFiniteLossError

    failing_list[0] = CheckpointError("runs/x", "arrays.npz is truncated (12 of 4096 bytes)", "arrays.npz")
    assert main(["list"]) == EXIT_FAILURE
    assert one_error_line(capsys, "zoo list: error: checkpoint 'runs/x/arrays.npz': arrays.npz is truncated")
    failing_list[0] = NonFiniteLossError("fit: the loss became NaN/inf at step 7", None, 7)
    assert main(["list"]) == EXIT_NON_FINITE
    assert one_error_line(capsys, "zoo list: error: fit: the loss became NaN/inf at step 7")
    failing_list[0] = KeyboardInterrupt()
    assert main(["list"]) == EXIT_INTERRUPTED
    assert one_error_line(capsys, "zoo list: interrupted")


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
