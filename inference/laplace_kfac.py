"""KFAC: Kronecker-factored GGN blocks for the dense and convolution weights of a network (Martens & Grosse 2015;
for convolutions the "expand" factors of Grosse & Martens 2016 / Eschenhagen et al. 2023, eq. for KFAC-expand).

For a weight W used as s = a W at R_n positions per example (R = 1 for a dense layer, the output locations of a
convolution, a the input patch), with the exact output-Hessian factor M_n (K columns m_k,
`inference.laplace_curvature.output_hessian_factor`) and g_{n,r,k} = d (f_n . m_k) / d s_{n,r} the layer's output
gradient:

    GGN_W ~= A (x) G,  A = 1 / (N R) sum_{n,r} a_{n,r} a_{n,r}^T,  G = sum_{n,r,k} g_{n,r,k} g_{n,r,k}^T,

in the order of the weight's (inputs, outputs) reshaping. It is exact for one example at one position (then
GGN_W = sum_k (a (x) g_k)(a (x) g_k)^T = a a^T (x) sum_k g_k g_k^T). The factor M is exact, not a sampled label
(no Monte-Carlo Fisher). Sites that are not such a weight (biases, normalisation scales) get the exact diagonal of
their GGN block. The layers are found in the traced program (`inference.laplace_layers`), so Haiku, Flax NNX and
Equinox networks are handled alike.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from base.value_key import Static
from inference.laplace_blocks import diag_blocks, kfac_block
from inference.laplace_curvature import CHUNK_BYTES, ggn, output_hessian_factor, padded_chunks
from inference.laplace_layers import find_layers, input_rows, output_rows, tapped_apply


def kfac_blocks(model, center: dict, names, x, state, chunk_size: int | None = None) -> list:
    """The KFAC blocks of the sites `names` over x (N, *feature_shape) at `center` (module docstring): one
    ``"kfac"`` block per dense / convolution weight used by one layer, and one ``"diag"`` block per other site. Summed over chunks of `chunk_size` examples (default: the per-example outputs of every layer and the
    factor gradients under `CHUNK_BYTES`)."""
    names = list(names)
    layers, _, outputs = find_layers(model, center, names, x[:1], state)
    uses = [layer.site for layer in layers]
    kept = [i for i, layer in enumerate(layers) if uses.count(layer.site) == 1]
    n = x.shape[0]
    if chunk_size is None:
        width = model.output_width(x.shape[1:])
        per_example = sum(math.prod(s.shape) for s in outputs) * (width + 1) + width
        chunk_size = max(1, min(n, CHUNK_BYTES // (4 * per_example)))
    a_sum: list = [0.0] * len(layers)
    g_sum: list = [0.0] * len(layers)
    positions = [0] * len(layers)
    for xb, weight, m in padded_chunks(x, chunk_size):
        a_part, g_part, per_example = _chunk_factors(Static(model), tuple(names), tuple(layers), center, xb,
                                                     weight, state)
        for i in kept:
            a_sum[i] = a_sum[i] + np.asarray(a_part[i], np.float64)
            g_sum[i] = g_sum[i] + np.asarray(g_part[i], np.float64)
            positions[i] += int(per_example[i]) * m
    blocks = [kfac_block(layers[i].site, a_sum[i] / positions[i], g_sum[i], layers[i].perm, layers[i].split)
              for i in kept]
    done = {layers[i].site for i in kept}
    rest = [k for k in names if k not in done]
    if rest:
        shapes = {k: np.shape(center[k]) for k in rest}
        blocks.extend(diag_blocks(rest, ggn(model, center, rest, x, state, "diag", chunk_size), shapes))
    return blocks


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _chunk_factors(static: Static, names: tuple, layers: tuple, center, x, weight, state):
    """([sum_r a a^T], [sum_{r,k} g g^T], [positions R per example]) per layer of one chunk x (B, ...); rows of
    padding (`weight` 0) contribute nothing. R is static (a Python int)."""
    model = static.obj
    _, _, outputs = find_layers(model, center, names, x, state)
    eps = [jnp.zeros(s.shape, s.dtype) for s in outputs]
    out, pullback, acts = jax.vjp(lambda e: tapped_apply(model, center, names, x, state, e), eps, has_aux=True)
    factors = output_hessian_factor(model.likelihood, out, center) * weight[:, None, None]
    grads = jax.vmap(lambda m: pullback(m)[0])(jnp.moveaxis(factors, 2, 0))  # per layer: (K, *output shape)
    a_out, g_out, per_example = [], [], []
    for layer, act, g in zip(layers, acts, grads):
        a = input_rows(layer, act)
        r = a.shape[0] // x.shape[0]
        a = a * jnp.repeat(weight, r)[:, None]
        rows_g = jax.vmap(lambda gk, layer=layer: output_rows(layer, gk))(g)
        a_out.append(a.T @ a)
        g_out.append(jnp.einsum("kri,krj->ij", rows_g, rows_g))
        per_example.append(r)
    return a_out, g_out, per_example
