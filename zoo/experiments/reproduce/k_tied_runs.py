"""The training runs of the k-tied Normal reproduction (Swiatkowski et al., ICML 2020): data with a
validation split, mean-field / k-tied fits with a checkpoint trace (validation -ELBO and the gradient SNR of
the Dense 2 layer's log-sd parameters, Fig. 6 right), and the step-time rounds of Table 4. The analyses
they call live in `zoo.experiments.analysis.sigma_spectrum`, `zoo.experiments.analysis.rank_truncation`, `zoo.experiments.analysis.gradient_snr`, `zoo.experiments.analysis.elbo_draws`;
the job and its findings in `zoo.experiments.reproduce.k_tied`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from zoo.experiments.analysis.elbo_draws import negative_elbo_draws
from zoo.experiments.analysis.gradient_snr import snr_summary
from inference import ConvergenceWarning, fit, mean_field
from inference.k_tied import k_tied
from zoo.experiments.analysis.elbo_gradients import elbo_gradients
from zoo.experiments.analysis.step_time import fit_step_ms
from zoo.data.tfds_loaders import load_tfds
from zoo.registry import TFDS_DATA, get
from zoo.experiments.analysis.seed_summary import sem

__all__ = ["SIGMA_INIT", "model_data", "make_guide", "sd_param_names", "train_with_trace", "step_time_rounds", "accuracy_runs"]


def model_data(entry: str, data, kwargs: dict, validation, data_dir=None, prior_scale: float = 1.0,
               data_kwargs: dict | None = None):
    """(entry, train (x, y), validation (x, y)) for `entry` on `data` (a data set's name, or a user's 4-tuple
    (x_train, y_train, x_test, y_test), e.g. from `zoo.experiments.reproduce.image_npz.load_image_npz`, treated as a
    shipped set).

    A TFDS data set (`data_dir`): the loader's "train" split (the papers' training part) and its
    "validation" split (the last 10,000 / 5,000 training examples, section 2.2); `validation` is ignored.
    A shipped data set: the last `validation` (a fraction of the training part, or a count) of its training
    part (shuffled when shipped) are the validation set, the rest the training set; `data_kwargs` go to the
    shipped data set's function (e.g. {"n": 100} for two_moons).
    """
    if isinstance(data, str) and data in TFDS_DATA:
        e = get(entry, data=data, data_kwargs={"data_dir": data_dir}, prior_scale=prior_scale, **kwargs)
        val = load_tfds(data, "validation", data_dir)
        return e, (e.train.x, e.train.y), (val.x, val.y)
    e = get(entry, data=data, data_kwargs=data_kwargs, prior_scale=prior_scale, **kwargs)
    n = len(e.train.y)
    v = int(round(validation * n)) if isinstance(validation, float) else int(validation)
    return e, (e.train.x[: n - v], e.train.y[: n - v]), (e.train.x[n - v:], e.train.y[n - v:])


SIGMA_INIT = 0.01
"""The initial posterior sd of every weight (appendix D.4: 0.01)."""


def make_guide(model, k: int | None, init_scale: float = SIGMA_INIT):
    """mean_field (k None) or k_tied with rank k, sigma starting at `init_scale` (appendix D.4: 0.01), as the
    paper's families: without the library's default sigma cap (``scale_cap=None``; the cap, 1.5 / sqrt(fan_in), is
    the library's default, not the paper's, and would bound the very sds whose structure Fig. 3 is about)."""
    if k is None:
        return mean_field(model, init_scale=init_scale, scale_cap=None)
    return k_tied(model, k=k, init_scale=init_scale, scale_cap=None)


def sd_param_names(guide, site: str, k: int | None) -> list:
    """The guide's parameters of the standard deviations of `site`: mean field's scale, k-tied's U and V."""
    return [guide.param_name(site, "scale")] if k is None else [guide.param_name(site, s) for s in ("u", "v")]


