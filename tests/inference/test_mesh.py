"""Data-parallel SVI on a device mesh (``fit(..., mesh=)``; NUTS chains on a mesh: test_nuts_driver.py).

In-process on the suite's 2 host devices (tests/conftest.py forces them before JAX starts): a minibatch split
over the "data" axis gives one device's losses and parameters to float tolerance, the compiled step really holds
half the rows per device and an all-reduce, a 1-device mesh equals no mesh exactly, a checkpointed fit resumed on
the mesh equals the uninterrupted one bit for bit, and a second fit with the same mesh compiles nothing."""

import jax
import numpy as np
import optax
import pytest
from jax import monitoring
from jax.sharding import Mesh

import inference
import zoo
from inference import svi
from base.errors import InputError

COMPILES: list = []  # every backend compile or persistent-cache read of this process (one listener per module)
monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kw: COMPILES.append(kw.get("fun_name", event)) if "backend_compile" in event or "cache_retrieval" in event
    else None)
# tests/inference/test_resume.py's entry and settings: the one-device fit shares its compiled programs (an optimiser
# record's rate is data: another adam(1e-2) is the same key)
KW = dict(steps=95, batch_size=32, chunk_size=10, seed=3, kl_warmup=20, progress=False,
          optimizer=inference.optimizers.adam(learning_rate=1e-2))


def data_mesh(devices: int) -> Mesh:
    assert jax.device_count() >= 2, "tests/conftest.py forces 2 host devices before JAX starts"
    return Mesh(np.array(jax.devices()[:devices]), ("data",))


@pytest.fixture(scope="module")
def entry():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})


@pytest.fixture(scope="module")
def one_device(entry):
    """The mean-field fit without a mesh."""
    return inference.fit(entry.model, inference.mean_field(entry.model), entry.train, **KW)


def _same(a, b):
    np.testing.assert_array_equal(a.losses, b.losses)
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k], err_msg=k)


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.losses, b.losses, rtol=tol)
    for k in a.params:
        np.testing.assert_allclose(a.params[k], b.params[k], rtol=tol, atol=tol, err_msg=k)


class _Interrupt:
    def on_chunk(self, run):
        if run.done == 50:
            raise KeyboardInterrupt


def test_bad_meshes_are_refused_naming_argument_value_and_expectation(entry):
    fit = lambda **kw: inference.fit(entry.model, inference.mean_field(entry.model), entry.train,  # noqa: E731
                                     **{**KW, **kw})
    with pytest.raises(InputError, match=r"mesh: expected None or a jax.sharding.Mesh with a \"data\" axis.*got 'cpu'"):
        fit(mesh="cpu")
    with pytest.raises(InputError, match=r"mesh: expected a Mesh with a \"data\" axis .*got <a Mesh with axes "
                                         r"\('batch',\)>"):
        fit(mesh=Mesh(np.array(jax.devices()[:2]), ("batch",)))
    with pytest.raises(InputError, match=r"batch_size: expected a multiple of the mesh's \"data\" axis size 2 .*got 31"):
        fit(mesh=data_mesh(2), batch_size=31)
    with jax.threefry_partitionable(False), pytest.raises(InputError, match=r"mesh: expected no mesh while "
                                                                           r"jax_threefry_partitionable is off"):
        fit(mesh=data_mesh(2))


def test_a_one_device_mesh_equals_no_mesh_exactly(entry, one_device):
    _same(inference.fit(entry.model, inference.mean_field(entry.model), entry.train, mesh=data_mesh(1), **KW),
          one_device)


def test_two_devices_split_each_minibatch_equal_one_device_resume_and_compile_once(entry, one_device, tmp_path,
                                                                                    monkeypatch):
    calls = []
    run_chunk = svi.run_chunk
    monkeypatch.setattr(svi, "run_chunk", lambda *args, **kw: calls.append((args, kw)) or run_chunk(*args, **kw))
    mesh = data_mesh(2)
    whole = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, mesh=mesh, **KW)
    _close(whole, one_device)
    assert not np.array_equal(whole.losses, one_device.losses)  # the sums really were split
    # the compiled step (cached: no compile here) holds B / 2 = 16 rows of logits per device and reduces across them
    text = run_chunk.lower(*calls[-1][0], **calls[-1][1]).compile().as_text()
    assert "all-reduce" in text and "f32[16,2]" in text and "f32[32,2]" not in text
    # interrupted after 50 steps, resumed on a mesh of the same devices: the uninterrupted fit bit for bit
    with pytest.raises(KeyboardInterrupt):
        inference.fit(entry.model, inference.mean_field(entry.model), entry.train, mesh=mesh,
                      checkpoint_dir=tmp_path / "fit", callbacks=[_Interrupt()], **KW)
    COMPILES.clear()
    resumed = inference.fit(entry.model, inference.mean_field(entry.model), entry.train,
                            mesh=Mesh(np.array(jax.devices()[:2]), ("data",)), checkpoint_dir=tmp_path / "fit",
                            resume=True, **KW)
    _same(resumed, whole)
    assert resumed.info.traces == 0 and COMPILES == []  # an equal mesh: the compiled programs are reused
    assert calls[-1][1]["mesh"] == mesh and len(calls) == 10 + 5 + 5  # whole, interrupted, resumed: 10 steps a chunk


def _batch_norm_mlp(x, is_training=False):
    """A dense network with Haiku state (batch-norm statistics), named apart from other tests' networks."""
    import haiku as hk

    from models.networks.layers import batch_norm

    h = jax.nn.relu(batch_norm(hk.Linear(3, name="mesh_bn_in")(x), is_training, name="mesh_bn_bn"))
    return hk.Linear(2, name="mesh_bn_out")(h)


def test_a_k_tied_guide_on_a_batch_norm_network_on_two_devices_equals_one_device(entry):
    """The batch-norm statistics are the whole minibatch's on both devices (the compiler reduces them too)."""
    import models

    model = models.bnn(_batch_norm_mlp, name="mesh_bn_mlp", feature_shape=entry.train.feature_shape)
    # plain SGD: Adam divides by the gradient's size, so on a weight whose gradient is ~0 (a batch-norm offset)
    # it turns float rounding into steps of the learning rate's size (measured on a batch-norm LeNet-5, one
    # device, Adam 1e-2, 6 steps: inputs scaled by 1 + 1e-7 moved such an offset by 7e-3, two devices by 2e-4)
    kw = {**KW, "steps": 20, "optimizer": optax.sgd(1e-2)}
    fits = [inference.fit(model, inference.k_tied.k_tied(model, k=2), entry.train, mesh=m, **kw) for m in (None, data_mesh(2))]
    _close(*fits)
    assert jax.tree.leaves(fits[0].state)
    for a, b in zip(jax.tree.leaves(fits[0].state), jax.tree.leaves(fits[1].state)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
