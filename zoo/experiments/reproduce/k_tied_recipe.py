"""The k-tied Normal paper's training recipe (Swiatkowski et al., ICML 2020, appendix D.2 and D.4) for Fig. 6
left's accuracy runs: every arm (point estimate, mean field, k-tied) picks Adam's rate, the prior sd and the KL
slope on the validation part of the training data (`zoo.experiments.reproduce.tuning`), then trains on the whole training
part with that setting, one run per seed, and is scored once on the test split.

The recipe: Adam at a constant rate from {1e-4, 3e-4, 1e-3, 3e-3}; a Normal prior N(0, sigma_p^2) with sigma_p from
{0.2, 0.3}; batch 1,024; the KL term annealed by `inference.kl_schedules.stepwise_linear` (+slope per batch,
raised every 100 batches) with the slope from {5e-5, 5e-6}; "until ELBO convergence" read as a number of epochs
(the steps are counted from the epochs and the training set's size); sigma initialised at 0.01. The point
estimate (MAP under the same prior) has no KL term to anneal: its grid is the rates and priors only.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optax
import pandas as pd

from inference import ConvergenceWarning, PosteriorCollapseWarning, fit

from inference.point_estimate import point_estimate
from inference.kl_schedules import stepwise_linear
from zoo.experiments.reproduce.k_tied_runs import make_guide
from zoo.experiments.reproduce.tuning import Choice, choose_on_validation, grid

__all__ = ["Recipe", "epoch_steps", "arm_label", "fit_arm", "tune_arms", "final_runs", "recipe_key", "POINT"]

POINT = "point"
"""The point-estimate arm (MAP under the prior) in `Recipe.arms`, beside None (mean field) and k-tied ranks."""


@dataclass(frozen=True)
class Recipe:
    """Settings of the tuned accuracy runs.

    arms: POINT, None (mean field) and k-tied ranks; learning_rates, prior_scales, kl_slopes: the validation grid
    (the paper's: (1e-4, 3e-4, 1e-3, 3e-3), (0.2, 0.3), (5e-5, 5e-6)); point_priors: the point estimate's prior
    grid (None: `prior_scales`); kl_every: batches between the schedule's raises (100); epochs: training length
    in passes over the training data; batch_size; chunk_size: `fit`'s chunk; seeds: the final runs' seeds (the
    tuning fits use the first); eval_draws: weight draws per validation / test score.
    """

    arms: tuple = (POINT, None, 2)
    learning_rates: tuple = (1e-4, 3e-4, 1e-3, 3e-3)
    prior_scales: tuple = (0.2, 0.3)
    kl_slopes: tuple = (5e-5, 5e-6)
    point_priors: tuple | None = None
    kl_every: int = 100
    epochs: float = 300
    batch_size: int = 1024
    chunk_size: int = 500
    seeds: tuple = (0, 1, 2, 3, 4)
    eval_draws: int = 100


def epoch_steps(n_train: int, batch_size: int, epochs: float) -> int:
    """SVI steps of `epochs` passes over `n_train` examples in minibatches of min(batch_size, n_train): ceil."""
    return max(1, math.ceil(epochs * n_train / min(batch_size, n_train)))


def arm_label(arm) -> str | int:
    """The arm's label in tables: "point estimate", "mean field" or the rank k."""
    return "point estimate" if arm == POINT else "mean field" if arm is None else arm


def recipe_key(recipe: Recipe, n_train: int) -> str:
    """The fingerprint of a row's recipe and training-set size (``recipe`` column of ``tuning.csv`` and
    ``accuracy_runs.csv``): a resumed job reuses only rows of the same recipe on as many training examples."""
    return hashlib.sha1(f"{recipe!r}|{int(n_train)}".encode()).hexdigest()[:12]


def _earlier_rows(out_dir, name: str, key: str, resume: bool) -> list[dict]:
    """The rows of ``out_dir/name`` (written by this module) whose ``recipe`` is ``key``; none unless ``resume``."""
    path = None if out_dir is None else Path(out_dir) / name
    if not resume or path is None or not path.exists():
        return []
    table = pd.read_csv(path)
    if "recipe" not in table:
        return []
    return table[table["recipe"].astype(str) == key].to_dict("records")


def _same(row: dict, label, setting: dict, **more) -> bool:
    """Whether an earlier ``row`` is arm ``label``'s fit of ``setting`` (and ``more`` columns): numbers compared
    as floats (a CSV reads them back so)."""
    if str(row.get("k", row.get("arm"))) != str(label):
        return False
    return all(_close(row.get(k), v) for k, v in {**setting, **more}.items())


def _close(a, b) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9) or (math.isnan(float(a)) and math.isnan(float(b)))
    except (TypeError, ValueError):
        return str(a) == str(b)


