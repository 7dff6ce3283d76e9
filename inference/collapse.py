"""Has the posterior ignored the data? `check_collapse` compares, on a fixed subsample of the training data, the
posterior predictive with two predictors that ignore the data: the prior predictive and the best input-free
predictor.

The rule (`check_collapse`; thresholds are its keyword arguments):

1. Take ``subsample`` (256) training examples, fixed (``numpy.random.default_rng(0)``, without replacement).
2. Score three predictors on them by their log predictive density per example,
   lpd = mean_n log (1/S) sum_s p(y_n | x_n, w_s), with S = ``num_samples`` (32) draws:
   the posterior predictive (w_s from the fitted posterior), the prior predictive (w_s from the model's prior)
   and the input-free predictor (classification: the subsample's class frequencies; regression: a Normal with
   the subsample's mean and standard deviation of y per output), which needs no draws.
3. ``gain``: the posterior's lpd minus the better of the other two. The posterior *collapsed* (it explains the
   training data no better than a predictor that never saw them) when gain < ``tol`` (0.05 nats per
   example). A healthy classifier gains nats per example (digits: about 2); a mean-field posterior that
   returned to its prior (wide networks, Coker et al. 2022, "Wide mean-field Bayesian neural networks ignore
   the data") gains about 0.
4. Classification also reports the accuracy of each predictor (the posterior predictive's mean probabilities'
   argmax; the input-free one predicts the most frequent class); it is reported, not judged.
5. Held-out rows (issue 45), when given (`inference.fit`'s ``validation`` argument): steps 1-3 again on up to
   ``subsample`` of them (fixed the same way; the input-free predictor their own class frequencies or Normal),
   and the posterior has also collapsed when its held-out gain is below ``tol``. Training rows alone cannot
   tell a posterior that memorised them: a network fitted to digits with SHUFFLED labels predicts its training
   rows well (gain above 1 nat) and held-out rows at chance (gain below 0: tests/inference/test_bad_inputs_svi.py
   measures both), which only the held-out rows reveal. Without held-out rows that case is not flagged.

Only `models.BNN` models (whose priors can be drawn, `BNN.site_priors`) are judged; others get None.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import numpyro.distributions as dist
from scipy.special import logsumexp

from models.bridge import BNN
from base.prng import flat_key, normal_draws
from base.value_key import Static

SUBSAMPLE = 256
NUM_SAMPLES = 32
TOL = 0.05


class PosteriorCollapseWarning(UserWarning):
    """`inference.fit` ended with a posterior that ignores the data (see `inference.collapse.check_collapse`).

    ``.collapse``: the numbers of the judgement (the dict stored in ``posterior.info.collapse``).
    """

    def __init__(self, message: str, collapse: dict):
        super().__init__(message)
        self.collapse = collapse


def prior_draws(model: BNN, feature_shape: tuple, num_samples: int, seed: int = 0) -> dict:
    """{site: (num_samples, *site_shape)} draws of every latent site from the model's prior
    (`models.BNN.site_priors`), by one jitted sampler shared by every structurally equal model.

    Site i is drawn with key i of ``split(PRNGKey(seed), sites)``, as ``prior.sample(key_i, (num_samples,))``
    draws it; when every prior is a Normal (`normal_prior`) the draws are ``loc + eps * scale`` with all the
    eps from one threefry hash (`base.prng.normal_draws`): the same numbers bit for bit from a program that
    compiles faster (one hash instead of one per site: a two-moons MLP's sampler in about 2/3 of the time, the
    tests' tiny ResNet-18's, 38 sites, in about 1/3), a compile every `inference.fit` of a new structure pays."""
    return jax.device_get(_prior_draws(Static(model), tuple(feature_shape), int(num_samples),
                                       jax.random.PRNGKey(seed)))


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _prior_draws(model: Static, feature_shape: tuple, num_samples: int, key) -> dict:
    """`prior_draws`' sampler, compiled once per model value (`base.value_key`), feature shape and draw count."""
    priors = model.obj.site_priors(feature_shape)
    names = list(priors)
    keys = jax.random.split(flat_key(key), len(names))
    bases = [normal_prior(d) for d in priors.values()]
    draws = (normal_draws(list(keys), [(num_samples,) + d.shape() for d in priors.values()],
                          scales=[base.scale for base in bases])
             if all(base is not None for base in bases) else None)
    if draws is None:
        return {name: priors[name].sample(k, (num_samples,)) for name, k in zip(names, keys)}
    return {name: base.loc + draw for name, base, draw in zip(names, bases, draws)}


