"""`zoo fit` / `zoo nuts` never lose work: --out checked before any work, the last finite posterior saved on a
NaN stop (exit 3), the fit state saved on SIGTERM (exit 143) and `--resume` continuing it to the very result of
an uninterrupted fit."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import inference
import zoo
from inference.fit_state import saved_step
from zoo.cli import main

REPO = Path(__file__).resolve().parents[2]
ENTRY = ["mlp", "--data", "two_moons", "--n", "100", "--hidden", "4", "--quiet"]
TINY = ENTRY + ["--batch-size", "32"]


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the command builds the entry (loads data) or trains: checks must come first."""
    import zoo.cli

    def refuse(*a, **k):
        raise AssertionError("the command started work before checking its arguments")

    monkeypatch.setattr(zoo.cli, "_entry", refuse)


def _bad_outs(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("someone's files")
    return [(tmp_path / "afile", "it is an existing file"),
            (tmp_path / "other", "it holds other files \\(notes.txt\\)"),
            (tmp_path / "afile" / "out", "is a file")]


@pytest.mark.parametrize("command", ["fit", "nuts"])
def test_a_bad_out_is_refused_before_any_work(tmp_path, capsys, no_work, command):
    for out, why in _bad_outs(tmp_path):
        assert main([command, *(TINY if command == "fit" else ENTRY), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"zoo {command}: error: --out: expected")
        assert re.search(why, err), err
    assert not (tmp_path / "afile.fit-state").exists()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs a folder no one can write in (/proc)")
def test_an_unwritable_out_is_refused(capsys, no_work):
    assert main(["fit", *TINY, "--out", "/proc/bnn-zoo-out"]) == 2
    assert "--out: expected a place where a folder can be written" in capsys.readouterr().err


def test_a_saved_fit_state_needs_resume(tmp_path, capsys, no_work):
    state = tmp_path / "run.fit-state"
    state.mkdir()
    (state / "fit_state.json").write_text(json.dumps({"step": 7}))
    assert main(["fit", *TINY, "--out", str(tmp_path / "run")]) == 2
    assert "holds a fit saved after 7 steps: add --resume" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        main(["fit", *TINY, "--checkpoint-every", "0", "--out", str(tmp_path / "x")])
    assert exited.value.code == 2
    assert "--checkpoint-every: expected a positive integer" in capsys.readouterr().err


def test_a_nan_stop_saves_the_last_finite_posterior(tmp_path, capsys):
    out = tmp_path / "nan"
    assert main(["fit", *TINY, "--steps", "50", "--lr", "1e30", "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert "became NaN/inf at step" in err and f"The last finite posterior is saved to {out}." in err
    saved = zoo.load(out)
    step = int(err.split("at step ")[1].split(";")[0])
    assert saved.losses.shape == (step,) and np.all(np.isfinite(saved.losses))
    assert all(np.all(np.isfinite(v)) for v in saved.params.values())


def test_sigterm_saves_the_fit_state_and_resume_finishes_the_fit(tmp_path, capsys, monkeypatch):
    import evals

    monkeypatch.setattr(evals, "score", lambda *a, **k: None)  # not under test here (and costs its compiles)
    out = tmp_path / "run"
    state = tmp_path / "run.fit-state"
    args = ["fit", *TINY, "--steps", "8000", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "zoo.cli", *args, "--checkpoint-every", "10"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while saved_step(state) is None and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    stopped_at = saved_step(state)
    assert 0 < stopped_at < 8000 and stopped_at % 500 == 0  # the end of a chunk (chunk_size 500)
    assert f"interrupted by SIGTERM: the fit state after step {stopped_at} of 8000 is saved in {state}" in err
    assert "with --resume to continue" in err and not out.exists()

    assert main(args + ["--resume"]) == 0
    assert f"saved to {out}" in capsys.readouterr().out
    assert not state.exists()  # the posterior is saved: the fit state is gone
    resumed = zoo.load(out)
    entry = zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})
    uninterrupted = inference.fit(entry.model, inference.make_guide("mean_field", entry.model), entry.train,
                                  steps=8000, batch_size=32, progress=False)  # zoo fit without --lr: fit's default optimiser
    np.testing.assert_array_equal(resumed.losses, uninterrupted.losses)
    for k in uninterrupted.params:
        np.testing.assert_array_equal(resumed.params[k], uninterrupted.params[k])
