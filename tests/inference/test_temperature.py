"""The likelihood temperature of `fit`: the tempered posterior p(y | x, w)^(1/T) p(w) of Bayesian linear
regression with known noise is Gaussian with precision Lambda_T = I/s^2 + Phi^T Phi / (sigma^2 T) and mean
Lambda_T^-1 Phi^T y / (sigma^2 T) (the likelihood's precision divided by T); mean field's optimum has that mean
and variances 1 / (Lambda_T)_ii. T is a traced argument (one program for every value), recorded in
FitInfo, checkpoints and the run's identity, and `zoo fit --temperature` passes it."""

import warnings

import jax
import numpy as np
import optax
import pytest
from jax import monitoring

import inference
import zoo
from inference.elbo import annealed_elbo_loss, elbo_terms
from models import bnn, likelihoods, priors
from base.errors import ArgumentTypeError, CheckpointError, InputError
from models.networks.mlp import mlp

PRIOR_SD, NOISE = 1.0, 0.5
COMPILES = []
monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kw: COMPILES.append(event) if "backend_compile" in event or "cache_retrieval" in event
    else None)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5]) + 0.3 + NOISE * rng.normal(size=40)).astype(np.float32)
    model = bnn(mlp((), 1), priors.normal(PRIOR_SD), likelihoods.normal(NOISE), name="blr", feature_shape=(3,))
    return x, y, model


def _tempered(x, y, temperature):
    """(mean (4,), precision (4, 4)) of the tempered BLR posterior, parameters [w_0, w_1, w_2, b]."""
    phi = np.c_[x, np.ones(len(x))].astype(np.float64)
    precision = np.eye(4) / PRIOR_SD ** 2 + phi.T @ phi / (NOISE ** 2 * temperature)
    return np.linalg.solve(precision, phi.T @ y / (NOISE ** 2 * temperature)), precision


# one object: fits with it share their compiled update (keyed by identity)
DECAYING_ADAM = optax.adam(optax.exponential_decay(2e-2, transition_steps=4000, decay_rate=0.01))


def _blr_fit(problem, temperature, **kw):
    x, y, model = problem
    return inference.fit(model, inference.mean_field(model, init_scale=0.1), (x, y), steps=4000, batch_size=40,
                         num_particles=16, optimizer=DECAYING_ADAM, progress=False, seed=1,
                         temperature=temperature, **kw)


@pytest.fixture(scope="module")
def tempered_fits(problem):
    """Fits at T = 4 and T = 0.25, and how many compiles the second one made."""
    hot = _blr_fit(problem, 4.0)
    before = len(COMPILES)
    cold = _blr_fit(problem, 0.25)
    return {4.0: hot, 0.25: cold}, len(COMPILES) - before


@pytest.mark.parametrize("temperature", [4.0, 0.25])
def test_mean_field_finds_the_closed_form_tempered_posterior(problem, tempered_fits, temperature):
    x, y, _ = problem
    post = tempered_fits[0][temperature]
    mean, precision = _tempered(x, y, temperature)
    loc = np.r_[post.params["mlp/~/linear_0/w_auto_loc"][:, 0], post.params["mlp/~/linear_0/b_auto_loc"]]
    scale = np.r_[post.params["mlp/~/linear_0/w_auto_scale"][:, 0], post.params["mlp/~/linear_0/b_auto_scale"]]
    sd = 1 / np.sqrt(np.diag(precision))
    assert np.all(np.abs(loc - mean) < 0.05 * sd), (loc, mean)
    np.testing.assert_allclose(scale, sd, rtol=0.05)
    # and not the untempered posterior: its scales differ from these by a factor near sqrt(T)
    assert not np.allclose(scale, 1 / np.sqrt(np.diag(_tempered(x, y, 1.0)[1])), rtol=0.2)
    assert post.info.temperature == temperature and post.info.converged


def test_two_temperatures_share_one_compiled_program(tempered_fits):
    fits, compiles = tempered_fits
    assert compiles == 0 and fits[0.25].info.traces == 0


def test_the_loss_divides_the_log_likelihood_by_t_and_warm_up_weights_the_kl(problem, tempered_fits):
    x, y, model = problem
    post = tempered_fits[0][4.0]

    @jax.jit  # one compile for both, not op by op
    def terms(key, params):
        ll, kl, _ = elbo_terms(key, params, model, post.guide, x, y, 40)
        loss, _ = annealed_elbo_loss(key, params, model, post.guide, 0.3, 1, x, y, 40, temperature=2.5)
        return ll, kl, loss

    ll, kl, loss = terms(jax.random.PRNGKey(3), post.params)
    assert float(loss) == pytest.approx(-(float(ll) / 2.5 - 0.3 * float(kl)), rel=1e-5)


def test_the_temperature_is_shown_stored_and_round_trips(tempered_fits, tmp_path):
    post = tempered_fits[0][4.0]
    assert "tempered posterior: temperature 4, likelihood^0.25" in post.info.summary()
    inference.save(post, tmp_path / "ck")
    back = inference.load(tmp_path / "ck", post.model)
    assert back.info == post.info and back.info.temperature == 4.0


@pytest.mark.parametrize("value, error", [(0.0, InputError), (-1.0, InputError), (float("nan"), InputError),
                                          (float("inf"), InputError), ("2", ArgumentTypeError)])
def test_a_bad_temperature_is_refused_naming_it(problem, value, error):
    x, y, model = problem
    with pytest.raises(error, match="temperature"):
        inference.fit(model, inference.mean_field(model), (x, y), steps=5, temperature=value, progress=False)


def test_resuming_with_another_temperature_is_refused(tmp_path):
    entry = zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})
    kw = dict(steps=50, batch_size=100, optimizer=optax.adam(1e-2), progress=False, chunk_size=500,
              checkpoint_dir=str(tmp_path / "state"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.ConvergenceWarning)
        inference.fit(entry.model, inference.mean_field(entry.model), entry.train, temperature=0.5, **kw)
        with pytest.raises(CheckpointError, match="temperature differs \\(saved 0.5, this call 1.0\\)"):
            inference.fit(entry.model, inference.mean_field(entry.model), entry.train, resume=True, **kw)
        again = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, resume=True,
                              temperature=0.5, **kw)
    assert again.info.temperature == 0.5 and again.info.first_step_s is None


def test_zoo_fit_passes_the_temperature_and_prints_the_judgement(tmp_path, capsys):
    from zoo.cli import main

    out = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.ConvergenceWarning)
        assert main(["fit", "mlp", "--data", "two_moons", "--n", "100", "--hidden", "4", "--quiet",
                     "--batch-size", "100", "--lr", "1e-2", "--steps", "50", "--temperature", "2",
                     "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ELBO: NOT converged (only 50 steps" in printed and "temperature 2, likelihood^0.5" in printed
    assert zoo.load(str(out)).info.temperature == 2.0
