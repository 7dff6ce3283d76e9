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
    ``"kfac"`` block per dense / convolution weight used by one layer, and one ``"diag"`` block per other site.
    Summed over chunks of `chunk_size` examples (default: the per-example outputs of every layer and the factor
    gradients under `CHUNK_BYTES`)."""
    return _layer_blocks(model, center, names, x, state, chunk_size, "kfac")


def diag_layer_blocks(model, center: dict, names, x, state, chunk_size: int | None = None) -> list:
    """One ``"diag"`` block per site of `names`: the exact GGN diagonal, for the weight of a dense layer used once
    at one position per example from the layer's own factors, sum_{n,k} (a_n * a_n) (g_{n,k} * g_{n,k})^T (no
    per-example gradient of the weight is formed), for every other site by per-example gradients
    (`inference.laplace_curvature.ggn`)."""
    return _layer_blocks(model, center, names, x, state, chunk_size, "diag")


def _layer_blocks(model, center: dict, names, x, state, chunk_size: int | None, mode: str) -> list:
    """`kfac_blocks` (mode "kfac") or `diag_layer_blocks` ("diag"), in one pass over the data for the layers."""
    names = list(names)
    layers, _, outputs = find_layers(model, center, names, x[:1], state)
    uses = [layer.site for layer in layers]
    kept = [i for i, layer in enumerate(layers) if uses.count(layer.site) == 1
            and (mode == "kfac" or (layer.kind == "dense" and math.prod(outputs[i].shape) == _fan(center, layer)[1]))]
    n = x.shape[0]
    chunk = chunk_size
    if chunk is None:
        width = model.output_width(x.shape[1:])
        per_example = sum(math.prod(s.shape) for s in outputs) * (width + 1) + width
        chunk = max(1, min(n, CHUNK_BYTES // (4 * per_example)))
    sums: list = [[0.0, 0.0] for _ in layers]
    positions = [0] * len(layers)
    for xb, weight, m in padded_chunks(x, chunk):
        parts, per_example = _chunk_factors(Static(model), tuple(names), tuple(layers), mode, center, xb, weight,
                                            state)
        for i in kept:
            sums[i] = [total + np.asarray(part, np.float64) for total, part in zip(sums[i], parts[i])]
            positions[i] += int(per_example[i]) * m
    if mode == "kfac":
        blocks = [kfac_block(layers[i].site, sums[i][0] / positions[i], sums[i][1], layers[i].perm, layers[i].split)
                  for i in kept]
    else:  # the (inputs, outputs) matrix back in the site's own axis order
        blocks = [diag_blocks([layers[i].site], _site_order(sums[i][0], center, layers[i]).ravel(),
                              {layers[i].site: np.shape(center[layers[i].site])})[0] for i in kept]
    done = {layers[i].site for i in kept}
    rest = [k for k in names if k not in done]
    if rest:
        shapes = {k: np.shape(center[k]) for k in rest}
        blocks.extend(diag_blocks(rest, ggn(model, center, rest, x, state, "diag", chunk_size), shapes))
    if mode == "diag":  # one block per site, in the sites' order
        blocks.sort(key=lambda block: names.index(block.sites[0]))
    return blocks


def _fan(center: dict, layer) -> tuple[int, int]:
    """(fan-in, fan-out) of `layer`'s weight: the sizes of its input and output axes."""
    shape = np.shape(center[layer.site])
    return (math.prod(shape[i] for i in layer.perm[:layer.split]), math.prod(shape[i] for i in layer.perm[layer.split:]))


def _site_order(matrix: np.ndarray, center: dict, layer) -> np.ndarray:
    """A (fan-in, fan-out) matrix over `layer`'s weight entries in (inputs, outputs) order, as an array of the
    site's own shape."""
    shape = np.shape(center[layer.site])
    permuted = np.reshape(matrix, tuple(shape[i] for i in layer.perm))
    return np.transpose(permuted, tuple(int(i) for i in np.argsort(layer.perm)))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _chunk_factors(static: Static, names: tuple, layers: tuple, mode: str, center, x, weight, state):
    """(per layer: [sum_r a a^T, sum_{r,k} g g^T] (mode "kfac") or [sum_{n,k} (a a) (g g)^T] ("diag"), per layer:
    positions R per example) of one chunk x (B, ...); rows of padding (`weight` 0) contribute nothing. R is
    static (a Python int)."""
    model = static.obj
    _, _, outputs = find_layers(model, center, names, x, state)
    eps = [jnp.zeros(s.shape, s.dtype) for s in outputs]
    out, pullback, acts = jax.vjp(lambda e: tapped_apply(model, center, names, x, state, e), eps, has_aux=True)
    factors = output_hessian_factor(model.likelihood, out, center) * weight[:, None, None]
    grads = jax.vmap(lambda m: pullback(m)[0])(jnp.moveaxis(factors, 2, 0))  # per layer: (K, *output shape)
    parts, per_example = [], []
    for layer, act, g in zip(layers, acts, grads):
        a = input_rows(layer, act)
        r = a.shape[0] // x.shape[0]
        a = a * jnp.repeat(weight, r)[:, None]
        rows_g = jax.vmap(lambda gk, layer=layer: output_rows(layer, gk))(g)
        if mode == "kfac":
            parts.append([a.T @ a, jnp.einsum("kri,krj->ij", rows_g, rows_g)])
        else:  # one position per example (R = 1) for the layers the result is kept for
            parts.append([jnp.einsum("ri,krj->ij", a * a, rows_g * rows_g)])
        per_example.append(r)
    return parts, per_example
