"""evals.comparison (evals.compare) on tiny synthetic draws (InferenceData) and a tiny BNN (MCMC Posterior)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from base.errors import InputError
from evals.comparison import compare, plot_predictions, plot_weights, to_inference_data
from inference.arviz_compat import ARVIZ_1
from evals.gaussians import JITTER, fit_gaussian, kl_closest_diagonal


def _value(table, scope, metric, posterior):
    rows = table[(table.scope == scope) & (table.metric == metric) & (table.posterior == posterior)]
    assert len(rows) == 1, (scope, metric, posterior)
    return float(rows.value.iloc[0])


@pytest.fixture(scope="module")
def correlated():
    """2 chains x 250 draws: site "w" (2,) with correlation 0.9, site "b" (3,) independent."""
    rng = np.random.default_rng(0)
    w = rng.multivariate_normal([0.0, 1.0], [[1.0, 0.9], [0.9, 1.0]], size=(2, 250))
    b = rng.normal(size=(2, 250, 3))
    return {"w": w, "b": b}


def test_shifted_draws_give_the_shift_in_means_and_wasserstein(correlated):
    shifted = {"w": correlated["w"] + 0.5, "b": correlated["b"]}
    table = compare(to_inference_data(correlated), to_inference_data(shifted))
    assert list(table.columns) == ["scope", "metric", "posterior", "value"]
    assert _value(table, "w", "mean_abs_diff_mean", "a-b") == pytest.approx(0.5)
    assert _value(table, "w", "mean_abs_diff_sd", "a-b") == pytest.approx(0.0, abs=1e-12)
    assert _value(table, "b", "max_abs_diff_mean", "a-b") == pytest.approx(0.0, abs=1e-12)
    # equal covariances: W2 is the norm of the mean difference, sqrt(2) * 0.5 over "w"
    assert _value(table, "w", "w2_gaussian", "a-b") == pytest.approx(0.5 * np.sqrt(2), rel=1e-5)
    assert _value(table, "all", "w2_gaussian", "a-b") == pytest.approx(0.5 * np.sqrt(2), rel=1e-5)


def test_kl_of_the_closest_diagonal_is_reported_per_posterior(correlated):
    table = compare(to_inference_data(correlated), to_inference_data(correlated))
    _, cov = fit_gaussian(correlated["w"].reshape(-1, 2), JITTER)
    assert _value(table, "w", "kl_diag_full", "a") == pytest.approx(kl_closest_diagonal(cov), rel=1e-12)
    # -1/2 log(1 - rho^2) = 0.830 at rho = 0.9. With n = 500 draws sd(r) ~ (1 - rho^2) / sqrt(n) = 0.0085
    # and dKL/drho = rho / (1 - rho^2) = 4.7, so the fitted KL has sd ~ 0.04: allow 3.3 sd.
    assert _value(table, "w", "kl_diag_full", "a") == pytest.approx(-0.5 * np.log(1 - 0.81), abs=0.13)
    assert _value(table, "b", "kl_diag_full", "b") < 0.01
    assert _value(table, "w", "w2_extra_error", "a") > 0.2
    assert abs(_value(table, "b", "w2_extra_error", "a")) < 0.1


def test_rhat_flags_chains_that_disagree_and_ess_counts_independent_draws(correlated):
    stuck = {"w": correlated["w"] + np.array([0.0, 3.0])[:, None, None], "b": correlated["b"]}
    table = compare(to_inference_data(correlated), to_inference_data(stuck), sites=["w"], max_dim=0)
    assert _value(table, "w", "rhat_max", "a") < 1.02
    assert _value(table, "w", "rhat_max", "b") > 1.5
    assert _value(table, "w", "ess_bulk_min", "a") > 250  # 500 independent draws
    assert not (table.metric == "kl_diag_full").any()  # max_dim=0 leaves out the Gaussian fits
    assert not (table.scope == "all").any()


def test_bad_sites_are_refused(correlated):
    a = to_inference_data(correlated)
    with pytest.raises(ValueError, match="sites"):
        compare(a, a, sites=["nope"])
    with pytest.raises(ValueError, match="shape"):
        compare(a, to_inference_data({"w": correlated["w"][..., :1]}), sites=["w"])
    with pytest.raises(TypeError, match="posterior"):
        compare({"w": 1}, a)


@pytest.fixture(scope="module")
def tiny_bnn():
    from inference.posterior import MCMCPosterior
    from models import bnn
    from models.networks.mlp import mlp

    model = bnn(mlp((3,), 2), name="tiny")
    rng = np.random.default_rng(1)
    samples = {k: rng.normal(size=(2, 40) + s).astype(np.float32) for k, s in model.site_shapes((2,)).items()}
    x = rng.normal(size=(25, 2)).astype(np.float32)
    flipped = {k: -v if "linear_1" in k else v for k, v in samples.items()}
    make = lambda s: MCMCPosterior(model=model, samples=s, feature_shape=(2,))  # noqa: E731
    return model, make(samples), make(flipped), x


def test_function_space_of_identical_and_of_label_swapped_posteriors(tiny_bnn):
    model, post, flipped, x = tiny_bnn
    same = compare(post, post, data=(x, None), max_dim=0)
    assert _value(same, "function", "agreement", "a-b") == 1.0
    assert _value(same, "function", "total_variation_mean", "a-b") == pytest.approx(0.0, abs=1e-7)
    # negating the last layer negates the logits: p_b(y=1|x) = p_a(y=0|x) for every draw
    probs = post.predict(x, num_samples=80).mean(0)
    y = probs.argmax(-1)
    swapped = compare(post, flipped, data=(x, y), max_dim=0)
    assert _value(swapped, "function", "agreement", "a-b") == pytest.approx(np.mean(np.abs(probs[:, 1] - 0.5) < 1e-6))
    assert _value(swapped, "function", "total_variation_mean", "a-b") == pytest.approx(
        np.mean(np.abs(probs[:, 1] - probs[:, 0])), rel=1e-4)
    assert _value(swapped, "function", "accuracy", "a") == 1.0
    assert _value(swapped, "function", "accuracy", "b") == pytest.approx(0.0)
    # an InferenceData on one side is predicted with the other side's model
    idata = to_inference_data(post.samples)
    via_idata = compare(post, idata, data=(x, None), max_dim=0)
    assert _value(via_idata, "function", "total_variation_max", "a-b") == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="model"):
        compare(idata, idata, data=(x, None), max_dim=0)


def _labels(axes) -> list:
    """The variable labels of a forest plot: ArviZ 0.x writes them as y tick labels of the first axes, 1.x as
    texts of its label column (the first axes)."""
    ax = np.ravel(axes)[0]
    return [t.get_text() for t in (*ax.get_yticklabels(), *ax.texts) if t.get_text()]


@pytest.mark.smoke
def test_plots_show_the_chosen_weights_and_predictions(tiny_bnn, correlated):
    """Under the installed ArviZ (0.x on Python 3.11, 1.x in the smoke run on the newest Python): the forest plots
    label the chosen weights and points, the pair plot overlays both posteriors' draws."""
    _, post, flipped, x = tiny_bnn
    axes = plot_weights(post, flipped, num=3)
    assert len([t for t in _labels(axes) if "linear_1" in t]) == 3  # the sign flip moved only linear_1 means
    pair = plot_weights(to_inference_data(correlated), to_inference_data(correlated), [("w", 0), ("w", 1)], kind="pair")
    # the (w[0], w[1]) scatter: 2 chains of each posterior under 1.x (a collection per chain), one set under 0.x
    scatters = max(len(ax.collections) for ax in np.ravel(pair))
    assert scatters == (4 if ARVIZ_1 else 2)
    axes = plot_predictions(post, flipped, (x, None), num_points=4)
    assert len([t for t in _labels(axes) if t.startswith("p(y=")]) == 4
    with pytest.raises(ValueError, match="kind"):
        plot_weights(post, flipped, kind="violin")
    if ARVIZ_1:
        with pytest.raises(InputError, match="^ax: "):
            plot_weights(post, flipped, num=3, ax=np.ravel(axes)[0])