def train_with_trace(entry, train, val, k: int | None, seed: int, *, checkpoints, batch_size: int, optimizer,
                     snr_site: str, snr_batches: int = 10, val_draws: int = 20, chunk_size: int = 250, log=None):
    """Fit mean field (k None) or k-tied (rank k) to `train` from scratch, stopping at every step count in
    `checkpoints` (increasing) to record the validation -ELBO per example and the gradient SNR of `snr_site`'s
    sd parameters.

    The fit runs in pieces, one `inference.fit` per interval between checkpoints, each warm-started at the
    previous piece's exact parameters (``init_params``); the optimiser (constant-rate Adam: a schedule would
    restart) starts a fresh state in every piece, and piece i draws minibatches and noise from seed
    ``1000 seed + i``. At a checkpoint, with the parameters fixed: ``val_neg_elbo`` (mean and SEM over
    `val_draws` weight draws, `zoo.experiments.analysis.elbo_draws`), and the SNR (footnote 3: E[g^2] / Var[g], and E[g]^2 /
    Var[g]) of every U, V (or sigma) entry over `snr_batches` minibatch gradients (`zoo.experiments.analysis.elbo_gradients`:
    unconstrained parameters, i.e. log U, log V; mean field's softplus-inverse sigma, whose SNR equals that of
    log sigma at fixed parameters, a per-parameter constant factor cancelling), averaged over the entries.
    Returns:
      (final posterior, [row per checkpoint: k, seed, step, val_neg_elbo, val_neg_elbo_sem, and of the
      layer's entries (`zoo.experiments.analysis.gradient_snr.snr_summary`): snr (mean over finite entries), snr_median,
      snr_inf_share, snr_squared_mean_median (the median of E[g]^2 / Var[g])]).
    """
    guide = make_guide(entry.model, k)
    post, done, rows = None, 0, []
    names = None
    for i, step in enumerate(checkpoints):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # pieces of one run; judged at the end
            post = fit(entry.model, guide, train, steps=step - done, batch_size=batch_size, optimizer=optimizer,
                       seed=1000 * seed + i, init_params=post, chunk_size=chunk_size, progress=False)
        done = step
        names = names or sd_param_names(guide, snr_site, k)
        grads = elbo_gradients(post, train, batch_size=batch_size, num_batches=snr_batches, seed=seed + step,
                               names=names)
        x_val, y_val = val
        elbo = negative_elbo_draws(post, x_val, y_val, n_train=len(train[1]), num_samples=val_draws, seed=seed)
        rows.append({"k": "mean field" if k is None else k, "seed": seed, "step": step,
                     "val_neg_elbo": float(elbo.mean()), "val_neg_elbo_sem": sem(elbo),
                     **_snr_columns(grads)})
        if log is not None:
            r = rows[-1]
            log(f"  {'mean field' if k is None else f'{k}-tied'} seed {seed} step {step}: validation -ELBO "
                f"{r['val_neg_elbo']:.4f}, Dense 2 SNR mean {r['snr']:.3g}, median {r['snr_median']:.3g}")
    return post, rows


def _snr_columns(grads) -> dict:
    footnote, usual = snr_summary(grads), snr_summary(grads, "squared_mean")
    return {"snr": footnote["mean"], "snr_median": footnote["median"], "snr_inf_share": footnote["inf_share"],
            "snr_squared_mean_median": usual["median"]}


def step_time_rounds(entry, ks, rounds: int, steps: int, batch_size: int, chunk_size: int) -> list:
    """Table 4: ms per SVI step (`zoo.experiments.analysis.step_time.fit_step_ms`, compile excluded) of mean field (k None)
    and each k-tied rank in `ks`, `rounds` interleaved rounds (load on a shared machine hits all alike).
    Returns rows {round, k, ms}."""
    rows = []
    for r in range(rounds):
        for k in ks:
            ms = fit_step_ms(entry.model, make_guide(entry.model, k), entry.train, steps=steps,
                             batch_size=batch_size, chunk_size=chunk_size, seed=r)
            rows.append({"round": r, "k": "mean field" if k is None else k, "ms": ms})
    return rows


def accuracy_runs(entry, ks, settings, seeds, num_samples: int = 100, log=None) -> pd.DataFrame:
    """Fig. 6 left on `entry`: one fit per (k, seed) of mean field (k None) or k-tied rank k (sigma init 0.01,
    `make_guide`) under `settings` (a `zoo.experiments.run.FitSettings`, e.g. `zoo.experiments.run.CONVERGED`: Adam 1e-2 cosine-decayed
    to 1e-4 over 10,000 steps, KL annealed over 20 %), scored on ``entry.test`` with `num_samples` weight draws.
    Returns one row per run: k ("mean field" or the rank), seed, accuracy, nll, ece, final_loss (the mean loss
    over the last 5 % of steps). `benchmarks/bench_k_tied_accuracy.py` calls it (`zoo reproduce k-tied` uses the paper's recipe instead,
    `zoo.experiments.reproduce.k_tied_recipe`)."""
    from evals import score
    from zoo.experiments.run import fit_with_settings

    rows = []
    for k in ks:
        for seed in seeds:
            post = fit_with_settings(entry, make_guide(entry.model, k), settings, seed=seed)
            s = score(post, entry.test, num_samples=num_samples, seed=seed, verbose=False).iloc[0]
            rows.append({"k": "mean field" if k is None else k, "seed": seed, "accuracy": float(s.accuracy),
                         "nll": float(s.nll), "ece": float(s.ece),
                         "final_loss": float(np.mean(post.losses[-max(1, settings.steps // 20):]))})
            if log is not None:
                log(f"  accuracy run {rows[-1]['k']} seed {seed}: accuracy {s.accuracy:.4f}, NLL {s.nll:.4f}")
    return pd.DataFrame(rows)
