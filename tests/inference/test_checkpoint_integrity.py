"""Checkpoints survive crashes and damage (issue 12, must-hold 1): `inference.save` writes through
`atomic_directory`; a process killed (SIGKILL) at random or chosen points of a save leaves a checkpoint that
loads and equals one of the saved versions exactly; a missing, truncated or edited file, or an unreadable one
in a checkpoint older than manifests, raises CheckpointError naming the file. Also: the exact round trip of
every Posterior field, and the fallback to site shapes for checkpoints without a model identity."""

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import inference
import models
import base.atomic_dir as atomic_dir
from base.atomic_dir import previous_path
from inference.run_info import NutsInfo
from base.errors import CheckpointError, FolderNotOwnedError
from models.networks.mlp import mlp

REPO = Path(__file__).resolve().parents[2]


def hand_posterior(model, feature_shape, version=0, draws=3, seed=0):
    """An MCMC Posterior built by hand (no compile): samples (1, draws, *shape) = N(0, 1) + version, stats,
    losses, network state and info all set, so that every stored field is checked."""
    samples = {k: v + np.float32(version) for k, v in _normal_draws(model, feature_shape, draws, seed).items()}
    return inference.MCMCPosterior(
        model=model, samples=samples, feature_shape=feature_shape,
        sample_stats={"diverging": (np.arange(draws) % 2 == 0)[None], "num_steps": np.full((1, draws), 7)},
        losses=np.array([3.5, 2.25, np.float32(1 / 3)], np.float32),
        state={"bn": {"mean": np.arange(4, dtype=np.float32), "var": np.ones(4, np.float64)}},
        config={"version": version, "note": "hand"},
        info=NutsInfo(nuts_s=1.5, divergences=2, mean_leapfrog_steps=7.0, chain_method="sequential"))


@functools.lru_cache(maxsize=4)
def _normal_draws(model, feature_shape, draws, seed):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal((1, draws) + s).astype(np.float32) for k, s in model.site_shapes(feature_shape).items()}


def assert_same(a, b):
    for group in ("samples", "sample_stats"):
        x, y = getattr(a, group), getattr(b, group)
        assert set(x) == set(y)
        for k in x:
            assert np.asarray(x[k]).dtype == y[k].dtype
            np.testing.assert_array_equal(np.asarray(x[k]), y[k])
    np.testing.assert_array_equal(a.losses, b.losses)
    assert b.losses.dtype == np.float32
    for k in ("mean", "var"):
        np.testing.assert_array_equal(a.state["bn"][k], b.state["bn"][k])
        assert a.state["bn"][k].dtype == b.state["bn"][k].dtype
    assert (a.kind, tuple(a.feature_shape), a.config, a.info) == (b.kind, tuple(b.feature_shape), b.config, b.info)


@pytest.fixture(scope="module")
def small():
    model = models.bnn(mlp((4,), 2))
    return model, hand_posterior(model, (3,))


@pytest.fixture
def saved(small, tmp_path):
    path = tmp_path / "ckpt"
    inference.save(small[1], path)
    return path


def test_round_trip_is_exact_and_writes_a_manifest(small, saved):
    model, post = small
    assert sorted(os.listdir(saved)) == ["MANIFEST.json", "arrays.npz", "posterior.json"]
    manifest = json.loads((saved / "MANIFEST.json").read_text())["files"]
    assert set(manifest) == {"arrays.npz", "posterior.json"}
    assert manifest["arrays.npz"]["bytes"] == (saved / "arrays.npz").stat().st_size
    assert_same(post, inference.load(saved, model))
    assert inference.checkpoint.read_meta(saved)["identity"]["prior"] == {"kind": "normal", "scale": 1.0, "loc": 0.0}


def test_saving_again_replaces_the_checkpoint_and_leaves_nothing_behind(small, saved):
    model, _ = small
    newer = hand_posterior(model, (3,), version=5)
    inference.save(newer, saved)
    assert_same(newer, inference.load(saved, model))
    assert sorted(os.listdir(saved.parent)) == ["ckpt"]  # no staging or previous folder left


