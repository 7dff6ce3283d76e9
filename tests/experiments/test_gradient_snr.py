"""zoo.experiments.analysis.gradient_snr (k-tied Normal paper, footnote 3) and zoo.experiments.analysis.elbo_gradients."""

import warnings

import numpy as np
import pytest

import inference
import zoo
from zoo.experiments.analysis.gradient_snr import gradient_snr, snr_summary
from zoo.experiments.analysis.elbo_gradients import elbo_gradients
from base.errors import InputError


def test_constant_gradient_has_infinite_snr_and_zero_mean_noise_none():
    const = np.tile(np.array([0.5, -2.0, 3.0]), (10, 1))
    assert np.all(np.isinf(gradient_snr(const)))
    assert np.all(np.isinf(gradient_snr(const, "squared_mean")))
    noise = np.random.default_rng(0).normal(size=(100_000, 4))
    # E[g]^2 / Var[g] of zero-mean noise is ~0; the footnote's E[g^2] / Var[g] = 1 + that is ~1
    assert np.all(gradient_snr(noise, "squared_mean") < 1e-3)
    assert np.allclose(gradient_snr(noise), 1.0, atol=1e-3)
    shifted = noise + 2.0  # mean 2, variance 1: E[g]^2 / Var = 4, E[g^2] / Var = 5
    assert np.allclose(gradient_snr(shifted, "squared_mean"), 4.0, rtol=0.02)
    assert np.allclose(gradient_snr(shifted), 5.0, rtol=0.02)
    assert np.isnan(gradient_snr(np.zeros((10, 2)))).all()
    summary = snr_summary({"a": shifted[:, :2], "b": np.zeros((100_000, 1)), "c": const[:, :2]})
    assert summary["mean"] == pytest.approx(5.0, rel=0.02)  # over the finite entries; NaN (zeros) left out
    assert summary["inf_share"] == pytest.approx(0.5) and np.isinf(summary["median"])
    with pytest.raises(InputError, match="gradients"):
        gradient_snr(np.ones((1, 3)))
    with pytest.raises(InputError, match="numerator"):
        gradient_snr(const, "ratio")


@pytest.fixture(scope="module")
def k_tied_fit():
    e = zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.ConvergenceWarning)
        post = inference.fit(e.model, inference.k_tied.k_tied(e.model, k=2), e.train, steps=10, batch_size=20,
                             progress=False)
    return e, post


def test_elbo_gradients_differ_by_minibatch_and_repeat_by_seed(k_tied_fit):
    e, post = k_tied_fit
    u = "mlp/~/linear_1/w_auto_u"
    grads = elbo_gradients(post, e.train, batch_size=8, num_batches=10, seed=1, names=[u])
    assert list(grads) == [u] and grads[u].shape == (10, 4, 2)
    assert np.all(np.isfinite(grads[u])) and np.all(grads[u].std(0) > 0)  # other minibatch, other noise
    again = elbo_gradients(post, e.train, batch_size=8, num_batches=10, seed=1, names=[u])
    assert np.array_equal(again[u], grads[u])
    snr = gradient_snr(grads[u])
    assert snr.shape == (4, 2) and np.all(snr >= 1.0)
    with pytest.raises(InputError, match="batch_size"):
        elbo_gradients(post, e.train, batch_size=500, num_batches=10)


def test_local_estimator_has_lower_gradient_variance_on_one_minibatch(k_tied_fit):
    """same_batch: only the noise varies; the local reparameterisation trick's gradient (Kingma et al., 2015)
    varies less than one weight draw per minibatch for the dense weights' scale factors."""
    e, post = k_tied_fit
    names = [f"mlp/~/linear_{i}/w_auto_{p}" for i in (0, 1) for p in ("u", "v")]
    kw = dict(batch_size=8, num_batches=10, seed=1, names=names, same_batch=True)  # the other test's compile
    weight, local = elbo_gradients(post, e.train, **kw), elbo_gradients(post, e.train, estimator="local", **kw)
    ratios = [local[n].var(0).sum() / weight[n].var(0).sum() for n in names]
    # 10 draws estimate a variance to ~45 %: each ratio well below 1, and their mean (0.31 measured) below 0.5
    assert max(ratios) < 0.75 and np.mean(ratios) < 0.5, ratios
    moving = elbo_gradients(post, e.train, **{**kw, "same_batch": False})  # other minibatches, other noise
    for n in names:  # the same minibatch 0 and key 0; then minibatch 0 again against other minibatches
        np.testing.assert_array_equal(weight[n][0], moving[n][0])
        assert not np.array_equal(weight[n][1:], moving[n][1:])