def test_mean_field_against_nuts_on_two_moons(moons_entry, moons_svi, moons_nuts):
    from inference import to_arviz

    table = compare(moons_svi, moons_nuts, num_samples=300, seed=0)
    sites = list(moons_nuts.samples)
    assert set(table.scope) == set(sites) | {"all"}
    assert _value(table, "all", "ess_bulk_min", "a") > 150  # 300 independent guide draws
    assert np.isnan(_value(table, "all", "rhat_max", "a"))  # one chain
    assert np.isfinite(_value(table, "all", "rhat_max", "b"))  # two NUTS chains
    # the same numbers through ArviZ: to_arviz draws the same guide samples for the same seed
    via_arviz = compare(to_arviz(moons_svi, num_samples=300, seed=0), to_arviz(moons_nuts), num_samples=300)
    np.testing.assert_allclose(via_arviz.value.to_numpy(), table.value.to_numpy(), rtol=1e-6, equal_nan=True)
    function = compare(moons_svi, moons_nuts, data=moons_entry.test, num_samples=200, max_dim=0)
    assert 0.5 < _value(function, "function", "agreement", "a-b") <= 1.0
    assert 0.0 <= _value(function, "function", "total_variation_mean", "a-b") < 0.5


def test_flat_draws_flattens_the_chosen_sites_in_order():
    from evals.comparison import flat_draws

    draws = {"a/w": np.arange(2 * 3 * 4).reshape(2, 3, 2, 2), "a/b": -np.arange(2 * 3).reshape(2, 3, 1)}
    flat = flat_draws(draws)
    assert flat.shape == (2, 3, 5)
    np.testing.assert_array_equal(flat[1, 2], [20, 21, 22, 23, -5])
    np.testing.assert_array_equal(flat_draws(draws, ["a/b"])[..., 0], draws["a/b"][..., 0])
