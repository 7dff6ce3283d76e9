"""The curvature criterion of variance networks (Neklyudov et al., 2018, section 5).

For a weight W_ij of a variance layer with posterior variance sigma_ij², eq. 16 compares the variance with
the curvature of the data log-likelihood at the mean M (the other weights W_net fixed):

    kappa_ij = sigma_ij² d²/dW_ij² [-sum_n log p(y_n | x_n, W, W_net)] at W = M.

The paper writes log p; we take the negative log-likelihood L of eq. 15, whose curvature at a fit is >= 0,
so kappa >= 0 where the loss is convex in W_ij (|kappa| is what the paper's log10 histograms show). Small
kappa: the network is nearly linear in W_ij over (M - sigma, M + sigma), so W_ij can be replaced by M_ij;
large kappa: the prediction needs the average over q(W_ij).

`diagonal_hessian` is exact for any small function (one Hessian-vector product per coordinate);
`dense_layer_diagonal_hessian` is exact and cheap for a dense layer h = z W + b of a BNN, using
d²L/dW_ij² = sum_n z_ni² d²L_n/dh_nj² (one product per output unit, shared by all examples).
"""

from __future__ import annotations

import functools
import inspect

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from models.bridge import unflatten_params

__all__ = ["diagonal_hessian", "kappa", "dense_layer_diagonal_hessian", "layer_kappa", "count_above",
           "log10_kappa", "KAPPA_FLOOR", "LOG10_KAPPA_0"]

KAPPA_FLOOR = 1e-25
"""kappa values at or below 0 are shown as this (Fig. 3 replaces kappa = 0 by 1e-25)."""
LOG10_KAPPA_0 = 1.5
"""The paper's threshold log10 kappa_0 = 1.5 (Fig. 3, found on MNIST LeNet-5)."""


def diagonal_hessian(loss_fn, w):
    """Exact diagonal of the Hessian of the scalar ``loss_fn(w)`` at ``w`` (any shape S) -> shape S.

    One forward-over-reverse Hessian-vector product per coordinate (vmapped): for small ``w`` only.
    """
    w = jnp.asarray(w)
    grad = jax.grad(loss_fn)
    basis = jnp.eye(w.size, dtype=w.dtype).reshape((w.size,) + w.shape)
    hvp = jax.vmap(lambda v: jax.jvp(grad, (w,), (v,))[1])(basis)  # (size,) + S
    return jnp.sum(hvp * basis, axis=tuple(range(1, w.ndim + 1))).reshape(w.shape)


def kappa(curvature, variance):
    """eq. 16: kappa = sigma² d²L/dW² elementwise; ``curvature``, ``variance`` broadcastable -> broadcast shape."""
    return jnp.asarray(variance) * jnp.asarray(curvature)


def _module_path(site: str) -> str:
    return site.rpartition("/")[0].replace("/~/", "/")


def dense_layer_diagonal_hessian(model, params: dict, site: str, x, y, state=None, batch_size: int = 512):
    """Exact diagonal of d²L/dW² for the dense weight ``site`` (shape (in, out)) of a BNN at ``params``.

    L = -sum_n log p(y_n | x_n, params) (eq. 15 at W = M, evaluation mode). The layer's input z (N, in) and
    d²L_n/dh_nj² (N, out) of its pre-activation h = z W + b are read by intercepting the Haiku module
    that owns ``site``; then d²L/dW_ij² = sum_n z_ni² d²L_n/dh_nj². x (N, ...), y (N,); the sum runs over
    minibatches of ``batch_size`` (the last one padded, so one compiled program serves every call with
    these shapes). Returns a float64 NumPy array (in, out).
    """
    if state is None:
        state = model.initial_state(x) if model.is_stateful(x) else {}
    curvature = _batch_curvature(model, site)
    x, y = np.asarray(x, np.float32), np.asarray(y)
    size = min(batch_size, len(x))
    total = np.zeros(params[site].shape, np.float64)
    for start in range(0, len(x), size):
        xb, yb = x[start:start + size], y[start:start + size]
        mask = np.zeros(size, np.float32)
        mask[:len(xb)] = 1.0
        pad = size - len(xb)
        if pad:
            xb = np.concatenate([xb, np.zeros((pad,) + xb.shape[1:], xb.dtype)])
            yb = np.concatenate([yb, np.zeros((pad,) + yb.shape[1:], yb.dtype)])
        total += np.asarray(curvature(params, state, xb, yb, mask), np.float64)
    return total


@functools.lru_cache(maxsize=32)
def _batch_curvature(model, site: str):
    """The jitted (params, state, xb, yb, mask) -> (in, out) minibatch term of `dense_layer_diagonal_hessian`."""
    path = _module_path(site)
    takes_flag = "is_training" in inspect.signature(model.network_fn).parameters

    def forward(params, state, delta, xb, yb, mask):
        captured = []

        def interceptor(next_f, args, kwargs, context):
            out = next_f(*args, **kwargs)
            if context.method_name == "__call__" and context.module.module_name.replace("/~/", "/") == path:
                captured.append(args[0])
                out = out + delta
            return out

        def net(inputs):
            with hk.intercept_methods(interceptor):
                return model.network_fn(inputs, is_training=False) if takes_flag else model.network_fn(inputs)

        logits, _ = hk.transform_with_state(net).apply(unflatten_params(params), state, None, xb)
        nll = -jnp.sum(mask * model.likelihood.log_prob(logits, yb, params))
        return nll, captured[0]

    @jax.jit
    def batch_curvature(params, state, xb, yb, mask):
        width = params[site].shape[-1]
        delta0 = jnp.zeros((xb.shape[0], width), jnp.float32)
        z = forward(params, state, delta0, xb, yb, mask)[1]
        grad = jax.grad(lambda d: forward(params, state, d, xb, yb, mask)[0])
        tangents = jnp.eye(width, dtype=jnp.float32)[:, None, :] * jnp.ones((1, xb.shape[0], 1), jnp.float32)
        hess = jax.lax.map(lambda t: jnp.sum(jax.jvp(grad, (delta0,), (t,))[1] * t, axis=-1), tangents)  # (out, B)
        z = z.reshape(z.shape[0], -1) * mask[:, None]
        return jnp.square(z).T @ hess.T  # (in, out)

    return batch_curvature


def layer_kappa(posterior, site: str, x, y, batch_size: int = 512):
    """eq. 16 for every weight of the dense variance layer ``site`` of an SVI posterior -> NumPy (in, out).

    The curvature is taken at the guide's median (its mean for Gaussian guides; the other weights at theirs),
    the variance is the guide's marginal variance of the site (``family.moments``).
    """
    guide = posterior.guide
    family = guide.assignment[site]
    values = {s: posterior.params[guide.param_name(site, s)] for s in family.params(guide.sites[site])}
    variance = np.asarray(family.moments(guide.sites[site], values)[1], np.float64)
    curvature = dense_layer_diagonal_hessian(posterior.model, posterior.median(), site, x, y,
                                             state=posterior.state, batch_size=batch_size)
    return np.asarray(kappa(curvature, variance))


def log10_kappa(values):
    """log10 |kappa| with values <= KAPPA_FLOOR shown as log10(KAPPA_FLOOR) = -25 (Fig. 3); same shape."""
    return np.log10(np.maximum(np.abs(np.asarray(values, np.float64)), KAPPA_FLOOR))


def count_above(values, log10_threshold: float = LOG10_KAPPA_0) -> int:
    """How many |kappa| exceed 10**log10_threshold (Fig. 4)."""
    return int(np.sum(log10_kappa(values) > log10_threshold))
