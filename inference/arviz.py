"""`to_arviz`: SVI and MCMC posteriors as ArviZ data (InferenceData under ArviZ 0.x, DataTree under 1.x;
`inference.arviz_compat`) with identical variables and dims.

Variables are named by `inference.site_names.arviz_name` (netCDF-safe: ``mlp/~/linear_0/w`` is
``mlp.~.linear_0.w``), so ``data.to_netcdf`` / ``az.from_netcdf`` round-trip them; each keeps its Haiku site
path in ``attrs["site"]``. The log_likelihood group is built only from the data the posterior was fitted to
(`inference.training_data`), so ``az.loo`` and ``az.compare`` estimate what they say; held-out data are
scored by `inference.predictive_density.log_predictive_density`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from inference.arviz_compat import ArvizData, from_groups
from inference.data_args import as_arrays
from inference.posterior import Posterior
from inference.site_names import arviz_names, resolve_sites
from inference.training_data import check_training_data
from base.errors import ArgumentTypeError, InputError

def to_arviz(posterior: Posterior, data=None, *, num_samples: int = 500, seed: int = 0,
             log_likelihood: bool | str = True, var_names=None) -> ArvizData:
    """The installed ArviZ's own object (``az.InferenceData`` under ArviZ 0.x, ``xarray.DataTree`` under 1.x; so
    ``az.loo`` / ``az.compare`` / ``az.summary`` of either ArviZ take it) with groups posterior, sample_stats (MCMC), and with `data`: log_likelihood,
    posterior_predictive and observed_data.

    Variables: one per site, named ``inference.site_names.arviz_name(site)`` ("/" -> ".", e.g. ``mlp.~.linear_0.w``)
    with the site path in ``attrs["site"]``, dims (chain, draw, *shape) named ``{name}_dim_{i}``; ``y`` in
    log_likelihood (chain, draw, N) and posterior_predictive (chain, draw, N). SVI: one chain of
    `num_samples` guide draws; MCMC: every stored draw. `var_names`: the sites to keep (site names or their
    ArviZ names; default all).

    log_likelihood: which data the log_likelihood group may come from.
      True (default): `data` must be the data the posterior was fitted to (``az.loo`` / ``az.compare``
        estimate the predictive density of new data from them); other data raise InputError naming
        `data`. A posterior that does not record its training data (built by hand, or loaded from one's checkpoint)
        cannot be checked: a UserWarning says so (`inference.training_data.remember_training_data` records them).
      "held_out": the log-likelihood of `data` whatever they are, unchecked, the group's ``attrs["data"]``
        saying so (``az.loo`` of it is not a LOO estimate; `inference.predictive_density.log_predictive_density` is the
        held-out score).
      False: no log_likelihood group; posterior_predictive and observed_data of any `data`.
    The group's ``attrs["data"]`` is "training" (checked), "unchecked" or "held_out".
    """
    if not isinstance(posterior, Posterior):
        raise ArgumentTypeError("posterior", f"<{type(posterior).__name__}>",
                                "an inference.Posterior (from inference.fit, nuts or load)")
    if not (log_likelihood is True or log_likelihood is False or log_likelihood == "held_out"):
        raise InputError("log_likelihood", log_likelihood, "True (the training data, checked), 'held_out' or False")
    sites = posterior.site_names if var_names is None else resolve_sites(var_names, posterior.site_names)
    names = arviz_names(sites)
    by_chain = posterior.draws_by_chain(num_samples, seed)
    chains, draws = next(iter(by_chain.values())).shape[:2]
    groups: dict[str, Any] = {"posterior": {names[k]: np.asarray(by_chain[k]) for k in sites}}
    dims = {names[k]: [f"{names[k]}_dim_{i}" for i in range(np.ndim(by_chain[k]) - 2)] for k in sites}
    if posterior.sample_stats:  # MCMC diagnostics (an SVI posterior has none)
        stats = dict(posterior.sample_stats)
        renamed = {"num_steps": "n_steps", "accept_prob": "acceptance_rate"}
        groups["sample_stats"] = {renamed.get(k, k): np.asarray(v) for k, v in stats.items()}
    ll_source = None
    if data is not None:
        x, y, _, _ = as_arrays(data)
        # the very draws of the posterior group (every site, also those var_names leaves out), chain-major
        flat = {k: np.asarray(v).reshape((chains * draws,) + np.shape(v)[2:]) for k, v in by_chain.items()}
        if log_likelihood is not False and y is not None:
            ll_source = _log_likelihood_source(posterior, data, log_likelihood)
            # float64: ArviZ's PSIS computes in the array's dtype, and in float32 its Pareto fit divides by zero
            # for confidently classified points (ratios equal to float32 precision) and elpd_loo comes out NaN
            ll = posterior.log_likelihood(x, y, draws=flat).astype(np.float64)
            groups["log_likelihood"] = {"y": ll.reshape(chains, draws, -1)}
        probs = posterior.predict(x, draws=flat)
        labels = _sample_labels(probs, posterior, seed)
        groups["posterior_predictive"] = {"y": labels.reshape((chains, draws) + labels.shape[1:])}
        if y is not None:
            groups["observed_data"] = {"y": np.asarray(y)}
    idata = from_groups(groups, dims)
    for site, name in names.items():
        idata.posterior[name].attrs["site"] = site
    if ll_source is not None:
        idata.log_likelihood.attrs["data"] = ll_source
    return idata


def _log_likelihood_source(posterior, data, log_likelihood) -> str:
    """"training", "unchecked" or "held_out": what the log_likelihood group is built from (see `to_arviz`);
    raises InputError naming `data` when log_likelihood=True and `data` are not the training data."""
    if log_likelihood == "held_out":
        return "held_out"
    if check_training_data(posterior, data):
        return "training"
    warnings.warn("to_arviz: this posterior does not record the data it was fitted to, so the log_likelihood "
                  "group cannot be checked to be of its training data (az.loo / az.compare need them); "
                  "inference.training_data.remember_training_data(posterior, train) records them", UserWarning,
                  stacklevel=4)  # the line that called inference.to_arviz
    return "unchecked"


def _sample_labels(probs, posterior, seed):
    """One predictive label per draw and example: (S, N) from probabilities (S, N, C); regression means pass through."""
    if not posterior.model.likelihood.classification:
        return probs
    rng = np.random.default_rng(seed)
    u = rng.random(probs.shape[:-1] + (1,))
    return (np.cumsum(probs, -1) < u).sum(-1).clip(0, probs.shape[-1] - 1).astype(np.int32)
