"""zoo.experiments.analysis.rank_truncation: rank-k truncation of mean-field sigma matrices and its scores (k-tied Normal
paper, Tables 2, 3)."""

from dataclasses import replace

import numpy as np
import pytest

from zoo.experiments.analysis.rank_truncation import (clipped_entries, k_tied_param_count, truncate_matrix, truncate_sigma,
                                   truncation_scores)
from base.errors import InputError

SITE = "mlp/~/linear_1/w_auto_scale"


@pytest.fixture(scope="module")
def tiny(tiny_mean_field):
    return tiny_mean_field


def test_full_rank_or_none_returns_the_posterior_unchanged(tiny):
    _, post = tiny
    for k in (None, 5, 6, 50):  # min(m, n) of the sites: 2, 5, 2
        same = truncate_sigma(post, k)
        assert same is post
        for name, value in post.params.items():
            assert np.array_equal(np.asarray(same.params[name]), np.asarray(value))


def test_rank_k_truncation_matches_the_svd_and_clips_at_the_floor(tiny):
    _, post = tiny
    rng = np.random.default_rng(0)
    sigma = rng.uniform(0.01, 0.1, (6, 3)) @ rng.uniform(0.1, 1.0, (3, 5))  # positive, rank 3
    post3 = replace(post, params={**post.params, SITE: sigma.astype(np.float32)}, unconstrained=None)
    cut2 = truncate_sigma(post3, 2, floor=1e-6)
    assert np.allclose(np.asarray(cut2.params[SITE]), truncate_matrix(sigma, 2, 1e-6), rtol=1e-5)
    s = np.linalg.svd(sigma, compute_uv=False)
    # clipping only moves entries towards the matrix (it is positive): the error is at most the SVD's
    assert np.linalg.norm(np.asarray(cut2.params[SITE]) - sigma) <= s[2] * (1 + 1e-5)
    cut1 = truncate_sigma(post3, 1, floor=1e-6)
    assert np.asarray(cut1.params[SITE]).min() >= 1e-6
    assert np.linalg.norm(np.asarray(cut1.params[SITE]) - sigma) <= np.hypot(s[1], s[2]) * (1 + 1e-5)
    # the means and biases are untouched; the copy has no stale unconstrained parameters; the input is unchanged
    loc = "mlp/~/linear_1/w_auto_loc"
    assert np.array_equal(np.asarray(cut1.params[loc]), np.asarray(post.params[loc]))
    assert cut1.unconstrained is None and np.array_equal(np.asarray(post3.params[SITE]), sigma.astype(np.float32))
    clipped, total = clipped_entries(post3, 1)
    assert total == 2 * 6 + 6 * 5 + 5 * 2 and 0 <= clipped <= 30
    with pytest.raises(InputError, match="k"):
        truncate_sigma(post, 0)


def test_negative_floor_approximation_is_clipped():
    m = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    cut = truncate_matrix(m, 1, floor=0.0)
    assert cut.min() >= 0.0 and cut.shape == (3, 2)
    assert np.allclose(truncate_matrix(m, 2), m)


def test_parameter_count_is_the_k_tied_formula(tiny):
    e, _ = tiny
    # weights 2x6, 6x5, 5x2 and 13 bias entries: mean field 2 * (52 + 13); k-tied 52 + k (8 + 11 + 7) + 2 * 13
    assert k_tied_param_count(e.model, e.train.feature_shape, None) == 130
    assert k_tied_param_count(e.model, e.train.feature_shape, 1) == 104
    assert k_tied_param_count(e.model, e.train.feature_shape, 2) == 130


def test_scores_are_per_draw_means_with_their_standard_errors(tiny):
    e, post = tiny
    row = truncation_scores(post, e.test, n_train=len(e.train.y), num_samples=12, seed=3)
    for name in ("neg_elbo", "accuracy", "nll", "brier", "ece"):
        assert np.isfinite(row[name]) and row[f"{name}_sem"] >= 0
    lik = post.log_likelihood(e.test.x, e.test.y, num_samples=12, seed=3)  # (S, N), the same draws
    per_draw_nll = -lik.mean(1)
    assert row["nll"] == pytest.approx(per_draw_nll.mean(), rel=1e-4)
    assert row["nll_sem"] == pytest.approx(per_draw_nll.std(ddof=1) / np.sqrt(12), rel=1e-3)
    assert row["neg_elbo"] > row["nll"]  # plus KL / N >= 0
    assert 0 <= row["accuracy"] <= 1 and 0 <= row["ens_accuracy"] <= 1
    assert row["ens_nll"] <= row["nll"] + 1e-6  # Jensen: the ensemble's NLL is at most the draws' average
