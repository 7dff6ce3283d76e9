"""The generalised Gauss-Newton (GGN) curvature of a BNN's log-likelihood at a point theta*, the curvature
every `inference.laplace` structure is built from.

For N examples with network outputs f_n = f(x_n, theta) (K values each), the GGN of the negative log-likelihood
is (Martens 2020; Immer et al. 2021, eq. 4; Daxberger et al. 2021 "Laplace Redux", sec. 3.1)

    GGN = sum_n J_n^T Lambda_n J_n,  J_n = d f_n / d theta (K x P),  Lambda_n = d^2 [-log p(y_n | f_n)] / d f_n^2,

which does not depend on y for the zoo's likelihoods:

* categorical over logits: Lambda = diag(p) - p p^T (p = softmax(f));
* Normal with noise sd sigma: Lambda = I / sigma^2.

Each is written as Lambda = M M^T with an exact K x K factor M (`output_hessian_factor`: categorical
M = diag(sqrt p) - p sqrt(p)^T, since (diag(s) - p s^T)(diag(s) - s p^T) = diag(p) - 2 p p^T + p (s^T s) p^T
and s^T s = 1; Normal M = I / sigma). Then J_n^T M_n (P x K) is K vector-Jacobian products of one example
(`factor_gradients`), and the GGN is the sum of their outer products: exact, no sampled labels.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from base.errors import InputError
from base.value_key import Static
from models import likelihoods

CHUNK_BYTES = 1 << 27
"""Bytes of per-example factor gradients (chunk x K x P float32) one compiled chunk may hold (128 MiB)."""


def check_likelihood(likelihood) -> None:
    """Raise InputError unless the GGN of `likelihood` is known here (categorical, Normal)."""
    if not isinstance(likelihood, (likelihoods.Categorical, likelihoods.Normal)):
        raise InputError("model.likelihood", f"<{type(likelihood).__name__}>",
                         "a categorical or Normal likelihood (the GGN of the others is not implemented)")


def output_hessian_factor(likelihood, output, params) -> jax.Array:
    """(B, K, K) factor M_n of the output Hessian Lambda_n = M_n M_n^T of -log p(y_n | f_n) for outputs
    f (B, K) (module docstring); `params` {site: array} gives a learned noise."""
    if isinstance(likelihood, likelihoods.Categorical):
        p = jax.nn.softmax(output, -1)
        s = jnp.sqrt(p)
        return jax.vmap(jnp.diag)(s) - p[:, :, None] * s[:, None, :]
    sigma = likelihood.noise if likelihood.noise is not None else params["likelihood/noise"]
    eye = jnp.eye(output.shape[-1], dtype=output.dtype) / sigma
    return jnp.broadcast_to(eye, (output.shape[0],) + eye.shape)


def factor_gradients(model, center: dict, names: tuple, x, state) -> jax.Array:
    """(B, K, P): row (n, k) is column k of J_n^T M_n, the per-example gradient of f(x_n, theta) . M_n[:, k]
    with respect to the sites `names` (flattened in that order, P values), every other site held at `center`.

    x: (B, *feature_shape); center: {site: array} (theta*); state: the network state (or None)."""
    theta, unravel = jax.flatten_util.ravel_pytree({k: center[k] for k in names})
    factors = output_hessian_factor(model.likelihood, model.apply(center, x, state), center)

    def one(xn, mn):
        _, vjp = jax.vjp(lambda t: model.apply({**center, **unravel(t)}, xn[None], state)[0], theta)
        return jax.vmap(lambda m: vjp(m)[0])(mn.T)

    return jax.vmap(one)(x, factors)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _chunk_ggn(model: Static, names: tuple, kind: str, center, x, weight, state):
    """One chunk's contribution: the dense (P, P) GGN (kind "dense") or its diagonal (P,) ("diag");
    `weight` (B,) is 1 for real rows and 0 for padding."""
    g = factor_gradients(model.obj, center, names, x, state) * weight[:, None, None]
    if kind == "dense":
        flat = g.reshape(-1, g.shape[-1])
        return flat.T @ flat
    return jnp.sum(g * g, axis=(0, 1))


def ggn(model, center: dict, names, x, state, kind: str = "dense", chunk_size: int | None = None) -> np.ndarray:
    """The GGN of the sites `names` over all of x (N, *feature_shape) at `center`: (P, P) (kind "dense") or its
    diagonal (P,) ("diag"), float64, P the sites' total size in `names` order (each flattened row-major).

    Summed over chunks of `chunk_size` examples (default: as many as keep the chunk's B x K x P factor
    gradients under `CHUNK_BYTES`); the last chunk is padded with zero-weight rows (one compile per shape)."""
    names = tuple(names)
    size = sum(math.prod(np.shape(center[k])) for k in names)
    width = model.output_width(x.shape[1:])
    if chunk_size is None:
        chunk_size = max(1, min(x.shape[0], CHUNK_BYTES // (4 * width * max(size, 1))))
    total = np.zeros((size, size) if kind == "dense" else (size,), np.float64)
    for xb, weight, _ in padded_chunks(x, chunk_size):
        total += np.asarray(_chunk_ggn(Static(model), names, kind, center, xb, weight, state), np.float64)
    return total


def padded_chunks(x, chunk_size: int):
    """(x_chunk (chunk_size, ...), weight (chunk_size,), m) for consecutive chunks of x: the last one padded with
    zero rows of weight 0 (one compiled shape for all), m its real rows."""
    for start in range(0, x.shape[0], chunk_size):
        xb = x[start:start + chunk_size]
        m = xb.shape[0]
        weight = np.r_[np.ones(m), np.zeros(chunk_size - m)].astype(np.float32)
        if m < chunk_size:
            xb = np.concatenate([xb, np.zeros((chunk_size - m,) + xb.shape[1:], xb.dtype)])
        yield xb, weight, m
