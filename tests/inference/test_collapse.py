"""Collapse detection (`inference.collapse`): a posterior that ignores the data is flagged, a healthy one is not."""

import warnings

import numpy as np
import optax
import pytest

import inference
from inference.collapse import check_collapse


@pytest.fixture(scope="module")
def collapsed(moons_entry):
    """A constructed collapse: mean field started at the prior's scale, the likelihood divided by 10^4, so the
    fit's target is (almost) the prior; the same structure and optimiser as the shared `moons_svi` fit."""
    e = moons_entry
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        post = inference.fit(e.model, inference.mean_field(e.model, init_scale=1.0), e.train, steps=200,
                             batch_size=64, optimizer=optax.adam(3e-3), temperature=1e4, progress=False, seed=0)
    return post, [w for w in record if issubclass(w.category, inference.PosteriorCollapseWarning)]


def test_a_healthy_fit_is_not_flagged(moons_svi):
    c = moons_svi.info.collapse
    assert moons_svi.info.collapsed is False and c["collapsed"] is False
    assert c["examples"] == 256 and c["draws"] == 32
    # two classes: the input-free predictor's log-likelihood is about -log 2, the posterior's near 0
    assert c["lpd_input_free"] == pytest.approx(-np.log(2), abs=0.01)
    assert c["gain"] > 0.5 and c["accuracy_posterior"] > 0.95
    assert "COLLAPSED" not in moons_svi.info.summary()


def test_a_posterior_at_the_prior_is_flagged_collapsed(collapsed):
    post, record = collapsed
    c = post.info.collapse
    assert post.info.collapsed is True and c["gain"] < c["tol"] == 0.05
    assert c["lpd_posterior"] < -0.6  # no better than the coin (-0.693)
    assert len(record) == 1 and record[0].message.collapse == c
    assert "POSTERIOR COLLAPSED" in post.info.summary()


def test_checkpoints_keep_the_collapse_judgement(collapsed, tmp_path):
    post, _ = collapsed
    inference.save(post, tmp_path / "ck")
    back = inference.load(tmp_path / "ck", post.model)
    assert back.info == post.info and back.info.collapsed is True


def test_the_judgement_is_fixed_by_its_subsample_and_draws(moons_svi, moons_entry):
    again = check_collapse(moons_svi, moons_entry.train.x, moons_entry.train.y)
    assert again == moons_svi.info.collapse


@pytest.mark.parametrize("prior", [{"*/b": "normal", "*": "fan_in"}, "cauchy"])
def test_prior_draws_equal_numpyros_per_site_draws_bit_for_bit(prior, assert_same_draws):
    """`prior_draws` draws every Normal prior's eps with one threefry hash (`normal_draws`, its constant scales
    folded as XLA folds numpyro's ``loc + eps * scale``): the numbers of one ``prior.sample`` per site, here at
    scales 0.7 (biases) and 1.3 / sqrt(fan_in) (kernels); a Cauchy prior is drawn site by site."""
    import jax
    import zoo
    from inference.collapse import normal_prior, prior_draws
    from base.prng import flat_key

    e = zoo.get("mlp", data="two_moons", hidden=(3,), data_kwargs={"n": 40}, prior=prior,
                prior_scale={"*/b": 0.7, "*": 1.3} if prior != "cauchy" else 1.0)
    priors = e.model.site_priors((2,))
    assert all((normal_prior(d) is None) == (prior == "cauchy") for d in priors.values())

    def per_site(key):
        keys = jax.random.split(flat_key(key), len(priors))
        return {name: d.sample(k, (5,)) for (name, d), k in zip(priors.items(), keys)}

    expected = jax.device_get(jax.jit(per_site)(jax.random.PRNGKey(3)))
    got = prior_draws(e.model, (2,), 5, seed=3)
    assert list(got) == list(expected)
    for name in expected:
        assert got[name].shape == (5,) + tuple(priors[name].shape())
        assert_same_draws(got[name], expected[name])


def test_an_improper_uniform_prior_has_no_prior_predictive(moons_svi, moons_entry):
    """A flat prior (``ImproperUniform``: an unregularised BatchEnsemble's factors) cannot be drawn: the judgement
    then compares with the input-free predictor only, as for a log-uniform prior, instead of failing the fit."""
    import numpyro.distributions as dist

    import models

    base = moons_svi.model
    flat = models.bnn(base.network_fn, lambda name, shape: dist.ImproperUniform(dist.constraints.real, tuple(shape), ()),
                      base.likelihood, name=base.name)
    post = inference.SVIPosterior(model=flat, guide=moons_svi.guide, params=moons_svi.params,
                                  feature_shape=moons_svi.feature_shape)
    c = check_collapse(post, moons_entry.train.x, moons_entry.train.y)
    assert c["lpd_prior"] is None and c["accuracy_prior"] is None and c["collapsed"] is False
    assert c["lpd_posterior"] == pytest.approx(moons_svi.info.collapse["lpd_posterior"], abs=1e-6)
