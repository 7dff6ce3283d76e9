"""IVON (Shen et al. 2024, Algorithm 1) under `inference.fit`: its fixed point on Bayesian linear regression is
the exact mean-field posterior, its result is the mean-field `SVIPosterior`, it resumes bit for bit, and bad
settings are refused by name."""

import os

import numpy as np
import optax
import pytest

import evals
import inference
import zoo
from base.errors import InputError
from inference.fit_state import saved_step
from inference.optimizers import optimizer_identity
from models import bnn, likelihoods, priors
from models.networks.mlp import mlp

PRIOR_SD, NOISE, N = 1.0, 0.5, 40
BLR_STEPS = 2000


@pytest.fixture(scope="module")
def blr():
    """(exact mean (4,), exact precision (4, 4), IVON's posterior) for y = x w + b + noise, full batch."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5]) + 0.3 + NOISE * rng.normal(size=N)).astype(np.float32)
    phi = np.c_[x, np.ones(N)].astype(np.float64)
    precision = np.eye(4) / PRIOR_SD**2 + phi.T @ phi / NOISE**2
    mean = np.linalg.solve(precision, phi.T @ y / NOISE**2)
    model = bnn(mlp((), 1), priors.normal(PRIOR_SD), likelihoods.normal(NOISE), name="blr", feature_shape=(3,))
    post = inference.fit(model, inference.mean_field(model, scale_cap=None), (x, y), steps=BLR_STEPS, batch_size=N,
                         optimizer=inference.ivon(optax.cosine_decay_schedule(0.1, BLR_STEPS), beta2=0.99),
                         progress=False, seed=1)
    return mean, precision, post


def _stack(params, suffix):
    return np.r_[params[f"mlp/~/linear_0/w_auto_{suffix}"][:, 0], params[f"mlp/~/linear_0/b_auto_{suffix}"]]


def test_ivon_reaches_the_exact_mean_field_posterior_of_linear_regression(blr):
    """For a quadratic loss the reparameterisation estimate g_hat eps / sigma has the exact diagonal Hessian as
    its mean, so IVON's fixed point is the KL(q || p)-optimal diagonal Gaussian: the exact mean and variances
    1 / Lambda_ii (Lambda the exact posterior precision). What is left is noise: at beta2 = 0.99 the Hessian
    average spans about 100 draws, each off by the other coordinates' terms sum_j H_ij eps_j eps_i, which leaves
    the sd a few per cent off (measured with this seed: -1 % to +7.5 %); the means keep the noise of the last
    steps of a cosine-decayed rate (measured: up to 0.09 posterior sd). Tolerances: 12 % on the sd, 0.2 sd on
    the mean."""
    mean, precision, post = blr
    assert isinstance(post, inference.SVIPosterior) and post.guide.config["name"] == "mean_field"
    sd = 1 / np.sqrt(np.diag(precision))
    loc, scale = _stack(post.params, "loc"), _stack(post.params, "scale")
    assert np.all(np.abs(loc - mean) < 0.2 * sd), (loc, mean, sd)
    np.testing.assert_allclose(scale, sd, rtol=0.12)
    assert post.info.converged


@pytest.fixture(scope="module")
def moons():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})


IVON = inference.ivon(0.05, steps=100)  # one object: fits with it share their compiled update
SETTINGS = dict(steps=100, batch_size=32, chunk_size=10, seed=3, progress=False, optimizer=IVON)


class _CtrlCAtStep50:
    """Raises KeyboardInterrupt, as Ctrl-C would, once the fit has done 50 steps (after that chunk was checkpointed)."""

    def on_chunk(self, run):
        if run.done == 50:
            raise KeyboardInterrupt


def test_an_interrupted_ivon_fit_resumes_bit_for_bit_and_scores(moons, tmp_path):
    fit = lambda **kw: inference.fit(moons.model, inference.mean_field(moons.model), moons.train,  # noqa: E731
                                     **{**SETTINGS, **kw})
    reference = fit()
    state = tmp_path / "state"
    with pytest.raises(KeyboardInterrupt):
        fit(checkpoint_dir=state, checkpoint_every=30, callbacks=[_CtrlCAtStep50()])
    assert saved_step(state) == 50
    resumed = fit(checkpoint_dir=state, resume=True)
    np.testing.assert_array_equal(resumed.losses, reference.losses)
    for k in reference.params:
        np.testing.assert_array_equal(resumed.params[k], reference.params[k])
        np.testing.assert_array_equal(resumed.unconstrained[k], reference.unconstrained[k])
    assert resumed.info.traces == 0
    # another IVON setting is another run (its configuration: the rate, betas, h0 and an explicit decay)
    assert optimizer_identity(IVON, None) != optimizer_identity(inference.ivon(0.05, beta2=0.999), None)
    assert sorted(os.listdir(state)) == ["MANIFEST.json", "fit_state.json", "fit_state.npz"]
    # the result is the mean-field posterior everything downstream takes: scoring and save / load round trip
    row = evals.score(reference, moons.test, num_samples=8, verbose=False).iloc[0]
    assert 0.5 < row["accuracy"] <= 1.0 and np.isfinite(row["nll"])
    inference.save(reference, tmp_path / "post")
    back = inference.load(tmp_path / "post", model=moons.model)
    for k in reference.params:
        np.testing.assert_array_equal(back.params[k], reference.params[k])


def test_bad_ivon_settings_and_guides_are_refused_by_name(moons):
    for kwargs, arg in [({"learning_rate": -1.0}, "learning_rate"), ({"hess_init": 0.0}, "hess_init"),
                        ({"beta2": 1.5}, "beta2"), ({"ess": -3.0}, "ess"), ({"weight_decay": -1.0}, "weight_decay"),
                        ({"steps": 0}, "steps")]:
        with pytest.raises(InputError, match=f"^{arg}:"):
            inference.ivon(**kwargs)
    with pytest.raises(InputError, match="^guide:"):
        inference.fit(moons.model, inference.k_tied.k_tied(moons.model, k=2), moons.train, **{**SETTINGS, "steps": 2})
    with pytest.raises(InputError, match="^num_particles:"):
        inference.fit(moons.model, inference.mean_field(moons.model), moons.train,
                      **{**SETTINGS, "steps": 2, "num_particles": 2})