def normal_prior(d):
    """The `numpyro.distributions.Normal` whose ``loc + eps * scale`` is a draw of `d` (eps of ``d.shape()``):
    `d` itself, or its base through `Independent` and an `ExpandedDistribution` of a scalar Normal (whose
    draws numpyro makes as the base's at the expanded shape) with a constant scalar scale (`normal_draws` folds
    it as XLA does); None for any other distribution."""
    while isinstance(d, dist.Independent):
        d = d.base_dist
    if isinstance(d, dist.ExpandedDistribution):
        d = d.base_dist if tuple(d.base_dist.batch_shape) == () and not d.base_dist.event_shape else None
    if type(d) is not dist.Normal or not isinstance(d.scale, (int, float, np.number)):
        return None
    return d


def check_collapse(posterior, x, y, *, subsample: int = SUBSAMPLE, num_samples: int = NUM_SAMPLES,
                   tol: float = TOL, seed: int = 0, held_out=None) -> dict | None:
    """The collapse judgement of `posterior` on its training data x (N, *feature_shape), y (N, ...), and on
    held-out rows ``held_out = (x_val (M, *feature_shape), y_val (M, ...))`` when given, by the rule of the
    module docstring.

    Returns:
      None when the model is not a `models.BNN`; else a JSON-able dict: collapsed (bool: on the training rows or,
      when given, on the held-out rows), reason (str), examples (the training subsample's size), draws (S),
      lpd_posterior, lpd_prior, lpd_input_free (mean log predictive density per training example, nats), gain
      (lpd_posterior minus the better of the other two), tol, for classification accuracy_posterior,
      accuracy_prior, accuracy_input_free (else None), and held_out: None, or the same numbers (examples, the
      lpd_* and accuracy_* entries, gain, collapsed) on the held-out subsample. A prior that cannot be sampled
      (an improper one, e.g. log-uniform) has no prior predictive: lpd_prior and accuracy_prior are None and the
      input-free predictor is the baseline.
    """
    model = posterior.model
    if not isinstance(model, BNN):
        return None
    try:
        prior = prior_draws(model, posterior.feature_shape, num_samples, seed)
    except (ValueError, NotImplementedError):  # an improper prior (log-uniform: ValueError; ImproperUniform, e.g.
        # an unregularised BatchEnsemble's factors: NotImplementedError) has no draws: no prior predictive
        prior = None
    train = _judged(posterior, x, y, prior, subsample, num_samples, tol, seed)
    held = (None if held_out is None
            else _judged(posterior, held_out[0], held_out[1], prior, subsample, num_samples, tol, seed))
    rows, judged = ("held-out", held) if held is not None and held["collapsed"] and not train["collapsed"] \
        else ("training", train)
    collapsed = bool(judged["collapsed"])
    which = ("prior predictive" if judged["lpd_prior"] is not None and judged["lpd_prior"] >= judged["lpd_input_free"]
             else "input-free predictor")
    baseline = judged["lpd_posterior"] - judged["gain"]
    reason = (f"the posterior predictive explains {judged['examples']} {rows} examples no better than the {which}: "
              f"log-likelihood {judged['lpd_posterior']:.3f} against {baseline:.3f} nats per example"
              if collapsed else
              f"the posterior predictive beats the {which} by {train['gain']:.3f} nats per training example"
              + ("" if held is None else f" and by {held['gain']:.3f} per held-out example"))
    return {"collapsed": collapsed, "reason": reason, "examples": train["examples"], "draws": int(num_samples),
            "lpd_posterior": train["lpd_posterior"], "lpd_prior": train["lpd_prior"],
            "lpd_input_free": train["lpd_input_free"], "gain": train["gain"], "tol": float(tol),
            "accuracy_posterior": train["accuracy_posterior"], "accuracy_prior": train["accuracy_prior"],
            "accuracy_input_free": train["accuracy_input_free"], "held_out": held}