def fit_arm(entry, train, arm, setting: dict, recipe: Recipe, seed: int):
    """One fit of `arm` (POINT, None or a rank) to `train` (x, y) under `setting` {learning_rate, kl_slope (not for
    POINT)} with the recipe's epochs and batch: Adam at the constant rate, `stepwise_linear(kl_slope,
    recipe.kl_every)` as the KL schedule. `entry`'s model carries the prior. Returns the Posterior
    (``info.final_kl_weight`` the last step's beta)."""
    steps = epoch_steps(len(train[1]), recipe.batch_size, recipe.epochs)
    guide = point_estimate(entry.model) if arm == POINT else make_guide(entry.model, arm)
    schedule = None if arm == POINT else stepwise_linear(setting["kl_slope"], recipe.kl_every)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # judged and kept in info; a grid has poor settings
        warnings.simplefilter("ignore", PosteriorCollapseWarning)
        return fit(entry.model, guide, train, steps=steps, batch_size=recipe.batch_size,
                   optimizer=optax.adam(setting["learning_rate"]), kl_schedule=schedule, seed=seed,
                   progress=False, chunk_size=recipe.chunk_size)


def _accuracy_nll(post, data, draws: int, seed: int) -> tuple[float, float, float]:
    from evals import score

    s = score(post, data, num_samples=draws, seed=seed, verbose=False).iloc[0]
    return float(s.accuracy), float(s.nll), float(s.ece)


def tune_arms(entries, recipe: Recipe, log=None, out_dir=None, resume: bool = False
              ) -> tuple[dict[Any, Choice], pd.DataFrame]:
    """Pick each arm's setting on the validation split: ({arm: `zoo.experiments.reproduce.tuning.Choice`}, the candidates'
    table: arm, the setting, validation (accuracy), val_nll, final_kl_weight, converged, chosen).

    entries: {prior sd: (entry, train (x, y), validation (x, y))}, one per prior of the grid (the prior is part of
    the model). Every setting of the arm's grid (learning rate x prior x KL slope; the point estimate: learning
    rate x prior) is fitted on the training part with seed ``recipe.seeds[0]`` and scored by validation accuracy
    (``recipe.eval_draws`` weight draws); the highest wins, ties to the earlier setting. out_dir: when given,
    ``tuning.csv`` (every candidate so far, with its final KL weight and validation NLL) is rewritten after each
    arm, so an interrupted job keeps what it measured; with ``resume``, a candidate already in ``tuning.csv`` from
    the same recipe and training-set size (`recipe_key`) is read back instead of fitted again."""
    choices, rows = {}, []
    seed = recipe.seeds[0]
    key = recipe_key(recipe, len(next(iter(entries.values()))[1][1]))
    earlier = _earlier_rows(out_dir, "tuning.csv", key, resume)
    for arm in recipe.arms:
        priors = (recipe.point_priors or recipe.prior_scales) if arm == POINT else recipe.prior_scales
        axes = dict(learning_rate=recipe.learning_rates, prior_scale=priors)
        if arm != POINT:
            axes["kl_slope"] = recipe.kl_slopes
        extra = {}

        def score(setting, arm=arm):
            done = [r for r in earlier if _same(r, arm_label(arm), setting)]
            if done:
                extra[tuple(setting.items())] = {k: done[0][k] for k in ("val_nll", "final_kl_weight", "converged")}
                if log is not None:
                    log(f"  tuning {arm_label(arm)} {setting}: read from tuning.csv (fitted earlier)")
                return float(done[0]["validation"])
            entry, tr, va = entries[setting["prior_scale"]]
            post = fit_arm(entry, tr, arm, setting, recipe, seed)
            acc, nll, _ = _accuracy_nll(post, va, recipe.eval_draws, seed)
            extra[tuple(setting.items())] = {"val_nll": nll, "final_kl_weight": post.info.final_kl_weight,
                                             "converged": post.info.converged}
            if log is not None:
                log(f"  tuning {arm_label(arm)} {setting}: validation accuracy {acc:.4f}, NLL {nll:.4f}, "
                    f"final beta {post.info.final_kl_weight:.4g}")
            return acc

        choice = choose_on_validation(grid(**axes), score, higher_is_better=True)
        choices[arm] = choice
        for row in choice.table.to_dict("records"):
            rows.append({"arm": arm_label(arm), **row, **extra[tuple((k, row[k]) for k in axes)],
                         "chosen": all(row[k] == choice.setting[k] for k in axes), "recipe": key})
        if out_dir is not None:
            pd.DataFrame(rows).to_csv(Path(out_dir) / "tuning.csv", index=False)
    return choices, pd.DataFrame(rows)


