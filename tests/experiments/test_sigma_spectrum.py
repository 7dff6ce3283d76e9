"""zoo.experiments.analysis.sigma_spectrum: the share of variance in the top singular values of sigma and of the means (k-tied
Normal paper, Fig. 3)."""

from dataclasses import replace

import numpy as np
import pytest

from zoo.experiments.analysis.sigma_spectrum import posterior_spectra, singular_value_shares, site_matrix, variance_explained
from base.errors import InputError


@pytest.fixture(scope="module")
def tiny(tiny_mean_field):
    return tiny_mean_field


def rank2_positive(m, n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.1, 1.0, (m, 2)) @ rng.uniform(0.1, 1.0, (2, n))


def test_site_matrix_keeps_dense_and_flattens_conv_to_output_columns():
    dense = np.arange(12.0).reshape(3, 4)
    assert site_matrix(dense) is not None and np.array_equal(site_matrix(dense), dense)
    conv = np.random.default_rng(0).normal(size=(3, 3, 2, 5))
    m = site_matrix(conv)
    assert m.shape == (18, 5)
    assert np.array_equal(m[:, 4], conv[..., 4].ravel())  # one output filter is one column
    with pytest.raises(InputError, match="array"):
        site_matrix(np.ones(4))


def test_exact_rank2_product_has_all_its_variance_in_the_top_two():
    a = rank2_positive(30, 20)
    assert variance_explained(a, 2) == pytest.approx(1.0, abs=1e-12)
    assert 0.5 < variance_explained(a, 1) < 1.0
    shares = singular_value_shares(a)
    assert shares.sum() == pytest.approx(1.0) and shares[2:].sum() < 1e-12
    # squares of the singular values, as the paper defines the share
    s = np.linalg.svd(a, compute_uv=False)
    assert variance_explained(a, 1) == pytest.approx(s[0] ** 2 / (s**2).sum())
    noise = np.random.default_rng(1).normal(size=(30, 20))
    assert variance_explained(noise, 2) < 0.3
    with pytest.raises(InputError, match="k"):
        variance_explained(a, 0)


def test_posterior_spectra_reads_sigma_and_means_of_every_weight_site(tiny):
    e, post = tiny
    params = dict(post.params)
    scale = "mlp/~/linear_1/w_auto_scale"
    # small, where the default sigma cap's limit tanh(scale / limit) is scale to 1e-6: q's sd is rank 2 too
    params[scale] = (1e-3 * rank2_positive(6, 5)).astype(np.float32)
    table = posterior_spectra(replace(post, params=params, unconstrained=None))
    assert list(table.site) == ["mlp/~/linear_0/w", "mlp/~/linear_1/w", "mlp/~/linear_2/w"]  # biases skipped
    row = table.set_index("site").loc["mlp/~/linear_1/w"]
    assert row.matrix == "6 x 5" and row.sigma_top2 == pytest.approx(1.0, abs=1e-5)
    assert row.sigma_top1 <= row.sigma_top2 <= row.sigma_top3 <= 1.0 + 1e-9
    assert row.sigma_top1_shuffled < row.sigma_top2 and row.sigma_cv > 0  # the null of the same entries
    # untouched sites: sigma is still its constant init (rank 1), the means are not
    first = table.set_index("site").loc["mlp/~/linear_0/w"]
    assert first.sigma_top1 > 0.95 and first.mean_top1 < 1.0
    assert first.sigma_cv < 0.05 and first.sigma_top1_shuffled > 0.95  # near-constant: rank 1 by the null too


def test_sd_log_ratio_is_the_median_distance_from_the_initial_sd():
    import math

    import pytest

    from base.errors import InputError
    from zoo.experiments.analysis.sigma_spectrum import sd_log_ratio

    sd = [[0.01, 0.02], [0.04, 0.005]]  # |log(sd / 0.01)| = 0, log 2, log 4, log 2: median log 2
    assert sd_log_ratio(sd, 0.01) == pytest.approx(math.log(2))
    assert sd_log_ratio([[0.01, 0.01]], 0.01) == 0.0  # untouched
    with pytest.raises(InputError, match="init"):
        sd_log_ratio(sd, 0.0)
