"""Gradient signal-to-noise ratio per parameter over a window of minibatch gradients (k-tied Normal paper,
section 3.2, Fig. 6 top right, footnote 3).

Footnote 3: "SNR for each gradient value is calculated as E[g_b^2] / Var[g_b], where g_b is the gradient
value for a single parameter. The expectation E and variance Var of the gradient values g_b are calculated
over a window of last 10 batches." That is ``numerator="mean_square"`` (the default): it equals
1 + E[g]^2 / Var[g] (Var with ddof 0), so it is >= 1 and zero-mean noise gives ~1, not 0. The usual SNR,
E[g]^2 / Var[g] (zero-mean noise ~0), is ``numerator="squared_mean"``; the two order parameters alike.
A parameter whose gradient is the same in every batch (Var 0) has SNR inf; one whose gradient is 0 in
every batch, NaN.
"""

from __future__ import annotations

import numpy as np

from base.validation import check_choice
from base.errors import InputError

__all__ = ["gradient_snr", "snr_summary"]

NUMERATORS = ("mean_square", "squared_mean")


def gradient_snr(gradients, numerator: str = "mean_square") -> np.ndarray:
    """SNR of every parameter over the window: gradients (T, ...) (T >= 2 minibatch gradients of the same
    parameters) -> (...): E[g^2] / Var[g] (footnote 3; ``numerator="squared_mean"``: E[g]^2 / Var[g]), E and
    Var (ddof 0) over the T axis."""
    check_choice("numerator", numerator, list(NUMERATORS))
    g = np.asarray(gradients, np.float64)
    if g.ndim < 1 or g.shape[0] < 2:
        raise InputError("gradients", f"<an array of shape {g.shape}>", "(T, ...) gradients with T >= 2 "
                         "(a window of minibatches)")
    if not np.all(np.isfinite(g)):
        raise InputError("gradients", "<an array with NaN or inf entries>", "finite gradients")
    mean = g.mean(0)
    var = np.mean((g - mean) ** 2, 0)
    top = np.mean(g**2, 0) if numerator == "mean_square" else mean**2
    with np.errstate(divide="ignore", invalid="ignore"):
        return top / var


def snr_summary(gradients_by_param: dict, numerator: str = "mean_square") -> dict:
    """Summaries of `gradient_snr` over every entry of every parameter in {name: (T, ...)} (a layer's log-sd
    parameters): {"mean": the paper's "mean gradient SNR", over the finite entries; "median": over all
    entries (robust: a few near-deterministic entries dominate the mean); "inf_share": the share of
    entries with SNR inf}. A parameter whose likelihood gradient is 0 throughout (e.g. the weights out of a
    ReLU unit dead on every input) has only its closed-form KL gradient, the same in every batch: SNR inf,
    which would make any mean inf. NaN entries (gradient 0) count in none of them."""
    snr = np.concatenate([np.ravel(gradient_snr(g, numerator)) for g in gradients_by_param.values()])
    snr = snr[~np.isnan(snr)]
    if snr.size == 0:
        return {"mean": float("nan"), "median": float("nan"), "inf_share": float("nan")}
    finite = snr[np.isfinite(snr)]
    return {"mean": float(finite.mean()) if finite.size else float("inf"), "median": float(np.median(snr)),
            "inf_share": float(np.isinf(snr).mean())}
