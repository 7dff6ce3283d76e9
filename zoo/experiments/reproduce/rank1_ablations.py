"""Rank-1 BNNs (Dusenberry et al., ICML 2020): the section-3 ablations on the rank-1 MLP, one function each.

Every ablation trains the rank-1 Normal MLP of `zoo.experiments.reproduce.rank1_setup` under one recipe, changing one thing,
for each seed, and scores it on the clean test set and a few corruption types (`corruption_summary`). Each returns
one row per (setting, seed); `zoo.experiments.reproduce.rank1` summarises them over seeds (mean +- SE) and draws the figures.

* `components`: K in {1, 2, 4, 8, 16} at a constant total batch K x B (section 3.3, Fig. 3).
* `objectives`: average per-component vs log-mixture likelihood in training, with per-component and mixture
  train / test curves over checkpoints (section 3.4, Fig. 4).
* `dropout_init`: sigma initialised from a dropout rate p, sigma = sqrt(p / (1 - p)) (section 3.5, Fig. 5).
* `prior_placement`: priors (and Normal posteriors) on s only, r only or both; the other factor point-estimated
  under a nearly flat Normal(1, 100) prior (section 3.1, Fig. 2: "the absence of a prior indicates point-wise
  estimation").
* `positive_priors`: real-valued Normal(1, sd) factors vs positive-valued LogNormal(0, sd) factors, prior and
  posterior alike (app. C.1, Fig. 9).

The arms that equal the recipe itself (K = 4 at its batch, the average likelihood, its dropout rate, the
real-valued prior) are one fit per seed: pass one `FitCache` to every ablation and it is trained and scored once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from zoo.experiments.analysis.diversity import component_probs
from evals import metrics
from zoo.experiments.reproduce.rank1_setup import DigitsSplit, Rank1Settings, corruption_summary, fit_method

__all__ = ["components", "objectives", "dropout_init", "prior_placement", "positive_priors", "PRIOR_PLACEMENTS",
           "FitCache"]

FLAT_SCALE = 100.0
"""The sd of the nearly flat Normal(1, sd) prior on a point-estimated factor in `prior_placement`."""
PRIOR_PLACEMENTS = {"s only": "alpha", "r only": "gamma", "both": None}
"""Fig. 2's settings: the factor that gets a prior (s = alpha on the inputs, r = gamma on the outputs)."""


class FitCache(dict):
    """{(method, settings, seed): (posterior, checkpoints [(step, posterior)], scores {types, severities: row})}:
    the ablations' fits of one recipe, each trained and scored once (`fitted`, `_scored`)."""


def fitted(method, split, settings, seed, cache: FitCache | None = None):
    """``fit_method(method, split, settings, seed)`` with its checkpoints every ``settings.chunk_size`` steps:
    (posterior, [(step, posterior)]), from `cache` when it holds this (method, settings, seed)."""
    key = (method, settings, seed)
    if cache is not None and key in cache:
        return cache[key][:2]
    seen = []
    post = fit_method(method, split, settings, seed, on_chunk=lambda step, p: seen.append((step, p)))
    if cache is not None:
        cache[key] = (post, seen, {})
    return post, seen


