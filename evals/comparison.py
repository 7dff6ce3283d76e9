"""Compare two posteriors of one model (e.g. mean-field SVI vs NUTS) in weight and function space.

``compare(a, b)`` returns a tidy pandas table with one row per (scope, metric, posterior):

* scope: a site name, ``"all"`` (every compared site, flattened and concatenated) or ``"function"``.
* posterior: ``"a"`` or ``"b"`` for a property of one posterior, ``"a-b"`` for a difference.

Weight-space metrics (per site and for "all"):
  mean_abs_diff_mean, max_abs_diff_mean, mean_abs_diff_sd ("a-b"): differences of marginal means/sds;
  mean_sd ("a", "b"): the average marginal standard deviation;
  ess_bulk_min, rhat_max ("a", "b"): ArviZ's bulk ESS (smallest entry) and rank-normalised split
    R-hat (largest entry); an SVI posterior is one chain of independent draws, and R-hat of a single
    chain is NaN (ArviZ needs two chains);
  kl_diag_full ("a", "b"): KL(q_diag || q_full) of each posterior's Gaussian fit (appendix B jitter)
    and its closest diagonal (eq. 5-6), as in Fig. 2;
  kl_full_marginal ("a", "b"): KL(q_full || N(mu, diag Sigma)), the blog's direction;
  w2_extra_error ("a", "b"): the blog's extra error of the mean-field assumption (sample-based W2,
    marginal diagonal; see ``evals.gaussians.mean_field_extra_error``);
  w2_gaussian ("a-b"): the 2-Wasserstein distance between the two full-covariance Gaussian fits.
  The Gaussian metrics are left out for scopes with more than ``max_dim`` entries.
Function-space metrics (when ``data`` is given; the mean predictive p_a(y | x) of each posterior):
  agreement ("a-b"): fraction of inputs where argmax p_a = argmax p_b;
  total_variation_mean / _max ("a-b"): 1/2 sum_c |p_a(c | x) - p_b(c | x)| averaged / maximised over x;
  accuracy, nll ("a", "b") when labels are given (``evals.metrics``; the NLL exact, from the per-draw
  log-likelihoods of the same draws, ``evals.metrics.nll_from_log_likelihood``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evals import metrics
from inference.diagnostics import ess_rhat
from inference.site_names import site_name
from evals.gaussians import (
    JITTER,
    fit_gaussian,
    kl_closest_diagonal,
    kl_marginal_diagonal,
    mean_field_extra_error,
    wasserstein2_gaussians,
)
from evals.scoring import member_predictions
from base.errors import ArgumentTypeError, InputError

__all__ = ["compare", "chain_draws", "flat_draws", "to_inference_data", "plot_weights", "plot_predictions"]

COLUMNS = ["scope", "metric", "posterior", "value"]


def _is_posterior(obj) -> bool:
    return hasattr(obj, "draws_by_chain") and hasattr(obj, "predict")


def _is_inference_data(obj) -> bool:
    return hasattr(obj, "posterior") and hasattr(obj, "groups")


def chain_draws(posterior, num_samples: int = 1000, seed: int = 0) -> dict:
    """Draws of every latent site, by chain: {site: (chains, draws, *site_shape)} NumPy arrays.

    Args:
      posterior: an `inference.Posterior` (SVI: ``num_samples`` draws of the guide as one chain;
        MCMC: the stored chains) or an ``az.InferenceData`` (its ``posterior`` group).
      num_samples, seed: SVI draws only.
    """
    if _is_posterior(posterior):
        return {k: np.asarray(v) for k, v in posterior.draws_by_chain(num_samples, seed).items()}
    if _is_inference_data(posterior):
        # keyed by site: `inference.to_arviz` keeps each variable's site path in attrs["site"]
        return {v.attrs.get("site", str(k)): np.asarray(v.values) for k, v in posterior.posterior.data_vars.items()}
    raise ArgumentTypeError.worded("posterior",
                                   f"posterior: expected an inference.Posterior or az.InferenceData, got {type(posterior).__name__}")


def to_inference_data(draws: dict):
    """The installed ArviZ's data (``az.InferenceData`` under 0.x, ``xarray.DataTree`` under 1.x) with a posterior
    group from {name: (chains, draws, ...)} arrays: each variable named ``inference.arviz_name(name)`` ("/" ->
    ".", which a DataTree and netCDF need) with `name` in ``attrs["site"]`` (`chain_draws` keys by it)."""
    from inference.arviz_compat import from_groups
    from inference.site_names import arviz_name

    data = from_groups({"posterior": {arviz_name(k): np.asarray(v) for k, v in draws.items()}})
    for name in draws:
        data.posterior[arviz_name(name)].attrs["site"] = name
    return data


def flat_draws(draws: dict, sites=None) -> np.ndarray:
    """(chains, draws, D): the draws {site: (chains, draws, *site_shape)} of the chosen sites (default: all, in
    the dict's order) flattened and concatenated in order; D is their total number of scalar entries."""
    sites = list(draws) if sites is None else sites
    return np.concatenate([draws[s].reshape(draws[s].shape[:2] + (-1,)) for s in sites], axis=-1)


def _gaussian_rows(scope: str, flat_a: np.ndarray, flat_b: np.ndarray, jitter: float, seed: int) -> list:
    rows = []
    fits = {}
    for label, flat in (("a", flat_a), ("b", flat_b)):
        draws = flat.reshape(-1, flat.shape[-1])
        mean, cov = fits[label] = fit_gaussian(draws, jitter)
        rows.append((scope, "kl_diag_full", label, kl_closest_diagonal(cov)))
        rows.append((scope, "kl_full_marginal", label, kl_marginal_diagonal(cov)))
        rows.append((scope, "w2_extra_error", label, mean_field_extra_error(draws, jitter, seed)["extra_error"]))
    rows.append((scope, "w2_gaussian", "a-b", wasserstein2_gaussians(*fits["a"], *fits["b"])))
    return rows


def _weight_rows(scope: str, flat_a: np.ndarray, flat_b: np.ndarray, jitter: float, max_dim: int, seed: int) -> list:
    samples_a = flat_a.reshape(-1, flat_a.shape[-1])
    samples_b = flat_b.reshape(-1, flat_b.shape[-1])
    mean_diff = np.abs(samples_a.mean(0) - samples_b.mean(0))
    sd_a, sd_b = samples_a.std(0, ddof=1), samples_b.std(0, ddof=1)
    rows = [
        (scope, "mean_abs_diff_mean", "a-b", float(mean_diff.mean())),
        (scope, "max_abs_diff_mean", "a-b", float(mean_diff.max())),
        (scope, "mean_abs_diff_sd", "a-b", float(np.abs(sd_a - sd_b).mean())),
        (scope, "mean_sd", "a", float(sd_a.mean())),
        (scope, "mean_sd", "b", float(sd_b.mean())),
    ]
    for label, flat in (("a", flat_a), ("b", flat_b)):
        rows += [(scope, key, label, value) for key, value in ess_rhat(flat).items()]
    if flat_a.shape[-1] <= max_dim:
        rows += _gaussian_rows(scope, flat_a, flat_b, jitter, seed)
    return rows


def _predictive(posterior, other, data, model, num_samples: int, seed: int, y=None):
    """((S, N, C) predictive probabilities, (S, N) per-draw log-likelihoods of labels `y` or None) of
    `posterior` on data x, one set of draws; InferenceData is wrapped into an MCMC Posterior of `model`
    (or of the other argument's model, when that is a Posterior)."""
    x = np.asarray(data[0] if isinstance(data, tuple) else data.x, np.float32)
    if not _is_posterior(posterior):
        model = model if model is not None else getattr(other, "model", None)
        if model is None:
            raise InputError.worded("model",
                                    "model: function-space comparison of InferenceData needs the BNN (model=...)")
        from inference.posterior import MCMCPosterior

        sites = model.site_shapes(x.shape[1:])
        samples = {k: v for k, v in chain_draws(posterior).items() if k in sites}
        posterior = MCMCPosterior(model=model, samples=samples, feature_shape=x.shape[1:])
    if not getattr(posterior.model.likelihood, "classification", False):  # refused before any prediction
        raise InputError.worded("data",
                                "data: function-space rows need class probabilities (S, N, C), got a regression "
                                f"posterior ({type(posterior.model.likelihood).__name__} likelihood)")
    return member_predictions(posterior, x, y, num_samples=num_samples, seed=seed)


def _function_rows(probs_a: np.ndarray, probs_b: np.ndarray, y, log_lik_a=None, log_lik_b=None) -> list:
    mean_a, mean_b = probs_a.mean(0), probs_b.mean(0)
    tv = 0.5 * np.abs(mean_a - mean_b).sum(-1)
    rows = [
        ("function", "agreement", "a-b", float(np.mean(mean_a.argmax(-1) == mean_b.argmax(-1)))),
        ("function", "total_variation_mean", "a-b", float(tv.mean())),
        ("function", "total_variation_max", "a-b", float(tv.max())),
    ]
    if y is not None:
        for label, probs, log_lik in (("a", probs_a, log_lik_a), ("b", probs_b, log_lik_b)):
            rows.append(("function", "accuracy", label, metrics.accuracy(probs.mean(0), y)))
            nll = metrics.nll(probs, y) if log_lik is None else metrics.nll_from_log_likelihood(log_lik)
            rows.append(("function", "nll", label, nll))
    return rows


def compare(a, b, data=None, sites=None, *, num_samples: int = 1000, seed: int = 0, jitter: float = JITTER,
            max_dim: int = 2000, model=None) -> pd.DataFrame:
    """Compare two posteriors of the same model (see the module docstring for every metric).

    Args:
      a, b: `inference.Posterior` (SVI or MCMC) or ``az.InferenceData`` with a posterior group.
      data: optional `base.data.Dataset` or (x, y) / (x, None) for the function-space rows.
      sites: site names (or their ArviZ names, `inference.arviz_name`) to compare (default: those both
        posteriors have, in a's order).
      num_samples: draws taken from an SVI posterior and for the predictive; seed: their seed.
      jitter: diagonal jitter of the Gaussian fits (appendix B).
      max_dim: largest number of flattened entries that gets Gaussian fits (a D x D covariance).
      model: the BNN, needed only for function space when both a and b are InferenceData.
    Returns:
      a tidy DataFrame with columns scope, metric, posterior, value.
    """
    draws_a = chain_draws(a, num_samples, seed)
    draws_b = chain_draws(b, num_samples, seed + 1)
    common = [s for s in draws_a if s in draws_b]
    sites = common if sites is None else [s if s in common else site_name(s) for s in sites]
    missing = [s for s in sites if s not in draws_a or s not in draws_b]
    if missing or not sites:
        raise InputError.worded("sites",
                                f"sites: {missing or 'none'} not in both posteriors; common sites are {common}")
    for s in sites:
        if draws_a[s].shape[2:] != draws_b[s].shape[2:]:
            raise InputError.worded("sites",
                                    f"sites: {s!r} has shape {draws_a[s].shape[2:]} in a but {draws_b[s].shape[2:]} in b")
    rows = []
    for s in sites:
        rows += _weight_rows(s, flat_draws(draws_a, [s]), flat_draws(draws_b, [s]), jitter, max_dim, seed)
    if len(sites) > 1:
        rows += _weight_rows("all", flat_draws(draws_a, sites), flat_draws(draws_b, sites), jitter, max_dim, seed)
    if data is not None:
        y = data[1] if isinstance(data, tuple) else data.y
        probs_a, log_lik_a = _predictive(a, b, data, model, num_samples, seed, y)
        probs_b, log_lik_b = _predictive(b, a, data, model, num_samples, seed + 1, y)
        rows += _function_rows(probs_a, probs_b, y, log_lik_a, log_lik_b)
    return pd.DataFrame(rows, columns=COLUMNS)


def _pick_weights(draws_a: dict, draws_b: dict, num: int) -> list:
    """The `num` (site, flat index) entries whose means differ most between a and b."""
    scored = []
    for site in (s for s in draws_a if s in draws_b):
        diff = np.abs(flat_draws(draws_a, [site]).mean((0, 1)) - flat_draws(draws_b, [site]).mean((0, 1)))
        scored += [(float(d), site, int(i)) for i, d in enumerate(diff)]
    return [(site, i) for _, site, i in sorted(scored, reverse=True)[:num]]


def _weight_variables(draws: dict, weights: list) -> dict:
    return {f"{site}[{i}]": draws[site].reshape(draws[site].shape[:2] + (-1,))[..., i] for site, i in weights}


def plot_weights(a, b, weights=None, *, kind: str = "forest", num: int = 6, labels=("a", "b"),
                 num_samples: int = 1000, seed: int = 0, ax=None):
    """ArviZ plots of chosen weights of two posteriors, under ArviZ 0.x and 1.x (`evals.arviz_plots`).

    Args:
      a, b: Posterior or InferenceData.
      weights: [(site, flat index), ...]; default: the ``num`` entries whose means differ most.
      kind: "forest" (ArviZ's forest plot of both, side by side per weight) or "pair" (ArviZ's pair plot,
        scatter of a and b overlaid; at most 4 weights).
      labels: legend names of a and b.
      ax: matplotlib axes to draw on (ArviZ 0.x only; 1.x lays out its own figure).
    Returns:
      a NumPy array of the matplotlib Axes drawn on.
    """
    from evals import arviz_plots

    if kind not in ("forest", "pair"):
        raise InputError.worded("kind", f"kind: expected 'forest' or 'pair', got {kind!r}")
    draws_a = chain_draws(a, num_samples, seed)
    draws_b = chain_draws(b, num_samples, seed + 1)
    weights = list(weights) if weights is not None else _pick_weights(draws_a, draws_b, num)
    idata = [to_inference_data(_weight_variables(d, weights)) for d in (draws_a, draws_b)]
    plot = arviz_plots.forest if kind == "forest" else arviz_plots.pair
    return plot(idata, list(labels), ax=ax, feature="evals.comparison.plot_weights")


def plot_predictions(a, b, data, *, num_points: int = 8, labels=("a", "b"), model=None,
                     num_samples: int = 200, seed: int = 0, ax=None):
    """Forest plot of the predicted probability of the class a predicts, at the first inputs (ArviZ's forest plot
    under 0.x and 1.x, `evals.arviz_plots.forest`).

    Args:
      a, b: Posterior or InferenceData (then ``model`` or a Posterior on the other side is needed).
      data: `Dataset` or (x, y); num_points: how many inputs (from the start of data) to show.
      ax: matplotlib axes to draw on (ArviZ 0.x only).
    Returns:
      a NumPy array of the matplotlib Axes drawn on.
    """
    from evals import arviz_plots

    x = data[0] if isinstance(data, tuple) else data.x
    subset = (np.asarray(x)[:num_points], None)
    probs_a = _predictive(a, b, subset, model, num_samples, seed)[0]
    probs_b = _predictive(b, a, subset, model, num_samples, seed + 1)[0]
    predicted = probs_a.mean(0).argmax(-1)
    rows = np.arange(len(predicted))
    variables = [
        {f"p(y={c}|x{n})": p[None, :, n, c] for n, c in zip(rows, predicted)} for p in (probs_a, probs_b)
    ]
    idata = [to_inference_data(v) for v in variables]
    return arviz_plots.forest(idata, list(labels), ax=ax, feature="evals.comparison.plot_predictions")
