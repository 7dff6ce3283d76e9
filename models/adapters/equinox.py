"""The Equinox adapter (`models.adapters`): an ``eqx.Module`` instance, or the pair (module, ``eqx.nn.State``)
that ``eqx.nn.make_with_state`` returns for a network with batch norm.

The module is Equinox's usual per-example function, mapped over the batch here: ``module(x_i) -> out_i``, or
``module(x_i, state) -> (out_i, state)`` with state, under ``jax.vmap(..., axis_name="batch")`` (so a
``BatchNorm`` is built with ``axis_name="batch"``). Training mode runs the module as given; evaluation mode
(predictions, NUTS) as ``eqx.nn.inference_mode(module)`` (batch norm reads its running statistics).

Batched modules: a module whose class sets ``batched: ClassVar[bool] = True`` takes the whole batch instead,
``module(x) -> out`` ((B, ...) -> (B, out)), or ``module(x, state) -> (out, state)``, called once and not mapped:
a layer that needs the batch, such as the rank-1 layers of `models.eqx_rank1` (their batches are tiled over the
mixture's components, `models.rank1.tile_components`). Batch norm in a batched module works when the module maps
its ``BatchNorm`` over the batch itself (``jax.vmap(self.bn, axis_name="batch", in_axes=(0, None),
out_axes=(0, None))``, the ``axis_name`` the norm was built with); the adapter passes the state through.

Sites: every floating-point array of the module, named by its path ("layers/0/weight", "layers/0/bias").
Equinox stores a Linear weight (out, in), a Conv weight (out, in, *kernel) and a Conv bias (out, 1, ..., 1);
their sites hold them in the layout of Haiku and NNX, inputs first and outputs last ((in, out), (*kernel, in,
out), (out,)), so that fan-in priors, the guides' scale caps and a bias's layer fan-in (`models.priors.fan_in`)
read them alike. Other arrays keep Equinox's layout. State: the arrays of the ``eqx.nn.State`` {path: array}.
One array held at two places (a layer shared by two attributes: Equinox's pytree lists its arrays once per place)
is ONE site, named by its first path, and every place reads it (NNX's graph does the same).

Refused at construction (InputError naming ``network``, before anything is traced; issue 45): an active
``eqx.nn.Dropout`` (p > 0 and not ``inference=True``: the adapter passes no key, so it would fail or be ignored;
MC dropout is the ``binary_dropout`` guide), a stateful layer (``BatchNorm``: an ``eqx.nn.StateIndex``) without its
``eqx.nn.State`` (pass the pair ``eqx.nn.make_with_state(Net)(...)`` returns), a module with no floating-point
array, a ``__call__`` with required arguments besides x (and the state).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from base.errors import InputError
from models.adapters import flat_named, path_name, require
from models.adapters.arrays import ArrayModuleAdapter, check_call, check_parameters


def _follow(tree, key_path):
    """The node of `tree` at `key_path` (attribute, index and key entries), or None where the path leaves it."""
    node = tree
    for entry in key_path:
        if hasattr(entry, "name"):
            node = getattr(node, entry.name, None)
        elif hasattr(entry, "idx"):
            node = node[entry.idx]
        elif hasattr(entry, "key"):
            node = node[entry.key]
        else:
            return None
    return node


def site_layout(eqx, owner, name: str, ndim: int) -> tuple | None:
    """The permutation taking an Equinox array to its site's layout: (1, 0) for a Linear ``weight`` (out, in),
    (2, ..., ndim - 1, 1, 0) for a Conv ``weight`` (out, in, *kernel), the axes dropped for a Conv ``bias``
    (out, 1, ..., 1) (the empty tuple); None (kept) for any other array."""
    if isinstance(owner, eqx.nn.Linear) and name == "weight" and ndim == 2:
        return (1, 0)
    if isinstance(owner, eqx.nn.Conv) and name == "weight":
        return tuple(range(2, ndim)) + (1, 0)
    if isinstance(owner, eqx.nn.Conv) and name == "bias" and ndim > 1:
        return ()
    return None


def to_site(value, layout):
    """An Equinox array in its site's layout (`site_layout`)."""
    if layout is None:
        return value
    return jnp.reshape(value, value.shape[:1]) if layout == () else jnp.transpose(value, layout)


