"""The Flax NNX adapter (`models.adapters`): an ``nnx.Module`` instance.

Sites: every ``nnx.Param``, named by its path ("layers/0/kernel", "layers/0/bias"; NNX's layouts are Haiku's:
a Linear kernel (in, out), a Conv kernel (*kernel, in, out)). State: every ``nnx.BatchStat`` ({path: array}),
updated in training mode; evaluation mode is the module after ``.eval()`` (``use_running_average=True``,
dropout off). Other variables (e.g. an ``nnx.Rngs``' counters) are constants: randomness in a zoo model comes
from its weights.

Refused at construction (InputError naming ``network``, before anything is traced; issue 45): an ``nnx.Dropout`` of
rate > 0 (the adapter's training mode would switch it on with a fixed key, so it was silently ignored; MC dropout
is the ``binary_dropout`` guide), a module with no ``nnx.Param`` or an integer one, a ``__call__`` with required
arguments besides x. Shared layers (one submodule held by two attributes) are one site: NNX's graph holds them once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from base.errors import InputError
from models.adapters import flat_named, require
from models.adapters.arrays import ArrayModuleAdapter, check_call, check_parameters


def check_dropout(nnx, module) -> None:
    """Refuse (InputError naming ``network``) an ``nnx.Dropout`` of rate > 0 anywhere in `module` (module
    docstring): it names the first one's path."""
    for path, node in nnx.iter_graph(module):
        if isinstance(node, nnx.Dropout) and node.rate > 0:
            where = "/".join(str(p) for p in path) or "(the module itself)"
            raise InputError("network", f"<{type(module).__name__} with nnx.Dropout {where!r} of rate {node.rate}>",
                             "a module without active dropout (rate 0, or no Dropout layer)",
                             "a zoo model's randomness is its weights' posterior: the module's own dropout would "
                             "draw one fixed mask; for MC dropout use the binary_dropout guide")


class NNXAdapter(ArrayModuleAdapter):
    """`module` (an ``nnx.Module``) as the bridge sees it; the module itself is not changed (clones are split)."""

    library = "flax.nnx"

    def __init__(self, module):
        nnx = require("flax.nnx")
        check_dropout(nnx, module)
        check_call(module, ("x",), "flax.nnx")
        self.module = module
        train, evaluation = nnx.clone(module), nnx.clone(module)
        train.train()
        evaluation.eval()
        self._graph_train, params, stats, self._rest = nnx.split(train, nnx.Param, nnx.BatchStat, ...)
        self._graph_eval = nnx.split(evaluation, nnx.Param, nnx.BatchStat, ...)[0]
        self._param_names, param_leaves, self._param_tree = flat_named(params)
        self._stat_names, stat_leaves, self._stat_tree = flat_named(stats)
        self._params = dict(zip(self._param_names, param_leaves))
        self._state = dict(zip(self._stat_names, stat_leaves))
        check_parameters(module, self._params, "nnx.Param")

    def apply(self, params: dict, state: dict, x, is_training: bool):
        """(output (B, out), state) of the module at x (B, ...): params {site: array}, state {path: array}."""
        nnx = require("flax.nnx")
        p = jax.tree.unflatten(self._param_tree, [params[n] for n in self._param_names])
        s = jax.tree.unflatten(self._stat_tree, [jnp.asarray(state[n]) for n in self._stat_names])
        module = nnx.merge(self._graph_train if is_training else self._graph_eval, p, s, self._rest)
        output = module(x)
        if not is_training or not self._stat_names:
            return output, state
        names, leaves, _ = flat_named(nnx.state(module, nnx.BatchStat))
        return output, dict(zip(names, leaves))
