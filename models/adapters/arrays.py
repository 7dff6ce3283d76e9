"""What the Flax NNX and Equinox adapters share (`models.adapters`): the module's own arrays are the initial
values (the key is not used), sites in the sorted order of their names (Haiku's order for the same network: a
module's "b"/"bias" before its "w"/"kernel"/"weight"), and the state a flat {path: array}."""

from __future__ import annotations

import jax.numpy as jnp


class ArrayModuleAdapter:
    """Base of `NNXAdapter` and `EquinoxAdapter`: subclasses set ``_params`` {site: array} (the module's own values,
    in the sites' layout) and ``_state`` {path: array} (empty for a stateless network), and define ``apply``."""

    compiled_init = False
    _params: dict
    _state: dict

    def init(self, key, x):
        """({site: array}, {path: array}): the module's own parameter values and state; `key` and `x` unused (the
        module was built for its inputs; `BNN.site_shapes` checks them by running ``apply``)."""
        del key, x
        return ({name: jnp.asarray(value) for name, value in self._params.items()},
                {name: jnp.asarray(value) for name, value in self._state.items()})

    @staticmethod
    def site_values(params) -> dict:
        """{site: array} in the sorted order of the site names."""
        return {name: params[name] for name in sorted(params)}

    @staticmethod
    def flatten_state(state) -> dict:
        """The state is already flat: {path: array}."""
        return dict(state)

    @staticmethod
    def unflatten_state(flat: dict) -> dict:
        """The state is already flat: {path: array}."""
        return dict(flat)
