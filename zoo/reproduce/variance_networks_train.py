"""The trainings of the variance-networks reproduction (Neklyudov et al., 2018): one LeNet-5 per method.

`fit_method` trains one row of Tables 1-2 (point estimate, binary dropout, variational dropout, variance
layers in the layer-, neuron-, weight-wise or additive parameterisation, zero-mean); `fit_by_epoch` trains
the phase-transition run one epoch at a time (warm starts), recording per epoch the deterministic and
ensemble accuracy, the layer's log alpha and kappa (eq. 16). The analyses are in `evals.curvature`,
`evals.sparse_ensemble` and `evals.fgsm`; `zoo.reproduce.variance_networks` is the job.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import optax

import inference
from evals.curvature import count_above, layer_kappa
from evals.metrics import accuracy
from inference.dropout import binary_dropout
from zoo.registry import get

DENSE1 = "lenet5/dense1/w"
ALL_WEIGHTS = "lenet5/*/w"


@dataclass(frozen=True)
class Method:
    """One trained network: ``label``; ``guide`` ("point_estimate", "binary_dropout", "variance_layers",
    "zero_mean", "additive"); ``sites``: the pattern of its variance (or dropout) layers; ``granularity``
    of alpha (variance_layers)."""

    label: str
    guide: str
    sites: str | None = None
    granularity: str = "layer"


TABLE1 = (
    Method("point estimate", "point_estimate"),
    Method("binary dropout (dense layers)", "binary_dropout", "lenet5/dense*/w"),
    Method("variational dropout, dense1", "variance_layers", DENSE1, "weight"),
    Method("variational dropout, all 4 layers", "variance_layers", ALL_WEIGHTS, "weight"),
    Method("variance, dense1 (layer-wise alpha)", "variance_layers", DENSE1, "layer"),
    Method("variance, all 4 layers (layer-wise alpha)", "variance_layers", ALL_WEIGHTS, "layer"),
    Method("variance, dense1 (zero-mean, eq. 12)", "zero_mean", DENSE1),
)
"""Table 1's rows; the dense1 variance rows also appear in Table 2."""
TABLE2 = {"layer": TABLE1[4], "neuron": Method("variance, dense1 (neuron-wise alpha)", "variance_layers", DENSE1,
                                               "neuron"),
          "weight": TABLE1[2], "additive": Method("variance, dense1 (additive, eq. 20)", "additive", DENSE1)}
"""Table 2's parameterisations (eq. 17-20) of the dense1 variance layer."""


def entry(settings, method: Method, data_dir=None):
    """The LeNet-5 entry of ``method``: log-uniform prior on its variance sites (eq. 4), Normal elsewhere."""
    log_uniform = [method.sites] if method.guide in ("variance_layers", "zero_mean", "additive") else []
    data_kwargs = {"data_dir": data_dir} if data_dir is not None and settings.data not in ("digits", "digits_28") \
        else None
    return get("lenet5", data=settings.data, data_kwargs=data_kwargs, channels=tuple(settings.channels),
               hidden=settings.hidden, activation=settings.activation, log_uniform_sites=log_uniform)


def guide_of(settings, method: Method, model):
    """The guide of ``method`` on ``model`` (other sites: mean field at sigma 1e-3, or point estimates)."""
    if method.guide == "point_estimate":
        return inference.point_estimate(model)
    if method.guide == "binary_dropout":
        return binary_dropout(model, dropout_sites=[method.sites], rate=settings.dropout_rate)
    if method.guide == "zero_mean":
        return inference.zero_mean(model, variance_sites=[method.sites])
    if method.guide == "additive":
        return inference.mean_field(model, init_scale=1e-3)
    return inference.variance_layers(model, variance_sites=[method.sites], granularity=method.granularity,
                                     init_log_alpha=settings.init_log_alpha)


