"""`models.likelihoods.noise_prior`: the inverse-gamma prior of a learned noise sd against its closed form, and the
likelihood's spec round trip (the default's spec unchanged, so earlier checkpoints compare equal)."""

import jax
import numpy as np
import pytest

from base.errors import InputError
from models.likelihoods import from_spec, noise_prior, normal


def test_inverse_gamma_noise_prior_matches_its_closed_form():
    b = 0.1
    d = noise_prior("inverse_gamma", b)
    sigma = np.array([0.02, 0.05, 0.3, 1.0, 4.0])
    # sigma^2 ~ InverseGamma(1, b): p(sigma) = 2 b sigma^-3 exp(-b / sigma^2)
    np.testing.assert_allclose(d.log_prob(sigma), np.log(2 * b) - 3 * np.log(sigma) - b / sigma ** 2, rtol=1e-5)
    assert float(d.icdf(0.5)) == pytest.approx(np.sqrt(b / np.log(2)), rel=1e-5)  # P(sigma^2 <= v) = exp(-b / v)
    draws = np.asarray(d.sample(jax.random.PRNGKey(0), (200_000,)))
    assert np.mean(draws ** 2 <= 0.2) == pytest.approx(np.exp(-b / 0.2), abs=0.005)
    assert float(noise_prior("half_normal", 1.0).log_prob(0.5)) == pytest.approx(np.log(2 / np.sqrt(2 * np.pi)) - 0.125)


def test_the_spec_round_trips_and_bad_priors_are_named():
    lik = normal(None, 0.1, "inverse_gamma")
    again = from_spec(lik.spec)
    assert again.spec == lik.spec and again.noise_prior == "inverse_gamma" and again.noise_prior_scale == 0.1
    assert normal(None).spec == {"kind": "normal", "noise": None, "noise_prior_scale": 1.0}
    with pytest.raises(InputError, match="noise_prior: expected one of"):
        normal(None, 1.0, "gamma")
    with pytest.raises(InputError, match="noise_prior_scale: expected a positive number"):
        normal(None, -1.0)