def test_a_truncated_arrays_file_is_named(small, saved):
    data = (saved / "arrays.npz").read_bytes()
    (saved / "arrays.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"arrays\.npz'.*has \d+ bytes, the manifest says \d+ \(truncated") as err:
        inference.load(saved, small[0])
    assert err.value.file == "arrays.npz" and err.value.path == str(saved)


def test_an_edited_metadata_file_is_named(small, saved):
    meta = saved / "posterior.json"
    meta.write_text(meta.read_text().replace('"hand"', '"HAND"'))  # same size, other bytes
    for read in (lambda: inference.load(saved, small[0]), lambda: inference.checkpoint.read_meta(saved)):
        with pytest.raises(CheckpointError, match=r"posterior\.json'.*SHA-256 differs from the manifest") as err:
            read()
        assert err.value.file == "posterior.json"


@pytest.mark.parametrize("name", ["arrays.npz", "posterior.json"])
def test_a_missing_file_is_named(small, saved, name):
    (saved / name).unlink()
    with pytest.raises(CheckpointError, match=rf"{name}'.*file is missing"):
        inference.load(saved, small[0])


def resign(folder):
    """Rewrite the manifest of the posterior checkpoint `folder` after an edit (as `save` writes it), so that
    the loader's checks past the manifest see the edited files."""
    (folder / "MANIFEST.json").unlink(missing_ok=True)
    atomic_dir._write_manifest(str(folder), "posterior")


def test_a_checkpoint_without_manifest_is_refused_and_damage_past_the_manifest_is_named(small, saved):
    """A folder without MANIFEST.json (a pre-release version's, or the manifest deleted) cannot be verified: it is
    refused, naming the path, the manifest and what this version reads. Files that pass the manifest but cannot
    be read are named too."""
    model, post = small
    (saved / "MANIFEST.json").unlink()
    with pytest.raises(CheckpointError, match=r"MANIFEST\.json'.*this version reads folders whose MANIFEST\.json lists "
                                              r"every file .*\(posterior\.json, arrays\.npz\) cannot be verified") as err:
        inference.load(saved, model)
    assert err.value.path == str(saved) and err.value.file == "MANIFEST.json"
    resign(saved)
    assert_same(post, inference.load(saved, model))
    data = (saved / "arrays.npz").read_bytes()
    (saved / "arrays.npz").write_bytes(data[: len(data) // 2])
    resign(saved)
    with pytest.raises(CheckpointError, match=r"arrays\.npz'.*cannot be read .*BadZipFile") as err:
        inference.load(saved, model)
    assert err.value.file == "arrays.npz"
    (saved / "posterior.json").write_text('{"format": 1, "kind": ')
    resign(saved)
    with pytest.raises(CheckpointError, match=r"posterior\.json'.*is not valid JSON"):
        inference.load(saved, model)
    (saved / "posterior.json").write_text('{"format": 7}')
    resign(saved)
    with pytest.raises(CheckpointError, match=r"posterior\.json'.*format 7; this version reads format 1"):
        inference.checkpoint.read_meta(saved)


def test_an_edited_activation_is_refused_with_or_without_its_manifest(small, tmp_path):
    """The census case: posterior.json edited (activation relu -> tanh) to fit a tanh model."""
    _, post = small
    relu = models.bnn(mlp((4,), 2))
    relu.arguments = {"activation": "relu"}
    saved = tmp_path / "ckpt"
    inference.save(inference.MCMCPosterior(model=relu, samples=post.samples, feature_shape=(3,)), saved)
    meta = saved / "posterior.json"
    meta.write_text(meta.read_text().replace('"activation": "relu"', '"activation": "tanh"'))
    tanh = models.bnn(mlp((4,), 2, activation="tanh"))
    tanh.arguments = {"activation": "tanh"}
    with pytest.raises(CheckpointError, match="posterior.json'.*SHA-256 differs"):
        inference.load(saved, tanh)
    (saved / "MANIFEST.json").unlink()
    with pytest.raises(CheckpointError, match="MANIFEST.json'.*file is missing"):
        inference.load(saved, tanh)


@pytest.mark.parametrize("field", ["identity", "info_type", "training_data"])
def test_a_pre_release_checkpoint_lacking_a_field_is_refused_naming_it(small, saved, field):
    model, _ = small
    meta = json.loads((saved / "posterior.json").read_text())
    del meta[field]
    (saved / "posterior.json").write_text(json.dumps(meta))
    resign(saved)
    with pytest.raises(CheckpointError, match=rf"posterior\.json'.*lacks the fields \['{field}'\]: it was written by "
                                              r"a pre-release version; this version reads format 1 with the fields "):
        inference.load(saved, model)


def test_a_model_of_unknown_arguments_is_checked_by_its_site_shapes(small, saved):
    model, post = small
    assert inference.checkpoint.read_meta(saved)["identity"]["arguments"] is None  # a plain models.bnn's
    tanh = models.bnn(mlp((4,), 2, activation="tanh"))
    assert_same(post, inference.load(saved, tanh))  # nothing to compare but shapes
    with pytest.raises(CheckpointError, match=r"another model; site 'mlp/~/linear_0/b': saved shape \(4,\), "
                                              r"model \(5,\)"):
        inference.load(saved, models.bnn(mlp((5,), 2)))


def test_a_model_of_another_prior_or_arguments_is_refused(small, saved):
    _, post = small
    other = models.bnn(mlp((4,), 2), prior=models.priors.normal(0.5))
    with pytest.raises(CheckpointError, match="another model; prior.scale: saved 1.0, model 0.5"):
        inference.load(saved, other)
    known = models.bnn(mlp((4,), 2))
    known.arguments = {"activation": "relu"}  # unknown on the saved side: not compared
    assert inference.load(saved, known).config == post.config


def test_save_refuses_a_folder_of_other_files_and_bad_arguments(small, tmp_path):
    _, post = small
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FolderNotOwnedError, match=r"path: expected a new or empty folder, or one holding a posterior "
                                                  r"saved by bnn-zoo.*holds files bnn-zoo did not write \(notes\.txt\)"):
        inference.save(post, tmp_path)
    assert os.listdir(tmp_path) == ["notes.txt"]
    with pytest.raises(TypeError, match="posterior: expected an inference.Posterior, got"):
        inference.save({"w": 1}, tmp_path / "x")
    with pytest.raises(TypeError, match="path: expected a directory path"):
        inference.save(post, 3)
    with pytest.raises(FileNotFoundError, match="path: no checkpoint"):
        inference.load(tmp_path / "absent", small[0])


def test_a_crash_between_the_two_renames_reads_the_previous_version(small, saved):
    """The state `atomic_directory` leaves when killed after moving the old version aside."""
    os.rename(saved, previous_path(saved))
    assert_same(small[1], inference.load(saved, small[0]))
    newer = hand_posterior(small[0], (3,), version=2)
    inference.save(newer, saved)
    assert_same(newer, inference.load(saved, small[0]))
    assert not os.path.exists(previous_path(saved))


# ----- SIGKILL while saving ---------------------------------------------------------------------------------
# A helper process imports the package once, then for every command forks a writer that saves versions
# first, first + 1, ... of a ~4 MB posterior to one path until it is killed; "hook" kills it at a chosen point
# of its first save (a writer whose hook does not fire exits with status 3, failing the test).
WRITER = r"""
import os, signal, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import inference, models
import base.atomic_dir as atomic_dir
from models.networks.mlp import mlp
sys.path.insert(0, sys.argv[1])
from test_checkpoint_integrity import hand_posterior

model = models.bnn(mlp((256,), 2))
model.site_shapes((1000,))  # cached now: the writers do no JAX work

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def install(hook):
    if hook == "half_npz":  # a partial arrays.npz in the staging folder
        real = np.savez
        def savez(file, **arrays):
            real(file, **arrays)
            os.truncate(file, os.path.getsize(file) // 2)
            die()
        np.savez = savez
    elif hook == "before_manifest":
        atomic_dir._write_manifest = lambda *a: die()
    elif hook in ("old_moved_aside", "new_moved_in"):
        real, calls = os.rename, []
        def rename(a, b):
            real(a, b)
            calls.append(b)
            if len(calls) == (1 if hook == "old_moved_aside" else 2):
                die()
        os.rename = rename

print("ready", flush=True)
while True:
    line = sys.stdin.readline()
    if not line:
        break
    path, first, hook = line.split()
    pid = os.fork()
    if pid == 0:
        try:
            install(hook)
            version = int(first)
            while True:
                inference.save(hand_posterior(model, (1000,), version, draws=4), path)
                version += 1
                if hook != "none":  # the hook did not fire: exit, and the test fails instead of waiting
                    break
        finally:
            os._exit(3)
    print(pid, flush=True)
    print(os.waitpid(pid, 0)[1], flush=True)
"""


@pytest.fixture(scope="module")
def writer(tmp_path_factory):
    log = tmp_path_factory.mktemp("writer") / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(Path(__file__).parent)], cwd=REPO,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.stdout.readline().strip() == "ready", log.read_text()

    def run(path, first, hook="none", delay=None):
        """Start a writer; kill it after `delay` seconds (or let `hook` kill it); returns its wait status."""
        proc.stdin.write(f"{path} {first} {hook}\n")
        proc.stdin.flush()
        pid = int(proc.stdout.readline())
        if delay is not None:
            time.sleep(delay)
            os.kill(pid, signal.SIGKILL)
        status = int(proc.stdout.readline())
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, log.read_text()
        return status

    yield run
    proc.stdin.close()
    proc.wait()


@pytest.fixture(scope="module")
def big_model():
    return models.bnn(mlp((256,), 2))


def loaded_version(path, model):
    """The version the checkpoint at `path` holds, after checking every array equals that version's exactly."""
    back = inference.load(path, model)
    version = back.config["version"]
    assert_same(hand_posterior(model, (1000,), version, draws=4), back)
    return version


def leftovers(path):
    return sorted(n for n in os.listdir(path.parent) if n != path.name)


@pytest.mark.parametrize("hook, survivor", [("half_npz", "previous"), ("before_manifest", "previous"),
                                            ("old_moved_aside", "previous"), ("new_moved_in", "new")])
def test_a_writer_killed_at_each_step_leaves_a_loadable_checkpoint(writer, big_model, tmp_path, hook, survivor):
    path = tmp_path / "ckpt"
    inference.save(hand_posterior(big_model, (1000,), 0, draws=4), path)
    writer(path, 1, hook)
    assert loaded_version(path, big_model) == (0 if survivor == "previous" else 1)
    assert leftovers(path)  # the killed writer's staging or previous folder is there ...
    inference.save(hand_posterior(big_model, (1000,), 2, draws=4), path)
    assert loaded_version(path, big_model) == 2
    assert leftovers(path) == []  # ... and the next save cleans it up


def test_writers_killed_at_random_times_always_leave_a_loadable_checkpoint(writer, big_model, tmp_path):
    path = tmp_path / "ckpt"
    inference.save(hand_posterior(big_model, (1000,), 0, draws=4), path)
    delays = np.random.default_rng(12).uniform(0.02, 0.4, size=20)
    last, mid_write = 0, 0
    for delay in delays:
        writer(path, last + 1, delay=float(delay))
        mid_write += bool(leftovers(path))  # killed inside a save: its staging folder is left
        version = loaded_version(path, big_model)
        assert version >= last  # the previous checkpoint, or a newer complete one
        last = version
    assert last > 0  # some saves completed ...
    assert mid_write >= 5  # ... and kills landed inside one (a save takes most of a writer's time)
    shutil.rmtree(path.parent)
