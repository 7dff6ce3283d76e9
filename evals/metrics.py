"""Classification metrics of a posterior's predictive distribution, defined as the uncertainty baselines' code
defines them (ECE: 15 equal-width bins, a confidence of 1.0 in the last; NLL: of the averaged probabilities).

Shapes: ``member_probs`` (S, N, C) are per-draw (or per-member) probabilities; ``probs`` (N, C) are the
averaged predictive probabilities (the mean over S of member_probs: average probabilities, never logits);
``y`` (N,) integer labels.

Every metric checks its arguments first (`inference.validation`): probabilities finite, non-negative and
summing to 1 over classes within `PROBABILITY_ATOL` (the message names the worst row), labels an integer
vector of length N (a length-1 vector is not broadcast) in [0, C). Anything else raises
`models.errors.InputError` naming the argument: unnormalised or NaN probabilities would otherwise give
numbers such as an NLL of -1.8 or an ECE of 5.3, and a label -1 would read the last class.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from inference.validation import PROBABILITY_ATOL, check_labels, check_positive_ints, check_probabilities

_EPS = 1e-12


__all__ = ["PROBABILITY_ATOL", "average", "accuracy", "nll", "ece", "reliability", "brier", "predictive_entropy",
           "mutual_information", "checked"]


def checked(probs, y=None, *, member: bool = False, arg: str = "probs"):
    """(probabilities float64, labels int32 or None) after the module's checks: probs (N, C), or (S, N, C) when
    `member`; y (N,) integer labels in [0, C), or None. Raises InputError naming `arg` or ``y``."""
    p = check_probabilities(probs, arg=arg, ndim=3 if member else 2)
    if y is None:
        return p, None
    return p, check_labels(y, p.shape[-1], arg="y", n=p.shape[-2], rows_of=arg)


def average(member_probs) -> np.ndarray:
    """(S, N, C) -> (N, C): the Bayesian model average of the probabilities."""
    return checked(member_probs, member=True, arg="member_probs")[0].mean(0)


def accuracy(probs, y) -> float:
    """Fraction of argmax(probs) == y; probs (N, C), y (N,)."""
    probs, y = checked(probs, y)
    return float(np.mean(np.argmax(probs, -1) == y))


def nll(member_probs, y) -> float:
    """Ensemble negative log-likelihood, mean over examples:
    -log(1/S sum_s p(y|x, w_s)) = -logsumexp_s(log p_s) + log S."""
    member_probs, y = checked(member_probs, y, member=True, arg="member_probs")
    p_true = np.take_along_axis(member_probs, y[None, :, None], -1)[..., 0]  # (S, N)
    log_p = np.log(np.maximum(p_true, _EPS))
    return float(np.mean(-(logsumexp(log_p, axis=0) - np.log(member_probs.shape[0]))))


def ece(probs, y, num_bins: int = 15) -> float:
    """Expected calibration error: sum_b (n_b / N) |acc_b - conf_b| over `num_bins` equal-width confidence
    bins on [0, 1] (empty bins skipped; a confidence of exactly 1.0 falls in the last bin); probs (N, C),
    y (N,), num_bins >= 1."""
    conf, correct = _confidence(probs, y, num_bins)
    bins = np.minimum((conf * num_bins).astype(int), num_bins - 1)
    counts = np.bincount(bins, minlength=num_bins)
    acc_sum = np.bincount(bins, weights=correct, minlength=num_bins)
    conf_sum = np.bincount(bins, weights=conf, minlength=num_bins)
    nonempty = counts > 0
    return float(np.sum(np.abs(acc_sum[nonempty] - conf_sum[nonempty])) / len(conf))


def reliability(probs, y, num_bins: int = 15):
    """Per-bin (bin centres (B,), accuracy (B,), mean confidence (B,), counts (B,)) for a reliability diagram;
    empty bins have NaN accuracy and confidence; probs (N, C), y (N,), num_bins >= 1."""
    conf, correct = _confidence(probs, y, num_bins)
    bins = np.minimum((conf * num_bins).astype(int), num_bins - 1)
    counts = np.bincount(bins, minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.bincount(bins, weights=correct, minlength=num_bins) / counts
        mean_conf = np.bincount(bins, weights=conf, minlength=num_bins) / counts
    centres = (np.arange(num_bins) + 0.5) / num_bins
    return centres, acc, mean_conf, counts


def brier(probs, y) -> float:
    """Mean over examples of sum_c (p_c - onehot(y)_c)^2; probs (N, C), y (N,)."""
    probs, y = checked(probs, y)
    onehot = np.eye(probs.shape[-1])[y]
    return float(np.mean(np.sum((probs - onehot) ** 2, -1)))


def predictive_entropy(probs) -> np.ndarray:
    """H[p(y|x)] = -sum_c p_c log p_c per example: (N, C) -> (N,) nats."""
    probs = checked(probs)[0]
    return _entropy(probs)


def _entropy(probs: np.ndarray) -> np.ndarray:
    return -np.sum(probs * np.log(np.maximum(probs, _EPS)), -1)


def mutual_information(member_probs) -> np.ndarray:
    """Epistemic part of the entropy, I[y; w | x] = H[mean_s p_s] - mean_s H[p_s]: (S, N, C) -> (N,) nats."""
    member_probs = checked(member_probs, member=True, arg="member_probs")[0]
    return _entropy(member_probs.mean(0)) - _entropy(member_probs).mean(0)


def _confidence(probs, y, num_bins):
    check_positive_ints(num_bins=num_bins)
    probs, y = checked(probs, y)
    conf = probs.max(-1)
    correct = (probs.argmax(-1) == y).astype(np.float64)
    return conf, correct
