import numpy as np
import pytest

from evals import metrics


def test_hand_computed_values():
    member = np.array([[[0.9, 0.1], [0.4, 0.6]], [[0.7, 0.3], [0.2, 0.8]]])  # (S=2, N=2, C=2)
    y = np.array([0, 1])
    probs = member.mean(0)  # [[.8, .2], [.3, .7]]
    assert metrics.accuracy(probs, y) == 1.0
    assert metrics.nll(member, y) == pytest.approx(-(np.log(0.8) + np.log(0.7)) / 2)
    assert metrics.brier(probs, y) == pytest.approx(((0.2**2 + 0.2**2) + (0.3**2 + 0.3**2)) / 2)
    # confidences .8 and .7 fall in bins 12 and 10 of 15; both correct: |1-.8|/2 + |1-.7|/2
    assert metrics.ece(probs, y) == pytest.approx((0.2 + 0.3) / 2)
    h = -(0.8 * np.log(0.8) + 0.2 * np.log(0.2))
    assert metrics.predictive_entropy(probs)[0] == pytest.approx(h)
    h_members = np.mean([-(0.9 * np.log(0.9) + 0.1 * np.log(0.1)), -(0.7 * np.log(0.7) + 0.3 * np.log(0.3))])
    assert metrics.mutual_information(member)[0] == pytest.approx(h - h_members)


def test_ece_calibrated_near_zero_and_overconfident_matches_formula():
    rng = np.random.default_rng(0)
    n = 200_000
    conf = rng.uniform(0.5, 1.0, n)
    correct = rng.uniform(size=n) < conf  # calibrated: P(correct | conf) = conf
    y = np.where(correct, 0, 1)
    probs = np.stack([conf, 1 - conf], -1)
    assert metrics.ece(probs, y) < 0.005
    # over-confident: always 0.95 confident, right 70% of the time -> ECE = |0.7 - 0.95| = 0.25
    probs = np.tile([0.95, 0.05], (1000, 1))
    y = np.r_[np.zeros(700, int), np.ones(300, int)]
    assert metrics.ece(probs, y) == pytest.approx(0.25)


def test_confidence_of_one_falls_in_last_bin():
    centres, acc, conf, counts = metrics.reliability(np.array([[1.0, 0.0]]), np.array([0]))
    assert counts[-1] == 1 and counts.sum() == 1


def test_nll_has_no_floor():
    # a probability of 1e-30 counts in full (a floor of 1e-12 made it 27.6 nats): -log(1e-30) = 69.08
    member = np.array([[[1.0, 1e-30], [0.5, 0.5]]])  # (S=1, N=2, C=2)
    assert metrics.nll(member, np.array([1, 0])) == pytest.approx((-np.log(1e-30) + np.log(2)) / 2, rel=1e-12)
    # averaged over draws as designed: -log((1e-30 + 3e-30) / 2)
    member = np.array([[[1.0, 1e-30]], [[1.0, 3e-30]]])
    assert metrics.nll(member, np.array([1])) == pytest.approx(-np.log(2e-30), rel=1e-12)
    # probability 0 in every draw: +inf, the true value; in one draw of two: -log(p / 2)
    assert metrics.nll(np.array([[[1.0, 0.0]], [[1.0, 0.0]]]), np.array([1])) == np.inf
    assert metrics.nll(np.array([[[1.0, 0.0]], [[0.6, 0.4]]]), np.array([1])) == pytest.approx(-np.log(0.2))


def test_nll_from_log_likelihood_is_exact():
    assert metrics.nll_from_log_likelihood(np.array([[-1000.0]])) == 1000.0
    assert metrics.nll_from_log_likelihood(np.array([-1000.0])) == 1000.0  # (N,): one draw, or an lpd
    # draws e^-1000 and e^-1000 / 3 average to e^-1000 * 2/3: NLL 1000 + log 1.5 (exp would underflow to 0)
    two = np.array([[-1000.0, -2.0], [-1000.0 - np.log(3.0), -2.0]])  # (S=2, N=2)
    assert metrics.nll_from_log_likelihood(two) == pytest.approx((1000.0 + np.log(1.5) + 2.0) / 2, rel=1e-14)
    assert metrics.nll_from_log_likelihood(np.array([[-np.inf, -1.0], [-np.inf, -1.0]])) == np.inf


def test_nll_paths_agree_where_both_are_exact():
    rng = np.random.default_rng(0)
    member = rng.dirichlet(np.full(4, 0.3), size=(5, 30))  # (S=5, N=30, C=4), some probabilities ~1e-10
    y = rng.integers(0, 4, 30)
    log_lik = np.log(np.take_along_axis(member, y[None, :, None], -1)[..., 0])  # (S, N)
    assert metrics.nll_from_log_likelihood(log_lik) == pytest.approx(metrics.nll(member, y), rel=1e-13)
    lpd = np.log(np.take_along_axis(member.mean(0), y[:, None], -1)[:, 0])  # (N,) log predictive density
    assert metrics.nll_from_log_likelihood(lpd) == pytest.approx(metrics.nll(member, y), rel=1e-13)


@pytest.mark.parametrize("bad, expected", [
    (np.array([[-1.0, np.nan]]), "below \\+inf"), (np.array([[np.inf, -1.0]]), "below \\+inf"),
    (np.zeros((2, 3, 4)), "shape \\(S, N\\) or \\(N,\\)"), (np.zeros((0, 3)), "S, N >= 1"),
    (np.array([["a"]]), "real log-likelihoods")])
def test_nll_from_log_likelihood_refuses(bad, expected):
    with pytest.raises(ValueError, match="log_lik") as err:
        metrics.nll_from_log_likelihood(bad)
    assert err.match(expected)
