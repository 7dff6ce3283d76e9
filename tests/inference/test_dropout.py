"""inference.dropout: whole input rows dropped and rescaled; the median is the weight-scaling network."""
import jax
import numpy as np

from inference.dropout import BinaryDropout, BinaryDropoutFamily


def test_rows_are_dropped_whole_and_rescaled_and_the_median_is_the_mean():
    loc = np.arange(1.0, 13.0).reshape(4, 3)
    d = BinaryDropout(loc, 0.5)
    draws = np.asarray(d.sample(jax.random.PRNGKey(0), (2000,)))
    ratio = draws / loc  # 0 or 2 for a whole row
    assert set(np.unique(ratio).tolist()) <= {0.0, 2.0}
    assert (ratio == ratio[:, :, :1]).all()
    np.testing.assert_allclose(draws.mean(0), loc, rtol=0.1)
    np.testing.assert_array_equal(np.asarray(d.icdf(0.5)), loc)
    assert float(np.asarray(d.log_prob(loc)).sum()) == 0.0
    assert BinaryDropoutFamily(0.25).config() == {"rate": 0.25}


def test_a_binary_dropout_posterior_round_trips_through_inference_load_and_zoo_load(moons_tiny, tmp_path):
    """binary_dropout is a registered guide: its saved posterior rebuilds its guide by name (it was refused with
    "unknown name 'binary_dropout'" before), with the same params, rate and sites, and predicts the same."""
    import optax

    import inference
    import zoo

    guide = inference.dropout.binary_dropout(moons_tiny.model, dropout_sites=["*/w"], rate=0.25)
    post = inference.fit(moons_tiny.model, guide, moons_tiny.train, steps=5, batch_size=16,
                         optimizer=optax.adam(1e-2), progress=False, config={"entry": moons_tiny.config})
    path = inference.save(post, tmp_path / "dropout")
    x = moons_tiny.test.x[:7]
    expected = np.asarray(post.predict(x, 4, seed=3))
    for loaded in (inference.load(path, model=moons_tiny.model), zoo.load(path)):
        assert loaded.guide.config == guide.config and guide.config["rate"] == 0.25
        assert set(loaded.params) == set(post.params)
        for name, value in post.params.items():
            np.testing.assert_array_equal(loaded.params[name], value)
        np.testing.assert_array_equal(np.asarray(loaded.predict(x, 4, seed=3)), expected)
    assert np.ptp(expected, axis=0).max() > 1e-3  # the draws drop rows: they differ (a point estimate's would not)
