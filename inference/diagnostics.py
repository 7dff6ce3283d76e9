"""Convergence diagnostics, the package's one wrapper of ArviZ's ESS and R-hat.

`ess_rhat` summarises any draws grouped by chain (weights, flattened sites, predictive probabilities);
the rest are function-space diagnostics: R-hat and ESS of predictive probabilities (weights are not
identified, so convergence is judged on p(y | x)). ArviZ is imported on first use (it is slow to import).
"""

from __future__ import annotations

import numpy as np
from base.errors import InputError


def ess_rhat(draws) -> dict:
    """{"ess_bulk_min": the smallest bulk ESS, "rhat_max": the largest rank-normalised split R-hat} over
    every entry of `draws` (chains, draws, ...) (floats; NaN entries are skipped).

    R-hat needs two chains: with one chain (an SVI posterior's independent draws) it is NaN.
    """
    import arviz as az

    data = az.convert_to_dataset({"w": np.asarray(draws)})
    return {"ess_bulk_min": float(az.ess(data, method="bulk")["w"].min()),
            "rhat_max": float(az.rhat(data)["w"].max())}


def predictive_draws(posterior, x, num_samples: int = 500, seed: int = 0) -> np.ndarray:
    """Predictive probabilities of x (N, *feature_shape) grouped by chain: (chains, draws, N, C).

    MCMC: every stored draw; SVI: one chain of `num_samples` guide draws.
    """
    probs = posterior.predict(x, num_samples=posterior.num_draws or num_samples, seed=seed)
    return probs.reshape((posterior.num_chains, -1) + probs.shape[1:])


def predictive_summary(posterior, x, num_samples: int = 500, seed: int = 0):
    """az.summary (mean, sd, 94 % HDI, MCSE, ESS, R-hat) of p(y = c | x_n) for every row of x (N, *feature_shape)
    and class, with the same columns under ArviZ 0.x and 1.x (`inference.arviz_compat.summary`).

    Returns a DataFrame with N * C rows, named ``p[n, c]``.
    """
    from inference.arviz_compat import summary

    probs = predictive_draws(posterior, x, num_samples, seed)
    return summary({"p": probs}, round_to=4)


def max_rhat(posterior, x, num_samples: int = 500, seed: int = 0) -> float:
    """The largest R-hat over the predictive probabilities p(y = c | x_n) of x (N, *feature_shape), all n and
    c (needs >= 2 chains)."""
    if posterior.num_chains < 2:
        raise InputError.worded("posterior", f"posterior: R-hat needs at least 2 chains, got {posterior.num_chains}")
    return ess_rhat(predictive_draws(posterior, x, num_samples, seed))["rhat_max"]
