"""Function-space diagnostics: R-hat and ESS of predictive probabilities (weights are not identified,
so convergence is judged on p(y | x))."""

from __future__ import annotations

import arviz as az
import numpy as np


def predictive_draws(posterior, x, num_samples: int = 500, seed: int = 0) -> np.ndarray:
    """Predictive probabilities grouped by chain: (chains, draws, N, C). SVI: one chain of `num_samples`."""
    chains = posterior.num_chains
    if posterior.kind == "mcmc":
        total = chains * next(iter(posterior.samples.values())).shape[1]
        probs = posterior.predict(x, num_samples=total, seed=seed)
    else:
        probs = posterior.predict(x, num_samples=num_samples, seed=seed)
    return probs.reshape((chains, -1) + probs.shape[1:])


def predictive_summary(posterior, x, num_samples: int = 500, seed: int = 0):
    """az.summary (mean, sd, HDI, ESS, R-hat) of p(y = c | x_n) for every input row and class.

    Returns a DataFrame with one row per (n, c), named ``p[n, c]``.
    """
    probs = predictive_draws(posterior, x, num_samples, seed)
    return az.summary(az.convert_to_dataset({"p": probs}), round_to=4)


def max_rhat(posterior, x, num_samples: int = 500, seed: int = 0) -> float:
    """The largest R-hat over predictive probabilities p(y = c | x_n) (needs >= 2 chains)."""
    if posterior.num_chains < 2:
        raise ValueError("posterior: R-hat needs at least 2 chains")
    probs = predictive_draws(posterior, x, num_samples, seed)
    return float(np.nanmax(az.rhat(az.convert_to_dataset({"p": probs}))["p"].values))
