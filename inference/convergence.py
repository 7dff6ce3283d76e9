"""Has the ELBO converged? `judge` reads a fit's loss curve (and its gradient norms) and says so.

The rule (`judge`; thresholds are its keyword arguments):

1. Fewer than ``min_steps`` (100) steps: not judged, reported as not converged.
2. The tail, the last ``tail_fraction`` (20 %) of the steps, is cut into ``windows`` (10) windows of equal
   length; the window means are the smoothed loss. A least-squares line through them (mean against the
   window's centre step) gives the loss's trend over the tail, and its t statistic, slope / standard error,
   with the standard error from the scatter of the window means around the line (8 degrees of freedom).
   Averaging over windows first makes the error honest when successive steps' losses are correlated.
3. ``change``: the fitted change of the loss across the tail (slope x tail length); ``rel_change``: that
   change relative to the size of the loss (|mean loss of the tail|, or the loss's step-to-step spread
   when that is larger, for a loss near 0).
4. Converged unless the trend is both real and relevant: |t| > ``t_crit`` (3; a flat curve of independent
   noise exceeds it about 2 % of the time) **and** |rel_change| > ``rel_tol`` (1 %, the relative ELBO
   change that ADVI, Kucukelbir et al. 2017, uses as its stopping tolerance). A loss still falling
   steadily is not converged; so is one rising (a learning rate too large). A statistically clear but
   negligible drift (under 1 % of the loss over the last 20 % of the run) counts as converged.

The gradient norm is reported (its mean over the first window of the run and over the tail), not used in
the decision: a Monte Carlo, minibatch ELBO's gradient keeps its noise at the optimum, so its norm does not
go to 0 there.
"""

from __future__ import annotations

import math

import numpy as np

TAIL_FRACTION = 0.2
WINDOWS = 10
T_CRIT = 3.0
REL_TOL = 0.01
MIN_STEPS = 100


class ConvergenceWarning(UserWarning):
    """`inference.fit` ended before its ELBO converged (see `inference.convergence.judge`).

    ``.convergence``: the numbers of the judgement (the dict stored in ``posterior.info.convergence``).
    """

    def __init__(self, message: str, convergence: dict):
        super().__init__(message)
        self.convergence = convergence


def judge(losses, grad_norms=None, *, tail_fraction: float = TAIL_FRACTION, windows: int = WINDOWS,
          t_crit: float = T_CRIT, rel_tol: float = REL_TOL, min_steps: int = MIN_STEPS,
          moved: bool | None = None) -> dict:
    """The convergence judgement of a loss curve, by the rule of the module docstring.

    Args:
      losses: (steps,) the loss of every step (finite).
      grad_norms: (steps,) the gradient's global norm at every step, or None (NaN entries: unknown).
      tail_fraction, windows, t_crit, rel_tol, min_steps: the rule's thresholds.
      moved: whether the parameters changed during the run (None: unknown). False is never converged, whatever
        the losses (a learning rate of 0 leaves a flat, noisy loss curve at the initial parameters).
    Returns:
      a JSON-able dict: converged (bool), reason (str), steps, moved (the argument), tail_steps, slope_t (t statistic of the
      tail's trend), change (fitted loss change across the tail), rel_change, loss_sd (step-to-step spread
      of the tail's losses), grad_norm_start / grad_norm_tail (mean gradient norm of the run's first window
      and of the tail; None when unknown) and the thresholds used (t_crit, rel_tol, tail_fraction).
    """
    losses = np.asarray(losses, np.float64).reshape(-1)
    steps = int(losses.size)
    out = {"converged": False, "reason": "", "steps": steps, "moved": moved, "tail_steps": 0, "slope_t": None,
           "change": None, "rel_change": None, "loss_sd": None, "grad_norm_start": None, "grad_norm_tail": None,
           "t_crit": float(t_crit), "rel_tol": float(rel_tol), "tail_fraction": float(tail_fraction)}
    if moved is False:
        out["reason"] = (f"the parameters did not move in {steps} steps: every update was 0 (a learning rate of 0?), "
                         "so the posterior is the initialisation")
        return out
    if steps < max(min_steps, 2 * windows):
        out["reason"] = f"only {steps} steps, too few to judge: at least {max(min_steps, 2 * windows)} are needed"
        return out
    size = max(2, int(round(steps * tail_fraction)) // windows)
    tail = losses[steps - size * windows:]
    t, change = window_trend(tail, size)
    sd = float(np.std(tail, ddof=1))
    rel = change / max(abs(float(np.mean(tail))), sd, 1e-30)
    out.update(tail_steps=int(tail.size), slope_t=t, change=change, rel_change=rel, loss_sd=sd)
    if grad_norms is not None:
        g = np.asarray(grad_norms, np.float64).reshape(-1)
        out["grad_norm_start"] = _nanmean(g[:size])
        out["grad_norm_tail"] = _nanmean(g[steps - size * windows:])
    trending = abs(t) > t_crit and abs(rel) > rel_tol
    out["converged"] = not trending
    direction = "falling" if change < 0 else "rising"
    out["reason"] = (f"the loss is still {direction}: {abs(rel):.2%} of its size over the last {tail.size} steps, "
                     f"t = {t:.1f}" if trending else
                     f"the loss is flat over the last {tail.size} steps: change {rel:+.2%} of its size, t = {t:.1f}")
    return out


def window_trend(values, size: int) -> tuple[float, float]:
    """(t statistic of the slope, fitted change across all of `values`) of the least-squares line through the
    means of consecutive windows of `size` steps of `values` (n,), n a multiple of `size` (at least 3
    windows). t is +-inf for an exact line with a slope, 0 for a constant."""
    means = np.asarray(values, np.float64).reshape(-1, size).mean(axis=1)
    k = means.size
    centres = (np.arange(k) - (k - 1) / 2.0) * size
    sxx = float(np.sum(centres ** 2))
    slope = float(np.sum(centres * (means - means.mean())) / sxx)
    resid = means - means.mean() - slope * centres
    se = math.sqrt(float(np.sum(resid ** 2)) / (k - 2) / sxx)
    change = slope * size * k
    if se == 0.0:
        return (0.0 if slope == 0.0 else math.copysign(math.inf, slope)), change
    return slope / se, change


def describe(convergence: dict | None) -> str:
    """One line for a fit summary: "converged (...)" / "NOT converged (...)" with the judgement's reason and
    the gradient norm; "convergence not judged" for None."""
    if not convergence:
        return "convergence not judged"
    text = ("converged" if convergence["converged"] else "NOT converged") + f" ({convergence['reason']}"
    if convergence.get("grad_norm_tail") is not None:
        text += f"; gradient norm {convergence['grad_norm_tail']:.3g}"
        if convergence.get("grad_norm_start"):
            text += f", {convergence['grad_norm_tail'] / convergence['grad_norm_start']:.2g}x the first steps'"
    return text + ")"


def _nanmean(values: np.ndarray) -> float | None:
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else None
