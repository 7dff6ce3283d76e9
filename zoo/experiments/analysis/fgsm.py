"""Iterative fast-sign attacks on a predictive distribution (variance networks, section 6.3, Fig. 2).

The attack (Goodfellow et al., 2014, iterated with a fixed step as in the paper): x_{k+1} = x_k + eps
sign(grad_x objective(x_k)), targeted: the objective is log p(target | x) of the attacked predictive (an
ensemble average over fixed weight draws, eq. 2, or one network). After each step we record the
successful attack rate (argmax p = target) and the mean predictive entropy (1/N) sum_n H[p(y | x_n)].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pandas as pd

__all__ = ["fgsm_step", "draws_predictor", "mixture_predictor", "iterative_fgsm", "entropy"]


def fgsm_step(objective, x, eps: float):
    """One fast-sign step up ``objective`` (scalar function of x): x + eps sign(grad objective(x)); x any shape."""
    return x + eps * jnp.sign(jax.grad(objective)(x))


def entropy(probs):
    """H[p] = -sum_c p_c log p_c per row: probs (N, C) -> (N,) (0 log 0 = 0)."""
    probs = jnp.asarray(probs)
    return -jnp.sum(jnp.where(probs > 0, probs * jnp.log(jnp.where(probs > 0, probs, 1.0)), 0.0), axis=-1)


def draws_predictor(model, draws: dict, state=None):
    """x (N, ...) -> (N, C): ``model``'s predictive averaged over ``draws`` {site: (S, ...)} (fixed draws, eq. 2)."""
    def predict(x):
        return jnp.mean(jax.vmap(lambda p: model.predictive(p, x, state=state))(draws), axis=0)
    return predict


def mixture_predictor(predictors):
    """The equal-weight average of several predictors x -> (N, C) (a deep ensemble of posteriors)."""
    def predict(x):
        return sum(p(x) for p in predictors) / len(predictors)
    return predict


def iterative_fgsm(predict, x, targets, eps: float, iterations: int) -> pd.DataFrame:
    """Targeted iterative fast sign against ``predict`` (x -> probabilities (N, C)).

    x (N, ...) float, targets (N,) int classes (choose them different from the true labels). Returns a
    DataFrame with rows iteration = 0 (clean) ... ``iterations``: success_rate (fraction with argmax =
    target), mean_entropy (nats).
    """
    targets = jnp.asarray(targets)

    def objective(xs):
        p = predict(xs)
        return jnp.sum(jnp.log(jnp.take_along_axis(p, targets[:, None], axis=1) + 1e-30))

    step = jax.jit(lambda xs: fgsm_step(objective, xs, eps))
    summary = jax.jit(lambda xs: (jnp.mean(jnp.argmax(predict(xs), -1) == targets), jnp.mean(entropy(predict(xs)))))
    xs = jnp.asarray(x, jnp.float32)
    rows = []
    for k in range(iterations + 1):
        if k:
            xs = step(xs)
        rate, ent = summary(xs)
        rows.append({"iteration": k, "success_rate": float(rate), "mean_entropy": float(ent)})
    return pd.DataFrame(rows)
