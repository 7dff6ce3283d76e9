"""Closed-form product-matrix covariances (eq. 14, 16-17) against the 10,000-draw simulation."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from scipy.stats import norm

from zoo.experiments.analysis.product_covariance import (
    closed_form_check,
    covariance_standard_error,
    plot_covariance_heatmaps,
    posterior_product_covariance,
    product_covariance,
    product_covariance_L2,
    product_covariance_L3,
    sampled_product_covariance,
    simulate_product_covariance,
)

SIZE = 4
NUM_UNIQUE = SIZE**2 * (SIZE**2 + 1) // 2  # distinct entries of the 16 x 16 covariance
# Under the closed form each standardised error (simulated - closed) / standard error is about
# N(0, 1). A Bonferroni bound over the distinct entries at family-wise level 1e-3:
Z_MAX = norm.ppf(1 - 1e-3 / (2 * NUM_UNIQUE))  # about 4.5


def _off_pattern(size: int) -> np.ndarray:
    """(size^2, size^2) mask of the entries Cov(W_ab, W_cd) with a != c and b != d."""
    a, b = np.divmod(np.arange(size**2), size)
    return (a[:, None] != a[None, :]) & (b[:, None] != b[None, :])


@pytest.mark.parametrize("L", [2, 3])
@pytest.mark.parametrize("mean_range", [0.1, 1.0])  # paper's means; large means stress eq. 14's mean terms
def test_closed_form_matches_simulation_within_monte_carlo_error(L, mean_range):
    check = closed_form_check(L, size=SIZE, num_draws=10_000, mean_range=mean_range, sd=0.5, seed=L)
    assert check["max_abs_z"] < Z_MAX
    # E[z^2] = 1 under the closed form; a wrong mean term at mean_range = 1 gives z of order 10.
    assert check["mean_z2"] < 2.0
    assert check["max_abs_error"] < Z_MAX * check["max_se"]


def test_a_wrong_closed_form_is_caught_by_the_same_tolerance():
    sim = simulate_product_covariance(2, size=SIZE, mean_range=1.0, seed=2)
    mu_a, mu_b = sim.means
    sd_a, sd_b = sim.sds
    # eq. 14 without its third term (mu^A mu^A sigma^B^2 delta_bd)
    missing = product_covariance_L2([mu_a, mu_b], [sd_a, sd_b]) - product_covariance_L2(
        [mu_a, np.zeros_like(mu_b)], [sd_a, sd_b]
    )
    z = (sim.cov - missing) / covariance_standard_error(sim.products)
    assert np.max(np.abs(z)) > Z_MAX


def test_L3_has_no_zero_entry_while_L2_has_zeros_off_shared_rows_and_columns():
    rng = np.random.default_rng(0)
    means = list(rng.uniform(-0.1, 0.1, size=(3, SIZE, SIZE)))
    sds = [np.full((SIZE, SIZE), 0.5)] * 3
    cov2 = product_covariance_L2(means[:2], sds[:2])
    cov3 = product_covariance_L3(means, sds)
    off = _off_pattern(SIZE)
    assert np.all(cov2[off] == 0.0) and np.all(cov2[~off] != 0.0)
    assert np.min(np.abs(cov3)) > 1e-9 * np.max(np.abs(cov3))
    # the simulation agrees: at L = 3 entries with a != c, b != d are far from zero, at L = 2 not
    z_zero = {L: np.abs(s.cov / covariance_standard_error(s.products))[off]
              for L, s in ((L, simulate_product_covariance(L, mean_range=1.0, seed=0)) for L in (2, 3))}
    assert z_zero[2].max() < Z_MAX
    assert z_zero[3].max() > Z_MAX


def test_recursion_over_eq_15_reproduces_eq_14_and_16_17_and_the_one_layer_diagonal():
    rng = np.random.default_rng(1)
    shapes = [(3, 5), (5, 2), (2, 4)]
    means = [rng.normal(size=s) for s in shapes]
    sds = [rng.uniform(0.2, 1.0, size=s) for s in shapes]
    np.testing.assert_allclose(
        product_covariance(means[:2], sds[:2]), product_covariance_L2(means[:2], sds[:2]), atol=1e-12
    )
    np.testing.assert_allclose(product_covariance(means, sds), product_covariance_L3(means, sds), atol=1e-12)
    np.testing.assert_array_equal(product_covariance(means[:1], sds[:1]), np.diag(sds[0].ravel() ** 2))
    assert product_covariance_L3(means, sds).shape == (3 * 4, 3 * 4)


def test_sampled_product_covariance_multiplies_in_layer_order():
    rng = np.random.default_rng(3)
    layers = [rng.normal(size=(50, 2, 3)), rng.normal(size=(50, 3, 4))]
    cov, products = sampled_product_covariance(layers)
    expected = np.einsum("sij,sjk->sik", *layers).reshape(50, -1)
    np.testing.assert_allclose(products, expected)
    np.testing.assert_allclose(cov, np.cov(expected, rowvar=False))
    with pytest.raises(ValueError, match=r"weight_draws\[1\]"):
        sampled_product_covariance([layers[0], layers[0]])


def test_bad_layer_shapes_are_refused():
    with pytest.raises(ValueError, match=r"means\[1\]"):
        product_covariance_L2([np.zeros((2, 3)), np.zeros((2, 2))], [np.ones((2, 3)), np.ones((2, 2))])
    with pytest.raises(ValueError, match="3 layer"):
        product_covariance_L3([np.zeros((2, 2))] * 2, [np.ones((2, 2))] * 2)


def test_heatmaps_show_each_covariance_on_a_symmetric_scale():
    covs = {f"L = {L}": simulate_product_covariance(L, num_draws=500, seed=L).cov for L in (1, 5, 20)}
    fig = plot_covariance_heatmaps(covs)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 3
    for image, cov in zip(images, covs.values()):
        np.testing.assert_array_equal(image.get_array(), cov)
        assert image.get_clim() == (-np.abs(cov).max(), np.abs(cov).max())


def test_posterior_product_covariance_of_a_deep_linear_network():
    import zoo
    from inference.posterior import MCMCPosterior

    entry = zoo.get("deep_linear", data="digits", depth=3, width=4)
    rng = np.random.default_rng(5)
    shapes = entry.model.site_shapes(entry.train.x)
    assert list(shapes.values()) == [(64, 4), (4, 4), (4, 10)]
    samples = {k: rng.normal(size=(1, 300) + s).astype(np.float32) for k, s in shapes.items()}
    posterior = MCMCPosterior(model=entry.model, samples=samples, feature_shape=(64,))
    cov, products = posterior_product_covariance(posterior, num_samples=300)
    layers = [samples[k][0].astype(np.float64) for k in shapes]  # site order = layer order
    expected_cov, expected_products = sampled_product_covariance(layers)
    assert cov.shape == (640, 640)
    np.testing.assert_allclose(products, expected_products, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(cov, expected_cov, rtol=1e-3, atol=1e-3)
