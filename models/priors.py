"""Priors over weight tensors, chosen per sample site.

A prior is a callable ``prior(site_name, shape) -> numpyro Distribution`` whose ``batch_shape`` is
``shape`` (the bridge adds ``to_event``). Compose them with `by_pattern`.
"""

from __future__ import annotations

import fnmatch
import math
from typing import Callable, Mapping

import numpyro.distributions as dist

Prior = Callable[[str, tuple], dist.Distribution]


def normal(scale: float = 1.0, loc: float = 0.0) -> Prior:
    """Independent Normal(loc, scale) on every entry of the tensor."""
    return _iid("normal", dist.Normal, scale, loc)


def fan_in_normal(scale: float = 1.0) -> Prior:
    """Normal(0, scale / sqrt(fan_in)) on every entry, fan_in = prod(shape[:-1]): the inputs of one output unit
    (dense (in, out): in; conv (kh, kw, c_in, c_out): kh kw c_in); 1-D sites (biases) have fan_in 1, so
    Normal(0, scale). Neal's (1996) scaling, under which a layer's pre-activations keep a variance that does
    not grow with its width; ``scale`` is sigma_w (He et al.'s ReLU initialisation is scale sqrt(2))."""
    _check_positive("scale", scale)

    def prior(name, shape):
        fan_in = math.prod(shape[:-1]) if len(shape) > 1 else 1
        return dist.Normal(0.0, scale / math.sqrt(fan_in)).expand(tuple(shape))

    prior.spec = {"kind": "fan_in_normal", "scale": scale}
    return prior


def he_normal(gain: float = 2.0) -> Prior:
    """Normal(0, sqrt(gain / fan_in)) with fan_in = prod(shape[:-1]) (1 for 1-D sites, e.g. biases): the
    `fan_in_normal` prior with scale sqrt(gain)."""
    _check_positive("gain", gain)
    prior = fan_in_normal(math.sqrt(gain))
    prior.spec = {"kind": "he_normal", "gain": gain}
    return prior


def cauchy(scale: float = 1.0, loc: float = 0.0) -> Prior:
    """Independent Cauchy(loc, scale) on every entry (heavy tails)."""
    return _iid("cauchy", dist.Cauchy, scale, loc)


def _iid(kind: str, family, scale: float, loc: float) -> Prior:
    """family(loc, scale) on every entry, with its spec for checkpoints."""
    _check_positive("scale", scale)

    def prior(name, shape):
        return family(loc, scale).expand(tuple(shape))

    prior.spec = {"kind": kind, "scale": scale, "loc": loc}
    return prior


def by_pattern(rules: Mapping[str, Prior], default: Prior | None = None) -> Prior:
    """Choose a prior per site by shell-style name pattern; the first matching rule wins.

    Example: ``by_pattern({"*/w": he_normal(), "*/b": normal(1.0)})``; ``"mlp/~/linear_0/*"``
    selects one layer. A site no rule matches takes `default`, or raises ValueError naming it.
    """
    rules = dict(rules)

    def prior(name, shape):
        for pattern, rule in rules.items():
            if fnmatch.fnmatchcase(name, pattern):
                return rule(name, shape)
        if default is None:
            raise ValueError(
                f"prior: no pattern matches site {name!r}; patterns are {list(rules)} and no default was given"
            )
        return default(name, shape)

    prior.spec = {
        "kind": "by_pattern",
        "rules": {k: getattr(v, "spec", None) for k, v in rules.items()},
        "default": getattr(default, "spec", None),
    }
    return prior


def log_uniform() -> Prior:
    """The improper log-uniform prior p(w) ∝ 1/|w| (variance networks; see `models.variance`)."""
    from models.variance import log_uniform_prior

    return log_uniform_prior()


PRIORS = {"normal": normal, "he_normal": he_normal, "cauchy": cauchy, "log_uniform": log_uniform}


def from_spec(spec) -> Prior:
    """Rebuild a prior from its ``.spec`` dict (used by checkpoints and the CLI)."""
    if callable(spec):
        return spec
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind == "by_pattern":
        return by_pattern({k: from_spec(v) for k, v in spec["rules"].items()},
                          from_spec(spec["default"]) if spec.get("default") else None)
    if kind not in PRIORS:
        raise ValueError(f"prior: unknown kind {kind!r}; expected one of {sorted(PRIORS) + ['by_pattern']}")
    return PRIORS[kind](**spec)


def _check_positive(arg, value):
    if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
        raise ValueError(f"{arg}: expected a positive finite number, got {value!r}")