def final_runs(entries, choices: dict, recipe: Recipe, log=None, out_dir=None, resume: bool = False) -> pd.DataFrame:
    """Each arm trained with its chosen setting on the whole training part (training + validation), one run per
    seed of ``recipe.seeds``, scored on the test split. entries: {prior sd: entry} (their ``train`` the whole
    training part, ``test`` the test split). Returns one row per run: k (`arm_label`), seed, accuracy, nll, ece,
    learning_rate, prior_scale, kl_slope, final_kl_weight, steps, converged. out_dir: when given,
    ``accuracy_runs.csv`` is rewritten after each arm (an interrupted job keeps what it measured); with ``resume``, a
    run already there from the same recipe, training-set size (`recipe_key`), setting and seed is read back."""
    rows = []
    key = recipe_key(recipe, len(next(iter(entries.values())).train.y))
    earlier = _earlier_rows(out_dir, "accuracy_runs.csv", key, resume)
    for arm, choice in choices.items():
        s = choice.setting
        entry = entries[s["prior_scale"]]
        for seed in recipe.seeds:
            done = [r for r in earlier if _same(r, arm_label(arm), s, seed=seed)]
            if done:
                rows.append({**done[0], "k": arm_label(arm)})
                if log is not None:
                    log(f"  final {arm_label(arm)} seed {seed}: read from accuracy_runs.csv (run earlier)")
                continue
            post = fit_arm(entry, (entry.train.x, entry.train.y), arm, s, recipe, seed)
            acc, nll, ece = _accuracy_nll(post, entry.test, recipe.eval_draws, seed)
            rows.append({"k": arm_label(arm), "seed": seed, "accuracy": acc, "nll": nll, "ece": ece,
                         "learning_rate": s["learning_rate"], "prior_scale": s["prior_scale"],
                         "kl_slope": s.get("kl_slope", np.nan), "final_kl_weight": post.info.final_kl_weight,
                         "steps": len(post.losses), "converged": post.info.converged, "recipe": key})
            if log is not None:
                log(f"  final {arm_label(arm)} seed {seed}: test accuracy {acc:.4f}, NLL {nll:.4f}")
        if out_dir is not None:
            pd.DataFrame(rows).to_csv(Path(out_dir) / "accuracy_runs.csv", index=False)
    return pd.DataFrame(rows)
