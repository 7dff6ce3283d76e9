"""The NLL of every table comes from per-draw log-likelihoods (a log-softmax in the model), exact where float32
probabilities underflow: `evals.score`, the OOD tables (`evals.ood`) and `evals.comparison`."""

import numpy as np
import pytest

import evals
import inference
import zoo
from evals import comparison, metrics, ood

S = 8


@pytest.fixture(scope="module")
def tiny():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100, "noise": 0.1})


@pytest.fixture(scope="module")
def svi(tiny):
    return inference.fit(tiny.model, inference.mean_field(tiny.model), tiny.train, steps=20, progress=False)


@pytest.fixture(scope="module")
def overconfident(tiny, svi):
    """An MCMC-kind Posterior of 2 chains x 4 draws: the SVI draws scaled by 40, so logits reach hundreds and the
    wrong predictions have probabilities far below float32's smallest (~1e-38)."""
    draws = svi.draws(S, seed=1)
    samples = {k: 40.0 * np.asarray(v).reshape((2, S // 2) + v.shape[1:]) for k, v in draws.items()}
    return inference.Posterior(model=tiny.model, kind="mcmc", samples=samples, feature_shape=svi.feature_shape)


def test_score_nll_is_exact_where_probabilities_underflow(tiny, overconfident):
    x, y = tiny.test.x, tiny.test.y
    log_lik = overconfident.log_likelihood(x, y, num_samples=S)  # (S, N)
    assert (np.exp(log_lik.astype(np.float64)).max(0) == 0).any()  # exp underflows even in float64: the probability path cannot see these
    exact = metrics.nll_from_log_likelihood(log_lik)
    assert 30 < exact < 1e4
    row = evals.score(overconfident, tiny.test, num_samples=S, verbose=False).iloc[0]
    assert row["nll"] == exact
    member = overconfident.predict(x, num_samples=S)  # float32 softmax: those labels have probability 0
    assert metrics.nll(member, y) == np.inf
    p_true = np.take_along_axis(member.astype(np.float64), y[None, :, None], -1)[..., 0]
    clamped = np.mean(-np.log(np.maximum(p_true, 1e-12).mean(0)))  # the old floor of 1e-12 (27.6 nats)
    assert clamped < 0.8 * exact
    assert row["accuracy"] == metrics.accuracy(member.mean(0), y)


def test_score_uses_one_set_of_draws(tiny, svi):
    """SVI: predict and log_likelihood with the same num_samples and seed draw the same weights in the same order,
    so score's accuracy / ECE and its NLL describe one set of draws."""
    x, y = tiny.test.x, tiny.test.y
    log_lik = svi.log_likelihood(x, y, num_samples=S, seed=3)  # (S, N)
    member = svi.predict(x, num_samples=S, seed=3)
    log_p = np.log(np.take_along_axis(member, y[None, :, None], -1)[..., 0])
    assert np.ptp(log_lik, axis=0).min() > 1e-3  # the draws differ, so matching them one by one means something
    np.testing.assert_allclose(log_lik, log_p, rtol=0, atol=1e-6)
    row = evals.score(svi, tiny.test, num_samples=S, seed=3, verbose=False).iloc[0]
    assert row["nll"] == metrics.nll_from_log_likelihood(log_lik)
    assert row["nll"] == pytest.approx(metrics.nll(member, y), rel=1e-6)


def test_ood_tables_use_log_likelihoods(tiny, svi, overconfident):
    x, y = tiny.test.x, tiny.test.y
    sets = [("fog", 1, x + 0.5, y)]
    results = ood.score_sets({"bnn": overconfident, "ens": ood.ensemble([overconfident, svi], num_samples=S),
                              "probs": lambda v: overconfident.predict(v, num_samples=S)},
                             sets, clean=(x, y), num_samples=S)
    table = results.table.set_index(["method", "type"])
    for kind, inputs in (("clean", x), ("fog", x + 0.5)):
        ll = overconfident.log_likelihood(inputs, y, num_samples=S)
        assert table.loc[("bnn", kind), "nll"] == pytest.approx(metrics.nll_from_log_likelihood(ll), rel=1e-12)
        both = np.concatenate([ll, svi.log_likelihood(inputs, y, num_samples=S)])
        assert table.loc[("ens", kind), "nll"] == pytest.approx(metrics.nll_from_log_likelihood(both), rel=1e-12)
        assert table.loc[("probs", kind), "nll"] == np.inf  # a plain callable: probabilities only, no floor
    assert np.isfinite(ood.aggregate(results.table).loc["bnn", "cnll"])


def test_comparison_nll_uses_log_likelihoods(tiny, svi, overconfident):
    table = comparison.compare(svi, overconfident, data=tiny.test, num_samples=S, max_dim=0)
    nll = table[(table.scope == "function") & (table.metric == "nll")].set_index("posterior")["value"]
    x, y = tiny.test.x, tiny.test.y
    assert nll["b"] == metrics.nll_from_log_likelihood(overconfident.log_likelihood(x, y, num_samples=S))
    assert nll["a"] == metrics.nll_from_log_likelihood(svi.log_likelihood(x, y, num_samples=S))


def test_classification_row_checks_the_log_likelihood_shape():
    member = np.full((2, 3, 2), 0.5)
    with pytest.raises(ValueError, match="log_likelihood"):
        evals.classification_row(member, [0, 1, 0], np.zeros((3, 3)))
    assert evals.classification_row(member, [0, 1, 0], np.full(3, -5.0))["nll"] == 5.0
