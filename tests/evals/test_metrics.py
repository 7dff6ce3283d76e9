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


def test_nll_is_stable_for_confident_members():
    member = np.array([[[1.0, 0.0]], [[1.0, 0.0]]])
    assert np.isfinite(metrics.nll(member, np.array([1])))
