"""Guides and families by name: `register_guide`, `register_family`, `make_guide`, and what a guide suits.

The registries themselves (`GUIDES`, `FAMILIES`, `ESTIMATORS`) are `base.registry.Registry` instances, beside
every other registry of the package (`base.registry`); this module holds the ways inference's items join them
and are read back. It imports no other module of `inference`, so every guide module can import it.

A guide registers with its facts (``Registry.info``): ``example`` options, with which tools that try every guide
(``zoo run``'s table, the tests) build it, and ``suits``, which models it is meant for: an entry's guide list
(``zoo list``) is derived from these, never written beside the entry.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping

from base.errors import InputError
from base.registry import ESTIMATORS, FAMILIES, GUIDES
from models.rank1 import RANK1_SITE_SUFFIXES

__all__ = ["ESTIMATORS", "FAMILIES", "GUIDES", "example_options", "guides_for", "has_rank1_factors", "make_guide",
           "plain_model", "plain_model_under", "register_family", "register_guide", "saved_settings", "suits"]


def has_rank1_factors(site_shapes: Mapping) -> bool:
    """Whether a model with latent sites {name: shape} `site_shapes` has rank-1 factor sites (``*/alpha``,
    ``*/gamma``: a rank-1 BNN, rank-1 paper eq. 1)."""
    return any(fnmatch.fnmatchcase(name, f"*/{s}") for name in site_shapes for s in RANK1_SITE_SUFFIXES)


def plain_model(site_shapes: Mapping) -> bool:
    """Whether a model with latent sites {name: shape} is a plain BNN (weights as the latent sites; no rank-1
    factors): what a guide suits unless it registers another ``suits``."""
    return not has_rank1_factors(site_shapes)


def plain_model_under(max_latent_dim: int, *, per_site: bool = False) -> Callable[[Mapping], bool]:
    """``suits`` of a guide with a dense covariance: a `plain_model` with at most `max_latent_dim` latent values
    in all (``per_site=True``: in each site, for a covariance block per site)."""
    def small(site_shapes: Mapping) -> bool:
        sizes = [math.prod(shape) for shape in site_shapes.values()]
        return plain_model(site_shapes) and (max(sizes, default=0) if per_site else sum(sizes)) <= max_latent_dim

    return small


def register_guide(name: str, factory: Callable | None = None, *, example: dict | None = None,
                   suits: Callable[[Mapping], bool] = plain_model, saved_settings: tuple = ()):
    """Make ``factory(model, **options) -> guide`` available as `name` (`make_guide`, the CLI's ``--guide``,
    `by_site`'s checkpoints, ``zoo run``'s table); without `factory`, a decorator. Returns `factory`.

    The guide's ``config`` must hold ``{"name": name, **options}``: `inference.load` rebuilds the guide of a
    saved posterior as ``make_guide(**config)``. `example`: options (JSON-able) that build the guide on any
    BNN of the catalogue, required ones included, written with site patterns rather than one network's site
    names (e.g. ``{"dropout_sites": ["*/w"]}``); tools that try every guide (``zoo run``) use them. `suits`:
    ``suits(site_shapes) -> bool`` over a model's latent sites {name: shape}, whether the guide is meant for
    that model (default `plain_model`); ``zoo list`` derives each entry's guides from it (`guides_for`).
    `saved_settings`: options a saved config of the guide must name (their defaults changed before the
    release: `inference.load` refuses a config without them, `saved_settings`).
    Raises InputError for an empty name, a factory or `suits` that is not callable or an `example` that is not
    a dict.
    """
    if example is not None and not isinstance(example, dict):
        raise InputError("example", example, "None or a dict of the guide's options")
    if factory is not None and not callable(factory):
        raise InputError("factory", factory, "a callable factory(model, **options) -> guide")
    if not callable(suits):
        raise InputError("suits", suits, "a callable suits(site_shapes) -> bool")
    return GUIDES.register(name, factory, example=dict(example or {}), suits=suits,
                           saved_settings=tuple(saved_settings))


def register_family(family_class):
    """Make a family class (a ``name`` class attribute and keyword fields) available to `by_site` by that name;
    returns the class, so that it also decorates one (``@register_family`` above ``@dataclass``)."""
    name = getattr(family_class, "name", None)
    if not isinstance(name, str) or not name:
        raise InputError("family_class", family_class, "a class with a non-empty string attribute `name`")
    return FAMILIES.register(name, family_class)


def make_guide(name: str, model, **options):
    """The guide `name` of `GUIDES` built for `model` with `options`; an unknown name raises InputError listing
    the known ones."""
    return GUIDES[name](model, **options)


def example_options(name: str) -> dict:
    """The ``example`` options registered with guide `name` ({} when none were given)."""
    return dict(GUIDES.info(name).get("example") or {})


def saved_settings(name) -> tuple:
    """The options a saved config of guide `name` must name (registered as ``saved_settings``; () for a guide
    registered without them or a name no guide has: its rebuild then reports the unknown name)."""
    return tuple(GUIDES.info(name).get("saved_settings", ())) if name in GUIDES else ()


def suits(name: str, site_shapes: Mapping) -> bool:
    """Whether guide `name` is meant for a model with latent sites {name: shape} `site_shapes` (its registered
    ``suits``; `plain_model` for a guide registered without one)."""
    return bool(GUIDES.info(name).get("suits", plain_model)(site_shapes))


def guides_for(site_shapes: Mapping) -> list:
    """The names of the registered guides meant for a model with latent sites {name: shape} `site_shapes`, in
    registration order (e.g. an mlp: mean_field, point_estimate, k_tied, ...; a rank-1 mlp: rank1_mixture)."""
    return [name for name in GUIDES if suits(name, site_shapes)]
