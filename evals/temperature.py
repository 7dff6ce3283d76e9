"""Temperature scaling of a posterior predictive and the calibrated NLL / ECE (Guo et al. 2017, "On calibration
of modern neural networks"; Ashukha et al. 2020, "Pitfalls of in-domain uncertainty estimation and ensembling in
deep learning", the "calibrated log-likelihood"): the functions on arrays; `evals.temperature_scale` and
``evals.score(..., validation=...)`` (`evals.scoring`) apply them to a posterior.

One temperature T > 0 is fitted on validation data by minimising the NLL of

    p_T(y | x) = softmax_y(log p(y | x) / T),     p(y | x) = (1/S) sum_s p(y | x, w_s),

the temperature applied to the log of the *averaged* predictive (pool, then calibrate), as Ashukha et al. apply it
to ensembles and to every other posterior in their comparison, not to each member's logits. For one draw (a
point estimate) log p(y | x) is the logits up to a constant per example, so this is Guo et al.'s logits / T.
Dividing by T keeps the argmax: accuracy is unchanged.

The NLL is convex in beta = 1 / T (a log-sum-exp of beta z minus beta z_y), so its derivative
mean_i (E_{p_beta}[z_i] - z_iy) is increasing and its root is found by bisection in log beta over
[1 / `T_MAX`, 1 / `T_MIN`] to float64 precision (a minimum outside that range is reported at its end).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import log_softmax, logsumexp

from base.errors import InputError

__all__ = ["Temperature", "fit_temperature", "pooled_log_probs", "calibrated_log_probs",
           "label_nll", "T_MIN", "T_MAX"]

T_MIN, T_MAX = 1e-3, 1e3
FLOOR = -1e4  # log-probabilities below this count as it while fitting T (a probability of 0 gives -inf)


class Temperature(NamedTuple):
    """temperature: the fitted T; nll: the validation NLL at T = 1; calibrated_nll: at the fitted T."""

    temperature: float
    nll: float
    calibrated_nll: float


def pooled_log_probs(member_log_probs) -> np.ndarray:
    """(N, C) float64 log of the averaged predictive, log (1/S) sum_s p(y | x, w_s), from (S, N, C) per-draw
    log-probabilities (or (N, C), one draw)."""
    a = np.asarray(member_log_probs, np.float64)
    a = a[None] if a.ndim == 2 else a
    if a.ndim != 3 or 0 in a.shape:
        raise InputError("member_log_probs", f"<array of shape {a.shape}>", "log-probabilities (S, N, C) or (N, C)")
    return logsumexp(a, axis=0) - np.log(a.shape[0])


def calibrated_log_probs(log_probs, temperature: float) -> np.ndarray:
    """(N, C) log p_T(y | x) = log_softmax(log_probs / T) of pooled log-probabilities (N, C)."""
    return log_softmax(np.asarray(log_probs, np.float64) / float(temperature), axis=-1)


def label_nll(log_probs, y) -> float:
    """Mean -log p(y_i | x_i) of log-probabilities (N, C) at labels y (N,)."""
    return float(-np.mean(np.take_along_axis(log_probs, y[:, None], -1)))


def fit_temperature(log_probs, y) -> float:
    """The T in [`T_MIN`, `T_MAX`] minimising the mean NLL of ``calibrated_log_probs(log_probs, T)`` for
    pooled log-probabilities (N, C) and labels y (N,) in [0, C) (the module docstring's bisection)."""
    z = np.maximum(np.asarray(log_probs, np.float64), FLOOR)
    y = np.asarray(y)
    z_y = np.take_along_axis(z, y[:, None], -1)[:, 0]

    def slope(beta):  # d/d beta of the mean NLL at beta = 1 / T
        p = np.exp(log_softmax(beta * z, axis=-1))
        return float(np.mean(np.sum(p * z, -1) - z_y))

    lo, hi = np.log(1 / T_MAX), np.log(1 / T_MIN)
    if slope(np.exp(lo)) >= 0:
        return T_MAX
    if slope(np.exp(hi)) <= 0:
        return T_MIN
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if slope(np.exp(mid)) < 0 else (lo, mid)
    return float(1 / np.exp(0.5 * (lo + hi)))


class TemperedPosterior:
    """A posterior's predictive temperature-scaled: log p_T(y | x) = log_softmax(log p(y | x) / T) of the averaged
    predictive p (`evals.temperature.calibrated_log_probs`, as `evals.score(..., validation=...)` applies it),
    one draw (N, C) -> (1, N, C); what `evals.score` and `evals.ood.score_sets` take as a predictor."""

    def __init__(self, posterior, temperature: float):
        self.posterior, self.temperature, self.model = posterior, float(temperature), posterior.model

    def log_predict(self, x, num_samples: int = 1, seed: int = 0) -> np.ndarray:
        log_p = np.asarray(self.posterior.log_predict(x, num_samples=num_samples, seed=seed))
        return calibrated_log_probs(pooled_log_probs(log_p), self.temperature)[None]

    def predict(self, x, num_samples: int = 1, seed: int = 0) -> np.ndarray:
        return np.exp(self.log_predict(x, num_samples=num_samples, seed=seed))
