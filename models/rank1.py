"""Rank-1 layers (Dusenberry et al., 2020, "Efficient and Scalable Bayesian Neural Nets with Rank-1
Factors", section 3; as the TensorFlow reference layers ``DenseRank1`` / ``Conv2DRank1`` run them).

A rank-1 layer keeps one weight W shared by K mixture components and, per component k, an input-side
vector alpha_k (fan-in channels) and an output-side vector gamma_k (output channels) with an
optional per-component bias b_k. The effective weight of component k is W o alpha_k gamma_kᵀ (eq. 3
with s = alpha, r = gamma), computed as ((x o alpha_k) W) o gamma_k + b_k, never materialised.

Batches are tiled component-major: a minibatch of n examples is repeated K times and rows
[k n, (k+1) n) belong to component k (``tile_components`` / ``split_components``).

Models: `rank1_mlp` (a network function), `rank1_prior` (Normal/Cauchy(1, 0.1) factors, Normal
weights = L2) and `rank1_likelihood` (average per-component or log-mixture training objective,
mixture evaluation) make a rank-1 BNN with ``models.bnn``; ``inference.rank1_mixture`` is its guide.

Haiku parameter names (the bridge turns each into the sample site ``"{module path}/{name}"``):
``w`` (W), ``alpha`` (K, fan-in channels), ``gamma`` (K, out channels), ``b`` (K, out channels).
A rank-1 model samples ``alpha`` and ``gamma`` (the mixture guide) and point-estimates ``w`` and
``b`` with a Normal prior (L2).
"""
from __future__ import annotations

import math

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro import handlers
from jax.custom_derivatives import SymbolicZero
from numpyro.distributions import Distribution

from models import priors as priors_lib
from models.networks.mlp import activation_fn
from base.errors import InputError

RANK1_SITE_SUFFIXES = ("alpha", "gamma")
"""Parameter names of the rank-1 factors, the sites the rank-1 mixture guide samples."""

OBJECTIVES = ("average", "mixture")
"""Training objectives of a rank-1 mixture: average per-component log-likelihood, log-mixture likelihood."""

DRAW_CLIP = 10.0
"""The rank-1 reference implementation clips alpha and gamma draws to [-10, 10]."""


def random_sign_init(v):
    """Initialiser ``init(key, shape, dtype=float32)`` for rank-1 factor locations (BatchEnsemble).

    v > 0: each entry is +1 with probability v and -1 otherwise (random sign flips); v <= 0: each
    entry ~ N(1, |v|) (standard deviation |v|): the "random sign" initialisation of rank-1 paper section
    3.5 and of its reference implementation. Returns an array of ``shape``.
    """
    v = float(v)
    if v > 1.0:
        raise InputError.worded("v", f"random_sign_init: v is a probability when positive, expected v <= 1, got {v}")

    def init(key, shape, dtype=jnp.float32):
        if v > 0:
            return jnp.where(jax.random.bernoulli(key, v, tuple(shape)), 1.0, -1.0).astype(dtype)
        return (1.0 + abs(v) * jax.random.normal(key, tuple(shape))).astype(dtype)

    return init


def log_factor_init(v):
    """Initialiser ``init(key, shape, dtype=float32)`` of the log-location of positive-valued (log-normal)
    factors, the counterpart of `random_sign_init` (rank-1 paper app. C.1, Fig. 9: positive-valued priors):
    v <= 0: each entry ~ N(0, |v|), i.e. factors exp(N(0, |v|)) around 1; v > 0: zeros (every factor 1; a
    positive factor has no sign to flip). Returns an array of ``shape``."""
    v = float(v)
    if v > 1.0:
        raise InputError.worded("v", f"log_factor_init: v is a probability when positive, expected v <= 1, got {v}")

    def init(key, shape, dtype=jnp.float32):
        if v > 0:
            return jnp.zeros(tuple(shape), dtype)
        return (abs(v) * jax.random.normal(key, tuple(shape))).astype(dtype)

    return init


def scale_from_dropout(p):
    """Standard deviation sigma = sqrt(p / (1 - p)) equivalent to a binary dropout rate p (section 3.5).

    ``p`` a float or array in (0, 1); p = 1e-3 gives sigma ≈ 0.0316. Same shape out.
    """
    p_arr = np.asarray(p, np.float64)
    if np.any(p_arr <= 0) or np.any(p_arr >= 1):
        raise InputError.worded("p", f"scale_from_dropout: the dropout rate p must lie in (0, 1), got {p}")
    return np.sqrt(p_arr / (1.0 - p_arr)) if p_arr.ndim else math.sqrt(float(p_arr) / (1.0 - float(p_arr)))