def steps_per_epoch(settings, train) -> int:
    """ceil(N / batch_size)."""
    return -(-len(train.y) // settings.batch_size)


def scores(settings, post, test, seed: int) -> dict:
    """Table 1's accuracies: stochastic (one draw), deterministic (means, eq. 3), ensemble (eq. 2)."""
    preds = inference.predictions_by_procedure(post, test.x, num_samples=settings.ensemble_draws, seed=seed)
    return {f"{k}_acc": accuracy(v, test.y) for k, v in preds.items()}


def fit_method(settings, method: Method, seed: int, data_dir=None, log=None):
    """Train ``method`` for ``settings.epochs`` epochs (Adam, constant rate). Returns (entry, posterior, row):
    row = method, seed, stochastic/deterministic/ensemble accuracy, final training ELBO (minus the mean loss
    of the last epoch)."""
    e = entry(settings, method, data_dir)
    guide = guide_of(settings, method, e.model)
    per_epoch = steps_per_epoch(settings, e.train)
    post = inference.fit(e.model, guide, e.train, steps=settings.epochs * per_epoch, batch_size=settings.batch_size,
                         optimizer=optax.adam(settings.learning_rate), seed=seed, progress=False,
                         chunk_size=per_epoch * 5)
    row = {"method": method.label, "seed": seed, **scores(settings, post, e.test, seed),
           "elbo": -float(np.mean(post.losses[-per_epoch:]))}
    if log is not None:
        log(f"  {method.label}, seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()
                                                           if k.endswith("_acc")) + f", ELBO {row['elbo']:.1f}")
    return e, post, row


def fit_by_epoch(settings, method: Method, seed: int, data_dir=None, log=None):
    """The phase-transition run (Fig. 1, 3, 4): ``method`` (a dense1 variance layer) trained
    ``settings.transition_epochs`` epochs one epoch per `inference.fit` call, each warm-started at the
    previous posterior's exact parameters (``init_params``; Adam's moments restart every epoch).

    Returns (entry, final posterior, per-epoch rows, kappas): rows have epoch, deterministic_acc,
    ensemble_acc, log_alpha (the layer's mean log alpha), kappa_above (weights with log10 kappa > kappa_0);
    kappas: {epoch: kappa array (in, out)}. Epoch 0 is before training.
    """
    e = entry(settings, method, data_dir)
    guide = guide_of(settings, method, e.model)
    per_epoch = steps_per_epoch(settings, e.train)
    optimizer = optax.adam(settings.learning_rate)
    post = inference.fit(e.model, guide, e.train, steps=1, optimizer=optimizer, seed=seed, progress=False,
                         batch_size=settings.batch_size, chunk_size=per_epoch)  # epoch 0: (one step from) the init
    rows, kappas, losses = [], {}, []
    for epoch in range(settings.transition_epochs + 1):
        if epoch:
            post = inference.fit(e.model, guide, e.train, steps=per_epoch, optimizer=optimizer,
                                 seed=seed * 10_000 + epoch, batch_size=settings.batch_size, chunk_size=per_epoch,
                                 init_params=post, progress=False)
            losses.append(float(np.mean(post.losses)))
        k = layer_kappa(post, method.sites, e.train.x, e.train.y)
        kappas[epoch] = k
        acc = scores(settings, post, e.test, seed)
        log_alpha = float(np.mean(np.asarray(post.params[guide.param_name(method.sites, "log_alpha")])))
        rows.append({"epoch": epoch, "deterministic_acc": acc["deterministic_acc"],
                     "ensemble_acc": acc["ensemble_acc"], "stochastic_acc": acc["stochastic_acc"],
                     "log_alpha": log_alpha, "kappa_above": count_above(k, settings.log10_kappa_0),
                     "elbo": -losses[-1] if losses else float("nan")})
        if log is not None and (epoch % max(1, settings.transition_epochs // 10) == 0
                                or epoch == settings.transition_epochs):
            r = rows[-1]
            log(f"  epoch {epoch}: deterministic {r['deterministic_acc']:.3f}, ensemble {r['ensemble_acc']:.3f}, "
                f"log alpha {log_alpha:.2f}, {r['kappa_above']} kappas above kappa_0")
    return e, post, rows, kappas
