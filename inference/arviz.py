"""`to_arviz`: SVI and MCMC posteriors as ArviZ InferenceData with identical variables and dims."""

from __future__ import annotations

import arviz as az
import numpy as np

from inference.data_args import as_arrays
from inference.posterior import Posterior


def to_arviz(posterior: Posterior, data=None, *, num_samples: int = 500, seed: int = 0,
             log_likelihood: bool = True) -> az.InferenceData:
    """An InferenceData with groups posterior, sample_stats (MCMC), and with `data`: log_likelihood,
    posterior_predictive and observed_data.

    Variables: one per site, named as the site (e.g. ``mlp/~/linear_0/w``), dims (chain, draw, *shape)
    named ``{site}_dim_{i}``; ``y`` in log_likelihood (chain, draw, N) and posterior_predictive.
    SVI: one chain of `num_samples` guide draws; MCMC: every stored draw.
    """
    by_chain = posterior.draws_by_chain(num_samples, seed)
    chains, draws = next(iter(by_chain.values())).shape[:2]
    groups = {"posterior": {k: np.asarray(v) for k, v in by_chain.items()}}
    if posterior.kind == "mcmc" and posterior.sample_stats:
        stats = dict(posterior.sample_stats)
        renamed = {"num_steps": "n_steps", "accept_prob": "acceptance_rate"}
        groups["sample_stats"] = {renamed.get(k, k): np.asarray(v) for k, v in stats.items()}
    if data is not None:
        x, y, _, _ = as_arrays(data)
        # the very draws of the posterior group, flattened chain-major
        flat = {k: np.asarray(v).reshape((chains * draws,) + np.shape(v)[2:]) for k, v in by_chain.items()}
        if log_likelihood and y is not None:
            ll = posterior.log_likelihood(x, y, draws=flat)
            groups["log_likelihood"] = {"y": ll.reshape(chains, draws, -1)}
        probs = posterior.predict(x, draws=flat)
        labels = _sample_labels(probs, posterior, seed)
        groups["posterior_predictive"] = {"y": labels.reshape((chains, draws) + labels.shape[1:])}
        if y is not None:
            groups["observed_data"] = {"y": np.asarray(y)}
    return az.from_dict(**groups)


def _sample_labels(probs, posterior, seed):
    """One predictive label per draw and example: (S, N) from probabilities (S, N, C); regression means pass through."""
    if not posterior.model.likelihood.classification:
        return probs
    rng = np.random.default_rng(seed)
    u = rng.random(probs.shape[:-1] + (1,))
    return (np.cumsum(probs, -1) < u).sum(-1).clip(0, probs.shape[-1] - 1).astype(np.int32)
