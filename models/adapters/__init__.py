"""Network adapters: what the bridge (`models.bridge.BNN`) needs from a module library, one library per module.

An adapter wraps one network and gives the bridge a few pure functions, so that `BNN` never calls a library
directly:

* ``init(key, x) -> (params, state)`` and ``site_values(params) -> {site name: array}``: one site per
  parameter tensor, named by its path in the module ("mlp/~/linear_0/w" in Haiku, "layers/0/kernel" in Flax
  NNX, "layers/0/weight" in Equinox), in a fixed order; state: the network's mutable state (batch-norm
  statistics), a pytree, empty when there is none. x: (1, *feature_shape) zeros. ``init`` may run under
  ``jax.jit`` or ``jax.eval_shape``; ``site_values`` runs outside them (it fixes the sites' order).
* ``apply(params, state, x, is_training) -> (output, state)``: x (B, *feature_shape) -> output (B, out); in
  training mode batch statistics are used and the returned state is updated, in evaluation mode the state is
  read and returned as it was.
* ``flatten_state(state) -> {name: array}`` and ``unflatten_state(flat) -> state`` (checkpoints).

``compiled_init``: whether ``init`` computes (Haiku's initialisers: the bridge compiles it once per model) or
only reads the module's own arrays (NNX, Equinox: their weights are the initial values, whatever the key).

`adapter_for` picks the adapter by the network's type: an ``nnx.Module`` instance (`models.adapters.nnx`), an
``eqx.Module`` instance or a pair (``eqx.Module``, ``eqx.nn.State``) as ``eqx.nn.make_with_state`` returns it
(`models.adapters.equinox`), any other callable: a Haiku network function (`models.adapters.haiku`). Flax and
Equinox are imported only when such a module is passed.
"""

from __future__ import annotations

import sys

from base.errors import ArgumentTypeError, MissingDependencyError

__all__ = ["adapter_for", "path_name", "require"]

EXTRAS = {"flax.nnx": "flax", "equinox": "equinox"}
"""The pip extra of bnn-zoo that installs each optional module library."""


def require(library: str):
    """Import `library` ("flax.nnx" or "equinox"), or raise `MissingDependencyError` naming the extra that
    installs it (``pip install 'bnn-zoo[flax]'``)."""
    import importlib

    try:
        return importlib.import_module(library)
    except ImportError as err:
        extra = EXTRAS[library]
        raise MissingDependencyError(f"{library} networks need {extra}: pip install 'bnn-zoo[{extra}]'") from err


def _loaded(library: str):
    """The module `library` if something already imported it, else None (a network of a library that was never
    imported cannot be one of its modules: nothing is imported to find out)."""
    return sys.modules.get(library)


def adapter_for(network):
    """The adapter of `network` (module docstring): Flax NNX module, Equinox module (or (module, state) pair),
    or a Haiku network function. Raises ArgumentTypeError naming ``network`` for anything else."""
    nnx = _loaded("flax.nnx")
    if nnx is not None and isinstance(network, nnx.Module):
        from models.adapters.nnx import NNXAdapter

        return NNXAdapter(network)
    eqx = _loaded("equinox")
    if eqx is not None:
        from models.adapters.equinox import EquinoxAdapter

        if isinstance(network, eqx.Module):
            return EquinoxAdapter(network)
        if (isinstance(network, tuple) and len(network) == 2 and isinstance(network[0], eqx.Module)
                and isinstance(network[1], eqx.nn.State)):
            return EquinoxAdapter(*network)
    if callable(network):
        from models.adapters.haiku import HaikuAdapter

        return HaikuAdapter(network)
    raise ArgumentTypeError("network", network, "a Haiku network function x -> output, a flax.nnx.Module, an "
                            "equinox.Module or an (equinox.Module, equinox.nn.State) pair")


def path_name(key_path) -> str:
    """"a/0/b" for a JAX key path (GetAttrKey("a"), SequenceKey(0), DictKey("b"), ...): each entry's name, index
    or key joined by "/"; NNX's trailing ``.value`` of a Variable is dropped."""
    parts = []
    for entry in key_path:
        for attribute in ("name", "key", "idx"):
            if hasattr(entry, attribute):
                parts.append(str(getattr(entry, attribute)))
                break
        else:
            parts.append(str(entry))
    if len(parts) > 1 and parts[-1] == "value" and type(key_path[-1]).__name__ == "GetAttrKey":
        parts.pop()
    return "/".join(parts)


def flat_named(tree) -> tuple[list, list, object]:
    """(names, leaves, treedef) of a pytree: names by `path_name`, in the tree's own order."""
    import jax

    with_paths, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return [path_name(p) for p, _ in with_paths], [leaf for _, leaf in with_paths], treedef
