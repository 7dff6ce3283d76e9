"""Bad inputs of issue 45 at the files, folders, signals and command line: each is refused with the package's error
naming the argument (and the value and what was expected), or behaves correctly. `CASES` lists them (id: the test
that covers it); docs/bad-input.md's section "Files, folders, signals and the command line (issue 45)" lists them
for users. Cheap: one tiny fit (the signal's), no NUTS, a hand-made posterior for the folders."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import sys
import threading
import types
import warnings

import numpy as np
import pytest

import base.atomic_dir as atomic_dir
import inference
import zoo
from base.errors import FolderNotOwnedError, InputError, PathNotFoundError, UnwritableError
from base.run_folder import RUN_MARKER, check_run_folder, claim_run_folder
from inference.fit_state import saved_step
from zoo.cli import StopAtChunkEnd, _rhat_verdict, check_out, main, signals_stop_the_fit

JOBS = "experiments/test_job_folders.py"  # the cases of zoo.experiments (tests outside tests/experiments import none)
CASES = {  # case: the test here that covers it, or "file::test" for one in another file
    # item 2: nothing of the user's is replaced or written into
    "a job's --out is a folder of the user's files": "test_a_job_folder_holding_anything_of_another_is_refused",
    "a job's --out is a saved posterior": "test_a_job_folder_holding_anything_of_another_is_refused",
    "a job's --out is a fit state": "test_a_job_folder_holding_anything_of_another_is_refused",
    "a job's --out is another job's results": "test_a_job_folder_holding_anything_of_another_is_refused",
    "a job's --out is a file": "test_a_job_folder_holding_anything_of_another_is_refused",
    "a job's --out has a marker bnn-zoo did not write": "test_a_job_folder_holding_anything_of_another_is_refused",
    "zoo run --out the user's folder": f"{JOBS}::test_zoo_run_and_every_reproduce_job_refuse_the_users_folder_before_any_work",
    "zoo reproduce --out the user's folder (every job, CLI and Python)":
        f"{JOBS}::test_zoo_run_and_every_reproduce_job_refuse_the_users_folder_before_any_work",
    "zoo fit --out over an earlier posterior, without --overwrite":
        "test_fit_and_nuts_refuse_an_earlier_posterior_without_overwrite",
    # item 3: signals
    "SIGTERM landing in a garbage-collection callback": "test_a_signal_in_a_finaliser_stops_the_fit_at_its_chunk_end",
    "a second signal while a chunk runs": "test_the_handler_sets_a_flag_and_a_second_signal_raises",
    # item 4: full disk
    "fit(checkpoint_dir=...) on a full disk": "test_a_full_disk_at_the_lock_record_is_unwritable_and_releases_it",
    # item 5: the command line
    "zoo nuts --init on the user's files": "test_init_and_score_name_the_argument_and_what_the_folder_is",
    "zoo nuts --init on a fit state": "test_init_and_score_name_the_argument_and_what_the_folder_is",
    "zoo score on a fit state / an empty folder / a file / nothing / a job's results":
        "test_init_and_score_name_the_argument_and_what_the_folder_is",
    "zoo nuts --draws-per-chain 1 (R-hat nan)": "test_r_hat_says_why_it_is_missing",
    # item 6: UCI data
    "UCI index file listing a row twice": "test_uci_index_files_listing_an_index_twice_are_refused_naming_the_file",
    "UCI feature column listed twice": "test_uci_index_files_listing_an_index_twice_are_refused_naming_the_file",
}

ENTRY = ["mlp", "--data", "two_moons", "--n", "100", "--hidden", "4", "--quiet"]  # zoo fit and zoo nuts take these


def test_a_job_folder_holding_anything_of_another_is_refused(tmp_path, every_kind_of_folder, files_under):
    places = every_kind_of_folder
    before = files_under(tmp_path)
    says = {"user": r"it holds files bnn-zoo did not mark as its own \(summary\.md, uci\.csv; no bnn-zoo-run\.json\)",
            "posterior": "it holds a posterior saved by bnn-zoo, which zoo benchmark uci would write into",
            "state": "it holds a fit state saved by bnn-zoo",
            "other job": r"it holds the results of zoo run \(bnn-zoo-run\.json says so\)",
            "file": "a folder for the results, got .*; it is an existing file",
            "forged": r"its bnn-zoo-run\.json is unreadable"}
    for name, pattern in says.items():
        with pytest.raises(FolderNotOwnedError) as caught:
            claim_run_folder(places[name], "zoo benchmark uci", "--out")
        assert caught.value.argument == "--out" and caught.value.value == str(places[name])
        assert re.search(f"^--out: expected .*{pattern}", str(caught.value)), str(caught.value)
    assert files_under(tmp_path) == before  # nothing written, nothing replaced
    # the library's own places: absent, empty, its own job's folder, a folder of marked job folders only
    for path, job in [(places["missing"], "zoo benchmark uci"), (places["empty"], "zoo benchmark uci"),
                      (places["other job"], "zoo run"), (tmp_path / "parent" / "k-tied", "zoo reproduce k-tied"),
                      (tmp_path / "parent", "zoo run")]:
        assert claim_run_folder(path, job) == str(path)
        assert json.loads((path / RUN_MARKER).read_text())["job"] == job
    with pytest.raises(InputError, match="^--out: expected a folder path"):
        check_run_folder("", "zoo run", "--out")


@pytest.fixture
def no_jobs(monkeypatch):
    """Fail the test if a command builds its entry (the checks must come before any work)."""
    import zoo.cli

    def refuse(*a, **k):
        raise AssertionError("the command started work before checking its arguments")

    monkeypatch.setattr(zoo.cli, "_entry", refuse)


def test_fit_and_nuts_refuse_an_earlier_posterior_without_overwrite(tmp_path, capsys, no_jobs, every_kind_of_folder,
                                                                    files_under):
    places = every_kind_of_folder
    before = files_under(tmp_path)
    for command in ("fit", "nuts"):
        assert main([command, *ENTRY, "--out", str(places["posterior"])]) == 2
        err = capsys.readouterr().err
        assert err == (f"zoo {command}: error: --out: expected a new or empty folder, or --overwrite, got "
                       f"'{places['posterior']}'; it holds a posterior saved earlier, which this run would replace: "
                       "add --overwrite to replace it, or choose another folder\n")
    assert files_under(tmp_path) == before
    check_out(str(places["posterior"]), overwrite=True)  # --overwrite: allowed (the user said so)
    with pytest.raises(FolderNotOwnedError):
        check_out(str(places["user"]), overwrite=True)  # never the user's files


def test_the_handler_sets_a_flag_and_a_second_signal_raises():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can be set in the main thread only")
    before = signal.getsignal(signal.SIGTERM)
    with signals_stop_the_fit() as interrupt:
        signal.raise_signal(signal.SIGTERM)  # the handler runs here and returns
        assert interrupt.signum == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            StopAtChunkEnd(interrupt).on_chunk(None)
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # a second signal: at once
    assert signal.getsignal(signal.SIGTERM) is before
    StopAtChunkEnd(types.SimpleNamespace(signum=None)).on_chunk(None)  # no signal: nothing


class _SignalInAFinaliser:
    """A fit callback: after the chunk that ends at step `at`, a SIGTERM arrives while an object's finaliser runs
    (as JAX's garbage-collection callback does), where an exception raised by the handler is only printed
    ("Exception ignored in ...") and lost."""

    def __init__(self, at: int | None):
        self.at = at  # None: after the last chunk, while the fit makes its posterior

    def on_chunk(self, run) -> None:
        if run.done == self.at:
            dying = _Dying()
            del dying

    def on_end(self, run, posterior):
        if self.at is None:
            dying = _Dying()
            del dying
        return posterior


class _Dying:
    def __del__(self):
        signal.raise_signal(signal.SIGTERM)


@pytest.mark.filterwarnings("ignore::inference.ConvergenceWarning")  # 60 steps: too few to judge
def test_a_signal_in_a_finaliser_stops_the_fit_at_its_chunk_end(tmp_path, capsys, monkeypatch):
    """zoo fit, its fit run in chunks of 10 steps, gets a SIGTERM inside a finaliser after step 20: it saves the
    state of step 20 and exits 143. (Before, the handler's KeyboardInterrupt was lost in the finaliser and the fit
    ran to its end, exit 0.)"""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can be set in the main thread only")
    real_fit, lost, at = inference.fit, [], [20]

    def fit_with_a_signal(*args, callbacks=(), **kwargs):
        return real_fit(*args, callbacks=[_SignalInAFinaliser(at[0]), *callbacks], **{**kwargs, "chunk_size": 10})

    monkeypatch.setattr(inference, "fit", fit_with_a_signal)
    monkeypatch.setattr(sys, "unraisablehook", lost.append)  # what "Exception ignored in ..." would report
    out = tmp_path / "post"
    assert main(["fit", *ENTRY, "--steps", "60", "--batch-size", "16", "--out", str(out)]) == 128 + signal.SIGTERM
    state = tmp_path / "post.fit-state"
    assert f"zoo fit: interrupted by SIGTERM: the fit state after step 20 of 60 is saved in {state}" in \
        capsys.readouterr().err
    assert saved_step(str(state)) == 20 and not out.exists() and lost == []
    # after the last chunk: the finished fit's posterior is saved, the scores are skipped, the status says so
    at[0] = None
    assert main(["fit", *ENTRY, "--steps", "60", "--batch-size", "16", "--out", str(out), "--resume"]) == 143
    assert capsys.readouterr().err == (f"zoo fit: interrupted by SIGTERM after the last step: the posterior is saved "
                                       f"to {out} (not scored)\n")
    assert len(zoo.load(out).losses) == 60 and not state.exists()  # resumed from step 20


def test_a_full_disk_at_the_lock_record_is_unwritable_and_releases_it(moons_tiny, tmp_path, monkeypatch):
    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    fds_before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    state = tmp_path / "state"
    monkeypatch.setattr(atomic_dir.os, "pwrite", full)
    e = moons_tiny
    with pytest.raises(UnwritableError) as caught:
        inference.fit(e.model, inference.mean_field(e.model), e.train, steps=10, batch_size=16, progress=False,
                      checkpoint_dir=str(state))
    monkeypatch.undo()
    assert caught.value.argument == "checkpoint_dir" and caught.value.value == str(state)
    assert "No space left on device" in str(caught.value) and ".state.lock" in str(caught.value)
    assert os.listdir(tmp_path) == []  # no lock file left behind
    if fds_before is not None:
        assert len(os.listdir("/proc/self/fd")) == fds_before  # nor its descriptor
    with atomic_dir.folder_lock(state, "fit", "checkpoint_dir"):  # the lock is free
        assert os.listdir(tmp_path) == [".state.lock"]


def test_init_and_score_name_the_argument_and_what_the_folder_is(tmp_path, capsys, no_jobs, every_kind_of_folder):
    places = every_kind_of_folder
    expected = ("expected a saved posterior (a folder written by inference.save, zoo fit --out or zoo nuts --out), "
                "got '{}'; ")
    says = {"user": "it holds files bnn-zoo did not write (summary.md, uci.csv), not a saved posterior",
            "state": "it is a fit state (the resumable state of an unfinished zoo fit, its --checkpoint-dir), not a "
                     "saved posterior",
            "empty": "it is an empty folder", "file": "it is a file",
            "other job": "it is the results folder of zoo run, not a saved posterior"}
    for name, hint in says.items():
        path = places[name]
        assert main(["nuts", *ENTRY, "--out", str(tmp_path / "new"), "--init", str(path)]) == 2
        assert capsys.readouterr().err.startswith(f"zoo nuts: error: --init: {expected.format(path)}{hint}")
        assert main(["score", str(path)]) == 2
        assert capsys.readouterr().err.startswith(f"zoo score: error: path: {expected.format(path)}{hint}")
    assert main(["score", str(places["missing"])]) == 2
    assert capsys.readouterr().err.startswith(f"zoo score: error: path: no checkpoint at '{places['missing']}' (it "
                                              "does not exist); expected a saved posterior")
    with pytest.raises(PathNotFoundError, match="^path: no checkpoint at"):
        zoo.load(places["missing"])
    with pytest.raises(InputError, match="^path: .*it is a fit state"):
        zoo.load(places["state"])
    assert not (tmp_path / "new").exists()


def test_r_hat_says_why_it_is_missing(hand_posterior):
    x = np.zeros((3, 2), np.float32)
    assert _rhat_verdict(hand_posterior(draws=1), x) == (  # 2 chains of 1 draw: nothing is computed
        "not computed: split R-hat needs at least 4 draws per chain, got 1; whether the chains converged is unknown "
        "(raise --draws-per-chain)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # ArviZ's 0 / 0 on draws that never vary
        assert _rhat_verdict(hand_posterior(draws=4), x) == ("undefined (nan) for these draws: whether the chains "
                                                              "converged is unknown")


def _uci_copy(tmp_path):
    from zoo.data.uci import PACKAGE_ROOT

    root = tmp_path / "uci"
    shutil.copytree(PACKAGE_ROOT / "yacht", root / "yacht")
    return root, root / "yacht"


def test_uci_index_files_listing_an_index_twice_are_refused_naming_the_file(tmp_path):
    from zoo.data.uci import uci

    root, folder = _uci_copy(tmp_path)
    train = folder / "index_train_0.txt"
    rows = train.read_text().split()
    train.write_text("\n".join(rows + rows[:3]) + "\n")  # three rows listed twice
    with pytest.raises(InputError) as caught:
        uci("yacht", 0, root=str(root))
    assert str(caught.value) == (f"{train}: expected each row index listed once, got <3 row indices listed more "
                                 f"than once: {', '.join(sorted(rows[:3], key=int))}>")
    shutil.copy(_uci_copy(tmp_path / "clean")[1] / "index_train_0.txt", train)
    features = folder / "index_features.txt"
    columns = features.read_text().split()
    features.write_text("\n".join(columns + columns[:1]) + "\n")
    with pytest.raises(InputError, match=f"^{re.escape(str(features))}: expected each column index listed once, got "
                                         f"<1 column indices listed more than once: {columns[0]}>"):
        uci("yacht", 0, root=str(root))


def test_cases_are_each_covered_by_a_test():
    import ast
    from pathlib import Path

    here = Path(__file__).resolve()
    for case, where in CASES.items():
        file, _, name = where.rpartition("::")
        source = here.parents[1] / file if file else here  # "file" is under tests/
        defined = {n.name for n in ast.parse(source.read_text()).body if isinstance(n, ast.FunctionDef)}
        assert name in defined, (case, where)
    assert len(CASES) == 18
