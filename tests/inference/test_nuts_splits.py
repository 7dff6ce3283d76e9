"""`inference.nuts_splits`: several data sets of one model in one vectorised NUTS program give, data set by data
set, the draws `inference.nuts` gives each alone (same start values, same chain keys); a data set a row longer
runs in a group of its own; bad input is refused by name."""

import warnings

import numpy as np
import pytest

import inference
import zoo
from base.errors import InputError
from inference.nuts_splits import groups_by_shape, nuts_splits


@pytest.fixture(scope="module")
def splits():
    """A regression MLP 1-4-1 with a learned noise and two data sets of 30 rows (one group: one compile)."""
    entry = zoo.get("mlp", data="regression_1d", hidden=(4,), noise=None)
    rng = np.random.default_rng(0)
    data = []
    for n in (30, 30):
        x = rng.uniform(-2, 2, (n, 1)).astype(np.float32)
        data.append((x, (np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=n)).astype(np.float32)))
    shapes = entry.model.site_shapes((1,))
    inits = [inference.MCMCPosterior(model=entry.model, feature_shape=(1,), samples={
        k: (np.abs if k == "likelihood/noise" else np.asarray)(
            np.random.default_rng(10 + i).normal(0.0, 0.5, (1, 4) + s)).astype(np.float32)
        for k, s in shapes.items()}) for i in range(2)]
    return entry.model, data, inits


def test_each_data_set_gets_the_draws_nuts_gives_it_alone(splits):
    model, data, inits = splits
    settings = dict(num_chains=2, num_warmup=3, draws_per_chain=4, max_tree_depth=3)
    warnings.simplefilter("ignore", inference.DivergenceWarning)  # 3 warm-up iterations: many diverge
    together = nuts_splits(model, data, inits=inits, seed=5, **settings)
    assert len(together) == 2
    for k in range(2):
        alone = inference.nuts(model, data[k], init=inits[k], seed=5 + k, chain_method="vectorized",
                               progress=False, **settings)
        for site, value in alone.samples.items():
            assert together[k].samples[site].shape == value.shape == (2, 4) + value.shape[2:]
            np.testing.assert_allclose(together[k].samples[site], value, atol=1e-4, rtol=1e-4)
        np.testing.assert_array_equal(together[k].sample_stats["num_steps"], alone.sample_stats["num_steps"])


def test_bad_input_is_named(splits):
    model, data, inits = splits
    with pytest.raises(InputError, match="inits: expected one posterior per data set"):
        nuts_splits(model, data, inits=inits[:1])
    with pytest.raises(InputError, match="datasets: expected one data set or more"):
        nuts_splits(model, [])
    with pytest.raises(InputError, match="num_chains"):
        nuts_splits(model, data, num_chains=0)


def test_data_sets_are_grouped_by_shape():
    x30, x31 = np.zeros((30, 2)), np.zeros((31, 2))
    arrays = [(x30, x30[:, 0]), (x31, x31[:, 0]), (x30, x30[:, 0]), (x30[:, :1], x30[:, 0])]
    assert groups_by_shape(arrays) == [[0, 2], [1], [3]]
