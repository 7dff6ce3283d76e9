"""The Laplace marginal likelihood (evidence) as a function of an isotropic prior precision, and its maximiser.

With the prior N(0, delta^-1 I) on the P parameters the Laplace approximation covers, the curvature H (the GGN)
at theta* and its eigenvalues lambda_i (GGN + delta I then has eigenvalues lambda_i + delta), the Laplace
evidence (Daxberger et al. 2021, "Laplace Redux", eq. 5; Immer et al. 2021, sec. 4) is

    log p(D | delta) ~= log p(D | theta*) + log N(theta*; 0, delta^-1 I) + P/2 log(2 pi) - 1/2 log|H + delta I|
                      = log p(D | theta*) - delta/2 ||theta*||^2 + P/2 log(delta) - 1/2 sum_i log(lambda_i + delta)

(the two P/2 log 2 pi terms cancel). With a block-diagonal GGN and a prior precision delta_b per block (per layer:
Immer et al. 2021 and Laplace Redux's "layerwise" prior precision) the log-determinant and the norm split by block,
so each delta_b maximises its own block's terms. theta* is held fixed (the post-hoc choice of Laplace Redux: the network is
not refitted for each delta), so the evidence is a cheap function of one scalar once the eigenvalues are known.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

GRID = np.logspace(-6, 8, 281)
"""The prior precisions searched first (20 per decade over 1e-6 .. 1e8)."""


def log_evidence(prior_precision, log_lik: float, sq_norm: float, eigvals: np.ndarray) -> np.ndarray:
    """The Laplace log evidence (module docstring) at `prior_precision` (a scalar or an array of them, > 0):
    log_lik = log p(D | theta*), sq_norm = ||theta*||^2 over the covered parameters, eigvals (P,) the GGN's
    eigenvalues (>= 0). Returns an array of the shape of `prior_precision` (float64)."""
    delta = np.asarray(prior_precision, np.float64)
    lam = np.clip(np.asarray(eigvals, np.float64).ravel(), 0.0, None)
    flat = delta.reshape(-1)
    logdet = np.array([np.sum(np.log1p(lam / d)) + lam.size * np.log(d) for d in flat])
    out = log_lik - 0.5 * flat * sq_norm + 0.5 * lam.size * np.log(flat) - 0.5 * logdet
    return out.reshape(delta.shape)


def optimise_prior_precision(sq_norm: float, eigvals: np.ndarray) -> float:
    """The prior precision delta that maximises `log_evidence` for ||theta*||^2 = `sq_norm` and the GGN eigenvalues
    `eigvals` (log p(D | theta*) does not depend on delta).

    A grid first (`GRID`: the evidence is a cheap 1-D function once the eigenvalues are known, and a grid cannot
    be led astray by a bad start or step size), then bounded Brent on log delta between the grid neighbours of
    the best grid point, so the result is the maximiser to about 1e-8 relative, not a grid value. A maximum at the
    grid's end returns that end."""
    values = log_evidence(GRID, 0.0, sq_norm, eigvals)
    best = int(np.nanargmax(values))
    if best in (0, len(GRID) - 1):
        return float(GRID[best])
    lo, hi = np.log(GRID[best - 1]), np.log(GRID[best + 1])
    res = optimize.minimize_scalar(lambda t: -float(log_evidence(np.exp(t), 0.0, sq_norm, eigvals)),
                                   bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    return float(np.exp(res.x))


def block_evidence(prior_precisions, log_lik: float, sq_norms, eigvals) -> float:
    """The Laplace log evidence with prior precision delta_b on block b (block-diagonal GGN and prior):
    log p(D | theta*) + sum_b [`log_evidence` of block b without the likelihood term]; `sq_norms`, `eigvals`:
    per block."""
    return log_lik + sum(float(log_evidence(d, 0.0, s, e)) for d, s, e in zip(prior_precisions, sq_norms, eigvals))
