"""`score`: one row of metrics for a posterior on a data set, the same call for SVI and MCMC; `temperature_scale`:
the temperature of its predictive fitted on validation data (`evals.temperature`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evals import metrics
from evals.temperature import Temperature, calibrated_log_probs, fit_temperature, label_nll, pooled_log_probs
from inference.data_args import as_arrays, check_model_data
from base.validation import check_memory, check_positive_ints, check_seed, check_targets
from base.errors import InputError


def score(posterior, data, *, num_samples: int = 100, seed: int = 0, name: str | None = None,
          verbose: bool = True, validation=None) -> pd.DataFrame:
    """Accuracy, ensemble NLL, ECE (15 bins), Brier, mean predictive entropy and mutual information
    (classification) or the RMSE of the predictive mean (regression).

    The NLL is exact: from the per-draw log-likelihoods log p(y_i | x_i, w_s) (S, N) the model computes by a
    log-softmax (``posterior.log_likelihood(x, y, num_samples, seed)``, the same draws as ``predict`` with the
    same seed, so every column describes one set of draws), folded by `evals.metrics.nll_from_log_likelihood`;
    never from float32 probabilities, which underflow to 0 below about 1e-38.

    Args:
      posterior: an `inference.Posterior` (or anything with ``predict(x, num_samples, seed) -> (S, N, C)``;
        without a ``log_likelihood`` method the NLL comes from those probabilities, `evals.metrics.nll`).
      data: an `base.data.Dataset` (as `zoo.get` entries hold), or (x, y): x (N, *feature_shape) of the
        shape the posterior's model was built for, y (N,) labels in [0, C) or regression targets.
      num_samples: posterior draws in total (a positive integer).
      validation: None, or held-out labelled data (a `Dataset` or (x, y), never the test set) of a classifier:
        one temperature T is fitted on it (`evals.temperature.temperature_scale`: the log of the averaged
        predictive divided by T, Ashukha et al. 2020's calibrated log-likelihood) and the row gains
        "calibrated_nll" and "calibrated_ece" (of softmax(log p(y | x) / T) on `data`) and "temperature" (T).
    Raises:
      InputError (a ValueError) naming the argument: missing labels, inputs of another feature shape,
      labels out of range or of another length, non-positive num_samples.
    Returns:
      a one-row DataFrame indexed by `name` (default: the posterior's guide or "nuts"); printed if verbose.
    """
    x, y, _, data_name = as_arrays(data)
    if y is None:
        raise InputError("data", "<(x, None)>", "labels y to score against")
    check_positive_ints(num_samples=num_samples)
    check_seed(seed)
    check_score_memory(posterior, x, num_samples)
    name = name or posterior_label(posterior)
    fitted = None if validation is None else temperature_scale(posterior, validation, num_samples=num_samples,
                                                               seed=seed)
    if getattr(getattr(posterior, "model", None), "likelihood", None) is not None and not posterior.model.likelihood.classification:
        member = posterior.predict(x, num_samples=num_samples, seed=seed)  # checks x against the posterior's model
        check_finite_predictions(np.asarray(member))
        mean = member.mean(0)
        y = check_targets(y, arg="data.y", n=mean.shape[0])
        if mean.size != y.size:
            raise InputError("data.y", f"<targets of shape {y.shape}>", f"targets of the predictions' shape {mean.shape}")
        row = {"rmse": float(np.sqrt(np.mean((np.reshape(mean, np.shape(y)) - y) ** 2)))}
    else:
        member, log_lik = member_predictions(posterior, x, y, num_samples=num_samples, seed=seed)
        row = classification_row(member, y, log_lik)
        if fitted is not None:
            row.update(calibrated_row(member, y, fitted.temperature))
    row["draws"] = int(member.shape[0])
    table = pd.DataFrame([row], index=pd.Index([name], name="posterior"))
    if verbose:
        print(f"{data_name}:\n{table.to_string(float_format=lambda v: f'{v:.4f}')}")
    return table


def validation_log_probs(posterior, validation, *, num_samples: int, seed: int):
    """((N, C) pooled log-probabilities, (N,) labels) of `posterior` on `validation` (a `Dataset` or (x, y) with
    labels), checked against the posterior's model: InputError naming ``validation`` otherwise (no labels,
    another feature shape, labels out of range, a regression model)."""
    x, y, num_classes, _ = as_arrays(validation, arg="validation")
    if y is None:
        raise InputError("validation", "<(x, None)>", "validation data with labels y")
    model = getattr(posterior, "model", None)
    if model is not None and hasattr(model, "likelihood"):
        if not model.likelihood.classification:
            raise InputError("validation", "<validation data for a regression model>",
                             "None: temperature scaling calibrates class probabilities")
        x, y = check_model_data(model, x, y, num_classes, arg="validation")
    probs, _ = member_predictions(posterior, x, y, num_samples=num_samples, seed=seed)
    with np.errstate(divide="ignore"):
        return pooled_log_probs(np.log(probs)), np.asarray(y, np.int64)


def temperature_scale(posterior, validation, *, num_samples: int = 100, seed: int = 0) -> Temperature:
    """Fit T on `validation` data (`evals.temperature`: T divides the log of the averaged predictive): a `Temperature` (T, the NLL at T = 1 and at T).

    posterior: an `inference.Posterior` of a classifier (or anything `evals.score` takes); validation: a
    `Dataset` or (x (N, ...), y (N,)) held out from training (never the test set); num_samples, seed: the
    posterior draws (as `evals.score`). Raises InputError naming ``validation`` for data that do not fit.
    """
    log_probs, y = validation_log_probs(posterior, validation, num_samples=num_samples, seed=seed)
    t = fit_temperature(log_probs, y)
    before, after = (label_nll(calibrated_log_probs(log_probs, temp), y) for temp in (1.0, t))
    return Temperature(t, before, after)


def calibrated_row(member_probs, y, temperature: float) -> dict:
    """{calibrated_nll, calibrated_ece, temperature} of member probabilities (S, N, C) and labels (N,) after
    temperature scaling with T = `temperature` (`evals.temperature`: the log of their average divided by T)."""
    member_probs, y = metrics.checked(member_probs, y, member=True, arg="member_probs")
    with np.errstate(divide="ignore"):
        log_probs = calibrated_log_probs(pooled_log_probs(np.log(member_probs)), temperature)
    return {"calibrated_nll": label_nll(log_probs, y),
            "calibrated_ece": metrics.ece(np.exp(log_probs), y), "temperature": float(temperature)}


SCORE_BYTES_PER_VALUE = 28
"""Bytes `score` holds per draw, example and class: the float32 log-probabilities and three float64 arrays of
their size (log-probabilities, probabilities, the checked probabilities)."""


def check_score_memory(posterior, x, num_samples) -> None:
    """Refuse (InputError naming num_samples) a `score` whose (S, N, C) arrays would not fit in memory."""
    model = getattr(posterior, "model", None)
    shape = np.shape(x)
    if model is None or not hasattr(model, "output_width") or len(shape) < 2:
        return  # not a zoo posterior, or inputs the posterior's own checks refuse
    width = model.output_width(tuple(shape[1:]))
    check_memory("num_samples", num_samples, SCORE_BYTES_PER_VALUE * float(num_samples) * shape[0] * width,
                 f"scoring {num_samples} draws of {shape[0]} examples x {width} classes")


def member_predictions(predictor, x, y=None, *, num_samples: int, seed: int):
    """(member probabilities (S, N, C) float64, per-draw log-likelihoods log p(y_i | x_i, w_s) (S, N) or None)
    of one set of draws of `predictor` on x (N, ...) with labels y (N,) in [0, C) (or None: no log-likelihoods).

    One pass where the predictor has ``log_predict(x, num_samples, seed) -> (S, N, C)`` log-probabilities (an
    `inference.Posterior` of a classifier, `evals.ood.Ensemble`): the probabilities are their ``exp`` and the
    log-likelihoods the entries at the labels, exact however small (never the log of an underflowed float32
    probability). Otherwise ``predict`` for the probabilities and, where the predictor has one,
    ``log_likelihood(x, y, num_samples, seed)`` with the same draws; a plain callable x -> (S, N, C) or (N, C)
    gives probabilities only. Raises InputError naming ``y`` for labels out of range or of another length.
    """
    log_predict = getattr(predictor, "log_predict", None)
    if callable(log_predict) and getattr(getattr(getattr(predictor, "model", None), "likelihood", None),
                                         "classification", True):
        log_probs = np.asarray(log_predict(x, num_samples=num_samples, seed=seed), np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            probs = np.exp(log_probs)
        check_finite_predictions(probs)
        if y is None:
            return probs, None
        probs, labels = metrics.checked(probs, y, member=True, arg="member_probs")
        return probs, np.take_along_axis(log_probs, labels[None, :, None], -1)[..., 0]
    if callable(getattr(predictor, "predict", None)):
        probs = predictor.predict(x, num_samples=num_samples, seed=seed)
    elif callable(predictor):
        probs = predictor(x)
    else:
        raise InputError("predictor", f"<{type(predictor).__name__}>",
                         "a callable x -> probabilities or an object with .predict / .log_predict")
    probs = np.asarray(probs, np.float64)
    probs = probs[None] if probs.ndim == 2 else probs
    check_finite_predictions(probs)
    if y is None or not callable(getattr(predictor, "log_likelihood", None)):
        return probs, None
    return probs, np.asarray(predictor.log_likelihood(x, y, num_samples=num_samples, seed=seed))


def check_finite_predictions(probs, arg: str = "posterior") -> None:
    """Refuse predictions (S, N, ...) with NaN/inf entries as a fault of the posterior (InputError naming `arg`,
    the inputs and draws affected), not of probabilities the caller never passed: a posterior whose parameters
    are extreme (e.g. a NaN-stopped fit's ``err.posterior``) predicts NaN."""
    bad = ~np.isfinite(probs)
    if bad.any():
        rows = bad.reshape(bad.shape[0], bad.shape[1], -1).any(axis=(0, 2)) if bad.ndim >= 2 else bad
        draws = bad.reshape(bad.shape[0], -1).any(axis=1)
        raise InputError(arg, f"<a posterior predicting NaN/inf for {int(rows.sum())} of {rows.size} inputs "
                         f"({int(draws.sum())} of {draws.size} draws)>", "a posterior with finite predictions",
                         "its parameters are extreme or NaN (a NaN-stopped fit's err.posterior?)")


def classification_row(member_probs, y, log_likelihood=None) -> dict:
    """{accuracy, nll, ece, brier, entropy, mutual_info} from member probabilities (S, N, C) and labels (N,)
    (checked once here: `evals.metrics.checked`).

    log_likelihood: optional per-draw log p(y_i | x_i, w_s) (S, N) of the same draws (or an (N,) log pointwise
    predictive density): the NLL is then `evals.metrics.nll_from_log_likelihood` of it, exact; without it,
    `evals.metrics.nll` of the probabilities. Raises InputError when its N (or S) differs from member_probs'.
    """
    member_probs, y = metrics.checked(member_probs, y, member=True, arg="member_probs")
    probs = metrics.average(member_probs)
    if log_likelihood is None:
        nll = metrics.nll(member_probs, y)
    else:
        shape = np.shape(log_likelihood)
        if shape not in (member_probs.shape[:2], member_probs.shape[1:2]):
            raise InputError("log_likelihood", f"<array of shape {shape}>", f"shape {member_probs.shape[:2]} (S, N) "
                             f"or ({member_probs.shape[1]},), the draws and examples of member_probs")
        nll = metrics.nll_from_log_likelihood(log_likelihood, arg="log_likelihood")
    return {
        "accuracy": metrics.accuracy(probs, y),
        "nll": nll,
        "ece": metrics.ece(probs, y),
        "brier": metrics.brier(probs, y),
        "entropy": float(metrics.predictive_entropy(probs).mean()),
        "mutual_info": float(metrics.mutual_information(member_probs).mean()),
    }


def posterior_label(posterior) -> str:
    """A short label: the guide's registry name for SVI; for draws, the name in their config ("ensemble" for
    `inference.ensemble`), else "nuts"."""
    if getattr(posterior, "kind", None) == "mcmc":
        return (getattr(posterior, "config", None) or {}).get("name", "nuts")
    guide = getattr(posterior, "guide", None)
    return (getattr(guide, "config", None) or {}).get("name", type(guide).__name__ if guide else "posterior")
