"""Classification metrics of a posterior's predictive distribution, defined as the uncertainty baselines' code
defines them (ECE: 15 equal-width bins, a confidence of 1.0 in the last; NLL: of the averaged probabilities).

NLL, which to use: the ensemble NLL of example i is -log (1/S) sum_s p(y_i | x_i, w_s), exactly, with no floor.
* `nll_from_log_likelihood(log_lik)` takes the per-draw log-likelihoods (S, N), log p(y_i | x_i, w_s) as the model
  computes them (a log-softmax, e.g. ``Posterior.log_likelihood(x, y)``), and folds them by a logsumexp in
  float64: exact however small p is (-1000 nats stays -1000). Every table of the zoo that reports an NLL of a
  posterior (`evals.score`, the OOD / corruption tables, `evals.comparison`, zoo run) uses it.
* `nll(member_probs, y)` takes probabilities (S, N, C), for arrays a user already holds. It is exact for the
  probabilities it is given, but probabilities computed in float32 by a softmax underflow to 0 below about
  1e-38 (about 87 nats) before they reach it, and a probability of exactly 0 gives an NLL of +inf, the true
  value for p = 0 (no clamp: a floor of 1e-12 would cap an example at 27.6 nats and hide over-confident
  mistakes). Use the log-likelihood path whenever the model is at hand.

Shapes: ``member_probs`` (S, N, C) are per-draw (or per-member) probabilities; ``probs`` (N, C) are the
averaged predictive probabilities (the mean over S of member_probs: average probabilities, never logits);
``y`` (N,) integer labels.

Every metric checks its arguments first (`base.validation`): probabilities finite, non-negative and
summing to 1 over classes within `PROBABILITY_ATOL` (the message names the worst row), labels an integer
vector of length N (a length-1 vector is not broadcast) in [0, C). Anything else raises
`base.errors.InputError` naming the argument: unnormalised or NaN probabilities would otherwise give
numbers such as an NLL of -1.8 or an ECE of 5.3, and a label -1 would read the last class.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp, xlogy

from base.validation import PROBABILITY_ATOL, as_array, check_labels, check_positive_ints, check_probabilities
from base.errors import ArgumentTypeError, InputError

__all__ = ["PROBABILITY_ATOL", "average", "accuracy", "nll", "nll_from_log_likelihood", "ece", "reliability", "brier", "predictive_entropy",
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
    """Ensemble negative log-likelihood from probabilities, mean over examples:
    mean_i -log(1/S sum_s p(y_i | x_i, w_s)) = mean_i -(logsumexp_s log p_s - log S); member_probs (S, N, C),
    y (N,). No floor: an example whose every draw gives its label probability 0 makes the mean +inf (see the
    module docstring; `nll_from_log_likelihood` is exact where float32 probabilities underflow)."""
    member_probs, y = checked(member_probs, y, member=True, arg="member_probs")
    p_true = np.take_along_axis(member_probs, y[None, :, None], -1)[..., 0]  # (S, N)
    with np.errstate(divide="ignore"):  # log 0 = -inf, on purpose
        log_p = np.log(p_true)
    return nll_from_log_likelihood(log_p, arg="member_probs")


def nll_from_log_likelihood(log_lik, *, arg: str = "log_lik") -> float:
    """Ensemble negative log-likelihood from per-draw log-likelihoods, exact (no floor):
    mean_i -(logsumexp_s log p(y_i | x_i, w_s) - log S), the negative mean log pointwise predictive density.

    log_lik: (S, N) log p(y_i | x_i, w_s) of S draws (``Posterior.log_likelihood(x, y)``), or (N,), read as one
      draw, which is also what a log pointwise predictive density (``reduce="log_mean_exp"``) is. Real numbers
      below +inf; -inf (probability 0) is allowed and gives +inf. The logsumexp runs in float64.
    Raises InputError naming `arg` for another shape, no entries, NaN or +inf.
    """
    a = as_array(log_lik, arg)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise ArgumentTypeError(arg, f"<array of dtype {a.dtype}>", "real log-likelihoods")
    if a.ndim not in (1, 2) or 0 in a.shape:
        raise InputError(arg, f"<array of shape {a.shape}>", "log-likelihoods of shape (S, N) or (N,), S, N >= 1")
    a = a.astype(np.float64).reshape((-1, a.shape[-1]))
    bad = np.isnan(a) | (a == np.inf)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(arg, f"<{int(bad.sum())} NaN/+inf entries, the first at index {first}>",
                         "log-likelihoods that are numbers below +inf (-inf, a probability 0, is allowed)")
    return float(np.mean(-(logsumexp(a, axis=0) - np.log(a.shape[0]))))


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
    return -np.sum(xlogy(probs, probs), -1)  # 0 log 0 = 0


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
