"""The latent sites of a BNN as a static table: what every guide builds its parameters from.

NumPyro's autoguides find a model's sites by running ``initialize_model`` on it, which in a fresh
process costs seconds of small eager compiles (one per operation of the model). A
`models.BNN` already knows its sites, shapes, priors and Haiku's initial values without running
anything, so `site_table` reads them off the network in milliseconds. It is the one place this
shortcut lives; a test checks it against NumPyro's own trace of the model (names, shapes, supports,
priors).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import jax
from numpyro.distributions import biject_to

from models.bridge import BNN, is_real_support
from models.priors import layer_fan_in
from base.errors import InputError


class Site(NamedTuple):
    """One latent sample site of a model.

    name: the site name (Haiku module path and parameter, e.g. ``mlp/~/linear_0/w``); shape: its value's
    shape; support: the prior's support (a NumPyro constraint); prior: the prior distribution (event
    shape `shape`); init_loc: the starting value mapped to the unconstrained space, of shape `shape`;
    layer_fan_in: the fan-in of the layer the site belongs to (`models.priors.layer_fan_in`: a kernel's own, its
    kernel's for a bias), or None when unknown (then read off `shape` alone).
    """

    name: str
    shape: tuple
    support: object
    prior: object
    init_loc: jax.Array
    layer_fan_in: int | None = None

    @property
    def is_real(self) -> bool:
        """Whether the support is the real line (no transform between guide and model)."""
        return is_real_support(self.support)


def site_table(model, x, rng_key=None) -> "OrderedDict[str, Site]":
    """{name: Site} of every latent site of `model` in model order, for inputs shaped like `x`.

    Args:
      model: a `models.BNN`.
      x: an example batch (B, *feature_shape) or the feature shape itself (a tuple).
      rng_key: key for Haiku's initialiser (the starting locations); default PRNGKey(0).
    Returns:
      An OrderedDict of `Site`; the init locations are Haiku's own initial values (likelihood sites at
      their prior median), unconstrained.
    Raises:
      ValueError naming `model` when it is not a `models.BNN`.
    """
    if not isinstance(model, BNN):
        raise InputError.worded("model", f"model: expected a models.BNN (built with models.bnn or zoo.get), got "
                         f"{type(model).__name__}; for another NumPyro model use NumPyro's own autoguides")
    key = jax.random.PRNGKey(0) if rng_key is None else rng_key
    priors = model.site_priors(x)
    init = model.init_values(key, x)
    all_shapes = model.site_shapes(x)
    shapes = {name: tuple(all_shapes[name]) for name in priors}  # the latent sites'
    return OrderedDict(
        (name, Site(name, shapes[name], prior.support, prior, biject_to(prior.support).inv(init[name]),
                    layer_fan_in(name, shapes)))
        for name, prior in priors.items())
