"""The Haiku adapter (`models.adapters`): a network function ``x -> output`` (or ``(x, is_training) -> output``)
transformed with ``hk.transform_with_state``; sites "module/name" (``flatten_params``), state Haiku's own nested
{module: {name: array}}."""

from __future__ import annotations

import inspect
from typing import Callable

import haiku as hk


def flatten_params(tree) -> dict:
    """Haiku params {module: {name: array}} -> {"module/name": array} (insertion order kept)."""
    return {f"{module}/{name}": value for module, leaves in tree.items() for name, value in leaves.items()}


def unflatten_params(flat: dict) -> dict:
    """{"module/name": array} -> Haiku params {module: {name: array}}; other keys are ignored."""
    tree: dict = {}
    for site, value in flat.items():
        module, _, name = site.rpartition("/")
        if module and not site.startswith("likelihood/"):
            tree.setdefault(module, {})[name] = value
    return tree


class HaikuAdapter:
    """A Haiku network function as the bridge sees it (`models.adapters`). ``transformed``: the
    ``hk.TransformedWithState`` (apply without an rng), initialised in training mode (Haiku creates batch-norm
    state only there)."""

    library = "haiku"
    compiled_init = True

    def __init__(self, network_fn: Callable):
        self.network_fn = network_fn
        takes_flag = "is_training" in inspect.signature(network_fn).parameters

        def with_flag(x, is_training=False):
            return network_fn(x, is_training=is_training) if takes_flag else network_fn(x)

        # declared: haiku types `without_apply_rng` by a TypeVar whose constraints mypy cannot resolve
        self.transformed: hk.TransformedWithState = hk.without_apply_rng(hk.transform_with_state(with_flag))

    def init(self, key, x):
        """(params {module: {name: array}}, state) of Haiku's initialiser at x (1, *feature_shape) with `key`, in
        training mode."""
        return self.transformed.init(key, x, is_training=True)

    @staticmethod
    def site_values(params) -> dict:
        """{site: array} of `init`'s params (`flatten_params`)."""
        return flatten_params(params)

    def apply(self, params: dict, state, x, is_training: bool):
        """(output (B, out), state) of the network at x (B, ...) with params {site: array}."""
        return self.transformed.apply(unflatten_params(params), state, x, is_training=is_training)

    @staticmethod
    def flatten_state(state) -> dict:
        """Haiku state {module: {name: array}} -> {"module/name": array}."""
        return flatten_params(state)

    @staticmethod
    def unflatten_state(flat: dict):
        """The inverse of `flatten_state`."""
        return unflatten_params(flat)
