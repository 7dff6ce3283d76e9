"""`zoo.experiments.benchmarks.uci_w2`: the 2-Wasserstein distance between predictive mixtures, against the closed
form for two Normals and against scipy's 1-Wasserstein distance of large samples (the same quantile functions)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm, wasserstein_distance

from zoo.experiments.benchmarks.uci_w2 import LEVELS, mixture_quantiles, w2_per_point


def test_two_normals_give_the_closed_form():
    # W2(N(m1, s1), N(m2, s2))^2 = (m1 - m2)^2 + (s1 - s2)^2; the midpoint rule over K levels weighs the spread
    # term by c_K = mean z(u_k)^2 (0.9936 for K = 200)
    mu_a, mu_b = np.array([[0.0, 1.0, -2.0]]), np.array([[0.5, 1.0, -2.0]])
    sd_a, sd_b = np.array([1.0]), np.array([2.0])
    c_k = np.mean(norm.ppf((np.arange(LEVELS) + 0.5) / LEVELS) ** 2)
    got = w2_per_point(mu_a, sd_a, mu_b, sd_b)
    np.testing.assert_allclose(got, np.sqrt((mu_a - mu_b)[0] ** 2 + c_k * 1.0), rtol=1e-9)
    np.testing.assert_allclose(got, np.sqrt((mu_a - mu_b)[0] ** 2 + 1.0), rtol=4e-3)  # the exact W2
    # a mixture of identical components is that Normal; equal spreads: exact whatever K
    np.testing.assert_allclose(w2_per_point(np.zeros((5, 1)), np.full(5, 0.3), np.full((1, 1), 0.2), [0.3]),
                               [0.2], rtol=1e-9)


def test_mixture_quantiles_match_large_samples():
    rng = np.random.default_rng(0)
    mu_a, sd_a = rng.normal(size=(7, 2)), np.array([0.2, 0.5, 0.1, 0.3, 0.4, 0.2, 0.1])
    mu_b, sd_b = rng.normal(size=(3, 2)) + 0.5, np.array([0.7, 0.1, 0.3])
    levels = (np.arange(2000) + 0.5) / 2000
    qa, qb = mixture_quantiles(mu_a, sd_a, levels), mixture_quantiles(mu_b, sd_b, levels)
    # the mixture CDF at its own quantiles is the level
    cdf = norm.cdf((qa[:, None, 0] - mu_a[None, :, 0]) / sd_a).mean(1)
    np.testing.assert_allclose(cdf, levels, atol=1e-9)
    for n in range(2):  # W1 from the same quantile functions against scipy on 400k draws of each mixture
        comp = [rng.integers(0, len(s), 400_000) for s in (sd_a, sd_b)]
        draws = [m[c, n] + s[c] * rng.normal(size=c.size) for (m, s), c in zip(((mu_a, sd_a), (mu_b, sd_b)), comp)]
        assert np.mean(np.abs(qa[:, n] - qb[:, n])) == pytest.approx(wasserstein_distance(*draws), rel=0.02)
