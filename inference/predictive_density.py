"""The log predictive density of held-out data: what a posterior's predictions score on new data.

    lpd = sum_i log p(y_i | x_i, D) = sum_i log (1/S) sum_s p(y_i | x_i, w_s),   w_s ~ p(w | D)

(the "log pointwise predictive density" of Gelman, Hwang & Vehtari 2014 and Vehtari, Gelman & Gabry 2017,
eq. 3, computed on test data rather than estimated from the training data by LOO). Its standard error over
examples, sqrt(N var_i(lpd_i)), is the one ArviZ reports for elpd_loo, so the two compare on one scale:
elpd_loo / N_train estimates lpd / N_test of new data from the same distribution.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from inference.data_args import as_arrays
from inference.posterior import Posterior
from base.validation import check_positive_ints
from base.errors import ArgumentTypeError, InputError


class PredictiveDensity(NamedTuple):
    """What `log_predictive_density` returns.

    Attributes:
      lpd: the total, sum_i lpd_i (float).
      se: its standard error over examples, sqrt(N var(lpd_i)) (float; 0 for N = 1).
      pointwise: lpd_i = log (1/S) sum_s p(y_i | x_i, w_s), (N,) float64.
      num_samples: S, the posterior draws averaged.
    """

    lpd: float
    se: float
    pointwise: np.ndarray
    num_samples: int

    @property
    def mean(self) -> float:
        """lpd / N: the mean log predictive density per example (minus the mean NLL of the predictive)."""
        return float(self.lpd / len(self.pointwise))


def default_num_samples(posterior, num_samples: int | None) -> int:
    """`num_samples`, or by default every stored draw of an MCMC posterior (all chains) and 500 guide draws
    of an SVI one."""
    if num_samples is not None:
        check_positive_ints(num_samples=num_samples)
        return int(num_samples)
    return posterior.num_draws or 500


def log_predictive_density(posterior, data, *, num_samples: int | None = None, seed: int = 0,
                           chunk_size: int = 50) -> PredictiveDensity:
    """The log predictive density of `data` (a `Dataset` or (x, y): x (N, *feature_shape), y (N,)) under
    `posterior` (module docstring equation), by `Posterior.log_likelihood(reduce="log_mean_exp")`: a running
    float64 logsumexp over draws, `chunk_size` draws at a time, never holding (S, N).

    num_samples: S (default: every MCMC draw, 500 SVI guide draws). Returns a `PredictiveDensity` (total,
    standard error, pointwise (N,), S). Held-out data are the intended use; for the training data ``az.loo``
    of `inference.to_arviz` estimates the same quantity for new data.
    """
    if not isinstance(posterior, Posterior):
        raise ArgumentTypeError("posterior", f"<{type(posterior).__name__}>", "an inference.Posterior")
    x, y, _, _ = as_arrays(data)
    s = default_num_samples(posterior, num_samples)
    pointwise = np.asarray(posterior.log_likelihood(x, y, num_samples=s, seed=seed, chunk_size=chunk_size,
                                                    reduce="log_mean_exp"), np.float64)
    n = pointwise.shape[0]
    se = float(np.sqrt(n * np.var(pointwise, ddof=1))) if n > 1 else 0.0
    return PredictiveDensity(float(pointwise.sum()), se, pointwise, s)


def predictive_density_table(posteriors: dict, data, *, num_samples: int | None = None, seed: int = 0,
                             chunk_size: int = 50):
    """One row per posterior of {label: Posterior}: `log_predictive_density` of `data`.

    Returns a pandas DataFrame indexed by "posterior" with columns lpd (total), se (its standard error),
    lpd_mean (lpd / N), n (examples), num_samples (draws), lpd_diff (the best row's lpd minus this one's, >= 0)
    and se_diff (the standard error of that difference, from the pointwise differences, as az.compare
    computes dse), sorted best first.
    """
    import pandas as pd

    if not isinstance(posteriors, dict) or not posteriors:
        raise InputError("posteriors", posteriors, "a non-empty dict {label: Posterior}")
    results = {label: log_predictive_density(post, data, num_samples=num_samples, seed=seed, chunk_size=chunk_size)
               for label, post in posteriors.items()}
    best = max(results, key=lambda k: results[k].lpd)
    rows = []
    for label, r in sorted(results.items(), key=lambda kv: -kv[1].lpd):
        diff = results[best].pointwise - r.pointwise
        n = len(diff)
        rows.append({"posterior": label, "lpd": r.lpd, "se": r.se, "lpd_mean": r.mean, "n": n,
                     "num_samples": r.num_samples, "lpd_diff": float(diff.sum()),
                     "se_diff": float(np.sqrt(n * np.var(diff, ddof=1))) if n > 1 else 0.0})
    return pd.DataFrame(rows).set_index("posterior")
