"""The local reparameterisation trick (Kingma et al., 2015): a dense layer's pre-activations drawn directly,
one noise draw per example and unit, instead of a weight draw.

Gaussian weights. For h = z W + b with independent W_ij ~ N(m_ij, v_ij) and a layer input z (B, in),

    h_nj ~ N( sum_i z_ni m_ij + b_j,  sum_i z_ni² v_ij )   independently over examples n and units j,

the exact marginal of an independent weight draw per example (variance networks, eq. 8 and appendix A:
"epsilon is sampled independently for each object in a mini-batch"); it costs two (B, in) x (in, out)
products and B x out normal draws instead of B x in x out. k-tied weights (sd = U Vᵀ, rank k) need no
(in, out) variance matrix: `k_tied_preactivation` computes the same variance in O(k² (in + out)) per example.

Binary dropout. W = M with input row i kept with probability 1 - rate and rescaled (`inference.dropout`):
one weight draw per example is the same as a mask on the layer's input per example,
h_n = (z_n * keep_n / (1 - rate)) M + b, keep_ni ~ Bernoulli(1 - rate).

`local_noise` wraps a network's call so that chosen Haiku dense modules compute their output this way.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp
import numpyro
from models.errors import InputError
from models.prng import normal

__all__ = ["gaussian_preactivation", "k_tied_preactivation", "dropout_preactivation", "GaussianRule", "KTiedRule",
           "DropoutRule", "local_noise"]

_TINY = 1e-12  # keeps the square root's gradient finite where z² v is exactly 0


def gaussian_preactivation(z, mean, variance, bias, eps):
    """h = z m + b + sqrt(z² v) * eps: z (B, in), mean and variance (in, out), bias (out,) or None, eps (B, out)
    standard normal -> (B, out), a draw of the pre-activations of independent N(m, v) weights (module docstring)."""
    return _preactivation(z, mean, jnp.square(z) @ variance, bias, eps)


def k_tied_preactivation(z, mean, u, v, bias, eps):
    """`gaussian_preactivation` for k-tied weights, sd = U Vᵀ (k-tied Normal paper, eq. 8): the output variance

        sum_i z_ni² (sum_k U_ik V_jk)²  =  sum_kl (z_n² @ (U_k o U_l)) V_jk V_jl

    computed in O(k² (in + out)) per example, without the (in, out) variance matrix. z (B, in), mean (in, out),
    u (in, k), v (out, k), bias (out,) or None, eps (B, out) standard normal -> (B, out)."""
    k = u.shape[-1]
    uu = (u[:, :, None] * u[:, None, :]).reshape(u.shape[0], k * k)  # columns U_k o U_l
    vv = (v[:, :, None] * v[:, None, :]).reshape(v.shape[0], k * k)  # rows V_jk V_jl
    return _preactivation(z, mean, (jnp.square(z) @ uu) @ vv.T, bias, eps)


def _preactivation(z, mean, out_variance, bias, eps):
    """z m + b + sqrt(out_variance) * eps (out_variance (B, out): the pre-activations' variance given z)."""
    h = z @ mean + jnp.sqrt(out_variance + _TINY) * eps
    return h if bias is None else h + bias


def dropout_preactivation(z, loc, bias, keep, rate: float):
    """h = (z * keep / (1 - rate)) loc + b: z (B, in), loc (in, out), bias (out,) or None, keep (B, in) in {0, 1}
    -> (B, out), binary dropout of the layer's inputs (a dropout weight draw per example)."""
    h = (z * keep / (1.0 - rate)) @ loc
    return h if bias is None else h + bias


@dataclass(frozen=True)
class GaussianRule:
    """Weights N(mean, variance) (arrays of the weight's shape (in, out)): `gaussian_preactivation`."""

    mean: jax.Array
    variance: jax.Array

    def __call__(self, z, bias, key):
        return gaussian_preactivation(z, self.mean, self.variance, bias, _eps(key, z, self.mean))


@dataclass(frozen=True)
class KTiedRule:
    """Weights N(mean, (U Vᵀ)²), mean (in, out), u (in, k), v (out, k): `k_tied_preactivation`."""

    mean: jax.Array
    u: jax.Array
    v: jax.Array

    def __call__(self, z, bias, key):
        return k_tied_preactivation(z, self.mean, self.u, self.v, bias, _eps(key, z, self.mean))


def _eps(key, z, mean):
    """(B, out) standard normals (jax.random.normal's numbers, `models.prng.normal`) for input z (B, in)."""
    return normal(key, (z.shape[0], mean.shape[-1])).astype(z.dtype)


@dataclass(frozen=True)
class DropoutRule:
    """Binary dropout of the input rows of ``loc`` (in, out) at ``rate``: `dropout_preactivation`."""

    loc: jax.Array
    rate: float

    def __call__(self, z, bias, key):
        keep = jax.random.bernoulli(key, 1.0 - self.rate, z.shape).astype(z.dtype)
        return dropout_preactivation(z, self.loc, bias, keep, self.rate)


@contextlib.contextmanager
def local_noise(rules: dict, key=None):
    """Inside the block, every call of a Haiku ``hk.Linear`` whose module path (``a/b`` for ``a/~/b``) is a key
    of ``rules`` returns ``rule(z, bias, key_j)`` for its input z (B, in), its own bias parameter (or None) and
    a key of its own; the module's weight parameter is not used. ``key``: the noise's key, or None to take a
    fresh one from NumPyro's seed handler at every call (``numpyro.prng_key()``: the network must then run
    inside a seeded NumPyro model, as in the ELBO). Yields the set of paths intercepted so far (filled as the
    network runs, e.g. while it is traced), so that a caller can check that every rule applied.
    """
    seen = set()
    paths = sorted(rules)

    def key_of(path):
        if key is not None:
            return jax.random.fold_in(key, paths.index(path))
        fresh = numpyro.prng_key()
        if fresh is None:
            raise InputError.worded("local_noise",
                                    "local_noise: key=None needs a seeded NumPyro model around the network "
                                    "(numpyro.handlers.seed)")
        return fresh

    def interceptor(next_f, args, kwargs, context):
        if context.method_name != "__call__" or not isinstance(context.module, hk.Linear):
            return next_f(*args, **kwargs)
        path = context.module.module_name.replace("/~/", "/")
        if path not in rules:
            return next_f(*args, **kwargs)
        z = args[0]
        if z.ndim != 2:
            raise InputError.worded("local_noise",
                                    f"local_noise: the dense module {path!r} got an input of shape {z.shape}, expected "
                                    "(batch, features)")
        params = context.module.params_dict()
        bias = next((v for k, v in params.items() if k.endswith("/b")), None)
        seen.add(path)
        return rules[path](z, bias, key_of(path))

    with hk.intercept_methods(interceptor):
        yield seen
