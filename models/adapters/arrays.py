"""What the Flax NNX and Equinox adapters share (`models.adapters`): the module's own arrays are the initial
values (the key is not used), sites in the sorted order of their names (Haiku's order for the same network: a
module's "b"/"bias" before its "w"/"kernel"/"weight"), and the state a flat {path: array}."""

from __future__ import annotations

import inspect

import jax.numpy as jnp
import numpy as np

from base.errors import InputError


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


def check_parameters(module, params: dict, what: str) -> None:
    """Refuse (InputError naming ``network``) a module with no parameters (nothing to infer: every guide and NUTS
    need at least one site) or with a parameter of a non-floating dtype (an integer ``nnx.Param`` has no gradient
    and no continuous posterior). params: {site: array}; what: what a parameter is in the library ("nnx.Param")."""
    name = type(module).__name__
    if not params:
        raise InputError("network", f"<{name} with no {what}>", f"a module with at least one floating-point {what} "
                         "(the weights the posterior is over)")
    for site, value in params.items():
        dtype = np.dtype(getattr(value, "dtype", None) or np.result_type(value))
        if not np.issubdtype(dtype, np.floating):
            raise InputError("network", f"<{name} whose {what} {site!r} is {dtype}>",
                             f"floating-point {what}s (a weight of a posterior is real-valued)",
                             "make it a float array, or hold it as a constant (not a parameter)")


def check_call(module, passed: tuple, library: str) -> None:
    """Refuse (InputError naming ``network``) a module whose ``__call__`` cannot be called with the arguments the
    adapter passes (`passed`: their names, e.g. ("x",) or ("x", "state")): an extra required argument, positional
    or keyword-only (the adapter could only guess it), or fewer positional parameters than passed."""
    try:
        signature = inspect.signature(module.__call__)
    except (TypeError, ValueError):  # no signature to read: the first call will tell
        return
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_more = any(p.kind is p.VAR_POSITIONAL for p in params)
    extra = [p.name for p in positional[len(passed):] if p.default is p.empty]
    extra += [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if extra or (len(positional) < len(passed) and not takes_more):
        call = f"module({', '.join(passed)})"
        raise InputError("network", f"<{type(module).__name__}.__call__{signature}>",
                         f"a {library} module the bridge can call as {call}",
                         f"required arguments {extra} have no value the bridge could pass: give them defaults "
                         "or wrap the module" if extra else "")
