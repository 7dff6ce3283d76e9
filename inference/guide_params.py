"""A guide's parameters read from one trace: their unconstrained initial values and their constraints.

`inference.fit` initialises from `guide_params`; `inference.posterior.SVIPosterior.unconstrained_params` maps a
loaded posterior's constrained parameters back through `guide_constraints` (`param_constraints` for a feature
shape). Both live here, below fit and
posterior, so that neither imports the other.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
from numpyro import handlers
from numpyro.distributions import biject_to

from base.prng import flat_key


def guide_params(guide, rng_key, x, y, n_data) -> tuple[dict, dict]:
    """(unconstrained params {name: array}, constraints {name: constraint or None}) of `guide`'s parameters,
    traceable (fit runs it inside its jitted initialisation).

    The guide runs once with zeros in place of its draws, so the graph holds only the parameter
    initialisers (no random draws, no network forward pass). x (B, ...), y (B,): a minibatch.
    """

    def zeros_for_draws(site):
        return jnp.zeros(site["fn"].shape()) if site["type"] == "sample" and not site["is_observed"] else None

    seeded = handlers.substitute(handlers.seed(guide, flat_key(rng_key)), substitute_fn=zeros_for_draws)
    params, constraints = {}, {}
    # NumPyro validates distribution arguments that are concrete (here: the initial values, constants of
    # the trace) eagerly, one small compile per check and shape; the initialisers need no such check
    with numpyro.validation_enabled(False):
        trace = handlers.trace(seeded).get_trace(x, y, n_data)
    for name, site in trace.items():
        if site["type"] == "param":
            c = site["kwargs"].get("constraint")
            constraints[name] = c
            params[name] = biject_to(c).inv(site["value"]) if c is not None else site["value"]
    return params, constraints


def param_constraints(guide, batch, n_data) -> dict:
    """{param name: NumPyro constraint or None} of `guide`'s parameters for minibatches shaped like batch = (x, y)
    (arrays, tracers or ``jax.ShapeDtypeStruct``), read from one abstract trace of its initialisation (nothing
    is computed or compiled)."""
    return param_structure(guide, batch, n_data)[1]


def param_structure(guide, batch, n_data) -> tuple[dict, dict]:
    """({param name: jax.ShapeDtypeStruct}, {param name: NumPyro constraint or None}) of `guide`'s unconstrained
    parameters for minibatches shaped like batch = (x, y), from one abstract trace of its initialisation."""
    found: dict = {}

    def constraints_of(key, x, y):
        params, constraints = guide_params(guide, key, x, y, n_data)
        found.update(constraints)  # this call's own dict, returned below: no state outlives the call
        return params

    shapes = jax.eval_shape(constraints_of, jax.random.PRNGKey(0), *(_abstract(v) for v in batch))
    return shapes, found


def _abstract(a) -> jax.ShapeDtypeStruct:
    return a if isinstance(a, jax.ShapeDtypeStruct) else jax.ShapeDtypeStruct(jnp.shape(a), jnp.result_type(a))


def guide_constraints(guide, feature_shape: tuple) -> dict:
    """`param_constraints` for inputs of `feature_shape` (a one-example minibatch of integer labels)."""
    batch = (jax.ShapeDtypeStruct((1,) + tuple(feature_shape), jnp.float32), jax.ShapeDtypeStruct((1,), jnp.int32))
    return param_constraints(guide, batch, 1)
