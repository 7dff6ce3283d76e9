"""Resumable fits: the fit state in checkpoint_dir, resuming bit for bit (after a KeyboardInterrupt and after a
SIGKILLed subprocess), refusing another run's state or a damaged one, and warm starts from a Posterior."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import optax
import pytest

import inference
import zoo
from inference.batches import MinibatchOrder, minibatch_blocks
from inference.fit_state import saved_step
from inference.optimizers import as_optimizer, optimizer_identity
from base.atomic_dir import lock_path
from base.errors import CheckpointError, CheckpointWarning, FolderLockedError, InputError

FIT = sys.modules["inference.fit"]  # the module (`inference.fit` is the function)
REPO = Path(__file__).resolve().parents[2]
SETTINGS = dict(steps=95, batch_size=32, chunk_size=10, seed=3, kl_warmup=20, progress=False)


def _entry():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})


ADAM = inference.optimizers.adam(learning_rate=1e-2)  # a record: optax.adam(1e-2)'s numbers, the rate in the identity


def _fit(entry, data=None, **kw):
    kw = {**SETTINGS, "optimizer": ADAM, **kw}
    return inference.fit(entry.model, inference.mean_field(entry.model), entry.train if data is None else data, **kw)


@pytest.fixture(scope="module")
def entry():
    return _entry()


@pytest.fixture(scope="module")
def reference(entry):
    """The uninterrupted 95-step fit, no checkpoints."""
    return _fit(entry)


def _assert_same_fit(a, b):
    np.testing.assert_array_equal(a.losses, b.losses)
    assert set(a.params) == set(b.params)
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
        np.testing.assert_array_equal(a.unconstrained[k], b.unconstrained[k])


class _InterruptAfter:
    """A callback (`inference.fit`'s ``callbacks``) that raises KeyboardInterrupt, as Ctrl-C would, after its
    `n`-th finished chunk (after the built-in checkpointing has seen that chunk)."""

    def __init__(self, n):
        self.n, self.chunks = n, 0

    def on_chunk(self, run):
        self.chunks += 1
        if self.chunks == self.n:
            raise KeyboardInterrupt


def test_an_interrupted_fit_resumes_bit_for_bit(entry, reference, tmp_path):
    state = tmp_path / "state"
    with pytest.raises(KeyboardInterrupt):
        _fit(entry, checkpoint_dir=state, checkpoint_every=30, callbacks=[_InterruptAfter(5)])
    # saved at step 30 (checkpoint_every) and, on the interruption, at the end of the last finished chunk
    assert saved_step(state) == 50
    assert sorted(os.listdir(state)) == ["MANIFEST.json", "fit_state.json", "fit_state.npz"]
    resumed = _fit(entry, checkpoint_dir=state, resume=True)
    _assert_same_fit(resumed, reference)
    assert resumed.info.traces == 0  # a restored state has the initial state's types: nothing retraced
    assert saved_step(state) == 95  # the finished fit is saved too...
    again = _fit(entry, checkpoint_dir=state, resume=True)  # ...so resuming it returns it without a step
    _assert_same_fit(again, reference)
    assert again.info.first_step_s is None


def test_a_sigkilled_fit_resumes_to_the_uninterrupted_result(entry, tmp_path):
    """A subprocess fits with a checkpoint every chunk and is killed with SIGKILL once one is on disk; the
    fit resumed here ends with the parameters and losses of an uninterrupted fit, bit for bit. While it runs,
    a second fit into its folder is refused naming its pid; once it is killed, its lock is taken over."""
    state, settings = tmp_path / "state", {**SETTINGS, "steps": 2000}
    code = (f"import inference, zoo\n"
            f"e = zoo.get('mlp', data='two_moons', hidden=(4,), data_kwargs={{'n': 100}})\n"
            f"inference.fit(e.model, inference.mean_field(e.model), e.train,\n"
            f"              optimizer=inference.optimizers.adam(learning_rate=1e-2),\n"
            f"              checkpoint_dir={str(state)!r}, checkpoint_every=10, **{settings!r})\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stderr=subprocess.PIPE)
    while saved_step(state) is None and proc.poll() is None:
        time.sleep(0.01)
    with pytest.raises(FolderLockedError, match=rf"checkpoint_dir: .*process {proc.pid} \(a fit, since"):
        _fit(entry, checkpoint_dir=state, resume=True, steps=2000)
    proc.kill()
    _, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]  # killed mid-run, not finished
    assert json.loads(Path(lock_path(state)).read_text())["pid"] == proc.pid  # its lock file is left
    killed_at = saved_step(state)
    assert 0 < killed_at < 2000
    resumed = _fit(entry, checkpoint_dir=state, resume=True, steps=2000)
    _assert_same_fit(resumed, _fit(entry, steps=2000))
    assert len(resumed.losses) == 2000
    assert not os.path.exists(lock_path(state))


def _late_drop(step):
    """Adam at 1e-2, dropping to 1e-3 at `step`: the same first updates as optax.adam(1e-2)."""
    return optax.adam(optax.piecewise_constant_schedule(1e-2, {step: 0.1}))


@pytest.mark.parametrize("change, named", [("seed", "seed"), ("steps", "steps"), ("kl_warmup", "kl_warmup"),
                                           ("data", "data"), ("optimizer", "optimizer"), ("schedule", "optimizer")])
def test_resuming_another_run_is_refused_naming_the_difference(entry, reference, tmp_path, change, named):
    state = tmp_path / "state"
    _fit(entry, checkpoint_dir=state)
    kw = {"seed": {"seed": 4}, "steps": {"steps": 96}, "kl_warmup": {"kl_warmup": 0},
          "data": {"data": (entry.train.x + np.float32(0.5), entry.train.y)},
          "optimizer": {"optimizer": inference.optimizers.adam(learning_rate=2e-2)},
          "schedule": {"optimizer": _late_drop(90)}}[change]  # differs from step 90 of 95 only
    with pytest.raises(CheckpointError, match=f"another run: {named} differs"):
        _fit(entry, checkpoint_dir=state, resume=True, **kw)


def test_the_optimizer_identity_is_its_configuration_and_its_states_structure_nothing_run():
    params = {"w": np.zeros(3, np.float32)}

    def identity(optimizer):
        return optimizer_identity(optimizer, as_optimizer(optimizer).transformation().init(params))

    adam = identity(inference.optimizers.adam(learning_rate=1e-2))
    assert adam == identity(inference.optimizers.adam(learning_rate=1e-2))
    assert adam["config"] == {"kind": "adam", "learning_rate": 1e-2, "b1": 0.9, "b2": 0.999, "eps": 1e-8}
    assert adam["hyperparams"] == {"learning_rate": pytest.approx(1e-2), "eps_root": 0.0}  # read off the state
    assert adam != identity(inference.optimizers.adam(learning_rate=2e-2))
    assert adam != identity(inference.optimizers.sgd(1e-2))
    cosine = [identity(inference.optimizers.cosine_adam(1e-2, decay_steps=n)) for n in (95, 96)]
    assert cosine[0] != cosine[1]
    own = identity(optax.adam(1e-2))  # a user's optax object: its state's structure only
    assert own["config"] is None and own["hyperparams"] == {} and own == identity(optax.adam(3e-2))
    assert own != identity(optax.sgd(1e-2, momentum=0.9))


def test_resuming_with_a_users_optax_object_says_what_is_compared(entry, reference, tmp_path):
    ident = {"optimizer": {"config": None, "state": "...", "hyperparams": {}}, "steps": 10}
    saver = FIT.Checkpoints(tmp_path / "state", ident, None, None)
    with pytest.warns(CheckpointWarning, match="the user's own optax object.* only its state's structure is "
                                               "compared"):
        assert saver.restore({"w": np.zeros(3, np.float32)}, resume=True) is None  # (nothing saved there yet)


def test_a_fit_state_of_the_format_before_is_refused_naming_it(entry, tmp_path, monkeypatch):
    state = tmp_path / "state"
    with monkeypatch.context() as patch:  # a state written as the version before wrote its format number
        patch.setattr(sys.modules["inference.fit_state"], "FORMAT", 2)
        _fit(entry, checkpoint_dir=state, steps=10)
    assert json.loads((state / "fit_state.json").read_text())["format"] == 2
    with pytest.raises(CheckpointError, match="a fit state of format 2 .before the optimiser records.*format 3 only"):
        _fit(entry, checkpoint_dir=state, resume=True, steps=10)


def test_a_saved_fit_is_not_overwritten_without_resume(entry, reference, tmp_path):
    state = tmp_path / "state"
    with pytest.warns(UserWarning, match="no saved fit state .* starts at step 0"):
        fresh = _fit(entry, checkpoint_dir=state, resume=True)  # nothing to resume: starts fresh, says so
    _assert_same_fit(fresh, reference)
    with pytest.raises(InputError, match="checkpoint_dir: .* fit saved after 95 steps; pass resume=True"):
        _fit(entry, checkpoint_dir=state)


@pytest.mark.parametrize("damage", ["truncate npz", "edit json", "delete npz"])
def test_a_damaged_fit_state_names_the_file(entry, reference, tmp_path, damage):
    state = tmp_path / "state"
    _fit(entry, checkpoint_dir=state)
    npz, meta = state / "fit_state.npz", state / "fit_state.json"
    if damage == "truncate npz":
        npz.write_bytes(npz.read_bytes()[:100])
    elif damage == "edit json":
        saved = json.loads(meta.read_text())
        saved["step"] = 90
        meta.write_text(json.dumps(saved))
    else:
        npz.unlink()
    name = "fit_state.json" if damage == "edit json" else "fit_state.npz"
    with pytest.raises(CheckpointError, match=name):
        _fit(entry, checkpoint_dir=state, resume=True)


@pytest.mark.parametrize("era", ["format 1", "no gradient norms"])
def test_a_fit_state_of_a_pre_release_format_is_refused_naming_the_format(entry, tmp_path, era):
    """No compatibility path: a state of an earlier format (or without the gradient norms every state now holds)
    is refused with the path, the file and what was expected, even with an intact manifest."""
    from base import atomic_dir
    from inference.fit_state import FORMAT

    state = tmp_path / "state"
    _fit(entry, checkpoint_dir=state)
    if era == "format 1":
        meta = state / "fit_state.json"
        saved = json.loads(meta.read_text())
        saved["format"] = 1
        meta.write_text(json.dumps(saved))
        match = f"a fit state of format 1, this version resumes format {FORMAT} only"
    else:
        npz = state / "fit_state.npz"
        with np.load(npz) as z:
            arrays = {k: z[k] for k in z.files if k != "grad_norms"}
        np.savez(npz, **arrays)
        match = "no gradient norms"
    (state / "MANIFEST.json").unlink()
    atomic_dir._write_manifest(str(state), "fit state")  # signed again: only the format is old
    with pytest.raises(CheckpointError, match=match) as info:
        _fit(entry, checkpoint_dir=state, resume=True)
    assert str(state) in str(info.value)


@pytest.mark.parametrize("kw, match", [({"checkpoint_every": 10}, "checkpoint_every: expected None when no "
                                                                   "checkpoint_dir"),
                                       ({"resume": True}, "resume: expected False when no checkpoint_dir"),
                                       ({"checkpoint_dir": "x", "resume": "yes"}, "resume: expected True or False"),
                                       ({"checkpoint_dir": "x", "checkpoint_every": 0}, "checkpoint_every")])
def test_checkpoint_arguments_are_checked(entry, kw, match):
    with pytest.raises(ValueError, match=match):
        _fit(entry, **kw)


def test_the_minibatch_order_resumes_mid_epoch():
    whole = np.concatenate(list(minibatch_blocks(37, 5, 100, 3, 9)))
    order = MinibatchOrder(37, 5, 3)
    first = np.concatenate(list(order.blocks(40, 9)))  # 40 rows: mid-epoch (7 batches per epoch)
    bits, pending = order.state()
    restored = MinibatchOrder(37, 5, state=(json.loads(json.dumps(bits)), pending.copy()))
    np.testing.assert_array_equal(np.concatenate([first, np.concatenate(list(restored.blocks(60, 9)))]), whole)


# ----- warm starts from a Posterior -----------------------------------------------------------------------------
def _scales(post):
    return np.concatenate([np.ravel(v) for k, v in sorted(post.params.items()) if k.endswith("_scale")])


def test_warm_start_from_a_posterior_keeps_its_scales(entry, reference):
    with pytest.raises(InputError, match="init_params: .*posterior.params.*pass init_params=posterior"):
        _fit(entry, init_params=reference.params)  # constrained values: would be read as unconstrained
    # one Adam step of lr 1e-2 moves each unconstrained value by about 1e-2, so each scale by about 1%;
    # posterior.params read as unconstrained would have made every scale softplus(scale) > 0.69
    one_step = _fit(entry, init_params=reference, steps=1)
    assert _scales(reference).max() < 0.5
    np.testing.assert_allclose(_scales(one_step), _scales(reference), rtol=0.02)
    exact = reference.unconstrained_params()
    for k in exact:
        np.testing.assert_array_equal(exact[k], reference.unconstrained[k])


def test_a_loaded_posterior_gives_its_unconstrained_params(entry, reference, tmp_path):
    inference.save(reference, tmp_path / "post")
    back = inference.load(tmp_path / "post", model=entry.model)
    assert back.unconstrained is None  # not stored: recovered through the constraints
    recovered = back.unconstrained_params()
    for k in reference.unconstrained:
        np.testing.assert_allclose(recovered[k], reference.unconstrained[k], rtol=1e-5, atol=1e-6)


def test_params_that_do_not_round_trip_are_refused(entry, reference):
    name = next(k for k in reference.params if k.endswith("_scale"))
    params = {k: np.array(v) for k, v in reference.params.items()}
    params[name][...] = 0.0  # a scale of 0: unconstrained -inf
    broken = inference.SVIPosterior(model=entry.model, guide=reference.guide, params=params,
                                 feature_shape=(2,))
    with pytest.raises(InputError, match=f"posterior.params\\[{name!r}\\]: expected values inside the support"):
        broken.unconstrained_params()
    with pytest.raises(InputError, match="posterior.params"):
        _fit(entry, init_params=broken)


def test_a_batch_norm_fit_resumes_with_its_moving_averages(tmp_path):
    """The model's mutable state (batch-norm moving averages) is part of the saved state: the resumed fit's
    Posterior.state and params equal the uninterrupted fit's."""
    import models
    from models.networks.lenet5 import lenet5

    model = models.bnn(lenet5(channels=(1, 1), hidden=2, padding="SAME", batch_norm=True), feature_shape=(4, 4, 1))
    rng = np.random.default_rng(0)
    data = (rng.normal(size=(24, 4, 4, 1)).astype(np.float32), rng.integers(0, 10, 24).astype(np.int32))
    kw = dict(steps=12, batch_size=8, chunk_size=3, seed=1, progress=False, optimizer=optax.adam(1e-2))

    def run(**more):
        return inference.fit(model, inference.mean_field(model), data, **kw, **more)

    whole = run()
    assert whole.state  # a stateful model
    with pytest.raises(KeyboardInterrupt):
        run(checkpoint_dir=tmp_path / "bn", callbacks=[_InterruptAfter(2)])
    assert saved_step(tmp_path / "bn") == 6
    resumed = run(checkpoint_dir=tmp_path / "bn", resume=True)
    _assert_same_fit(resumed, whole)
    flat = lambda tree: jax.tree_util.tree_leaves(tree)  # noqa: E731
    assert len(flat(whole.state)) > 0
    for a, b in zip(flat(resumed.state), flat(whole.state)):
        np.testing.assert_array_equal(a, b)
