"""zoo.experiments.analysis.sparse_ensemble: threshold 0 changes nothing; a threshold above every kappa zeroes the whole layer."""
import numpy as np
import optax
import pytest

import inference
import zoo
from zoo.experiments.analysis.sparse_ensemble import edited_draws, ensemble_probs, sparse_ensemble_curve

SITE = "mlp/~/linear_0/w"


@pytest.fixture(scope="module")
def posterior():
    e = zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100}, log_uniform_sites=[SITE])
    guide = inference.zero_mean.variance_layers(e.model, variance_sites=[SITE], granularity="layer", init_log_alpha=-1.0)
    return e, inference.fit(e.model, guide, e.train, steps=30, batch_size=50, optimizer=optax.adam(1e-2),
                            progress=False)


def test_threshold_zero_changes_nothing_and_a_huge_one_zeroes_the_layer(posterior):
    e, post = posterior
    kappa = np.abs(np.random.default_rng(0).normal(size=(2, 4))) + 1e-3
    curve = sparse_ensemble_curve(post, SITE, kappa, [-np.inf, 100.0], e.test.x, e.test.y, num_samples=5)
    untouched, everything = curve.iloc[0], curve.iloc[1]
    assert untouched["fraction_below"] == 0.0 and untouched["compression"] == 1.0
    assert untouched["acc_mean"] == untouched["acc_zero"] == untouched["acc_full"]
    assert everything["fraction_below"] == 1.0 and everything["compression"] == 8.0
    draws = {k: np.asarray(v) for k, v in post.draws(5, seed=0).items()}
    zeroed = edited_draws(draws, SITE, np.ones((2, 4), bool), 0.0)
    assert not zeroed[SITE].any() and np.array_equal(zeroed[SITE.replace("/w", "/b")], draws[SITE.replace("/w", "/b")])
    probs = ensemble_probs(e.model, zeroed, e.test.x)  # every hidden unit sees only its bias: one prediction
    np.testing.assert_allclose(probs, np.broadcast_to(probs[:1], probs.shape), atol=1e-6)
    assert everything["acc_zero"] == pytest.approx(float(np.mean(probs.argmax(-1) == e.test.y)))
