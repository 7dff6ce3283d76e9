"""Ensemble diversity against accuracy over checkpoints (rank-1 BNN paper, section 3.6 and Fig. 6).

Following Fort et al. (2019), the paper measures diversity as the fraction of test points where the discrete
predictions of two members differ, averaged over all member pairs, normalised by (1 - accuracy) "to account for
the fact that the lower the accuracy of a member, the more random its predictions can be"; Fig. 6 plots it
against accuracy and log-likelihood over consecutive checkpoints late in training, rank-1 BNN vs BatchEnsemble.

The disagreement and its normalisation are those of `evals.ood` (``pairwise_disagreement``, ``diversity``:
divided by the error of the members' averaged prediction). Here: the members of a rank-1 posterior (each
mixture component under each posterior draw, `component_probs`), the per-checkpoint table
(`diversity_table`) and the figure (`plot_diversity`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from evals import metrics
from evals.ood import diversity, pairwise_disagreement
from base.value_key import Static
from base.errors import InputError
from models.rank1 import split_components

__all__ = ["component_probs", "member_scores", "diversity_table", "plot_diversity"]


def component_probs(posterior, x, num_samples: int = 1, seed: int = 0) -> np.ndarray:
    """Class probabilities of every mixture component of a rank-1 posterior under every draw: (S K, N, C).

    ``posterior``: an SVI `inference.Posterior` of a model with a ``models.rank1.Rank1Likelihood`` (a rank-1
    network's output (K N, C) is tiled component-major); x (N, *features). Row ``s K + k`` is component k under
    draw s (for BatchEnsemble every draw is the same point: use ``num_samples=1``). Their mean over the first axis
    is the posterior's mixture prediction (``posterior.predict(x).mean(0)`` with the same draws).
    """
    likelihood = getattr(getattr(posterior, "model", None), "likelihood", None)
    k = getattr(likelihood, "num_components", None)
    if k is None or not hasattr(likelihood, "base"):
        raise InputError("posterior", f"<{type(posterior).__name__}>",
                         "a posterior of a rank-1 model (models.rank1.Rank1Likelihood)")
    model, state = posterior.model, getattr(posterior, "state", None) or None
    # compiled once per model value key (the checkpoints of a fit, every fit of one entry), not per call
    probs = np.asarray(_per_draw_components(Static(model), posterior.draws(num_samples, seed=seed),
                                            jnp.asarray(x, jnp.float32), state), np.float64)
    return probs.reshape((-1,) + probs.shape[2:])


@functools.partial(jax.jit, static_argnums=0)
def _per_draw_components(model: Static, params, xs, state):
    """(S, K, N, C) per-component probabilities of every draw: `_components` mapped over the draws' first axis."""
    return jax.vmap(lambda p: _components(model.obj, p, xs, state))(params)


def _components(model, params, xs, state):
    """One draw's per-component probabilities (K, N, C) of a rank-1 `model` on xs (N, ...)."""
    likelihood = model.likelihood
    output = model.apply(params, xs, state)  # (K N, C)
    return split_components(likelihood.base.predictive(output, params), likelihood.num_components)


def member_scores(member_probs, y) -> dict:
    """Scores of an ensemble's members (S, N, C) on labels y (N,): ``accuracy`` and ``nll`` of the averaged
    probabilities (`evals.metrics`), ``member_accuracy`` (mean over members), ``disagreement`` (the fraction of
    points where two members' argmax differ, averaged over pairs) and ``diversity`` = disagreement / (1 - accuracy),
    the normalisation of the paper's section 3.6 (NaN with one member or no error)."""
    member_probs = np.asarray(member_probs, np.float64)
    if member_probs.ndim != 3:
        raise InputError("member_probs", f"<array of shape {member_probs.shape}>", "member probabilities (S, N, C)")
    avg = metrics.average(member_probs)
    return {
        "accuracy": metrics.accuracy(avg, y),
        "nll": metrics.nll(member_probs, y),
        "member_accuracy": float(np.mean([metrics.accuracy(p, y) for p in member_probs])),
        "disagreement": pairwise_disagreement(member_probs),
        "diversity": diversity(member_probs, y),
    }


def diversity_table(checkpoints: dict, x, y, num_samples: int = 1, seed: int = 0) -> pd.DataFrame:
    """One row per (method, checkpoint): `member_scores` of the components of each rank-1 posterior.

    checkpoints: {method: [(step, Posterior), ...]} (consecutive checkpoints of one run, late in training);
    x (N, ...), y (N,) a held-out set. Returns columns method, step and those of `member_scores`.
    """
    rows = []
    for method, series in checkpoints.items():
        for step, posterior in series:
            rows.append({"method": method, "step": int(step),
                         **member_scores(component_probs(posterior, x, num_samples, seed), y)})
    return pd.DataFrame(rows)


def plot_diversity(table: pd.DataFrame, fig=None):
    """Fig. 6: normalised diversity against accuracy and against NLL, one colour per method, one point per
    checkpoint (a `diversity_table`). Returns the matplotlib Figure (object API, no pyplot)."""
    from matplotlib.figure import Figure

    fig = fig or Figure(figsize=(8, 3.2))
    axes = fig.subplots(1, 2)
    for method, group in table.groupby("method", sort=False):
        axes[0].plot(100 * group["accuracy"], group["diversity"], "o-", label=method, alpha=0.8)
        axes[1].plot(group["nll"], group["diversity"], "o-", label=method, alpha=0.8)
    axes[0].set_xlabel("accuracy (%)")
    axes[1].set_xlabel("NLL")
    for ax in axes:
        ax.set_ylabel("disagreement / (1 - acc)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig
