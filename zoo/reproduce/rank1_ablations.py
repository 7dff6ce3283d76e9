"""Rank-1 BNNs (Dusenberry et al., ICML 2020): the section-3 ablations on the rank-1 MLP, one function each.

Every ablation trains the rank-1 Normal MLP of `zoo.reproduce.rank1_setup` under one recipe, changing one thing,
for each seed, and scores it on the clean test set and a few corruption types (`corruption_summary`). Each returns
one row per (setting, seed); `zoo.reproduce.rank1` summarises them over seeds (mean +- SE) and draws the figures.

* `components`: K in {1, 2, 4, 8, 16} at a constant total batch K x B (section 3.3, Fig. 3).
* `objectives`: average per-component vs log-mixture likelihood in training, with per-component and mixture
  train / test curves over checkpoints (section 3.4, Fig. 4).
* `dropout_init`: sigma initialised from a dropout rate p, sigma = sqrt(p / (1 - p)) (section 3.5, Fig. 5).
* `prior_placement`: priors (and Normal posteriors) on s only, r only or both; the other factor point-estimated
  under a nearly flat Normal(1, 100) prior (section 3.1, Fig. 2: "the absence of a prior indicates point-wise
  estimation").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evals.diversity import component_probs
from evals import metrics
from zoo.reproduce.rank1_setup import DigitsSplit, Rank1Settings, corruption_summary, fit_method

__all__ = ["components", "objectives", "dropout_init", "prior_placement", "PRIOR_PLACEMENTS"]

FLAT_SCALE = 100.0
"""The sd of the nearly flat Normal(1, sd) prior on a point-estimated factor in `prior_placement`."""
PRIOR_PLACEMENTS = {"s only": "alpha", "r only": "gamma", "both": None}
"""Fig. 2's settings: the factor that gets a prior (s = alpha on the inputs, r = gamma on the outputs)."""


def _scored(post, split, settings, draws, types, severities, seed, **extra) -> dict:
    """One row: Table-2 scores of `post` on the test set and its corruptions, plus `extra`."""
    row = corruption_summary({"m": post}, split.test_raw, split, draws={"m": draws}, types=types,
                             severities=severities, seed=seed, reference=None).iloc[0].to_dict()
    row.pop("method")
    return {**extra, "seed": seed, **row, "final_loss": float(np.mean(post.losses[-max(1, settings.steps // 20):]))}


def components(split: DigitsSplit, recipe: Rank1Settings, seeds, ks=(1, 2, 4, 8, 16), total_batch=512,
               types=None, severities=(1, 3, 5), log=print) -> pd.DataFrame:
    """Fig. 3: rank-1 Normal with K components, minibatch B = total_batch / K examples (the paper keeps K B
    constant, so more components see fewer new examples per step). One row per (K, seed)."""
    rows = []
    for k in ks:
        s = recipe.replace(num_components=int(k), batch_size=max(1, total_batch // int(k)))
        for seed in seeds:
            post = fit_method("rank1_normal", split, s, seed)
            rows.append(_scored(post, split, s, s.eval_samples, types, severities, seed, K=int(k),
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


def objectives(split: DigitsSplit, recipe: Rank1Settings, seeds, types=None, severities=(1, 3, 5), log=print):
    """Fig. 4: training with the average per-component log-likelihood vs the log-mixture likelihood (evaluation
    always uses the mixture). Returns (final scores, one row per (objective, seed); curves, one row per
    (objective, seed, checkpoint every ``recipe.chunk_size`` steps, train/test, component k or "mixture") with
    NLL and accuracy)."""
    rows, curves = [], []
    for objective in ("average", "mixture"):
        s = recipe.replace(objective=objective)
        for seed in seeds:
            seen = []
            post = fit_method("rank1_normal", split, s, seed, on_chunk=lambda step, p: seen.append((step, p)))
            for step, p in seen:
                curves += _curve_rows(objective, seed, step, p, split, s.eval_samples)
            rows.append(_scored(post, split, s, s.eval_samples, types, severities, seed, objective=objective))
            log(f"  {objective} likelihood seed {seed}: NLL {rows[-1]['NLL']:.4f} cNLL {rows[-1]['cNLL']:.4f}")
    return pd.DataFrame(rows), pd.DataFrame(curves)


def dropout_init(split: DigitsSplit, recipe: Rank1Settings, seeds, rates=(1e-3, 0.1, 0.3), types=None,
                 severities=(1, 3, 5), log=print) -> pd.DataFrame:
    """Fig. 5: sigma initialised as sqrt(p / (1 - p)) for dropout rates p. One row per (p, seed)."""
    rows = []
    for p in rates:
        s = recipe.replace(dropout_rate=float(p))
        for seed in seeds:
            post = fit_method("rank1_normal", split, s, seed)
            rows.append(_scored(post, split, s, s.eval_samples, types, severities, seed, dropout_rate=float(p)))
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
    guide = inference.rank1_mixture(model, family="normal", dropout_rate=settings.dropout_rate,
                                    sign_init=settings.sign_init, factor_sites=sites)
    return model, guide


def prior_placement(split: DigitsSplit, recipe: Rank1Settings, seeds, types=None, severities=(1, 3, 5),
                    log=print) -> pd.DataFrame:
    """Fig. 2: priors on s only, r only, or both (`PRIOR_PLACEMENTS`). One row per (placement, seed)."""
    from types import SimpleNamespace

    rows = []
    for label, site in PRIOR_PLACEMENTS.items():
        for seed in seeds:
            model, guide = _placement_model(split, recipe, site)
            post = fit_method("rank1_normal", split, recipe, seed, guide=guide, entry=SimpleNamespace(model=model))
            rows.append(_scored(post, split, recipe, recipe.eval_samples, types, severities, seed, prior_on=label))
            log(f"  prior on {label} seed {seed}: NLL {rows[-1]['NLL']:.4f} cNLL {rows[-1]['cNLL']:.4f}")
    return pd.DataFrame(rows)
