"""Which data a Posterior was fitted to: a fingerprint it keeps (``Posterior.training_data``) and the check
`to_arviz` makes before it builds a log_likelihood group.

``az.loo`` and ``az.compare`` estimate the expected log predictive density of NEW data from the pointwise
log-likelihood of the data the posterior was conditioned on (PSIS-LOO, Vehtari, Gelman & Gabry 2017): given
the log-likelihood of held-out data they estimate nothing (the issue's SVI example: elpd_loo -79.9 with every
Pareto k > 0.7, for a posterior whose actual held-out log predictive density was -3.2). So the fingerprint of
the training data, as `fit` and `nuts` saw them (validated and cast, `inference.data_args.labelled_arrays`), is
recorded and compared. Held-out data are scored by `inference.predictive_density.log_predictive_density`.
"""

from __future__ import annotations

from inference.data_args import labelled_arrays
from inference.model_identity import data_fingerprint
from base.errors import InputError


def training_fingerprint(model, data) -> dict:
    """`inference.model_identity.data_fingerprint` of `data` (a `Dataset` or (x, y)) as `fit` / `nuts`
    see them: x (N, *feature_shape) float32, y (N,) checked against `model` and cast."""
    x, y = labelled_arrays(model, data, "the training-data fingerprint")
    return data_fingerprint(x, y)


def remember_training_data(posterior, data):
    """Record `data` (a `Dataset` or (x, y)) as the data `posterior` was fitted to (sets
    ``posterior.training_data``) and return `posterior`: for a Posterior built by hand, or by a fit that does
    not record it. `nuts` records it itself; `inference.save` / `load` keep it."""
    posterior.training_data = training_fingerprint(posterior.model, data)
    return posterior


def is_training_data(posterior, data) -> bool | None:
    """Whether `data` are the data `posterior` was fitted to: True / False, or None when the posterior does
    not record them (built by hand, or saved from one)."""
    known = getattr(posterior, "training_data", None)
    if known is None:
        return None
    return training_fingerprint(posterior.model, data)["sha256"] == known["sha256"]


def check_training_data(posterior, data, arg: str = "data") -> bool:
    """Raise InputError naming `arg` when `data` are not the data `posterior` was fitted to. Returns True when
    checked, False when the posterior does not record its training data (nothing could be checked)."""
    same = is_training_data(posterior, data)
    if same is False:
        known = posterior.training_data
        x, y = labelled_arrays(posterior.model, data, "the training-data check")
        raise InputError(
            arg, f"<data x {tuple(x.shape)}, y {tuple(y.shape)} that are not the posterior's training data "
                 f"(x {tuple(known['x']['shape'])}, SHA-256 {known['sha256'][:12]}...)>",
            "the data the posterior was fitted to, for the log_likelihood group (az.loo / az.compare)",
            "pass the training data; score held-out data with inference.predictive_density.log_predictive_density(posterior, "
            "data); or pass log_likelihood='held_out' to store this data's log-likelihood anyway (az.loo of it "
            "is then not a LOO estimate), or log_likelihood=False to leave the group out")
    return same is True
