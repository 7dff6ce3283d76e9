"""Rank-1 BNNs (Dusenberry et al., ICML 2020): data, methods and training of `zoo reproduce rank1`.

The pieces every table and ablation of `zoo.experiments.reproduce.rank1` shares:

* `digits_split`: the shipped digits (or digits_28) with a validation part carved out of the training
  set (every choice is made on it; the test set is scored once, at the end), raw [0, 1] pixels kept for
  the corruption suite and the training standardisation as ``preprocess``.
* `Rank1Settings`: one training recipe (steps, Adam and its schedule, KL annealing, K, initialisation,
  evaluation draws); `QUICK_RECIPE` is what the investigation of issue 17 chose on the validation set.
* `METHODS` and `fit_method`: deterministic, BatchEnsemble (the library's: MAP under the Normal(1, 0.1) factor
  prior; and Wen et al.'s unregularised one: no factor prior, `unregularised_factors`), rank-1 Normal / Cauchy,
  mean field and a deep ensemble of point estimates, each ``zoo.get`` + ``inference.make_guide`` +
  ``inference.fit``.
* `corruption_summary`: clean + corrupted scores of several predictors in the layout of the paper's
  Table 2 (``evals.ood.summary_table``, mCE relative to the deterministic network).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import optax

from base.data import Dataset
from base.errors import InputError

__all__ = ["DigitsSplit", "digits_split", "task_split", "Rank1Settings", "QUICK_RECIPE", "ZOO_RUN_RECIPE", "METHODS",
           "MC_DROPOUT_SITES", "choose_mc_dropout_rate", "choose_on_validation_nll", "validation_nll",
           "fit_method", "entry_for", "unregularised_factors", "corrupted_sets", "corruption_summary", "score_rows", "summary_of_rows",
           "score_table", "optimizer_of"]


@dataclass(frozen=True)
class DigitsSplit:
    """Training data (standardised), validation and test sets (raw pixels in [0, 1]) and ``preprocess``
    (raw -> standardised, the training set's global mean and sd), image side ``size``."""

    train: Dataset
    val_raw: Dataset
    test_raw: Dataset
    mu: float
    sd: float
    size: int

    def preprocess(self, x):
        """Raw pixels (N, D) -> the standardisation the networks were trained on, (N, D)."""
        return (np.asarray(x, np.float32) - self.mu) / self.sd

    def standardised(self, raw: Dataset) -> tuple:
        """(x, y) of a raw set after `preprocess`."""
        return self.preprocess(raw.x), raw.y

    @property
    def image_shape(self) -> tuple:
        """(size, size, 1)."""
        return (self.size, self.size, 1)


def digits_split(val_fraction: float = 0.2, seed: int = 0, size: int = 8) -> DigitsSplit:
    """The shipped digits split (test = the library's fixed test set, 449 images) with ``val_fraction`` of
    its training part held out as a validation set by a ``seed``-ed permutation.

    Returns a `DigitsSplit`: train (80 % of the 1,348 training images, x (N, size^2), standardised by the remaining training pixels'
    global mean and sd, `zoo.data.embedded.digits_standardiser`), val_raw and test_raw in [0, 1].
    """
    from zoo.data import digits as digits_data
    from zoo.data.embedded import digits_standardiser

    if not 0 < val_fraction < 1:
        raise InputError("val_fraction", val_fraction, "a fraction in (0, 1)")
    raw_train, raw_test = digits_data(standardise=False, size=size)
    order = np.random.default_rng(seed).permutation(len(raw_train))
    n_val = int(round(val_fraction * len(raw_train)))
    val_idx, tr_idx = order[:n_val], order[n_val:]
    mu, sd = digits_standardiser(raw_train.x[tr_idx])
    name = raw_train.name
    train = Dataset((raw_train.x[tr_idx] - mu) / sd, raw_train.y[tr_idx], 10, name, raw_train.image_shape)
    val = Dataset(raw_train.x[val_idx], raw_train.y[val_idx], 10, f"{name}_val", raw_train.image_shape)
    return DigitsSplit(train, val, raw_test, float(mu), float(sd), size)


_SPLITS: dict = {}


def task_split(size: int = 8) -> DigitsSplit:
    """``digits_split(seed=0, size=size)``, made once per process: the split every part of `zoo reproduce rank1`
    uses (deterministic, so a worker process of `zoo.experiments.parallel` rebuilds the same one), one object so that
    `corrupted_sets` corrupts its test set once per process."""
    if size not in _SPLITS:
        _SPLITS[size] = digits_split(seed=0, size=size)
    return _SPLITS[size]


@dataclass(frozen=True)
class Rank1Settings:
    """One training recipe for every method of a table (the paper tunes the baselines' recipe too).

    steps, batch_size: Adam updates on minibatches of this many examples (a rank-1 network tiles each
    minibatch K times, so it sees K x batch_size rows, as the paper's constant total batch does not:
    section 3.3 keeps K x B fixed; here B is fixed, the cheaper choice for K <= 4).
    lr, schedule: Adam's rate, "constant" or "cosine" (decayed to lr / 100 over `steps`).
    kl_fraction: the KL is annealed linearly from 0 to 1 over this fraction of the steps (paper: 2/3).
    num_components: K; dropout_rate: sigma init sqrt(p / (1 - p)); sign_init: loc init (> 0: random
    signs with P(+1) = sign_init; <= 0: N(1, |sign_init|), the paper's -0.5 on CIFAR-10, Table 5);
    factor_scale: the factor prior's sd (Normal / Cauchy(1, factor_scale); paper 0.1);
    prior_scale: sd of W's Normal prior (L2); objective: "average" or "mixture" (section 3.4);
    eval_samples: draws per component at evaluation (Table 8: 1, 4, 25); hidden: the MLP widths;
    cauchy_dropout_rate: the Cauchy rows' sigma init (the paper's appendix Table 5: 1e-6 for Cauchy, 1e-3 for
    Normal); mc_dropout_rate: MC dropout's rate (`choose_mc_dropout_rate` picks it on the validation split);
    chunk_size: steps per compiled chunk (``inference.fit``), also the spacing of checkpoints (Figs. 4, 6):
    one value for every fit, so that fits of one structure compile once.
    """

    steps: int = 3000
    batch_size: int = 128
    lr: float = 3e-3
    schedule: str = "constant"
    kl_fraction: float = 2 / 3
    num_components: int = 4
    dropout_rate: float = 1e-3
    sign_init: float = 0.5
    factor_scale: float = 0.1
    prior_scale: float = 1.0
    objective: str = "average"
    eval_samples: int = 10
    hidden: tuple = (64, 64)
    chunk_size: int = 150
    cauchy_dropout_rate: float = 1e-6
    mc_dropout_rate: float = 0.1

    def replace(self, **changes) -> Rank1Settings:
        """A copy with `changes`."""
        return replace(self, **changes)


ZOO_RUN_RECIPE = Rank1Settings()
"""`zoo run`'s rank-1 rows before issue 17 (zoo.experiments.run.RANK1_FIT): Adam 3e-3 constant, 3,000 steps, KL over 2/3,
random-sign loc init (P(+1) = 0.5), sigma from p = 1e-3, 10 evaluation draws."""

QUICK_RECIPE = Rank1Settings(steps=3000, lr=1e-2, schedule="cosine", sign_init=-0.5, eval_samples=1)
"""The recipe the validation-set investigation chose (docs/rank1.md): cosine-decayed Adam 1e-2 -> 1e-4 (as `zoo
run` trains its point estimate), loc init N(1, 0.5) (the paper's random_sign_init = -0.5, Table 5) instead of
random +-1 signs, and 1 draw per component at evaluation (as the paper's Table 2; 4 and 25 were no better on the
validation NLL)."""


def optimizer_of(settings: Rank1Settings) -> optax.GradientTransformation:
    """Adam at ``settings.lr``: constant, or cosine-decayed to lr / 100 over ``settings.steps``."""
    if settings.schedule == "constant":
        return optax.adam(settings.lr)
    if settings.schedule == "cosine":
        return optax.adam(optax.cosine_decay_schedule(settings.lr, settings.steps, alpha=0.01))
    raise InputError("schedule", settings.schedule, "'constant' or 'cosine'")


METHODS = {
    "deterministic": ("mlp", "point_estimate"),
    "batch_ensemble": ("rank1_mlp", "delta"),
    "batch_ensemble_unregularised": ("rank1_mlp", "delta"),
    "rank1_normal": ("rank1_mlp", "normal"),
    "rank1_cauchy": ("rank1_mlp", "cauchy"),
    "mean_field": ("mlp", "mean_field"),
    "mc_dropout": ("mlp", "binary_dropout"),
    "rank1_lognormal": ("rank1_mlp", "lognormal"),
}
"""{method: (catalogue entry, guide or rank-1 family)}; the deep ensemble is K deterministic fits. MC dropout drops
the input rows of every dense weight but the first (`MC_DROPOUT_SITES`: hidden units, not pixels).
"batch_ensemble" is MAP under the rank-1 model's Normal(1, 0.1) factor prior; "batch_ensemble_unregularised" drops
that prior (`unregularised_factors`: a flat one), as Wen et al.'s BatchEnsemble trains its factors."""
MC_DROPOUT_SITES = ("*/linear_[1-9]*/w",)
SAMPLED = ("mean_field", "mc_dropout")
"""Methods whose every draw is one network: scored with K x eval_samples draws, the forward passes of a rank-1
net with K components and eval_samples draws per component."""


def unregularised_factors(model):
    """`model` (a rank-1 `models.BNN`) with an improper flat prior (log density 0) on its factor sites
    (``*/alpha``, ``*/gamma``) and its own prior elsewhere: under a point-mass guide its fit is Wen et al.'s
    BatchEnsemble, the factors trained on the likelihood alone (the shared weights keep their Normal prior, an
    L2 penalty, as BatchEnsemble's weight decay). Returns a new `models.BNN`."""
    import fnmatch

    import numpyro.distributions as dist

    from models import bnn
    from models.rank1 import RANK1_SITE_SUFFIXES

    base = model.prior

    def prior(name, shape):
        if any(fnmatch.fnmatchcase(name, f"*/{suffix}") for suffix in RANK1_SITE_SUFFIXES):
            return dist.ImproperUniform(dist.constraints.real, tuple(shape), ())
        return base(name, shape)

    prior.spec = {"kind": "by_pattern", "rules": {f"*/{s}": {"kind": "flat"} for s in RANK1_SITE_SUFFIXES},
                  "default": getattr(base, "spec", None)}
    return bnn(model.network_fn, prior, model.likelihood, name=model.name, feature_shape=model.feature_shape)


def entry_for(method: str, split: DigitsSplit, settings: Rank1Settings, hidden=None, factor=None):
    """The catalogue entry of `method` on the split's training data (test = the standardised test set)."""
    import dataclasses

    import zoo

    if method not in METHODS:
        raise InputError("method", method, f"one of {sorted(METHODS)}")
    hidden = tuple(hidden or settings.hidden)
    xte, yte = split.standardised(split.test_raw)
    data = (split.train.x, split.train.y, xte, yte)
    entry, family = METHODS[method]
    if entry == "mlp":
        return zoo.get("mlp", data=data, data_kwargs={"num_classes": 10}, hidden=hidden,
                       prior_scale=settings.prior_scale)
    e = zoo.get("rank1_mlp", data=data, data_kwargs={"num_classes": 10}, hidden=hidden,
                num_components=settings.num_components, factor=factor or family.replace("delta", "normal"),
                objective=settings.objective, sign_init=settings.sign_init, prior_scale=settings.prior_scale)
    if method == "batch_ensemble_unregularised":
        return dataclasses.replace(e, model=unregularised_factors(e.model))
    return e


def _guide(method, model, settings):
    import inference

    entry, family = METHODS[method]
    if family == "binary_dropout":
        from inference.dropout import binary_dropout

        return binary_dropout(model, dropout_sites=MC_DROPOUT_SITES, rate=settings.mc_dropout_rate)
    if entry == "mlp":
        kwargs = {"init_scale": 0.01} if family == "mean_field" else {}
        return inference.make_guide(family, model, **kwargs)
    rate = settings.cauchy_dropout_rate if family == "cauchy" else settings.dropout_rate
    return inference.make_guide("rank1_mixture", model, family=family, dropout_rate=rate,
                                sign_init=settings.sign_init)


def fit_method(method: str, split: DigitsSplit, settings: Rank1Settings, seed: int = 0, *, guide=None,
               entry=None, on_chunk=None, hidden=None):
    """Train `method` (a key of `METHODS`) on ``split.train`` under `settings`: ``inference.fit`` with
    `optimizer_of`, KL warm-up over ``kl_fraction`` of the steps, batch ``batch_size``. `guide`, `entry`:
    replace the method's own (e.g. a guide with priors on one factor only; `entry` needs only ``.model``);
    `hidden`: other widths (the deep ensemble's members); `on_chunk(step, posterior)` every ``settings.chunk_size``
    steps (``inference.fit``: consecutive checkpoints). Returns the SVI Posterior."""
    import inference
    from inference.fit import ChunkHook

    entry = entry or entry_for(method, split, settings, hidden=hidden)
    guide = guide or _guide(method, entry.model, settings)
    return inference.fit(entry.model, guide, split.train, steps=settings.steps, batch_size=settings.batch_size,
                         optimizer=optimizer_of(settings), kl_warmup=int(settings.steps * settings.kl_fraction),
                         seed=seed, progress=False, chunk_size=settings.chunk_size,
                         callbacks=[] if on_chunk is None else [ChunkHook(on_chunk)])


def draws_for(method: str, settings: Rank1Settings) -> int:
    """Posterior draws at evaluation: 1 for point estimates (deterministic, BatchEnsemble: every draw is
    the same), K x ``eval_samples`` for the `SAMPLED` methods (mean field, MC dropout: as many networks as a
    rank-1 net evaluates), ``eval_samples`` for the rank-1 nets (each draw covers all K components)."""
    if method in SAMPLED:
        return settings.num_components * settings.eval_samples
    return 1 if METHODS.get(method, ("", "point_estimate"))[1] in ("point_estimate", "delta") else settings.eval_samples


_SETS: dict = {}


def corrupted_sets(raw: Dataset, split: DigitsSplit, types=None, severities=(1, 2, 3, 4, 5)) -> list:
    """``evals.corruptions.corrupted(raw, ...)`` as a list [(type, severity, x, y)] (corruption seed 0), made once
    per (set, types, severities) and kept: corrupting the digits with all 19 types x 5 severities takes tens of
    seconds, and every method and ablation is scored on the same sets."""
    from evals.corruptions import corrupted

    key = (id(raw), None if types is None else tuple(types), tuple(severities))
    if key not in _SETS:
        _SETS[key] = (raw, list(corrupted(raw, types=types, severities=severities, seed=0,
                                          image_shape=split.image_shape)))
    return _SETS[key][1]


def corruption_summary(predictors: dict, raw: Dataset, split: DigitsSplit, *, draws: dict, types=None,
                       severities=(1, 2, 3, 4, 5), seed: int = 0, reference: str | None = "deterministic",
                       num_params: dict | None = None):
    """Score {name: predictor} on `raw` (clean) and its corruptions (`corrupted_sets`; ``draws[name]`` posterior draws
    each): `score_table` with the split's ``preprocess``."""
    sets = corrupted_sets(raw, split, types, severities)
    return score_table(predictors, sets, raw, draws=draws, preprocess=split.preprocess, seed=seed, reference=reference,
                       num_params=num_params)


def score_rows(predictors: dict, sets, clean, *, draws: dict, preprocess=None, seed: int = 0):
    """Per-set scores of {name: predictor} on the `clean` test set and the corrupted `sets` [(type, severity, x, y)]
    (``evals.ood.score_sets``, ``draws[name]`` draws each: fewer draws than ``Posterior.predict``'s chunk run the
    network on just those draws, so 1 draw over the 95 corrupted sets costs 1 forward pass, not 50). Returns the
    ``OODResults.table`` of every predictor, concatenated: one row per (method, type, severity); a plain DataFrame,
    so that predictors scored in different processes combine in `summary_of_rows`."""
    import pandas as pd

    from evals import ood

    sets = list(sets)
    tables = [ood.score_sets({name: predictor}, sets, clean=clean, preprocess=preprocess,
                             num_samples=draws[name], seed=seed).table
              for name, predictor in predictors.items()]  # one call per predictor: its own number of draws
    return pd.concat(tables, ignore_index=True)


def summary_of_rows(rows, methods, *, reference: str | None = "deterministic", num_params: dict | None = None):
    """The Table-2 summary of `score_rows` tables (``evals.ood.summary_table``: NLL, Acc, ECE, cNLL, cA, cECE, mCE
    vs `reference` when it was scored, #params when `num_params` is given), one row per method of `methods`
    (column "method"), in that order."""
    from evals import ood

    summary = ood.summary_table(ood.OODResults(table=rows), reference if reference in set(methods) else None,
                                num_params=num_params)
    return summary.loc[list(methods)].rename_axis("method").reset_index()


def score_table(predictors: dict, sets, clean, *, draws: dict, preprocess=None, seed: int = 0,
                reference: str | None = "deterministic", num_params: dict | None = None):
    """Score {name: predictor} on the `clean` test set and the corrupted `sets` [(type, severity, x, y)]:
    `summary_of_rows` of `score_rows`, the Table-2 summary, one row per method in the order of `predictors`."""
    rows = score_rows(predictors, sets, clean, draws=draws, preprocess=preprocess, seed=seed)
    return summary_of_rows(rows, list(predictors), reference=reference, num_params=num_params)


def validation_nll(post, split: DigitsSplit, draws: int, seed: int = 0) -> float:
    """Mean NLL of `post`'s predictive (``draws`` draws averaged) on the validation split (never the test set)."""
    from evals import metrics

    x, y = split.standardised(split.val_raw)
    return float(metrics.nll(np.asarray(post.predict(x, num_samples=draws, seed=seed)), y))


def choose_on_validation_nll(method: str, field: str, values, split: DigitsSplit, settings: Rank1Settings,
                             seed: int = 0):
    """One setting of `method` by validation NLL: fit it with ``settings.<field>`` = each of `values` (one seed) and
    score each fit on the validation split (`validation_nll`, never the test set). Returns (the best value,
    [{field, "val_NLL"}] one per value)."""
    rows = []
    for value in values:
        s = settings.replace(**{field: float(value)})
        post = fit_method(method, split, s, seed)
        rows.append({field: float(value), "val_NLL": validation_nll(post, split, draws_for(method, s), seed)})
    return min(rows, key=lambda r: r["val_NLL"])[field], rows


def choose_mc_dropout_rate(split: DigitsSplit, settings: Rank1Settings, rates=(0.05, 0.1, 0.2), seed: int = 0):
    """MC dropout's rate by validation NLL (`choose_on_validation_nll`). Returns (the best rate, [{"rate",
    "val_NLL"}] one per rate)."""
    best, rows = choose_on_validation_nll("mc_dropout", "mc_dropout_rate", rates, split, settings, seed)
    return best, [{"rate": r["mc_dropout_rate"], "val_NLL": r["val_NLL"]} for r in rows]