def _scored(post, split, settings, draws, types, severities, seed, cache=None, method="rank1_normal",
            **extra) -> dict:
    """One row: Table-2 scores of `post` on the test set and its corruptions, plus `extra` (scored once per
    cached fit of (method, settings, seed) and set of corruptions)."""
    memo = cache.get((method, settings, seed), (None, None, {}))[2] if cache is not None else {}
    where = (None if types is None else tuple(types), tuple(severities), draws)
    if where not in memo:
        row = corruption_summary({"m": post}, split.test_raw, split, draws={"m": draws}, types=types,
                                 severities=severities, seed=seed, reference=None).iloc[0].to_dict()
        row.pop("method")
        memo[where] = row
    return {**extra, "seed": seed, **memo[where],
            "final_loss": float(np.mean(post.losses[-max(1, settings.steps // 20):])),
            "converged": getattr(getattr(post, "info", None), "converged", None)}


def components(split: DigitsSplit, recipe: Rank1Settings, seeds, ks=(1, 2, 4, 8, 16), total_batch=512,
               types=None, severities=(1, 3, 5), log=print, cache: FitCache | None = None) -> pd.DataFrame:
    """Fig. 3: rank-1 Normal with K components, minibatch B = total_batch / K examples (the paper keeps K B
    constant, so more components see fewer new examples per step). One row per (K, seed)."""
    rows = []
    for k in ks:
        s = recipe.replace(num_components=int(k), batch_size=max(1, total_batch // int(k)))
        for seed in seeds:
            post, _ = fitted("rank1_normal", split, s, seed, cache)
            rows.append(_scored(post, split, s, s.eval_samples, types, severities, seed, cache, K=int(k),
                                batch=s.batch_size))
            log(f"  K = {k} seed {seed}: NLL {rows[-1]['NLL']:.4f} cNLL {rows[-1]['cNLL']:.4f}")
    return pd.DataFrame(rows)


def _curve_rows(objective, seed, step, post, split, draws):
    """Per-component and mixture NLL / accuracy on the training and test sets at one checkpoint."""
    rows = []
    for part, (x, y) in (("train", (split.train.x, split.train.y)), ("test", split.standardised(split.test_raw))):
        members = component_probs(post, x, num_samples=draws, seed=seed)  # (S K, N, C), draw-major
        k = post.model.likelihood.num_components
        per_component = members.reshape((draws, k) + members.shape[1:]).mean(0)  # (K, N, C)
        for c in range(k):
            rows.append({"objective": objective, "seed": seed, "step": step, "set": part, "member": f"component {c}",
                         "nll": metrics.nll(per_component[c][None], y),
                         "accuracy": metrics.accuracy(per_component[c], y)})
        rows.append({"objective": objective, "seed": seed, "step": step, "set": part, "member": "mixture",
                     "nll": metrics.nll(members, y), "accuracy": metrics.accuracy(metrics.average(members), y)})
    return rows


def objectives(split: DigitsSplit, recipe: Rank1Settings, seeds, types=None, severities=(1, 3, 5), log=print,
               cache: FitCache | None = None):
    """Fig. 4: training with the average per-component log-likelihood vs the log-mixture likelihood (evaluation
    always uses the mixture). Returns (final scores, one row per (objective, seed); curves, one row per
    (objective, seed, checkpoint every ``recipe.chunk_size`` steps, train/test, component k or "mixture") with
    NLL and accuracy)."""
    rows, curves = [], []
    for objective in ("average", "mixture"):
        s = recipe.replace(objective=objective)
        for seed in seeds:
            post, seen = fitted("rank1_normal", split, s, seed, cache)
            for step, p in seen:
                curves += _curve_rows(objective, seed, step, p, split, s.eval_samples)
            rows.append(_scored(post, split, s, s.eval_samples, types, severities, seed, cache, objective=objective))
            log(f"  {objective} likelihood seed {seed}: NLL {rows[-1]['NLL']:.4f} cNLL {rows[-1]['cNLL']:.4f}")
    return pd.DataFrame(rows), pd.DataFrame(curves)


def dropout_init(split: DigitsSplit, recipe: Rank1Settings, seeds, rates=(1e-3, 0.1, 0.3), types=None,
                 severities=(1, 3, 5), log=print, cache: FitCache | None = None) -> pd.DataFrame:
    """Fig. 5: sigma initialised as sqrt(p / (1 - p)) for dropout rates p. One row per (p, seed)."""
    rows = []
    for p in rates:
        s = recipe.replace(dropout_rate=float(p))
        for seed in seeds:
            post, _ = fitted("rank1_normal", split, s, seed, cache)
            rows.append(_scored(post, split, s, s.eval_samples, types, severities, seed, cache, dropout_rate=float(p)))
            log(f"  dropout init p = {p} seed {seed}: acc {rows[-1]['Acc']:.2f} NLL {rows[-1]['NLL']:.4f}")
    return pd.DataFrame(rows)


def _placement_model(split, settings, with_prior):
    """The rank-1 MLP with the factor prior on `with_prior` ("alpha", "gamma" or None: both) and a nearly flat
    Normal(1, FLAT_SCALE) prior on the other factor; returns (model, guide) with Normal components only there."""
    import inference
    import models
    from models import priors as priors_lib
    from models.rank1 import rank1_likelihood, rank1_mlp

    factor = priors_lib.normal(settings.factor_scale, loc=1.0)
    flat = priors_lib.normal(FLAT_SCALE, loc=1.0)
    rules = {f"*/{s}": (factor if with_prior in (None, s) else flat) for s in ("alpha", "gamma")}
    prior = priors_lib.by_pattern(rules, default=priors_lib.normal(settings.prior_scale))
    k = settings.num_components
    model = models.bnn(rank1_mlp(settings.hidden, 10, k, sign_init=settings.sign_init), prior,
                       rank1_likelihood(models.likelihoods.categorical(), k, settings.objective), name="rank1_mlp")
    model.feature_shape = split.train.feature_shape
    sites = ("*/alpha", "*/gamma") if with_prior is None else (f"*/{with_prior}",)
    guide = inference.rank1_mixture.rank1_mixture(model, family="normal", dropout_rate=settings.dropout_rate,
                                    sign_init=settings.sign_init, factor_sites=sites)
    return model, guide


def prior_placement(split: DigitsSplit, recipe: Rank1Settings, seeds, types=None, severities=(1, 3, 5),
                    log=print, cache: FitCache | None = None) -> pd.DataFrame:
    """Fig. 2: priors on s only, r only, or both (`PRIOR_PLACEMENTS`; "both" is the recipe's rank-1 Normal model,
    from `cache` when the other ablations trained it). One row per (placement, seed)."""
    from types import SimpleNamespace

    rows = []
    for label, site in PRIOR_PLACEMENTS.items():
        for seed in seeds:
            if site is None:
                post, _ = fitted("rank1_normal", split, recipe, seed, cache)
                rows.append(_scored(post, split, recipe, recipe.eval_samples, types, severities, seed, cache,
                                    prior_on=label))
            else:
                model, guide = _placement_model(split, recipe, site)
                post = fit_method("rank1_normal", split, recipe, seed, guide=guide,
                                  entry=SimpleNamespace(model=model))
                rows.append(_scored(post, split, recipe, recipe.eval_samples, types, severities, seed,
                                    prior_on=label))
            log(f"  prior on {label} seed {seed}: NLL {rows[-1]['NLL']:.4f} cNLL {rows[-1]['cNLL']:.4f}")
    return pd.DataFrame(rows)


POSITIVE_PRIORS = {"real (Normal)": "rank1_normal", "positive (log-normal)": "rank1_lognormal"}
"""Fig. 9's arms: the factor family, prior and posterior alike (Normal(1, sd) vs LogNormal(0, sd), sd the
recipe's ``factor_scale``)."""


def positive_priors(split: DigitsSplit, recipe: Rank1Settings, seeds, types=None, severities=(1, 3, 5), log=print,
                    cache: FitCache | None = None) -> pd.DataFrame:
    """Fig. 9: real- vs positive-valued factors (`POSITIVE_PRIORS`), one row per (arm, seed) with column "factors"."""
    rows = []
    for label, method in POSITIVE_PRIORS.items():
        for seed in seeds:
            post, _ = fitted(method, split, recipe, seed, cache)
            rows.append(_scored(post, split, recipe, recipe.eval_samples, types, severities, seed, cache, method,
                                factors=label))
            log(f"  {label} seed {seed}: NLL {rows[-1]['NLL']:.4f} cNLL {rows[-1]['cNLL']:.4f}")
    return pd.DataFrame(rows)
