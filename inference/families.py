"""Variational families: what a per-site guide puts on one latent site.

A family is a small immutable object (optax style) with no state of its own. For a `Site` (name,
shape, support, prior, initial location) it

* declares its parameters: ``params(site) -> {suffix: ParamSpec(init, constraint)}``, in the order they
  are created (``init`` an array, or a function ``key -> array`` for random initialisations);
* gives the site's distribution from their (constrained) values: ``distribution(site, values)``, over
  the site's *unconstrained* value, with event shape ``site.shape``;
* counts its parameters by the paper's formula: ``num_params(site)``;
* and, where it has them, gives the closed-form moments ``moments(site, values) -> (mean, variance)``;
* optionally, its local-reparameterisation rule ``local_rule(site, values) -> rule or None`` (a
  `models.local_reparam` rule: how a dense layer's pre-activations or a kernel's Flipout output are drawn for
  `inference.estimators.Local`; a Gaussian family returns `gaussian_local_rule`). A family without it keeps one
  weight draw per minibatch under that estimator.

`inference.site_guide.SiteGuide` turns a {site pattern: family} map into a NumPyro guide; ``mean_field(model)`` is
that guide with the Normal family on every site, ``by_site`` any mix. The families of the zoo live
beside their guides: `inference.mean_field.NormalFamily`, `inference.point_estimate.DeltaFamily`,
`inference.k_tied.KTiedFamily`, `inference.zero_mean.ZeroMeanFamily` and ``VarianceLayerFamily``,
`inference.rank1_mixture.Rank1FactorFamily`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol, runtime_checkable

from numpyro.distributions import constraints

from inference.sites import Site
from models.priors import fan_in
from base.errors import InputError
from models.local_reparam import FlipoutRule, GaussianRule


class ParamSpec(NamedTuple):
    """One variational parameter of a family: its initial value (array of the parameter's shape, or a
    function ``key -> array``) and the constraint it lives in (NumPyro constraint; default real)."""

    init: Any
    constraint: Any = constraints.real


@runtime_checkable
class Family(Protocol):
    """What every variational family provides (see the module docstring)."""

    name: str

    def params(self, site: Site) -> "dict[str, ParamSpec]":
        """{suffix: ParamSpec} of the parameters this family creates for `site`, in creation order."""

    def distribution(self, site: Site, values: dict):
        """The distribution of `site`'s unconstrained value (event shape ``site.shape``) given the
        constrained parameter `values` {suffix: array}."""

    def num_params(self, site: Site) -> int:
        """Scalar variational parameters for `site` by the family's formula."""

    def config(self) -> dict:
        """JSON-able keyword arguments that rebuild this family."""


def gaussian_local_rule(site: Site, mean, variance):
    """The local rule of a site whose entries are independent Gaussians N(mean, variance) (arrays of the site's
    shape): `GaussianRule` for a dense (2-D) weight (its pre-activations drawn per example, Kingma et al., 2015),
    `FlipoutRule` for a convolution kernel (3-D or more, channels last; Wen et al., 2018), None otherwise."""
    if len(site.shape) == 2:
        return GaussianRule(mean, variance)
    return FlipoutRule(mean, variance) if len(site.shape) >= 3 else None


def site_size(site: Site) -> int:
    """Number of scalar entries of the site's value: prod(site.shape)."""
    return math.prod(site.shape)


DEFAULT_SCALE_CAP = 1.5
"""c of the default sigma cap: a weight's sd in q stays below c / sqrt(fan_in) (`scale_limit`)."""


def scale_limit(site: Site, cap: float | None, bias_limit: str = "layer") -> float | None:
    """The largest sd q may give an entry of `site`: cap / sqrt(fan_in), or None (no limit) for ``cap=None``.

    fan_in is the site's own (`models.priors.fan_in`, the one rule of the package: dense (in, out): in; conv
    (kh, kw, cin, cout): kh kw cin; 1 for biases, rank-1 per-component biases (K, out) and embedding tables),
    except for a bias under ``bias_limit="layer"``: one more weight
    on each output unit, it takes its layer's (``site.layer_fan_in``, its kernel's), so its kernel's limit. Under ``"own"`` (the rule before biases followed their layer;
    checkpoints fitted so keep it) fan_in is read off the site's shape alone, 1 for a bias, whose sd could then
    reach c. With unit-variance inputs, the noise a layer's capped weights add to a pre-activation then has sd at
    most about `cap`, whatever the layer's width.
    """
    if cap is None:
        return None
    layer = site.layer_fan_in if len(site.shape) == 1 and bias_limit == "layer" else None
    n = layer if layer is not None else fan_in(site.name, site.shape)
    return cap / math.sqrt(n)


BIAS_LIMITS = ("layer", "own")
"""How the sigma cap limits a bias (`scale_limit`): "layer" (its kernel's limit, the default) or "own" (by its
own shape: c, the rule of checkpoints fitted before)."""


def bias_limit_arg(value) -> str:
    """`value` if it is one of `BIAS_LIMITS`, else InputError naming ``bias_limit``."""
    if value not in BIAS_LIMITS:
        raise InputError("bias_limit", value, f"one of {BIAS_LIMITS}")
    return value


def capped(scale, limit: float | None):
    """The sd q uses for a free `scale` (> 0) under `limit`: limit tanh(scale / limit), which is `scale` to
    within 1 % for scale < limit / 6 and never reaches `limit`; `scale` itself when `limit` is None."""
    import jax.numpy as jnp

    return scale if limit is None else limit * jnp.tanh(scale / limit)


def scale_cap_arg(value) -> float | None:
    """`value` as a cap c (a positive float) or None; ValueError naming ``scale_cap`` otherwise."""
    return None if value is None else positive_number("scale_cap", value)


def positive_number(arg: str, value) -> float:
    """`value` as a float; ValueError naming `arg` unless it is a finite number > 0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise InputError.worded(arg, f"{arg}: expected a positive number, got {value!r}")
    return number
