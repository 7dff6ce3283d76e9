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
