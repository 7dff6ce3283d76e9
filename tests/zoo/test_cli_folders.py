"""The command line never loses work to its own folders (issue 31): --out and --checkpoint-dir that overlap, an
empty --out, a fit state where the posterior goes (or the reverse) are refused before any work; a NaN-stopped
fit goes beside an existing posterior; a posterior that cannot be saved at the end leaves the finished fit
state, named, for --resume; `corruptions` and `run` check their --out before any work."""

import errno
import os
import re
import sys
import types

import numpy as np
import pytest

import inference
import base.atomic_dir as atomic_dir
import zoo
from inference.fit_state import saved_step
from base.errors import CheckpointWarning, UnwritableError
from zoo.cli import main

TINY = ["mlp", "--data", "two_moons", "--n", "100", "--hidden", "4", "--quiet", "--batch-size", "32"]


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a command builds its entry, trains or draws: the checks must come first."""
    import evals.corruption_grid
    import zoo.cli

    def refuse(*a, **k):
        raise AssertionError("the command started work before checking its arguments")

    monkeypatch.setattr(zoo.cli, "_entry", refuse)
    # `zoo run`'s job module, as the command imports it, is a stand-in that refuses (the library's tests import
    # no experiment)
    monkeypatch.setitem(sys.modules, "zoo.experiments.run", types.SimpleNamespace(main_job=refuse))
    monkeypatch.setattr(evals.corruption_grid, "run", refuse)


@pytest.fixture
def no_scores(monkeypatch):
    import evals

    monkeypatch.setattr(evals, "score", lambda *a, **k: None)  # not under test here (and costs its compiles)


def _one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"zoo {command}: error: "), err
    return err


@pytest.mark.parametrize("out, state, relation", [("run1", "run1", "is --out"), ("out", "out/st", "is inside --out"),
                                                   ("st/post", "st", "holds --out")])
def test_overlapping_out_and_checkpoint_dir_are_refused_before_any_work(tmp_path, capsys, no_work, out, state,
                                                                         relation):
    args = ["fit", *TINY, "--out", str(tmp_path / out), "--checkpoint-dir", str(tmp_path / state)]
    assert main(args) == 2
    err = _one_line_error(capsys, "fit")
    assert "--checkpoint-dir: expected a folder apart from --out (neither inside the other)" in err
    assert f"; it {relation} (" in err
    assert os.listdir(tmp_path) == []


def test_empty_paths_are_refused_and_leave_nothing(tmp_path, capsys, no_work, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["fit", *TINY, "--out", ""]) == 2
    assert "--out: expected a folder path (not empty), got ''" in _one_line_error(capsys, "fit")
    assert main(["fit", *TINY, "--out", "post", "--checkpoint-dir", ""]) == 2
    assert "--checkpoint-dir: expected a folder path (not empty), got ''" in _one_line_error(capsys, "fit")
    assert os.listdir(tmp_path) == []  # no ./.fit-state


def test_a_posterior_and_a_fit_state_swap_places_refused(tmp_path, capsys, no_work):
    inference.save(_hand_posterior(), tmp_path / "post")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "fit_state.json").write_text('{"step": 7}')
    assert main(["fit", *TINY, "--out", str(tmp_path / "new"), "--checkpoint-dir", str(tmp_path / "post")]) == 2
    assert "--checkpoint-dir: expected a new or empty folder, or one holding a saved fit state" in \
        _one_line_error(capsys, "fit")
    assert main(["fit", *TINY, "--out", str(tmp_path / "state")]) == 2
    assert "--out: expected a new or empty folder, or one holding a saved posterior" in _one_line_error(capsys, "fit")
    assert sorted(os.listdir(tmp_path)) == ["post", "state"]


def _hand_posterior():
    """A posterior built by hand (no training): a tiny MLP's samples, all zeros."""
    import models
    from models.networks.mlp import mlp

    model = models.bnn(mlp((2,), 2), feature_shape=(2,))
    samples = {k: np.zeros((1, 2) + s, np.float32) for k, s in model.site_shapes((2,)).items()}
    return inference.MCMCPosterior(model=model, samples=samples, feature_shape=(2,))


