"""The dense and convolution layers of any network the bridge runs (Haiku, Flax NNX, Equinox), found in its
traced program: what KFAC needs (each layer's input activations a and output gradients g) and the order in
which the network uses its weights (which sites form the last layer), without knowing the module library.

The network ``x -> model.apply(params, x, state)`` is traced once with ``jax.make_jaxpr``; an interpreter walks
its equations, following each weight site's value through dtype conversions and inlined ``jit`` calls. A layer is
a ``dot_general`` (without batch dimensions) or a ``conv_general_dilated`` (one feature group) with exactly one
weight-site operand (the site's value itself, or its axes transposed: Equinox's layout). Run again (`tapped_apply`), the interpreter returns each layer's activation operand and adds a
perturbation eps_l to its output, so that d output / d eps_l is the layer's output gradient g.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.extend as jex
import jax.numpy as jnp
import numpy as np

INLINED = ("pjit", "jit", "closed_call", "core_call")
"""Call primitives whose body the interpreter walks when a weight enters them (others are run as they are)."""
ALIASES = ("convert_element_type", "copy", "copy_p")
"""Primitives whose output is still the weight site (same values)."""


class Layer(NamedTuple):
    """One dense or convolution layer: its weight `site`, `kind` ("dense" / "conv"), the weight's axes in
    (inputs..., outputs...) order (`perm`) with `split` input axes, and how its operands are laid out (`layout`:
    the equation's parameters that `input_rows` / `output_rows` need)."""

    site: str
    kind: str
    perm: tuple
    split: int
    layout: tuple


@dataclass
class _Context:
    """What one interpreter run collects: layers, the order weights are used in, activations; `eps` added to outputs."""

    eps: list | None = None
    layers: list | None = None
    outputs: list | None = None
    activations: list | None = None
    order: list | None = None


def _layer_of(eqn, tags, invals) -> Layer | None:
    """The `Layer` of equation `eqn` when it is one (module docstring), else None. `tags`: per operand None or
    (site, axes): the operand is the site's value with its axes permuted (operand axis i = site axis axes[i])."""
    name = eqn.primitive.name
    if name == "dot_general":
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        if lb or rb or (tags[0] is None) == (tags[1] is None):
            return None
        w = 0 if tags[0] is not None else 1
        site, axes = tags[w]
        wc, qc = (lc, rc) if w == 0 else (rc, lc)
        wfree = [i for i in range(np.ndim(invals[w])) if i not in wc]
        qfree = [i for i in range(np.ndim(invals[1 - w])) if i not in qc]
        perm = tuple(axes[i] for i in tuple(wc) + tuple(wfree))
        return Layer(site, "dense", perm, len(wc), (w, tuple(qc), tuple(qfree), len(wfree)))
    if name == "conv_general_dilated" and tags[1] is not None and tags[0] is None:
        p = eqn.params
        if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
            return None
        site, axes = tags[1]
        lhs_spec, rhs_spec, out_spec = p["dimension_numbers"]
        perm = tuple(axes[i] for i in (rhs_spec[1],) + tuple(rhs_spec[2:]) + (rhs_spec[0],))
        filter_shape = tuple(np.shape(invals[1])[i] for i in rhs_spec[2:])
        layout = (filter_shape, p["window_strides"], p["padding"], p["lhs_dilation"], p["rhs_dilation"],
                  p["dimension_numbers"])
        return Layer(site, "conv", perm, 1 + len(filter_shape), layout)
    return None


def _out_tag(name: str, params: dict, tag):
    """The tag of an equation's output whose first operand carries `tag` (see `_layer_of`): kept by a dtype
    conversion or copy, its axes permuted by a transpose, lost by any other operation."""
    if tag is None:
        return None
    if name in ALIASES:
        return tag
    if name == "transpose":
        site, axes = tag
        return site, tuple(axes[i] for i in params["permutation"])
    return None


def _evaluate(jaxpr, consts, args, arg_tags, ctx: _Context):
    """Evaluate `jaxpr` on `args` ((out values), (out tags)); `arg_tags`: the weight site of each arg or None."""
    env: dict = {}
    tags: dict = {}

    def read(v):
        return v.val if isinstance(v, jex.core.Literal) else env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a, t in zip(jaxpr.invars, args, arg_tags):
        env[v] = a
        if t is not None:
            tags[v] = t
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        intags = [None if isinstance(v, jex.core.Literal) else tags.get(v) for v in eqn.invars]
        name = eqn.primitive.name
        inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
        if name in INLINED and inner is not None and any(t is not None for t in intags):
            closed = inner if hasattr(inner, "consts") else jex.core.ClosedJaxpr(inner, ())
            outs, outtags = _evaluate(closed.jaxpr, closed.consts, invals, intags, ctx)
        else:
            bind_params = eqn.primitive.get_bind_params(eqn.params)
            if isinstance(bind_params, tuple):  # JAX before 0.7: (subfuns, params)
                result = eqn.primitive.bind(*bind_params[0], *invals, **bind_params[1])
            else:
                result = eqn.primitive.bind(*invals, **bind_params)
            outs = list(result) if eqn.primitive.multiple_results else [result]
            outtags = [_out_tag(name, eqn.params, intags[0])] + [None] * (len(outs) - 1)
            if ctx.order is not None:
                ctx.order.extend(t[0] for t in intags if t is not None)
            layer = _layer_of(eqn, intags, invals)
            if layer is not None:
                index = len(ctx.activations) if ctx.activations is not None else len(ctx.layers or [])
                if ctx.layers is not None:
                    ctx.layers.append(layer)
                if ctx.outputs is not None:
                    ctx.outputs.append(jax.ShapeDtypeStruct(np.shape(outs[0]), outs[0].dtype))
                if ctx.activations is not None:
                    ctx.activations.append(invals[1] if layer.kind == "dense" and layer.layout[0] == 0
                                           else invals[0])
                if ctx.eps is not None:
                    outs[0] = outs[0] + ctx.eps[index]
        for v, o, t in zip(eqn.outvars, outs, outtags):
            env[v] = o
            if t is not None:
                tags[v] = t
    return [read(v) for v in jaxpr.outvars], [tags.get(v) for v in jaxpr.outvars]


def _run(model, center: dict, names, x, state, ctx: _Context):
    """The network output (B, out) at `center` for x, interpreted with `ctx` (the sites `names` tagged)."""
    names = sorted(names)

    def fn(weights, xs):
        return model.apply({**center, **weights}, xs, state)

    weights = {k: center[k] for k in names}
    closed = jax.make_jaxpr(fn)(weights, x)
    leaves = jax.tree_util.tree_leaves(weights)  # sorted-key order: `names`
    tags = [(k, tuple(range(np.ndim(center[k])))) for k in names]
    out, _ = _evaluate(closed.jaxpr, closed.consts, leaves + [x], tags + [None], ctx)
    return out[0]


def find_layers(model, center: dict, names, x, state) -> tuple[list, list, list]:
    """(layers, order, outputs) of the network at `center` for inputs like x (B, *feature_shape): the `Layer` of
    every dense / convolution equation with one of the sites `names` as its weight, in execution order, the sites
    in the order the network's equations use them (repeats kept) and each layer's output shape
    (``jax.ShapeDtypeStruct``). Traced abstractly: nothing is computed."""
    layers: list = []
    order: list = []
    outputs: list = []
    ctx = _Context(layers=layers, order=order, outputs=outputs)
    jax.eval_shape(lambda c, xs: _run(model, c, names, xs, state, ctx), center, x)
    return layers, order, outputs


def tapped_apply(model, center: dict, names, x, state, eps: list):
    """(output (B, out), [activation operand of layer l]): the network at `center` with eps[l] added to the
    output of layer l (`find_layers`' order; each eps[l] shaped like that output)."""
    ctx = _Context(eps=list(eps), activations=[])
    out = _run(model, center, names, x, state, ctx)
    return out, ctx.activations


def input_rows(layer: Layer, activation) -> jax.Array:
    """(R, P_in): the layer's inputs as rows a_r (dense: one per example and free position; conv: one patch per
    example and output location), columns in the order of the weight's `perm`-ed input axes."""
    if layer.kind == "dense":
        _, qc, qfree, _ = layer.layout
        return jnp.transpose(activation, tuple(qfree) + tuple(qc)).reshape(-1, int(np.prod(
            [activation.shape[i] for i in qc])))
    filter_shape, strides, padding, lhs_dil, rhs_dil, dn = layer.layout
    patches = jax.lax.conv_general_dilated_patches(activation, filter_shape, strides, padding, lhs_dil, rhs_dil,
                                                   dn)
    return _feature_last(patches, dn.out_spec[1])


def output_rows(layer: Layer, grad) -> jax.Array:
    """(R, P_out): the gradient at the layer's output as rows g_r, matching `input_rows` row for row."""
    if layer.kind == "dense":
        w, _, qfree, nwfree = layer.layout
        if w == 0:  # output axes: (weight free..., activation free...)
            grad = jnp.transpose(grad, tuple(range(nwfree, grad.ndim)) + tuple(range(nwfree)))
        width = int(np.prod(grad.shape[grad.ndim - nwfree:])) if nwfree else 1
        return grad.reshape(-1, width)
    return _feature_last(grad, layer.layout[-1].out_spec[1])


def _feature_last(value, feature_axis: int) -> jax.Array:
    """(R, C): `value` with its `feature_axis` moved last and every other axis flattened into rows."""
    return jnp.moveaxis(value, feature_axis, -1).reshape(-1, value.shape[feature_axis])