def _judged(posterior, x, y, prior, subsample: int, num_samples: int, tol: float, seed: int) -> dict:
    """Steps 1-3 of the rule on rows x (N, ...), y (N, ...): {examples, lpd_posterior, lpd_prior, lpd_input_free,
    gain, collapsed, accuracy_posterior, accuracy_prior, accuracy_input_free}; prior: the prior draws or None."""
    x, y = np.asarray(x), np.asarray(y)
    n = x.shape[0]
    pick = np.sort(np.random.default_rng(0).choice(n, size=min(n, int(subsample)), replace=False))
    xs, ys = x[pick], y[pick]
    likelihood = posterior.model.likelihood
    classification = bool(getattr(likelihood, "classification", False)) and hasattr(likelihood, "log_predictive")
    post_acc: float | None  # the accuracies: None for a regression likelihood
    prior_acc: float | None
    free_acc: float | None
    if classification:
        post_lpd, post_acc = _class_scores(posterior.log_predict(xs, num_samples, seed=seed), ys)
        prior_lpd, prior_acc = (_class_scores(posterior.log_predict(xs, draws=prior), ys) if prior is not None
                                else (None, None))
        counts = np.bincount(ys.astype(int).ravel(), minlength=int(ys.max()) + 1)
        free_lpd = float(np.mean(np.log(counts[ys.astype(int)] / ys.size)))
        free_acc = float(counts.max() / ys.size)
    else:
        post_lpd = float(np.mean(posterior.log_likelihood(xs, ys, num_samples, seed=seed, reduce="log_mean_exp")))
        prior_lpd = (float(np.mean(posterior.log_likelihood(xs, ys, draws=prior, reduce="log_mean_exp")))
                     if prior is not None else None)
        free_lpd = _input_free_normal_lpd(ys)
        post_acc = prior_acc = free_acc = None
    baseline = free_lpd if prior_lpd is None else max(prior_lpd, free_lpd)
    gain = post_lpd - baseline
    return {"collapsed": bool(gain < tol), "examples": int(len(pick)), "lpd_posterior": post_lpd,
            "lpd_prior": prior_lpd, "lpd_input_free": free_lpd, "gain": float(gain), "accuracy_posterior": post_acc,
            "accuracy_prior": prior_acc, "accuracy_input_free": free_acc}


def _class_scores(log_probs: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(mean log predictive density, accuracy) of the predictive mean of per-draw log probabilities (S, N, C)."""
    log_mean = logsumexp(np.asarray(log_probs, np.float64), axis=0) - np.log(log_probs.shape[0])
    labels = y.astype(int).reshape(-1)
    lpd = float(np.mean(log_mean[np.arange(labels.size), labels]))
    return lpd, float(np.mean(np.argmax(log_mean, axis=-1) == labels))


def _input_free_normal_lpd(y: np.ndarray) -> float:
    """Mean log density per example of y (N, ...) under a Normal with y's own mean and sd per output column."""
    flat = np.asarray(y, np.float64).reshape(y.shape[0], -1)
    sd = np.maximum(flat.std(axis=0), 1e-12)
    z = (flat - flat.mean(axis=0)) / sd
    return float(np.mean(np.sum(-0.5 * z ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi), axis=1)))


def describe(collapse: dict | None) -> str:
    """A fragment for a fit summary: "" when not judged or not collapsed, else "; POSTERIOR COLLAPSED (...)"."""
    if not collapse or not collapse.get("collapsed"):
        return ""
    text = f"; POSTERIOR COLLAPSED ({collapse['reason']}"
    held = collapse.get("held_out")
    if held and held["collapsed"] and not collapse["gain"] < collapse["tol"]:  # judged on the held-out rows
        return text + (f"; held-out accuracy {held['accuracy_posterior']:.3f}, training accuracy "
                       f"{collapse['accuracy_posterior']:.3f}" if held.get("accuracy_posterior") is not None else "") + ")"
    if collapse.get("accuracy_prior") is not None:
        text += (f"; training accuracy {collapse['accuracy_posterior']:.3f}, prior predictive's "
                 f"{collapse['accuracy_prior']:.3f}")
    return text + ")"
