"""The Posterior interface and its two kinds (`SVIPosterior`, `MCMCPosterior`): built without a kind switch,
the constrained parameters refused as `fit`'s ``init_params`` by their type, a checkpoint of each kind loading
as its class. Tiny: a 2-4-2 MLP, no training."""

import pickle

import jax
import numpy as np
import pytest

import inference
import base.atomic_dir as atomic_dir
import models
from inference.fit import start_params
from base.errors import ArgumentTypeError, CheckpointError, InputError
from models.networks.mlp import mlp

KEY = jax.random.PRNGKey(0)
X = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(3, 2)


@pytest.fixture(scope="module")
def model():
    return models.bnn(mlp([4], 2), feature_shape=(2,))


@pytest.fixture(scope="module")
def svi(model):
    guide = inference.mean_field(model)
    return inference.SVIPosterior(model=model, guide=guide, params=guide.init_params(KEY, X), feature_shape=(2,))


@pytest.fixture(scope="module")
def mcmc(model, svi):
    """2 chains x 3 draws: 6 guide draws regrouped."""
    draws = svi.draws(6, seed=1)
    return inference.MCMCPosterior(model=model, samples={k: v.reshape((2, 3) + v.shape[1:]) for k, v in draws.items()},
                                   feature_shape=(2,))


def test_the_interface_cannot_be_built_and_names_the_kinds(model):
    with pytest.raises(ArgumentTypeError, match=r"kind: expected .*SVIPosterior\(.*MCMCPosterior\(.*got 'mcmc'"):
        inference.Posterior(model=model, kind="mcmc", samples={}, feature_shape=(2,))
    with pytest.raises(TypeError, match="kind"):  # the old keyword is not a field of either kind
        inference.MCMCPosterior(model=model, kind="mcmc", samples={}, feature_shape=(2,))


def test_each_kind_answers_the_interface_its_own_way(svi, mcmc):
    assert isinstance(svi, inference.Posterior) and isinstance(mcmc, inference.Posterior)
    assert (svi.kind, svi.num_chains, svi.num_draws) == ("svi", 1, None)
    assert (mcmc.kind, mcmc.num_chains, mcmc.num_draws) == ("mcmc", 2, 6)
    assert (mcmc.guide, mcmc.params, mcmc.losses, svi.samples, svi.sample_stats) == (None,) * 5
    with pytest.raises(AttributeError):
        svi.kind = "mcmc"  # read-only
    by_chain = mcmc.draws_by_chain()
    flat = mcmc.draws()
    for k, v in by_chain.items():
        assert v.shape[:2] == (2, 3)
        np.testing.assert_array_equal(flat[k], v.reshape((6,) + v.shape[2:]))  # chain-major
    assert {v.shape[:2] for v in svi.draws_by_chain(5).values()} == {(1, 5)}
    with pytest.raises(InputError, match="an SVI posterior"):
        mcmc.unconstrained_params()


def test_stored_and_on_demand_draws_give_the_same_predictions(svi, mcmc):
    """The shared per-draw code: an MCMC posterior of the SVI posterior's draws predicts what the SVI
    posterior predicts from those draws."""
    draws = mcmc.draws()
    np.testing.assert_allclose(mcmc.predict(X, num_samples=6, chunk_size=4), svi.predict(X, draws=draws, chunk_size=4),
                               rtol=1e-6)
    assert svi.predict(X, num_samples=6).shape == (6, 3, 2)


def test_the_constrained_params_are_refused_by_their_type(svi):
    assert isinstance(svi.params, inference.posterior.ConstrainedParams) and isinstance(svi.params, dict)
    with pytest.raises(InputError, match=r"init_params: .*posterior.params.*pass init_params=posterior"):
        start_params(svi.params)
    plain = dict(svi.unconstrained_params())
    assert start_params(plain) is plain
    # a pytree like a dict: through jit and back it keeps its type and values
    back = jax.jit(lambda p: jax.tree.map(lambda v: v * 2.0, p))(svi.params)
    assert type(back) is inference.posterior.ConstrainedParams
    for k, v in svi.params.items():
        np.testing.assert_allclose(back[k], 2.0 * np.asarray(v), rtol=1e-6)
    again = pickle.loads(pickle.dumps(svi.params))
    assert type(again) is inference.posterior.ConstrainedParams and set(again) == set(svi.params)


def test_a_checkpoint_of_each_kind_loads_as_its_class(svi, mcmc, model, tmp_path):
    for post in (svi, mcmc):
        inference.save(post, tmp_path / post.kind)
        back = inference.load(tmp_path / post.kind, model=model)
        assert type(back) is type(post)
        np.testing.assert_array_equal(back.predict(X, num_samples=6, seed=2), post.predict(X, num_samples=6, seed=2))
    meta = tmp_path / "mcmc" / "posterior.json"
    meta.write_text(meta.read_text().replace('"kind": "mcmc"', '"kind": "vi"'))
    (tmp_path / "mcmc" / "MANIFEST.json").unlink()
    atomic_dir._write_manifest(str(tmp_path / "mcmc"), "posterior")  # edited on purpose: the edit signed
    with pytest.raises(CheckpointError, match="has kind 'vi'; expected 'svi', 'mcmc' or 'laplace'"):
        inference.load(tmp_path / "mcmc", model=model)
