"""The NLL of every table comes from per-draw log-likelihoods (a log-softmax in the model), exact where float32
probabilities underflow: `evals.score`, the OOD tables (`evals.ood`) and `evals.comparison`."""

import numpy as np
import pytest

import evals
import inference
from evals import comparison, metrics, ood

S = 8


# the suite's session fixtures (tests/conftest.py): moons_entry, a two-moons MLP 16-16, and moons_svi, its
# mean-field fit, named entry and svi here
@pytest.fixture(scope="module")
def entry(moons_entry):
    return moons_entry


@pytest.fixture(scope="module")
def svi(moons_svi):
    return moons_svi


@pytest.fixture(scope="module")
def overconfident(entry, svi):
    """An MCMC-kind Posterior of 2 chains x 4 draws: the SVI draws scaled by 3, so logits grow about 27-fold; on
    inputs scaled by 3 (off the data) some wrong predictions have probabilities far below float32's smallest."""
    draws = svi.draws(S, seed=1)
    samples = {k: 3.0 * np.asarray(v).reshape((2, S // 2) + v.shape[1:]) for k, v in draws.items()}
    return inference.MCMCPosterior(model=entry.model, samples=samples, feature_shape=svi.feature_shape)


def test_score_nll_is_exact_where_probabilities_underflow(entry, overconfident):
    x, y = 3.0 * entry.test.x, entry.test.y
    log_lik = overconfident.log_likelihood(x, y, num_samples=S)  # (S, N)
    assert (log_lik.max(0) < -104).any()  # below float32's smallest (subnormal) probability, 1.4e-45, in every draw
    exact = metrics.nll_from_log_likelihood(log_lik)
    row = evals.score(overconfident, (x, y), num_samples=S, verbose=False).iloc[0]
    assert row["nll"] == pytest.approx(exact, rel=1e-6) and 5 < exact < 100
    member = overconfident.predict(x, num_samples=S)  # float32 softmax: those labels have probability 0
    assert metrics.nll(member, y) == np.inf
    p_true = np.take_along_axis(member.astype(np.float64), y[None, :, None], -1)[..., 0]
    clamped = np.mean(-np.log(np.maximum(p_true, 1e-12).mean(0)))  # the old floor of 1e-12 (27.6 nats)
    assert clamped < exact / 3
    # accuracy from the same pass (exp of the log-probabilities): with 8 draws of probability ~1 the averages tie
    # exactly at 0.5 on some points, and predict's float32 softmax breaks those ties on other bits
    log_probs = overconfident.log_predict(x, num_samples=S).astype(np.float64)
    assert row["accuracy"] == metrics.accuracy(np.exp(log_probs).mean(0), y)
    assert abs(row["accuracy"] - metrics.accuracy(member.mean(0), y)) <= np.mean(member.mean(0)[:, 0] == 0.5)


def test_log_predict_is_one_pass_of_predict_and_log_likelihood(entry, svi, overconfident):
    """exp(log_predict) is predict (same draws); at the labels it is log_likelihood; regression refuses."""
    x, y = 3.0 * entry.test.x, entry.test.y
    for post in (svi, overconfident):
        log_probs = post.log_predict(x, num_samples=S, seed=2)  # (S, N, C)
        assert log_probs.shape == (S, len(x), 2)
        np.testing.assert_allclose(np.exp(log_probs), post.predict(x, num_samples=S, seed=2), atol=1e-6)
        at_labels = np.take_along_axis(log_probs, y[None, :, None], -1)[..., 0]
        np.testing.assert_allclose(at_labels, post.log_likelihood(x, y, num_samples=S, seed=2), rtol=1e-5, atol=1e-4)
    assert overconfident.predict(x, num_samples=S).min() == 0.0
    assert overconfident.log_predict(x, num_samples=S).min() < -104  # finite where the float32 softmax is 0


def test_score_uses_one_set_of_draws(entry, svi):
    """SVI: predict and log_likelihood with the same num_samples and seed draw the same weights in the same order,
    so score's accuracy / ECE and its NLL describe one set of draws."""
    x, y = entry.test.x, entry.test.y
    log_lik = svi.log_likelihood(x, y, num_samples=S, seed=3)  # (S, N)
    member = svi.predict(x, num_samples=S, seed=3)
    log_p = np.log(np.take_along_axis(member, y[None, :, None], -1)[..., 0])
    assert np.ptp(log_lik, axis=0).max() > 0.1  # the draws differ, so matching them one by one means something
    np.testing.assert_allclose(log_lik, log_p, rtol=0, atol=1e-6)
    row = evals.score(svi, entry.test, num_samples=S, seed=3, verbose=False).iloc[0]
    assert row["nll"] == pytest.approx(metrics.nll_from_log_likelihood(log_lik), rel=1e-6)
    assert row["nll"] == pytest.approx(metrics.nll(member, y), rel=1e-6)


def test_ood_tables_use_log_likelihoods(entry, svi, overconfident):
    x, y = entry.test.x, entry.test.y
    sets = [("zoom", 1, 3.0 * x, y)]
    results = ood.score_sets({"bnn": overconfident, "ens": ood.ensemble([overconfident, svi], num_samples=S),
                              "probs": lambda v: overconfident.predict(v, num_samples=S)},
                             sets, clean=(x, y), num_samples=S)
    table = results.table.set_index(["method", "type"])
    for kind, inputs in (("clean", x), ("zoom", 3.0 * x)):
        ll = overconfident.log_likelihood(inputs, y, num_samples=S)
        assert table.loc[("bnn", kind), "nll"] == pytest.approx(metrics.nll_from_log_likelihood(ll), rel=1e-6)
        both = np.concatenate([ll, svi.log_likelihood(inputs, y, num_samples=S)])
        assert table.loc[("ens", kind), "nll"] == pytest.approx(metrics.nll_from_log_likelihood(both), rel=1e-6)
    # a plain callable: probabilities only; exact on the clean set, +inf (no floor) where they underflow
    assert table.loc[("probs", "clean"), "nll"] == pytest.approx(table.loc[("bnn", "clean"), "nll"], rel=1e-4)
    assert table.loc[("probs", "zoom"), "nll"] == np.inf
    assert np.isfinite(ood.aggregate(results.table).loc["bnn", "cnll"])


def test_comparison_nll_uses_log_likelihoods(entry, svi, overconfident):
    x, y = 3.0 * entry.test.x, entry.test.y
    table = comparison.compare(svi, overconfident, data=(x, y), num_samples=S, max_dim=0)
    nll = table[(table.scope == "function") & (table.metric == "nll")].set_index("posterior")["value"]
    assert nll["b"] == pytest.approx(metrics.nll_from_log_likelihood(overconfident.log_likelihood(x, y, num_samples=S)), rel=1e-6)
    assert nll["a"] == pytest.approx(metrics.nll_from_log_likelihood(svi.log_likelihood(x, y, num_samples=S)), rel=1e-6)


def test_classification_row_checks_the_log_likelihood_shape():
    member = np.full((2, 3, 2), 0.5)
    with pytest.raises(ValueError, match="log_likelihood"):
        evals.classification_row(member, [0, 1, 0], np.zeros((3, 3)))
    assert evals.classification_row(member, [0, 1, 0], np.full(3, -5.0))["nll"] == 5.0