def is_batched(module) -> bool:
    """Whether `module`'s class declares ``batched = True`` (a `ClassVar`): the adapter then calls it on the whole
    batch (module docstring) instead of mapping it over examples."""
    batched = getattr(type(module), "batched", False)
    if not isinstance(batched, bool):
        raise InputError(f"{type(module).__name__}.batched", batched, "a bool class attribute (ClassVar[bool])")
    return batched


def check_layers(eqx, module, state) -> None:
    """Refuse (InputError naming ``network``) an active Dropout, or a stateful layer when `state` is None (module
    docstring); the message names the layer's path."""
    kinds = (eqx.nn.Dropout, eqx.nn.StateIndex)
    nodes = jax.tree_util.tree_flatten_with_path(module, is_leaf=lambda n: isinstance(n, kinds))[0]
    name = type(module).__name__
    for path, node in nodes:
        where = path_name(path) or "(the module itself)"
        if isinstance(node, eqx.nn.Dropout) and node.p > 0 and not node.inference:
            raise InputError("network", f"<{name} with an active eqx.nn.Dropout {where!r} (p={node.p})>",
                             "a module without active dropout (p=0 or inference=True)",
                             "the bridge passes no dropout key; a zoo model's randomness is its weights' posterior: "
                             "for MC dropout use the binary_dropout guide")
        if isinstance(node, eqx.nn.StateIndex) and state is None:
            raise InputError("network", f"<{name} with a stateful layer at {where!r} and no eqx.nn.State>",
                             "the pair (module, state) that eqx.nn.make_with_state(Net)(...) returns",
                             "a BatchNorm keeps its statistics in an eqx.nn.State")


class EquinoxAdapter(ArrayModuleAdapter):
    """`module` (an ``eqx.Module``) with its `state` (an ``eqx.nn.State`` or None) as the bridge sees it."""

    library = "equinox"

    def __init__(self, module, state=None):
        eqx = require("equinox")
        check_layers(eqx, module, state)
        self._batched = is_batched(module)
        check_call(module, ("x", "state") if state is not None else ("x",), "equinox")
        self.module = module
        params, self._static_train = eqx.partition(module, eqx.is_inexact_array)
        self._static_eval = eqx.partition(eqx.nn.inference_mode(module, True), eqx.is_inexact_array)[1]
        with_paths, self._param_tree = jax.tree_util.tree_flatten_with_path(params)
        first: dict = {}  # {id of an array: the site of its first place} (a shared layer's arrays: one site)
        self._param_names = []  # the site each leaf reads, in the tree's order
        self._layouts: dict = {}  # {site: (site_layout's permutation or None, Equinox's shape)}
        self._params = {}
        for path, leaf in with_paths:
            name = first.setdefault(id(leaf), path_name(path))
            self._param_names.append(name)
            if name in self._params:
                continue
            layout = site_layout(eqx, _follow(module, path[:-1]), name.rpartition("/")[2], np.ndim(leaf))
            self._layouts[name] = (layout, np.shape(leaf))
            self._params[name] = to_site(leaf, layout)
        check_parameters(module, self._params, "floating-point array")
        self._stateful = state is not None
        self._stat_names, stat_leaves, self._stat_tree = flat_named(state if state is not None else {})
        self._state = dict(zip(self._stat_names, stat_leaves))

    def to_module_layout(self, name: str, value):
        """A site's value in Equinox's own layout (the inverse of `to_site`)."""
        layout, shape = self._layouts[name]
        if layout is None:
            return value
        if layout == ():
            return jnp.reshape(value, shape)
        return jnp.transpose(value, tuple(int(i) for i in np.argsort(layout)))

    def apply(self, params: dict, state: dict, x, is_training: bool):
        """(output (B, out), state) of the module mapped over x (B, ...): params {site: array}, state {path: array}."""
        eqx = require("equinox")
        leaves = [self.to_module_layout(n, params[n]) for n in self._param_names]
        module = eqx.combine(jax.tree.unflatten(self._param_tree, leaves),
                             self._static_train if is_training else self._static_eval)
        if not self._stateful:
            return (module(x) if self._batched else jax.vmap(module)(x)), state
        s = jax.tree.unflatten(self._stat_tree, [jnp.asarray(state[n]) for n in self._stat_names])
        if not self._batched:
            module = jax.vmap(module, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
        output, s = module(x, s)
        if not is_training:
            return output, state
        names, new_leaves, _ = flat_named(s)
        return output, dict(zip(names, new_leaves))

