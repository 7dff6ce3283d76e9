"""Classification metrics of a posterior's predictive distribution, defined as the uncertainty baselines' code
defines them (ECE: 15 equal-width bins, a confidence of 1.0 in the last; NLL: of the averaged probabilities).

Shapes: ``member_probs`` (S, N, C) are per-draw (or per-member) probabilities; ``probs`` (N, C) are the
averaged predictive probabilities (the mean over S of member_probs: average probabilities, never logits);
``y`` (N,) integer labels.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

_EPS = 1e-12


def average(member_probs) -> np.ndarray:
    """(S, N, C) -> (N, C): the Bayesian model average of the probabilities."""
    return np.asarray(member_probs, np.float64).mean(0)


def accuracy(probs, y) -> float:
    """Fraction of argmax(probs) == y."""
    return float(np.mean(np.argmax(probs, -1) == np.asarray(y)))


def nll(member_probs, y) -> float:
    """Ensemble negative log-likelihood, mean over examples:
    -log(1/S sum_s p(y|x, w_s)) = -logsumexp_s(log p_s) + log S."""
    member_probs = np.asarray(member_probs, np.float64)
    y = np.asarray(y)
    p_true = np.take_along_axis(member_probs, y[None, :, None], -1)[..., 0]  # (S, N)
    log_p = np.log(np.maximum(p_true, _EPS))
    return float(np.mean(-(logsumexp(log_p, axis=0) - np.log(member_probs.shape[0]))))


def ece(probs, y, num_bins: int = 15) -> float:
    """Expected calibration error: sum_b (n_b / N) |acc_b - conf_b| over `num_bins` equal-width confidence
    bins on [0, 1] (empty bins skipped; a confidence of exactly 1.0 falls in the last bin)."""
    conf, correct = _confidence(probs, y)
    bins = np.minimum((conf * num_bins).astype(int), num_bins - 1)
    counts = np.bincount(bins, minlength=num_bins)
    acc_sum = np.bincount(bins, weights=correct, minlength=num_bins)
    conf_sum = np.bincount(bins, weights=conf, minlength=num_bins)
    nonempty = counts > 0
    return float(np.sum(np.abs(acc_sum[nonempty] - conf_sum[nonempty])) / len(conf))


def reliability(probs, y, num_bins: int = 15):
    """Per-bin (bin centres (B,), accuracy (B,), mean confidence (B,), counts (B,)) for a reliability diagram;
    empty bins have NaN accuracy and confidence."""
    conf, correct = _confidence(probs, y)
    bins = np.minimum((conf * num_bins).astype(int), num_bins - 1)
    counts = np.bincount(bins, minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.bincount(bins, weights=correct, minlength=num_bins) / counts
        mean_conf = np.bincount(bins, weights=conf, minlength=num_bins) / counts
    centres = (np.arange(num_bins) + 0.5) / num_bins
    return centres, acc, mean_conf, counts


def brier(probs, y) -> float:
    """Mean over examples of sum_c (p_c - onehot(y)_c)^2."""
    probs = np.asarray(probs, np.float64)
    onehot = np.eye(probs.shape[-1])[np.asarray(y)]
    return float(np.mean(np.sum((probs - onehot) ** 2, -1)))


def predictive_entropy(probs) -> np.ndarray:
    """H[p(y|x)] = -sum_c p_c log p_c per example: (N, C) -> (N,) nats."""
    probs = np.asarray(probs, np.float64)
    return -np.sum(probs * np.log(np.maximum(probs, _EPS)), -1)


def mutual_information(member_probs) -> np.ndarray:
    """Epistemic part of the entropy, I[y; w | x] = H[mean_s p_s] - mean_s H[p_s]: (S, N, C) -> (N,) nats."""
    member_probs = np.asarray(member_probs, np.float64)
    return predictive_entropy(member_probs.mean(0)) - predictive_entropy(member_probs).mean(0)


def _confidence(probs, y):
    probs = np.asarray(probs, np.float64)
    conf = probs.max(-1)
    correct = (probs.argmax(-1) == np.asarray(y)).astype(np.float64)
    return conf, correct