def tile_components(x, num_components):
    """Repeat a batch K times component-major: (n, ...) -> (K n, ...), rows [k n, (k+1) n) = x."""
    return jnp.tile(x, (num_components,) + (1,) * (x.ndim - 1))


def split_components(x, num_components):
    """Undo the tiling layout: (K n, ...) -> (K, n, ...), ``out[k]`` = rows of component k."""
    if x.shape[0] % num_components:
        raise InputError.worded("x",
            f"x: expected a batch tiled over {num_components} components for rank-1 layers (a multiple of "
            f"{num_components} rows, see tile_components), got {x.shape[0]} rows"
        )
    return x.reshape((num_components, x.shape[0] // num_components) + x.shape[1:])


def rank1_apply(x, alpha, gamma, bias, linear_map, clip=DRAW_CLIP):
    """((x_k o alpha_k) @ W) o gamma_k + b_k for every component k (rank-1 paper eq. 3, section 3).

    Args:
      x: (K n, ..., c_in), tiled component-major.
      alpha: (K, c_in) input-side factors; gamma: (K, c_out) output-side; bias: (K, c_out) or None.
      linear_map: the shared linear operator, (m, ..., c_in) -> (m, ..., c_out) (matmul or conv by W).
      clip: draws of alpha and gamma are clipped to [-clip, clip] (None: no clipping).
    Returns: (K n, ..., c_out), equal to x_k @ (W o alpha_k gamma_kᵀ) + b_k row block by row block.
    """
    def scaled_map(xs, alpha):  # (K, n, ..., c_in), (K, c_in) -> (K, n, ..., c_out)
        scaled = xs * alpha.reshape((alpha.shape[0],) + (1,) * (xs.ndim - 2) + alpha.shape[-1:])
        return split_components(linear_map(scaled.reshape(x.shape)), alpha.shape[0])

    return _rank1_output(x, alpha, gamma, bias, scaled_map, clip)


TRUNCATED_SD = 0.87962566103423978
"""The standard deviation of a standard normal truncated to [-2, 2] (Haiku's ``TruncatedNormal`` divides by it)."""


def rank1_kernel_init(key, shape, fan_in: int):
    """Haiku's initialisation of a rank-1 layer's shared weight W outside Haiku (the NNX and Equinox layers): a
    normal truncated to two standard deviations, standard deviation 1 / sqrt(fan_in). Returns an array of `shape`."""
    return jax.random.truncated_normal(key, -2.0, 2.0, shape) * (1.0 / np.sqrt(fan_in) / TRUNCATED_SD)


def conv_nhwc(w, stride, padding: str):
    """The linear map of a 2-D convolution by `w` (kh, kw, c_in, c_out): z (m, H, W, c_in) -> (m, H', W', c_out),
    `stride` a pair, `padding` "SAME" or "VALID" (the shared operator of the rank-1 conv layers)."""
    def conv(z):
        return jax.lax.conv_general_dilated(z, w, stride, padding, dimension_numbers=("NHWC", "HWIO", "NHWC"))

    return conv


def rank1_dense_apply(x, alpha, gamma, bias, w, clip=DRAW_CLIP):
    """`rank1_apply` for a dense layer, ``linear_map = z @ w``, with the same output, whose gradient for alpha
    needs no product back to the layer's input when the input is not differentiated (`factor_scaled_matmul`).
    x (K n, c_in) tiled component-major, alpha (K, c_in), gamma (K, c_out), bias (K, c_out) or None,
    w (c_in, c_out) -> (K n, c_out)."""
    return _rank1_output(x, alpha, gamma, bias, lambda xs, alpha: factor_scaled_matmul(xs, alpha, w), clip)


def _rank1_output(x, alpha, gamma, bias, scaled_map, clip):
    """`rank1_apply`'s output with ``scaled_map(x split (K, n, ..., c_in), alpha) = (x_k o alpha_k) W`` per
    component (K, n, ..., c_out)."""
    num_components = alpha.shape[0]
    if clip is not None:
        alpha, gamma = jnp.clip(alpha, -clip, clip), jnp.clip(gamma, -clip, clip)
    feature_axes = (1,) * (x.ndim - 1)  # broadcast (K, c) over (K, n, ..., c)
    out = scaled_map(split_components(x, num_components), alpha)
    out = out * gamma.reshape((num_components,) + feature_axes + gamma.shape[-1:])
    if bias is not None:
        out = out + bias.reshape((num_components,) + feature_axes + bias.shape[-1:])
    return out.reshape((x.shape[0],) + out.shape[2:])


@jax.custom_jvp
def factor_scaled_matmul(x, alpha, w):
    """(x_k o alpha_k) @ W for every component k: x (K, n, c_in), alpha (K, c_in), w (c_in, c_out) ->
    (K, n, c_out), computed as one (K n, c_in) @ (c_in, c_out) product.

    Its derivative (a custom JVP, so forward and reverse mode both work) writes the change in alpha and W as
    the change of the per-component weight W_k = diag(alpha_k) W, d(W_k) = diag(d alpha_k) W + diag(alpha_k) dW,
    acting on x_k. Where x carries no tangent (a network's first layer: its input is data), the reverse mode then
    gets the gradients from the per-component weight gradient G_k = x_kᵀ g_k (g_k: the output's cotangent rows
    of component k), which the gradient of W needs anyway:

        d alpha_k = rowsum(G_k o W),    dW = sum_k diag(alpha_k) G_k,

    (the K products x_kᵀ g_k cost what the one product (x o alpha)ᵀ g for dW costs), so that alpha's gradient
    takes K x c_in x c_out elementwise work instead of the (K n, c_out) @ (c_out, c_in) product back to the input
    that autodiff of the forward computes. Where x has a tangent, that product is needed for x anyway, and the
    derivative is the forward's own (alpha's gradient from it, elementwise in K n x c_in).
    """
    return _scaled_matmul(x, alpha, w)


def _scaled_matmul(x, alpha, w):
    """(x_k o alpha_k) @ W as one (K n, c_in) @ (c_in, c_out) product: `factor_scaled_matmul`'s value."""
    scaled = (x * alpha[:, None, :]).reshape(-1, x.shape[-1])
    return (scaled @ w).reshape(x.shape[:2] + w.shape[-1:])


def _factor_scaled_matmul_jvp(primals, tangents):
    """`factor_scaled_matmul`'s JVP (its docstring): through the per-component weights where x has no tangent,
    the forward's own derivative otherwise; symbolic-zero tangents add no term."""
    x, alpha, w = primals
    dx, d_alpha, d_w = (None if isinstance(t, SymbolicZero) else t for t in tangents)
    out = _scaled_matmul(x, alpha, w)
    if dx is None:
        def d_weight(k):  # d(diag(alpha_k) W), (c_in, c_out)
            terms = ([] if d_alpha is None else [d_alpha[k][:, None] * w]) + \
                    ([] if d_w is None else [alpha[k][:, None] * d_w])
            return sum(terms[1:], terms[0])

        # component by component (K is static): reverse mode then sums diag(alpha_k) G_k and G_k o W as K
        # elementwise terms, which XLA's CPU backend compiles several times faster than one reduction over a
        # (K, c_in, c_out) array
        return out, jnp.stack([x[k] @ d_weight(k) for k in range(x.shape[0])])
    d_scaled = dx * alpha[:, None, :] if d_alpha is None else dx * alpha[:, None, :] + x * d_alpha[:, None, :]
    tangent = (d_scaled.reshape(-1, x.shape[-1]) @ w).reshape(out.shape)
    if d_w is not None:
        tangent = tangent + _scaled_matmul(x, alpha, d_w)
    return out, tangent


factor_scaled_matmul.defjvp(_factor_scaled_matmul_jvp, symbolic_zeros=True)


FIXABLE = ("w", "b")
"""Parameters a rank-1 layer can take as constants (W and the bias), e.g. for NUTS over r and s only."""


class _Rank1Factors(hk.Module):
    """Shared parameter creation: alpha (K, c_in), gamma (K, c_out), optional bias b (K, c_out).

    ``fixed``: {"w": array, "b": array} (either or both) used as constants instead of Haiku
    parameters, so the bridge makes no sample site for them.
    """

    def __init__(self, num_components, with_bias, sign_init, clip, fixed, name):
        super().__init__(name=name)
        if num_components < 1:
            raise InputError.worded("num_components", f"num_components must be >= 1, got {num_components}")
        unknown = sorted(set(fixed or {}) - set(FIXABLE))
        if unknown:
            raise InputError.worded("fixed", f"fixed: only {FIXABLE} can be fixed in a rank-1 layer, got {unknown}")
        self.num_components = num_components
        self.with_bias = with_bias
        self.sign_init = random_sign_init(sign_init)
        self.clip = clip
        self.fixed = dict(fixed or {})

    def _param(self, name, shape, dtype, init):
        if name not in self.fixed:
            return hk.get_parameter(name, list(shape), dtype, init=init)
        value = jnp.asarray(self.fixed[name], dtype)
        if value.shape != tuple(shape):
            raise InputError.worded(f"fixed[{name!r}]",
                                    f"fixed[{name!r}]: expected shape {tuple(shape)}, got {value.shape}")
        return value

    def _factors(self, c_in, c_out, dtype):
        def factor_init(shape, dtype):
            return self.sign_init(hk.next_rng_key(), shape, dtype)

        alpha = hk.get_parameter("alpha", [self.num_components, c_in], dtype, init=factor_init)
        gamma = hk.get_parameter("gamma", [self.num_components, c_out], dtype, init=factor_init)
        bias = None
        if self.with_bias:
            bias = self._param("b", (self.num_components, c_out), dtype, jnp.zeros)
        return alpha, gamma, bias


class Rank1Dense(_Rank1Factors):
    """Dense rank-1 layer: x (K n, c_in) -> ((x_k o alpha_k) W) o gamma_k + b_k, (K n, output_size).

    Parameters: ``w`` (c_in, output_size) with Haiku's Linear initialisation, ``alpha`` (K, c_in),
    ``gamma`` (K, output_size) initialised by ``random_sign_init(sign_init)``, ``b`` (K, output_size)
    zeros. ``fixed``: constants for ``w`` / ``b`` (see `_Rank1Factors`). Rank-1 paper section 3 / eq. 3;
    the reference layer ``DenseRank1`` computes the same.
    """

    def __init__(self, output_size, num_components, with_bias=True, sign_init=0.5, clip=DRAW_CLIP, fixed=None,
                 name=None):
        super().__init__(num_components, with_bias, sign_init, clip, fixed, name)
        self.output_size = output_size

    def __call__(self, x):
        c_in = x.shape[-1]
        w_init = hk.initializers.TruncatedNormal(stddev=1.0 / np.sqrt(c_in))
        w = self._param("w", (c_in, self.output_size), x.dtype, w_init)
        alpha, gamma, bias = self._factors(c_in, self.output_size, x.dtype)
        return rank1_dense_apply(x, alpha, gamma, bias, w, self.clip)


class Rank1Conv2D(_Rank1Factors):
    """2-D convolutional rank-1 layer, NHWC: x (K n, H, W, c_in) -> (K n, H', W', output_channels).

    alpha scales input channels, gamma output channels (as the reference layer ``Conv2DRank1``); ``w`` is
    (kh, kw, c_in, c_out) with He-style fan-in initialisation; ``padding`` "SAME" or "VALID".
    """

    def __init__(
        self, output_channels, kernel_shape, num_components, stride=1, padding="SAME", with_bias=True,
        sign_init=0.5, clip=DRAW_CLIP, fixed=None, name=None,
    ):
        super().__init__(num_components, with_bias, sign_init, clip, fixed, name)
        self.output_channels = output_channels
        self.kernel_shape = (kernel_shape,) * 2 if isinstance(kernel_shape, int) else tuple(kernel_shape)
        self.stride = (stride,) * 2 if isinstance(stride, int) else tuple(stride)
        if padding not in ("SAME", "VALID"):
            raise InputError.worded("padding", f"padding must be 'SAME' or 'VALID', got {padding!r}")
        self.padding = padding

    def __call__(self, x):
        c_in = x.shape[-1]
        fan_in = c_in * self.kernel_shape[0] * self.kernel_shape[1]
        w_init = hk.initializers.TruncatedNormal(stddev=1.0 / np.sqrt(fan_in))
        w = self._param("w", tuple(self.kernel_shape) + (c_in, self.output_channels), x.dtype, w_init)
        alpha, gamma, bias = self._factors(c_in, self.output_channels, x.dtype)

        return rank1_apply(x, alpha, gamma, bias, conv_nhwc(w, self.stride, self.padding), self.clip)


class ComponentMixture(Distribution):
    """Equal-weight mixture over K components, batch (n,), trained with either of two objectives.

    ``components``: a distribution of batch shape (n, K) (and any event shape). ``log_prob(y)`` (n,):
    ``"average"``: (1/K) sum_k log p_k(y), the average per-component log-likelihood (rank-1 paper
    section 3.4, the default); ``"mixture"``: log (1/K) sum_k p_k(y), the log-mixture likelihood.
    ``sample`` draws from the mixture (a uniformly chosen component per row) under both objectives.
    """

    arg_constraints: dict = {}
    pytree_data_fields = ("components",)
    pytree_aux_fields = ("objective",)

    def __init__(self, components, objective="average", *, validate_args=None):
        if objective not in OBJECTIVES:
            raise InputError.worded("objective", f"objective: expected one of {OBJECTIVES}, got {objective!r}")
        if len(components.batch_shape) != 2:
            raise InputError.worded("components",
                                    f"components: expected batch shape (n, K), got {components.batch_shape}")
        self.components = components
        self.objective = objective
        super().__init__(components.batch_shape[:1], components.event_shape, validate_args=validate_args)

    @property
    def support(self):
        """The components' support (e.g. integer labels for a categorical likelihood)."""
        return self.components.support

    @property
    def num_components(self):
        """K, the second batch axis of `components`."""
        return self.components.batch_shape[1]

    def component_log_prob(self, value):
        """log p_k(y_i): value (n, *event) -> (n, K)."""
        return self.components.log_prob(jnp.expand_dims(value, len(self.batch_shape)))

    def log_prob(self, value):
        """Training log-likelihood per example (n,) under ``objective`` (section 3.4)."""
        lp = self.component_log_prob(value)
        if self.objective == "average":
            return jnp.mean(lp, axis=-1)
        return jax.nn.logsumexp(lp, axis=-1) - math.log(self.num_components)

    def sample(self, key, sample_shape=()):
        """Mixture draws: sample_shape + (n,) + event, each row from a uniformly chosen component."""
        pick_key, draw_key = jax.random.split(key)
        draws = self.components.sample(draw_key, sample_shape)  # sample_shape + (n, K) + event
        k = jax.random.randint(pick_key, tuple(sample_shape) + self.batch_shape, 0, self.num_components)
        axis = k.ndim  # the component axis of `draws`
        index = k.reshape(k.shape + (1,) + (1,) * len(self.event_shape))
        return jnp.take_along_axis(draws, index, axis=axis).squeeze(axis)


class Rank1Likelihood:
    """A likelihood for networks whose output is tiled over K components, (K n, ...) for n examples.

    Wraps a base likelihood of ``models.likelihoods`` (categorical or normal). Training registers
    ``"y"`` (n,) with a `ComponentMixture` under ``objective`` ("average" per-component likelihood,
    the default, or "mixture"); evaluation (``log_prob``) always uses the log-mixture (rank-1 paper
    section 3.4) and ``predictive`` averages the components' probabilities -> (n, C); averaging
    over S posterior draws on top gives the K x S average the paper evaluates.
    """

    def __init__(self, base, num_components, objective="average"):
        if objective not in OBJECTIVES:
            raise InputError.worded("objective", f"objective: expected one of {OBJECTIVES}, got {objective!r}")
        if not isinstance(num_components, int) or num_components < 1:
            raise InputError.worded("num_components",
                                    f"num_components: expected a positive integer, got {num_components!r}")
        self.base = base
        self.num_components = num_components
        self.objective = objective
        self.classification = base.classification
        self.spec = {"kind": "rank1", "base": getattr(base, "spec", None), "num_components": num_components,
                     "objective": objective}

    def latent_sites(self):
        """The base likelihood's own latent sites (e.g. a learned noise), unchanged."""
        return self.base.latent_sites()

    def distribution(self, output, params, objective=None):
        """`ComponentMixture` of batch (n,) for network output (K n, ...)."""
        per_example = jnp.moveaxis(split_components(output, self.num_components), 0, 1)  # (n, K, ...)
        components = self.base.distribution(per_example, params)
        if len(components.batch_shape) > 2:
            components = components.to_event(len(components.batch_shape) - 2)
        return ComponentMixture(components, objective or self.objective)

    def sample(self, output, y, params, scale=None):
        """Register the observed site "y" (n,) with the training objective, scaled by `scale` (N / n)."""
        d = self.distribution(output, params)
        with numpyro.plate("data", d.batch_shape[0]), handlers.scale(scale=1.0 if scale is None else scale):
            return numpyro.sample("y", d, obs=y)

    def log_prob(self, output, y, params):
        """Log-mixture log p(y_i | x_i) = log (1/K) sum_k p(y_i | x_i, theta_k): (n,)."""
        return self.distribution(output, params, objective="mixture").log_prob(y)

    def predictive(self, output, params):
        """Component-averaged prediction: (K n, ...) -> (n, ...), e.g. class probabilities (n, C)."""
        return jnp.mean(split_components(self.base.predictive(output, params), self.num_components), axis=0)

    def log_predictive(self, output, params):
        """Log of the component-averaged class probabilities, log (1/K) sum_k p_k: (K n, C) -> (n, C), by a
        logsumexp over components (classification bases only)."""
        log_p = split_components(self.base.log_predictive(output, params), self.num_components)
        return jax.nn.logsumexp(log_p, axis=0) - math.log(self.num_components)


def rank1_likelihood(base, num_components, objective="average"):
    """`Rank1Likelihood` over `base` for K = `num_components` (rank-1 paper section 3.4)."""
    return Rank1Likelihood(base, num_components, objective)


def _lognormal(scale, loc=1.0):
    """LogNormal(log loc, scale) on every entry: positive factors with median `loc` (sd about loc * scale)."""
    from numpyro.distributions import LogNormal

    if not loc > 0:
        raise InputError.worded("factor_loc",
                                f"factor_loc: a log-normal factor prior needs factor_loc > 0, got {loc!r}")

    def prior(name, shape):
        return LogNormal(math.log(loc), scale).expand(tuple(shape))

    prior.spec = {"kind": "lognormal", "scale": scale, "loc": loc}
    return prior


def rank1_prior(factor="normal", factor_loc=1.0, factor_scale=0.1, weight_prior=None):
    """Prior for rank-1 models: Normal or Cauchy(factor_loc, factor_scale) on every ``*/alpha`` and
    ``*/gamma`` site (the rank-1 reference implementation's factor prior on CIFAR: loc 1, scale 0.1), or,
    with ``factor="lognormal"``, the positive-valued LogNormal(log factor_loc, factor_scale) (app. C.1),
    `weight_prior` (default Normal(0, 1), i.e. L2) on the rest.
    """
    factor_priors = {"normal": priors_lib.normal, "cauchy": priors_lib.cauchy, "lognormal": _lognormal}
    if factor not in factor_priors:
        raise InputError.worded("factor", f"factor: expected 'normal', 'cauchy' or 'lognormal', got {factor!r}")
    fp = factor_priors[factor](factor_scale, loc=factor_loc)
    return priors_lib.by_pattern({f"*/{s}": fp for s in RANK1_SITE_SUFFIXES},
                                 default=weight_prior or priors_lib.normal(1.0))


class Rank1MLP(hk.Module):
    """Rank-1 MLP: x (n, ...) flattened, tiled K times, Rank1Dense layers -> (K n, num_outputs).

    Sites ``{name}/rank1_dense_{i}/{w, b, alpha, gamma}``; activations from
    ``models.networks.mlp.ACTIVATIONS`` between layers. ``fixed``: {site name: array} of W and bias
    sites to hold constant (e.g. an SVI posterior's median), leaving only alpha and gamma random: the
    model NUTS samples in the rank-1 paper's "r and s sampled, W fixed" setting.
    """

    def __init__(self, hidden, num_outputs, num_components, activation="relu", sign_init=0.5, fixed=None,
                 name="rank1_mlp"):
        super().__init__(name=name)
        self.fixed = dict(fixed or {})
        self.widths = tuple(int(h) for h in hidden) + (int(num_outputs),)
        self.num_components = num_components
        self.act = activation_fn(activation)
        self.sign_init = sign_init

    def __call__(self, x):
        h = tile_components(x.reshape(x.shape[0], -1), self.num_components)
        for i, width in enumerate(self.widths):
            layer = f"rank1_dense_{i}"
            fixed = {p: self.fixed[f"{self.module_name}/{layer}/{p}"] for p in FIXABLE
                     if f"{self.module_name}/{layer}/{p}" in self.fixed}
            h = Rank1Dense(width, self.num_components, sign_init=self.sign_init, fixed=fixed, name=layer)(h)
            if i < len(self.widths) - 1:
                h = self.act(h)
        return h


def rank1_mlp(hidden, num_outputs, num_components, activation="relu", sign_init=0.5, fixed=None,
              name="rank1_mlp"):
    """Network function for `models.bnn`: x (n, D) -> (K n, num_outputs) through a `Rank1MLP`.

    ``fixed``: {site: array} of W / bias sites held constant (see `Rank1MLP`); other keys are ignored.
    """

    def network(x):
        return Rank1MLP(hidden, num_outputs, num_components, activation, sign_init, fixed, name)(x)

    return network
