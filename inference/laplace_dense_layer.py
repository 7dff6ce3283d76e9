"""The exact GGN of one dense layer (its weight W and bias b) from the layer's own per-example factors, about ten
times cheaper than stacking per-example gradients (`inference.laplace_curvature.ggn`) for a last layer of 400 x 10.

For a dense layer s = a W + b used once per example (a the input, g_{n,k} = d (f_n . m_k) / d s_n the output
gradient for column k of the output-Hessian factor M_n), the per-example gradient of (W, b) along m_k is
a~_n (x) g_{n,k} with a~ = (a, 1) (the bias as one more input row; (1, a) when b comes before W in the sites'
order). So the GGN is exactly

    GGN = sum_n (a~_n a~_n^T) (x) Gamma_n,  Gamma_n = sum_k g_{n,k} g_{n,k}^T,

computed chunk by chunk as a (P_in + 1)^2 x P_out^2 contraction instead of an (N K) x P x P product. The bias is
checked to enter as s + b (its per-example gradient must equal g on the first examples); otherwise, or for any
other sites, `dense_layer_ggn` returns None and the caller uses the general path.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from base.value_key import Static
from inference.laplace_curvature import CHUNK_BYTES, factor_gradients, output_hessian_factor, padded_chunks
from inference.laplace_layers import find_layers, input_rows, output_rows, tapped_apply


def dense_layer_ggn(model, center: dict, sites, x, state) -> np.ndarray | None:
    """The exact GGN (P, P) float64 of `sites` over x (N, *feature_shape) at `center`, flattened as
    `inference.laplace_curvature.ggn` flattens them, when `sites` are one dense layer's weight (used once, one
    position per example) and optionally its bias (module docstring); None otherwise."""
    sites = list(sites)
    layers, _, outputs = find_layers(model, center, sites, x[:1], state)
    mine = [i for i, layer in enumerate(layers) if layer.site in sites]
    if len(mine) != 1 or len({layer.site for layer in layers if layer.site in sites}) != 1:
        return None
    index = mine[0]
    layer = layers[index]
    shape = np.shape(center[layer.site])
    fan_in = math.prod(shape[i] for i in layer.perm[:layer.split])
    fan_out = math.prod(shape[i] for i in layer.perm[layer.split:])
    rest = [s for s in sites if s != layer.site]
    if layer.kind != "dense" or math.prod(outputs[index].shape) != fan_out or len(rest) > 1 or (
            rest and np.shape(center[rest[0]]) != (fan_out,)):
        return None
    bias_first = bool(rest) and sites.index(rest[0]) < sites.index(layer.site)
    if rest and not _bias_adds_to_output(model, center, sites, index, rest[0], x[:2], state):
        return None
    rows = fan_in + (1 if rest else 0)
    chunk_size = max(1, min(x.shape[0], CHUNK_BYTES // (4 * rows * rows)))
    total = np.zeros((rows, fan_out, rows, fan_out), np.float64)
    for xb, weight, _ in padded_chunks(x, chunk_size):
        total += np.asarray(_chunk(Static(model), tuple(sites), tuple(layers), index, bool(rest), bias_first,
                                   center, xb, weight, state), np.float64)
    total = total.reshape(rows * fan_out, rows * fan_out)
    # the weight's entries in (inputs, outputs) order -> the site's own row-major order (identity for (in, out))
    order = np.arange(math.prod(shape)).reshape(tuple(shape[i] for i in layer.perm))
    order = np.transpose(order, tuple(int(i) for i in np.argsort(layer.perm))).ravel()  # site entry -> perm entry
    offset = fan_out if bias_first else 0
    where = np.arange(rows * fan_out)
    where[offset:offset + order.size] = order + offset
    return total[np.ix_(where, where)]


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4, 5))
def _chunk(static: Static, sites: tuple, layers: tuple, index: int, with_bias: bool, bias_first: bool, center, x,
           weight, state):
    """sum_n (a~ a~^T) (x) Gamma_n over one chunk, as (rows, out, rows, out)."""
    model = static.obj
    _, _, outputs = find_layers(model, center, sites, x, state)
    eps = [jnp.zeros(s.shape, s.dtype) for s in outputs]
    out, pullback, acts = jax.vjp(lambda e: tapped_apply(model, center, sites, x, state, e), eps, has_aux=True)
    factors = output_hessian_factor(model.likelihood, out, center) * weight[:, None, None]
    grads = jax.vmap(lambda m: pullback(m)[0][index])(jnp.moveaxis(factors, 2, 0))  # (K, *output shape)
    a = input_rows(layers[index], acts[index])  # (B, in)
    if with_bias:
        ones = jnp.ones((a.shape[0], 1), a.dtype)
        a = jnp.concatenate([ones, a] if bias_first else [a, ones], axis=1)
    g = jax.vmap(lambda gk: output_rows(layers[index], gk))(grads)  # (K, B, out)
    gamma = jnp.einsum("kbi,kbj->bij", g, g)
    return jnp.einsum("bp,bq,bij->piqj", a, a, gamma)


def _bias_adds_to_output(model, center, sites, index: int, bias: str, x, state) -> bool:
    """Whether the per-example gradient of the bias site along M equals the output gradient g of layer `index`
    (of `find_layers` over `sites`) on x (a few examples): the bias enters as s + b."""
    along_bias = np.asarray(factor_gradients(model, center, (bias,), x, state))  # (B, K, out)
    layers, _, outputs = find_layers(model, center, sites, x, state)
    eps = [jnp.zeros(s.shape, s.dtype) for s in outputs]
    out, pullback, _ = jax.vjp(lambda e: tapped_apply(model, center, sites, x, state, e), eps, has_aux=True)
    factors = output_hessian_factor(model.likelihood, out, center)
    g = jax.vmap(lambda m: output_rows(layers[index], pullback(m)[0][index]))(jnp.moveaxis(factors, 2, 0))
    return bool(np.allclose(np.moveaxis(np.asarray(g), 0, 1), along_bias, rtol=1e-4, atol=1e-6))
