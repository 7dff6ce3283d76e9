"""Every guide of the k-tied / variance / rank-1 family works with fit, Predictive, sample_posterior,
median, quantiles and reports its parameter count by the paper's formula."""
import jax
import numpy as np
import optax
import pytest
from numpyro.infer import Predictive

import models
from inference import GUIDES, fit, load, register_guide, save, to_arviz
from inference.site_names import arviz_name
from inference.k_tied import k_tied
from inference.rank1_mixture import batch_ensemble, rank1_mixture
from inference.zero_mean import variance_layers, zero_mean
from models.networks.mlp import mlp
from models.rank1 import rank1_likelihood, rank1_mlp, rank1_prior
from models.variance import log_uniform_prior

K = 2


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 3)).astype(np.float32)
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int32)


def _plain_model():
    prior = models.priors.by_pattern({"mlp/~/linear_0/w": log_uniform_prior()}, default=models.priors.normal(1.0))
    return models.bnn(mlp([4], 2), prior, feature_shape=(3,))


def _rank1_model(factor="normal"):
    return models.bnn(rank1_mlp([4], 2, K), rank1_prior(factor), rank1_likelihood(models.likelihoods.categorical(), K),
                      feature_shape=(3,))


FACTORIES = {"k_tied": k_tied, "zero_mean": zero_mean, "variance_layers": variance_layers,
             "rank1_mixture": rank1_mixture}

CASES = {
    "k_tied": lambda: (_plain_model(), lambda m: k_tied(m, k=2)),
    "zero_mean": lambda: (_plain_model(), lambda m: zero_mean(m, variance_sites=["mlp/~/linear_0/w"])),
    "variance_layers": lambda: (_plain_model(), lambda m: variance_layers(m, variance_sites="mlp/~/linear_0/w")),
    "rank1_normal": lambda: (_rank1_model(), lambda m: rank1_mixture(m)),
    "rank1_cauchy": lambda: (_rank1_model("cauchy"), lambda m: rank1_mixture(m, family="cauchy")),
    "batch_ensemble": lambda: (_rank1_model(), lambda m: batch_ensemble(m)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_guide_trains_and_serves_every_posterior_api(case, tmp_path):
    x, y = _data()
    model, make_guide = CASES[case]()
    guide = make_guide(model)
    post = fit(model, guide, (x, y), steps=60, batch_size=24, optimizer=optax.adam(1e-2), progress=False)
    assert np.all(np.isfinite(post.losses))
    assert np.mean(post.losses[-10:]) < np.mean(post.losses[:10])

    assert guide.num_params_formula() == guide.num_free_params(post.params)  # formula == actual leaves

    shapes = model.site_shapes(x)

    @jax.jit
    def serve(params, key):
        draws = guide.sample_posterior(key, params, x, sample_shape=(5,))
        pred = Predictive(model, guide=guide, params=params, num_samples=3)(key, x)
        return draws, pred["y"], guide.median(params), guide.quantiles(params, [0.25, 0.5, 0.75])

    draws, y_pred, median, quant = serve(post.params, jax.random.PRNGKey(1))
    for name, shape in shapes.items():
        assert draws[name].shape == (5,) + shape
        assert median[name].shape == shape and quant[name].shape == (3,) + shape
        np.testing.assert_allclose(quant[name][1], median[name], rtol=1e-5, atol=1e-6)
        assert np.all(quant[name][0] <= quant[name][2])
    assert y_pred.shape == (3, len(x))

    idata = to_arviz(post, (x, y), num_samples=4)
    assert idata.log_likelihood["y"].shape == (1, 4, len(x))
    assert np.all(np.asarray(idata.log_likelihood["y"]) <= 0)
    assert set(idata.posterior.data_vars) == {arviz_name(site) for site in shapes}  # netCDF-safe names

    if guide.config["name"] not in GUIDES:
        register_guide(guide.config["name"], FACTORIES[guide.config["name"]])
    loaded = load(save(post, str(tmp_path / case)), model)
    assert type(loaded.guide) is type(guide) and loaded.guide.config == guide.config
    for name, value in post.params.items():
        np.testing.assert_array_equal(loaded.params[name], value)
    for name, value in loaded.median().items():
        np.testing.assert_array_equal(value, median[name])
