"""Folders the library writes are its own (issue 31): a fit state is never written over the user's files or a
saved posterior, nor a posterior over a fit state; a read-only or full place is refused before any work; a save
that fails during a fit warns and the fit returns its result; concurrent writers are serialised or refused
with a lock naming the holder's pid; an empty folder holds no fit state."""

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import optax
import pytest

import inference
import base.atomic_dir as atomic_dir
import zoo
from inference.fit_state import saved_step
from base.errors import (CheckpointWarning, FolderLockedError, FolderNotOwnedError, InputError, UnwritableError,
                           ZooError)

FIT = sys.modules["inference.fit"]  # the module (`inference.fit` is the function)
REPO = Path(__file__).resolve().parents[2]
SETTINGS = dict(steps=40, batch_size=32, chunk_size=10, seed=1, progress=False)


@pytest.fixture(scope="module")
def entry():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})


ADAM = optax.adam(1e-2)  # one object: fits with it share their compiled update (keyed by identity)


def _fit(entry, **kw):
    return inference.fit(entry.model, inference.mean_field(entry.model), entry.train,
                         **{**SETTINGS, "optimizer": ADAM, **kw})


@pytest.fixture(scope="module")
def reference(entry):
    """The 40-step fit without checkpoints."""
    return _fit(entry)


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if fit builds its compiled update: the refusal must come before any work."""

    def refuse(*a, **k):
        raise AssertionError("fit started work before checking its checkpoint_dir")

    monkeypatch.setattr(FIT, "start_state", refuse)


def _same(a, b):
    np.testing.assert_array_equal(a.losses, b.losses)
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])


def _leftovers(folder: Path, keep: set) -> list:
    return sorted(n for n in os.listdir(folder) if n not in keep)


def test_fit_never_replaces_a_folder_of_the_users_files(entry, tmp_path, no_training):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "notes.txt").write_text("mine")
    for resume in (False, True):
        with pytest.raises(FolderNotOwnedError, match=r"checkpoint_dir: expected a new or empty folder, or one holding "
                                                      r"a fit state saved by bnn-zoo, got .*proj'; it holds files "
                                                      r"bnn-zoo did not write \(notes\.txt\)"):
            _fit(entry, checkpoint_dir=proj, resume=resume)
    assert os.listdir(proj) == ["notes.txt"] and (proj / "notes.txt").read_text() == "mine"
    assert _leftovers(tmp_path, {"proj"}) == []


def test_a_posterior_and_a_fit_state_are_never_written_over_each_other(entry, reference, tmp_path, monkeypatch):
    post_dir, state_dir = tmp_path / "post", tmp_path / "state"
    inference.save(reference, post_dir)
    manifest = json.loads((post_dir / "MANIFEST.json").read_text())
    assert (manifest["writer"], manifest["kind"]) == ("bnn-zoo", "posterior")  # the package's marker
    _fit(entry, checkpoint_dir=state_dir, steps=10)
    assert json.loads((state_dir / "MANIFEST.json").read_text())["kind"] == "fit state"
    with monkeypatch.context() as m:
        m.setattr(FIT, "start_state", lambda *a, **k: pytest.fail("trained before refusing"))
        for resume in (False, True):
            with pytest.raises(FolderNotOwnedError, match="checkpoint_dir: .*it holds a posterior saved by bnn-zoo, "
                                                          "which a fit state would replace"):
                _fit(entry, checkpoint_dir=post_dir, resume=resume)
    with pytest.raises(FolderNotOwnedError, match="path: .*it holds a fit state saved by bnn-zoo, which a "
                                                  "posterior would replace"):
        inference.save(reference, state_dir)
    _same(reference, inference.load(post_dir, entry.model))  # both intact
    assert saved_step(state_dir) == 10
    # a file of the user's dropped into the package's folder makes it theirs too: not replaced
    (post_dir / "notes.txt").write_text("mine")
    with pytest.raises(FolderNotOwnedError, match=r"holds files bnn-zoo did not write \(notes\.txt\)"):
        inference.save(reference, post_dir)
    assert not atomic_dir.remove_folder(post_dir, "posterior") and (post_dir / "notes.txt").exists()
    assert atomic_dir.remove_folder(state_dir, "fit state") and not state_dir.exists()


def _erofs(*a, **k):
    raise OSError(errno.EROFS, "Read-only file system")


def test_a_read_only_or_full_place_is_refused_before_any_work(entry, reference, tmp_path, monkeypatch, no_training):
    state = tmp_path / "deep" / "state"
    with monkeypatch.context() as m:  # a read-only disk: the probe file cannot be made
        m.setattr(atomic_dir.tempfile, "mkstemp", _erofs)
        with pytest.raises(UnwritableError, match=r"checkpoint_dir: expected a place where a folder can be written, "
                                                  r"got .*state'; cannot write in .* \(Read-only file system\)"):
            _fit(entry, checkpoint_dir=state)
        with pytest.raises(UnwritableError, match="path: expected a place where a folder can be written"):
            inference.save(reference, tmp_path / "post")
    with monkeypatch.context() as m:  # a full disk
        m.setattr(atomic_dir, "free_bytes", lambda folder: 1000)
        with pytest.raises(UnwritableError, match=r"path: expected a folder on a disk with room for the checkpoint, "
                                                  r"got .*post'; 1,000 bytes are free in .*, it needs about"):
            inference.save(reference, tmp_path / "post")
    assert os.listdir(tmp_path) == []  # nothing written, not even the parent folder


def test_a_full_disk_found_while_training_is_checked_before_the_first_step(entry, tmp_path, monkeypatch):
    monkeypatch.setattr(atomic_dir, "free_bytes", lambda folder: 1000)
    monkeypatch.setattr(FIT, "run_steps", lambda *a, **k: pytest.fail("trained before checking the space"))
    with pytest.raises(UnwritableError, match="checkpoint_dir: expected a folder on a disk with room for the "
                                              "checkpoint.*1,000 bytes are free"):
        _fit(entry, checkpoint_dir=tmp_path / "state")
    assert os.listdir(tmp_path) == []


def test_a_save_that_fails_mid_fit_warns_and_the_fit_returns_its_result(entry, reference, tmp_path, monkeypatch):
    state, calls = tmp_path / "state", []
    real = atomic_dir._write_manifest

    def full_after_the_first(folder, kind):
        calls.append(folder)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(folder, kind)

    monkeypatch.setattr(atomic_dir, "_write_manifest", full_after_the_first)
    with pytest.warns(CheckpointWarning) as caught:
        post = _fit(entry, checkpoint_dir=state, checkpoint_every=10)
    messages = [str(w.message) for w in caught if issubclass(w.category, CheckpointWarning)]
    # saves at steps 10 (done), 20, 30, 40 and the final one retrying 40 (failed): the first and last failures warn
    assert len(messages) == 2 and len(calls) == 5
    assert "fit state after step 20 could not be saved" in messages[0] and "No space left" in messages[0]
    assert "training goes on" in messages[0] and "keeps the state after step 10" in messages[0]
    assert "after step 40 could not be saved" in messages[1] and "returns its result all the same" in messages[1]
    assert "(4 save(s) failed)" in messages[1]
    _same(reference, post)  # the whole fit, as without checkpoints
    assert saved_step(state) == 10 and _leftovers(tmp_path, {"state"}) == []  # no staging folder left


def test_save_onto_a_disk_that_fills_up_keeps_the_earlier_checkpoint(entry, reference, tmp_path, monkeypatch):
    path = tmp_path / "post"
    inference.save(reference, path)
    monkeypatch.setattr(atomic_dir, "_write_manifest", lambda *a: _erofs())
    with pytest.raises(UnwritableError, match=r"path: expected a folder on a disk that can take the checkpoint, got "
                                              r".*post'; writing it failed \(Read-only file system\); nothing was "
                                              r"replaced") as err:
        inference.save(reference, path)
    assert isinstance(err.value, (InputError, ZooError))
    monkeypatch.undo()
    _same(reference, inference.load(path, entry.model))
    assert _leftovers(tmp_path, {"post"}) == []


def test_resume_on_an_empty_folder_warns_and_starts_at_step_0(entry, reference, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    with pytest.warns(UserWarning, match="no saved fit state at .*state'; the fit starts at step 0"):
        post = _fit(entry, checkpoint_dir=state, resume=True)
    _same(reference, post)
    assert saved_step(state) == 40


def _lock_holder(lock: Path, purpose: str) -> subprocess.Popen:
    """A process (no JAX) holding the flock of `lock` as `atomic_dir.folder_lock` does, until its stdin closes."""
    code = textwrap.dedent(f"""
        import fcntl, json, os, sys, time
        fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, json.dumps({{"pid": os.getpid(), "purpose": {purpose!r}, "started": "now"}}).encode())
        print("locked", flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_folder_another_process_holds_is_refused_naming_its_pid(entry, reference, tmp_path, no_training):
    state = tmp_path / "state"
    proc = _lock_holder(atomic_dir.lock_path(state), "fit")
    try:
        with pytest.raises(FolderLockedError, match=rf"checkpoint_dir: expected a folder no other process is writing, "
                                                    rf"got .*state'; process {proc.pid} \(a fit, since now\) holds its "
                                                    rf"lock .*\.state\.lock") as err:
            _fit(entry, checkpoint_dir=state)
        assert err.value.pid == proc.pid
        with pytest.raises(FolderLockedError, match=f"path: .*process {proc.pid} \\(a fit"):
            inference.save(reference, state)  # a fit holds it: refused at once, not waited for
    finally:
        proc.stdin.close()
        proc.wait()
    assert not state.exists()
    # the holder is gone, its lock file is left with its pid: taken over
    assert json.loads(Path(atomic_dir.lock_path(state)).read_text())["pid"] == proc.pid
    inference.save(reference, state)
    assert not os.path.exists(atomic_dir.lock_path(state))  # released and removed
    _same(reference, inference.load(state, entry.model))


THREE_WRITERS = r"""
import os, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import inference, models
from models.networks.mlp import mlp

model = models.bnn(mlp((32,), 2), feature_shape=(10,))
shapes = model.site_shapes((10,))  # cached now: the writers do no JAX work
path, saves = sys.argv[1], int(sys.argv[2])

def posterior(writer, version):
    samples = {k: np.full((1, 2) + s, writer * 1000 + version, np.float32) for k, s in shapes.items()}
    return inference.MCMCPosterior(model=model, samples=samples, feature_shape=(10,),
                               config={"writer": writer, "version": version})

children = []
for writer in range(3):
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            for version in range(saves):
                inference.save(posterior(writer, version), path)
        except BaseException as err:
            print(f"writer {writer}: {type(err).__name__}: {err}", flush=True)
            status = 1
        os._exit(status)
    children.append(pid)
print(" ".join(str(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])) for pid in children), flush=True)
"""


def test_three_processes_saving_into_one_folder_follow_one_another(tmp_path):
    path = tmp_path / "ckpt"
    out = subprocess.run([sys.executable, "-c", THREE_WRITERS, str(path), "20"], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}, timeout=120)
    assert out.stdout.splitlines()[-1:] == ["0 0 0"], out.stdout + out.stderr[-2000:]  # 60 saves, none failed
    import models
    from models.networks.mlp import mlp

    back = inference.load(path, models.bnn(mlp((32,), 2)))
    writer, version = back.config["writer"], back.config["version"]
    assert version == 19  # the last save of one writer, complete
    for v in back.samples.values():
        np.testing.assert_array_equal(v, writer * 1000 + version)
    assert _leftovers(tmp_path, {"ckpt"}) == []  # no staging, previous or lock file left
