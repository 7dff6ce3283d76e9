"""The trainings of the variance-networks reproduction (Neklyudov et al., 2018): one LeNet-5 per method.

`fit_method` trains one row of Tables 1-2 (point estimate, binary dropout, variational dropout, variance
layers in the layer-, neuron-, weight-wise or additive parameterisation, zero-mean) in ONE `inference.fit`
(Adam never restarts); with ``curve=True`` its `on_chunk` hook records, every ``settings.curve_every``
epochs, the deterministic and ensemble test accuracy, the layer's log alpha and kappa (eq. 16): the
phase-transition curves of Fig. 1, 3 and 4. As in the paper's LeNet-5 experiments only the variance
(or dropout) layers are stochastic: every other weight is a point estimate. The analyses are in
`zoo.experiments.analysis.curvature`, `zoo.experiments.analysis.sparse_ensemble` and `zoo.experiments.analysis.fgsm`; `zoo.experiments.reproduce.variance_networks` is the job.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, replace

import numpy as np
import optax

import inference
from zoo.experiments.analysis.curvature import count_above, layer_kappa
from evals.metrics import accuracy
from inference.dropout import binary_dropout
from inference.fit import ChunkHook
from base.errors import InputError
from zoo.registry import get
from zoo.experiments.reproduce.tuning import choose_on_validation, grid
from inference.run_info import FitInfo

DENSE1 = "lenet5/dense1/w"
ALL_WEIGHTS = "lenet5/*/w"
VARIANCE_PARAMS = ("_log_alpha", "_sigma", "_scale")
"""Name endings of the guide parameters that set a variance (log alpha, zero-mean sigma, additive sigma)."""


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


KAPPA_N_PAPER = 60_000
"""The training-set size at which the paper found log10 kappa_0 = 1.5 (MNIST's 60,000 images)."""


def log10_kappa_threshold(log10_kappa_0: float, n_train: int, n_paper: int = KAPPA_N_PAPER) -> float:
    """The paper's threshold moved to a training set of ``n_train`` examples: kappa (eq. 16) is sigma² times the
    curvature of the loss summed over the training set, so it grows in proportion to N, and the threshold is
    scaled likewise: log10 kappa_0 + log10(n_train / n_paper) (1.5 at MNIST's 60,000; -0.15 at the 1,348
    training digits)."""
    return float(log10_kappa_0 + math.log10(n_train / n_paper))


@functools.lru_cache(maxsize=2)
def _user_arrays(path: str):
    from zoo.experiments.reproduce.image_npz import load_image_npz

    return load_image_npz(path)


def entry(settings, method: Method, data_dir=None, activation: str | None = None):
    """The LeNet-5 entry of ``method``: log-uniform prior on its variance sites (eq. 4), Normal elsewhere, batch
    norm after every hidden layer when ``settings.batch_norm`` (section 6: "variance layers ... followed with a
    Batch Normalization layer and a ReLU"), ``activation`` (default ``settings.activation``); on
    ``settings.data_path``'s images (`zoo.experiments.reproduce.image_npz`) when it is set, else on ``settings.data``."""
    log_uniform = [method.sites] if method.guide in ("variance_layers", "zero_mean", "additive") else []
    data = settings.data
    data_kwargs = {"data_dir": data_dir} if data_dir is not None and settings.data not in ("digits", "digits_28") \
        else None
    if settings.data_path is not None:
        data, data_kwargs = _user_arrays(str(settings.data_path)), {"num_classes": 10}
    return get("lenet5", data=data, data_kwargs=data_kwargs, channels=tuple(settings.channels),
               hidden=settings.hidden, activation=activation or settings.activation, batch_norm=settings.batch_norm,
               log_uniform_sites=log_uniform)


def split_validation(train, fraction: float):
    """(training part, validation part) of a `Dataset`: its last ``fraction`` of rows are the validation part
    (the shipped and `image_npz` training sets are already in a seeded random order; for an `image_npz` set of
    5,000 images, rows perm[3200:4000] of the fixed permutation). Every fit of the job sees only the training
    part; settings are chosen on the validation part, never on the test split."""
    n = len(train.y)
    n_val = int(round(fraction * n))
    if not 0 < n_val < n:
        raise InputError("validation_fraction", fraction, f"a fraction leaving both parts of the {n} training "
                         "examples non-empty")
    return train.subset(slice(0, n - n_val)), train.subset(slice(n - n_val, n))


def guide_of(settings, method: Method, model):
    """The guide of ``method`` on ``model``: its family on ``method.sites``, point estimates elsewhere."""
    if method.guide == "point_estimate":
        return inference.point_estimate.point_estimate(model)
    if method.guide == "binary_dropout":
        return binary_dropout(model, dropout_sites=[method.sites], rate=settings.dropout_rate)
    family = {"zero_mean": ("zero_mean", {}),
              "additive": ("mean_field", {"init_scale": settings.additive_init_scale}),
              "variance_layers": ("variance_layers", {"granularity": method.granularity,
                                                      "init_log_alpha": settings.init_log_alpha})}[method.guide]
    return inference.by_site.by_site(model, {method.sites: family}, default="point_estimate")


def variance_param_labels(params: dict) -> dict:
    """{name: "variance" | "other"} for a flat dict of guide parameters (``optax.multi_transform`` labels):
    "variance" for the names ending in `VARIANCE_PARAMS`."""
    return {k: "variance" if k.endswith(VARIANCE_PARAMS) else "other" for k in params}


def optimizer_of(settings, learning_rate: float | None = None):
    """Adam at ``learning_rate`` (default ``settings.learning_rate``), and at ``settings.variance_learning_rate`` on
    the variance parameters (log alpha, sigma). Adam moves a parameter by about its rate per step, so in a few
    hundred steps a layer-wise log alpha at 1e-2 cannot travel the ~10 units of the paper's transition (from -4
    to ~6)."""
    rate = settings.learning_rate if learning_rate is None else learning_rate
    return optax.multi_transform({"variance": optax.adam(settings.variance_learning_rate),
                                  "other": optax.adam(rate)}, variance_param_labels)


def steps_per_epoch(settings, train) -> int:
    """floor(N / batch_size): `inference.fit` drops the last partial batch."""
    return max(1, len(train.y) // settings.batch_size)


SCORE_ROWS = 512
"""Images per call of the predictor in `scores`: the ensemble's activations (50 draws x 512 images x LeNet-5's
24 x 24 x 20 first feature map: 1.2 GB) stay bounded whatever the test set's size."""


def scores(settings, post, test, seed: int, validation=None) -> dict:
    """Table 1's accuracies on ``test``: stochastic (one draw), deterministic (means, eq. 3), ensemble (eq. 2), as
    ``{procedure}_acc``; with a ``validation`` set also ``val_{procedure}_acc``. Both sets are joined and scored
    `SCORE_ROWS` images at a time (the last block padded: one compiled predictor), each block with the same
    ``settings.ensemble_draws`` weight draws (the same ``seed``)."""
    parts = [("", test)] + ([("val_", validation)] if validation is not None else [])
    x = np.concatenate([d.x for _, d in parts])
    rows = min(SCORE_ROWS, len(x))
    padded = np.concatenate([x, np.zeros((-len(x) % rows,) + x.shape[1:], x.dtype)])
    blocks = [inference.zero_mean.predictions_by_procedure(post, padded[i:i + rows], num_samples=settings.ensemble_draws,
                                                 seed=seed) for i in range(0, len(padded), rows)]
    preds = {k: np.concatenate([b[k] for b in blocks])[:len(x)] for k in blocks[0]}
    out, start = {}, 0
    for prefix, d in parts:
        out.update({f"{prefix}{k}_acc": accuracy(v[start:start + len(d.y)], d.y) for k, v in preds.items()})
        start += len(d.y)
    return out


def mean_log_alpha(post, method: Method) -> float:
    """The mean log alpha of dense1 (a variance layer of every variance_layers method; nan for the others)."""
    if method.guide != "variance_layers":
        return float("nan")
    return float(np.mean(np.asarray(post.params[post.guide.param_name(DENSE1, "log_alpha")])))


def per_example(settings, method: Method):
    """``fit``'s ``estimator`` for ``method``: "standard" for the point estimate; ``settings.estimator``
    otherwise, except that a weight draw per example ("per_example") is not used for the all-4-layer rows
    (per-example convolution kernels: 816 s for one quick fit on the loaded 2-core machine, vs ~60-150 s for a
    dense1 row). "local" (the local reparameterisation trick, `inference.local_reparam`) reparameterises the
    dense layers and keeps one draw per minibatch for the convolution kernels. A weight draw per example with
    ``settings.batch_norm`` is refused (InputError): its vmap over the examples has no minibatch statistics."""
    if settings.estimator == "per_example" and settings.batch_norm:
        raise InputError("estimator", "per_example", "'local' or 'standard' when batch_norm is on (a weight draw per "
                         "example runs each example alone: batch norm has no minibatch statistics there)")
    if method.guide == "point_estimate" or (settings.estimator == "per_example" and method.sites == ALL_WEIGHTS):
        return "standard"
    return settings.estimator


def fit_method(settings, method: Method, seed: int, data_dir=None, log=None, curve: bool = False,
               learning_rate: float | None = None, activation: str | None = None):
    """Train ``method`` for ``settings.epochs`` epochs in one fit (`optimizer_of` at ``learning_rate``, default
    ``settings.learning_rate``) on the training part of the training set (`split_validation`: the last
    ``settings.validation_fraction`` is held out); with ``settings.estimator`` its stochastic dense layers
    get independent noise per example (`per_example`: the paper's local reparameterisation trick, appendix A).
    ``activation`` replaces ``settings.activation`` (the per-epoch kappa run's softplus).

    Returns (entry, posterior, row, curve_rows, kappas): entry's ``train`` is the training part; row = method,
    seed, learning_rate, stochastic/deterministic/ensemble test accuracy (``*_acc``) and validation accuracy
    (``val_*_acc``), final training ELBO (minus the mean loss of the last epoch), log_alpha, fit_s, traces
    (compiles of the update: 0 when shared with an earlier fit of the same structure). With ``curve`` (a dense1
    variance layer), every ``settings.curve_every`` epochs: curve_rows gets epoch, deterministic_acc,
    ensemble_acc, stochastic_acc (test), log_alpha, kappa_above (weights with log10 kappa above
    `log10_kappa_threshold`: kappa_0 scaled to the training part's size), elbo; kappas {epoch: (in, out)}.
    Otherwise curve_rows = [] and kappas = {}.
    """
    full = entry(settings, method, data_dir, activation)
    train, validation = split_validation(full.train, settings.validation_fraction)
    e = replace(full, train=train)
    rate = settings.learning_rate if learning_rate is None else float(learning_rate)
    guide = guide_of(settings, method, e.model)
    per_epoch = steps_per_epoch(settings, e.train)
    rows, kappas = [], {}
    threshold = log10_kappa_threshold(settings.log10_kappa_0, len(e.train.y))

    def record(step, post):
        epoch = step // per_epoch
        if epoch % settings.curve_every and epoch != settings.epochs:
            return
        k = layer_kappa(post, method.sites, e.train.x, e.train.y)
        kappas[epoch] = k
        acc = {k: v for k, v in scores(settings, post, e.test, seed, validation).items() if not k.startswith("val_")}
        rows.append({"epoch": epoch, **acc, "log_alpha": mean_log_alpha(post, method),
                     "kappa_above": count_above(k, threshold),
                     "elbo": -float(np.mean(post.losses[-per_epoch:]))})
        if log is not None and epoch % max(1, settings.epochs // 6) == 0:
            r = rows[-1]
            log(f"    epoch {epoch}: deterministic {r['deterministic_acc']:.3f}, ensemble {r['ensemble_acc']:.3f}, "
                f"log alpha {r['log_alpha']:.2f}, {r['kappa_above']} kappas above kappa_0")

    t0 = time.perf_counter()
    post = inference.fit(e.model, guide, e.train, steps=settings.epochs * per_epoch, batch_size=settings.batch_size,
                         optimizer=optimizer_of(settings, rate), seed=seed, progress=False, chunk_size=per_epoch,
                         callbacks=[ChunkHook(record)] if curve else [],
                         estimator=per_example(settings, method))
    assert isinstance(post.info, FitInfo) and post.losses is not None  # fit records both
    row = {"method": method.label, "seed": seed, "learning_rate": rate, **scores(settings, post, e.test, seed,
                                                                                  validation),
           "elbo": -float(np.mean(post.losses[-per_epoch:])), "log_alpha": mean_log_alpha(post, method),
           "fit_s": time.perf_counter() - t0, "traces": post.info.traces}
    if log is not None:
        log(f"  {method.label}, seed {seed}, rate {rate:g}: validation ensemble {row['val_ensemble_acc']:.3f}; test "
            + ", ".join(f"{k} {v:.3f}" for k, v in row.items() if k.endswith("_acc") and not k.startswith("val_"))
            + f", ELBO {row['elbo']:.1f}, {row['fit_s']:.1f} s, {row['traces']} compile(s)")
    return e, post, row, rows, kappas


def tune_method(settings, method: Method, seed: int, data_dir=None, log=None):
    """``method``'s learning rate chosen on the validation part (`zoo.experiments.reproduce.tuning.choose_on_validation` over
    ``settings.learning_rates``, scored by the validation ensemble accuracy, eq. 2; ties go to the earlier
    rate). Every candidate is a `fit_method` on the training part with ``seed``; the test scores of the
    candidates are computed but never looked at in the choice.

    Returns (choice, fit, rows): the `Choice` (setting {"learning_rate": r}, its validation accuracy, the table
    of every candidate), the chosen candidate's `fit_method` result (no refit: the same training part) and every
    candidate's row (`fit_method`'s, with ``chosen`` True / False)."""
    fits = {}

    def score(setting):
        fits[setting["learning_rate"]] = fit_method(settings, method, seed, data_dir, log,
                                                    learning_rate=setting["learning_rate"])
        return fits[setting["learning_rate"]][2]["val_ensemble_acc"]

    choice = choose_on_validation(grid(learning_rate=tuple(settings.learning_rates)), score, higher_is_better=True)
    best = choice.setting["learning_rate"]
    return choice, fits[best], [{**fit[2], "chosen": rate == best} for rate, fit in fits.items()]