def test_a_nan_stopped_fit_goes_beside_a_good_posterior(tmp_path, capsys, no_scores):
    good, hand = tmp_path / "good", _hand_posterior()
    inference.save(hand, good)
    assert main(["fit", *TINY, "--steps", "50", "--lr", "1e30", "--out", str(good), "--overwrite"]) == 3
    err = capsys.readouterr().err
    beside = tmp_path / "good.nan-stopped"
    assert f"The last finite posterior is saved to {beside} ({good} keeps the posterior that was there)." in err
    after = inference.load(good, hand.model)
    for k in hand.samples:
        np.testing.assert_array_equal(hand.samples[k], after.samples[k])  # the good posterior is untouched
    stopped = zoo.load(beside)
    assert len(stopped.losses) < 50 and np.all(np.isfinite(stopped.losses))
    assert sorted(os.listdir(tmp_path)) == ["good", "good.nan-stopped"]


def test_a_posterior_that_cannot_be_saved_is_kept_as_a_fit_state_or_elsewhere_and_named(tmp_path, capsys,
                                                                                          monkeypatch, no_scores):
    out, state = tmp_path / "post", tmp_path / "post.fit-state"
    real_save = inference.save

    def disk_full(post, path):
        if str(path) == str(out):
            raise UnwritableError("path", str(path), "a folder on a disk that can take the checkpoint",
                                  "writing it failed (No space left on device)")
        return real_save(post, path)

    monkeypatch.setattr(inference, "save", disk_full)
    assert main(["fit", *TINY, "--steps", "20", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "zoo fit: error: the fit finished but its posterior could not be saved: path: expected a folder" in err
    assert f"the fit state after step 20 of 20 is kept in {state}" in err and "with --resume" in err
    assert saved_step(state) == 20 and not out.exists()
    monkeypatch.setattr(inference, "save", real_save)
    assert main(["fit", *TINY, "--steps", "20", "--out", str(out), "--resume"]) == 0  # saved, nothing trained
    assert "first step after - (no step left to run)" in capsys.readouterr().out
    assert len(zoo.load(out).losses) == 20 and not state.exists()

    # neither --out nor the fit state could be written: the posterior goes to a temporary folder, named
    monkeypatch.setattr(inference, "save", disk_full)
    real_manifest = atomic_dir._write_manifest

    def no_fit_state(folder, kind):
        if kind == "fit state":
            raise OSError(errno.ENOSPC, "No space left on device")
        real_manifest(folder, kind)

    monkeypatch.setattr(atomic_dir, "_write_manifest", no_fit_state)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    out = tmp_path / "post2"
    with pytest.warns(CheckpointWarning, match="could not be saved"):
        assert main(["fit", *TINY, "--steps", "20", "--out", str(out)]) == 1
    monkeypatch.undo()
    (where,) = os.listdir(tmp_path / "tmp")
    assert f"no finished fit state was saved either, so it is saved in {tmp_path / 'tmp' / where} instead" in \
        capsys.readouterr().err
    assert where.startswith("post2.") and len(zoo.load(tmp_path / "tmp" / where).losses) == 20


def _read_only(monkeypatch):
    def erofs(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(atomic_dir.tempfile, "mkstemp", erofs)


def test_corruptions_and_run_check_their_out_before_any_work(tmp_path, capsys, monkeypatch, no_work):
    (tmp_path / "afile").write_text("x")
    for command, out, says in [("corruptions", tmp_path, "--out: expected a file path, got .*; it is an existing "
                                                          "folder"),
                               ("corruptions", "", "--out: expected a file path \\(not empty\\)"),
                               ("run", tmp_path / "afile", "--out: expected a folder for the results, got .*; it is an "
                                                           "existing file")]:
        assert main([command, "--out", str(out)]) == 2
        assert re.search(says, _one_line_error(capsys, command))
    _read_only(monkeypatch)
    for command, out in [("corruptions", tmp_path / "missing" / "grid.png"), ("run", tmp_path / "results")]:
        assert main([command, "--out", str(out)]) == 2
        err = _one_line_error(capsys, command)
        assert f"--out: expected a place where a folder can be written, got '{out}'; cannot write in " in err
        assert "(Read-only file system)" in err
    assert sorted(os.listdir(tmp_path)) == ["afile"]


def test_the_corruption_grid_makes_the_missing_folders_of_its_png(tmp_path):
    from evals.corruption_grid import plot_corruption_grid

    path = tmp_path / "a" / "b" / "grid.png"
    plot_corruption_grid(np.full((4, 4), 0.5, np.float32), str(path), kinds=("gaussian_noise",))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
