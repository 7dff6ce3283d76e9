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

Convolutions: Flipout (Wen et al., 2018, eq. 2). A weight shared by every position of an image makes the
positions' pre-activations correlated, so independent noise per example, position and channel (the local trick
above) would not be the marginal of a weight draw per example. Flipout draws one perturbation dW ~ N(0, v) per
minibatch and gives example n the weight W_n = M + dW o (s_n r_nᵀ), s_n in {-1, 1}^in and r_n in {-1, 1}^out
uniform random signs (in and out: the kernel's input and output channels): each W_n is N(M, v), the same
marginal as a weight draw, and the examples' perturbations are decorrelated, at the cost of a second
convolution,

    h_n = conv(z_n, M) + b + conv(z_n o s_n, dW) o r_n.

`local_noise` wraps a network's call so that chosen Haiku dense and convolution modules compute their output
this way.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp
import numpyro
from base.errors import InputError
from base.prng import paired_normals

__all__ = ["gaussian_preactivation", "k_tied_preactivation", "dropout_preactivation", "flipout_output", "GaussianRule",
           "KTiedRule", "DropoutRule", "FlipoutRule", "local_noise"]

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


def flipout_output(apply, z, mean, sd, eps, signs_in, signs_out, channel_axis: int = -1):
    """Flipout's output for a layer (Wen et al., 2018, eq. 2; module docstring): ``apply(z, mean, False) +
    apply(z o s, sd o eps, True) o r``, the layer's output with example n's weight M + (sd o eps) o (s_n r_nᵀ).

    apply(inputs, w, zero_bias) -> outputs: the layer's own map (a convolution: (B, ..., in) -> (B, ..., out)) with
    weight w (the kernel's shape) and its bias (zeros if `zero_bias`); z: the layer's input (B, ...); mean, sd, eps:
    the weights' means, standard deviations and one standard normal draw (the kernel's shape); signs_in (B, in),
    signs_out (B, out): +-1; channel_axis: the channels' axis of z and of the output. Returns the output (B, ...).
    """
    def per_example(signs, ndim):
        shape = [signs.shape[0]] + [1] * (ndim - 1)
        shape[channel_axis] = signs.shape[1]
        return signs.reshape(shape).astype(z.dtype)

    h = apply(z, mean, False)
    perturbation = apply(z * per_example(signs_in, z.ndim), sd * eps, True)
    return h + perturbation * per_example(signs_out, perturbation.ndim)


class _DenseRule:
    """A rule for Haiku dense modules (``hk.Linear``): it computes the output from z (B, in) and the bias."""

    module_type = hk.Linear
    module_words = "hk.Linear (dense)"
    input_ndim = 2

    def __call__(self, z, bias, key, apply):
        """The layer's output for input z (B, in), its bias (out,) or None and a key; `apply` is unused (the rule
        computes the dense map itself)."""
        del apply
        return self.output(z, bias, key)


@dataclass(frozen=True)
class GaussianRule(_DenseRule):
    """Weights N(mean, variance) (arrays of the weight's shape (in, out)): `gaussian_preactivation`."""

    mean: jax.Array
    variance: jax.Array

    def output(self, z, bias, key):
        """`gaussian_preactivation` with (B, out) normals of `key`."""
        return gaussian_preactivation(z, self.mean, self.variance, bias, _eps(key, z, self.mean))


@dataclass(frozen=True)
class KTiedRule(_DenseRule):
    """Weights N(mean, (U Vᵀ)²), mean (in, out), u (in, k), v (out, k): `k_tied_preactivation`."""

    mean: jax.Array
    u: jax.Array
    v: jax.Array

    def output(self, z, bias, key):
        """`k_tied_preactivation` with (B, out) normals of `key`."""
        return k_tied_preactivation(z, self.mean, self.u, self.v, bias, _eps(key, z, self.mean))


def _eps(key, z, mean):
    """(B, out) standard normals (`base.prng.paired_normals`: half the hashes of ``jax.random.normal``) for input
    z (B, in)."""
    return paired_normals(key, (z.shape[0], mean.shape[-1])).astype(z.dtype)


@dataclass(frozen=True)
class DropoutRule(_DenseRule):
    """Binary dropout of the input rows of ``loc`` (in, out) at ``rate``: `dropout_preactivation`."""

    loc: jax.Array
    rate: float

    def output(self, z, bias, key):
        """`dropout_preactivation` with a (B, in) keep mask of `key`."""
        keep = jax.random.bernoulli(key, 1.0 - self.rate, z.shape).astype(z.dtype)
        return dropout_preactivation(z, self.loc, bias, keep, self.rate)


@dataclass(frozen=True)
class FlipoutRule:
    """Convolution weights N(mean, variance) (arrays of the kernel's shape (..., in, out)): `flipout_output`,
    through the module's own convolution."""

    mean: jax.Array
    variance: jax.Array
    channel_axis: int = -1
    module_type = hk.ConvND
    module_words = "hk.ConvND (convolution)"

    def __call__(self, z, bias, key, apply):
        """The layer's output for input z (B, ..., in) (`flipout_output`); `bias` is applied by `apply`."""
        del bias
        k_eps, k_in, k_out = jax.random.split(key, 3)
        eps = paired_normals(k_eps, self.mean.shape).astype(z.dtype)
        signs_in = jax.random.rademacher(k_in, (z.shape[0], z.shape[self.channel_axis]), z.dtype)
        signs_out = jax.random.rademacher(k_out, (z.shape[0], self.mean.shape[-1]), z.dtype)
        sd = jnp.sqrt(self.variance + _TINY)
        return flipout_output(apply, z, self.mean, sd, eps, signs_in, signs_out, self.channel_axis)


@contextlib.contextmanager
def local_noise(rules: dict, key=None):
    """Inside the block, every call of a Haiku module whose module path (``a/b`` for ``a/~/b``) is a key of
    ``rules`` and whose type is the rule's ``module_type`` (``hk.Linear`` for the dense rules, ``hk.ConvND`` for
    `FlipoutRule`) returns ``rule(z, bias, key_j, apply)`` for its input z (B, ...), its own bias parameter (or
    None), a key of its own and ``apply(inputs, w, zero_bias)``, the module's own map with its weight replaced by
    w (and its bias by zeros if `zero_bias`); the module's weight parameter is not used. ``key``: the noise's key, or None to take a
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
        if context.method_name != "__call__":
            return next_f(*args, **kwargs)
        module = context.module
        path = module.module_name.replace("/~/", "/")
        rule = rules.get(path)
        if rule is None or not isinstance(module, rule.module_type):
            return next_f(*args, **kwargs)
        z = args[0]
        if getattr(rule, "input_ndim", z.ndim) != z.ndim:
            raise InputError.worded("local_noise", f"local_noise: the dense module {path!r} got an input of shape "
                                    f"{z.shape}, expected (batch, features)")
        if getattr(module, "channel_index", -1) != getattr(rule, "channel_axis", -1):
            raise InputError.worded("local_noise", f"local_noise: the module {path!r} has its channels on axis "
                                    f"{module.channel_index}, expected channels last (axis -1)")
        params = module.params_dict()
        bias = next((v for k, v in params.items() if k.endswith("/b")), None)

        def apply(inputs, w, zero_bias):  # the module's own map, its weight replaced by w (and its bias by 0)
            def getter(next_getter, value, ctx):
                if ctx.module_name != module.module_name:
                    return next_getter(value)
                if ctx.name == "w":
                    return w
                return jnp.zeros_like(value) if ctx.name == "b" and zero_bias else next_getter(value)

            with hk.custom_getter(getter):
                return next_f(inputs, *args[1:], **kwargs)

        seen.add(path)
        return rule(z, bias, key_of(path), apply)

    with hk.intercept_methods(interceptor):
        yield seen
