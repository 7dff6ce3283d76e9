"""Priors over weight tensors, chosen per sample site.

A prior is a callable ``prior(site_name, shape) -> numpyro Distribution`` whose ``batch_shape`` is
``shape`` (the bridge adds ``to_event``). Compose them with `by_pattern`; `per_site` builds the prior of a
catalogue entry's ``prior`` / ``prior_scale`` arguments (a kind and a scale, each one value or one per site
pattern).

What ``scale`` means for each kind of `KINDS` (the entries' ``prior_scale``; fan_in as `fan_in` defines it):

================  =========================================================================
kind              prior on every entry of a site
================  =========================================================================
``"normal"``      Normal(0, scale): scale is the standard deviation
``"fan_in"``      Normal(0, scale / sqrt(fan_in)): scale is Neal's sigma_w (`fan_in_normal`)
``"he_normal"``   Normal(0, scale sqrt(2 / fan_in)): scale multiplies He et al.'s ReLU sd
                  (scale 1 is He's prior, `he_normal` with gain 2 scale^2)
``"cauchy"``      Cauchy(0, scale): scale is the Cauchy scale (half the interquartile range)
================  =========================================================================
"""

from __future__ import annotations

import fnmatch
import math
import numbers
from typing import Callable, Mapping

import numpyro.distributions as dist

from base.errors import ArgumentTypeError, InputError
from base.registry import PRIORS

Prior = Callable[[str, tuple], dist.Distribution]

KINDS = ("normal", "fan_in", "he_normal", "cauchy")
"""The kinds a catalogue entry's ``prior`` names (see the module docstring for what a scale means)."""

BIASES = ("*/b", "*/bias", "bias")
"""Bias sites: Haiku's ``b``, Flax NNX's and Equinox's ``bias`` (a bare layer's is named ``bias``)."""

# Sites whose fan_in is 1 whatever their shape: biases (rank-1 layers' are per component, (K, out)) and
# embedding tables (vocab, d), whose output units each read one entry of one row (a one-hot input): Haiku's
# ``embeddings``, Flax NNX's ``embedding``.
FAN_IN_ONE = BIASES + ("*/embeddings", "*/embedding", "embedding")


def _tagged(prior: Prior, **attributes) -> Prior:
    """`prior` with `attributes` set on it: its ``spec`` dict (read back by `from_spec`) and helpers such as
    ``route``; `setattr`, as the type of a function does not declare attributes of its own."""
    for name, value in attributes.items():
        setattr(prior, name, value)
    return prior


def fan_in(name: str, shape: tuple) -> int:
    """The number of inputs one output unit of site `name` (of `shape`) sums over.

    Dense kernels (in, out): in; convolution kernels in Haiku's layout (kh, kw, c_in, c_out): kh kw c_in;
    LSTM kernels (E, 4H) and recurrent kernels (H, 4H): E and H (each is its own site; a gate sums over
    both, E + H inputs); 1-D sites and batch-norm scales / offsets (1, ..., 1, C): 1; biases (`BIASES`: ``*/b``,
    ``*/bias``, also rank-1 per-component biases (K, out)) and embedding tables (``*/embeddings``,
    ``*/embedding``, (vocab, d)): 1. In general prod(shape[:-1]) unless the site is one of `FAN_IN_ONE`. Flax NNX
    kernels have these layouts; Equinox's Linear and Conv weights are given them by the bridge
    (`models.adapters.equinox`).
    """
    if len(shape) < 2 or any(fnmatch.fnmatchcase(name, p) for p in FAN_IN_ONE):
        return 1
    return math.prod(shape[:-1])


def layer_fan_in(name: str, shapes: dict) -> int:
    """The fan-in of the layer site `name` belongs to, given every site's shape `shapes` ({name: shape}).

    A kernel's is its own (`fan_in`). A bias (`BIASES`) of shape (out,) is one more weight on each output unit of
    its layer, so it takes the fan-in of its module's kernel: the site in the same module path (the name up to
    its last "/") with fan-in > 1 and the same last dimension (summed over several: an LSTM's kernel and recurrent
    kernel feed the same gates, E + H inputs). A site with no such kernel (a batch-norm scale or
    offset, an embedding table, a rank-1 per-component bias (K, out)) keeps its own `fan_in`. Pure: shapes only.
    """
    own = fan_in(name, shapes[name])
    shape = tuple(shapes[name])
    if len(shape) != 1 or not any(fnmatch.fnmatchcase(name, p) for p in BIASES):
        return own
    module = name.rpartition("/")[0]
    kernels = [fan_in(other, s) for other, s in shapes.items()
               if other != name and other.rpartition("/")[0] == module and len(s) >= 2 and tuple(s)[-1] == shape[0]
               and fan_in(other, s) > 1]
    return sum(kernels) if kernels else own


@PRIORS.register("normal")
def normal(scale: float = 1.0, loc: float = 0.0) -> Prior:
    """Independent Normal(loc, scale) on every entry of the tensor."""
    return _iid("normal", dist.Normal, scale, loc)


@PRIORS.register("fan_in_normal")
def fan_in_normal(scale: float = 1.0) -> Prior:
    """Normal(0, scale / sqrt(fan_in)) on every entry, fan_in as `fan_in` counts it (dense (in, out): in;
    conv (kh, kw, c_in, c_out): kh kw c_in; biases and embedding tables: 1, so Normal(0, scale)). Neal's
    (1996) scaling, under which a layer's pre-activations keep a variance that does not grow with its width;
    ``scale`` is sigma_w (He et al.'s ReLU initialisation is scale sqrt(2))."""
    _check_positive("scale", scale)

    def prior(name, shape):
        return dist.Normal(0.0, scale / math.sqrt(fan_in(name, shape))).expand(tuple(shape))

    return _tagged(prior, spec={"kind": "fan_in_normal", "scale": scale})


@PRIORS.register("he_normal")
def he_normal(gain: float = 2.0) -> Prior:
    """Normal(0, sqrt(gain / fan_in)) with fan_in as `fan_in` counts it (1 for biases): the `fan_in_normal`
    prior with scale sqrt(gain)."""
    _check_positive("gain", gain)
    return _tagged(fan_in_normal(math.sqrt(gain)), spec={"kind": "he_normal", "gain": gain})


@PRIORS.register("cauchy")
def cauchy(scale: float = 1.0, loc: float = 0.0) -> Prior:
    """Independent Cauchy(loc, scale) on every entry (heavy tails)."""
    return _iid("cauchy", dist.Cauchy, scale, loc)


def _iid(kind: str, family, scale: float, loc: float) -> Prior:
    """family(loc, scale) on every entry, with its spec for checkpoints."""
    _check_positive("scale", scale)

    def prior(name, shape):
        return family(loc, scale).expand(tuple(shape))

    return _tagged(prior, spec={"kind": kind, "scale": scale, "loc": loc})


def scaled(kind: str, scale: float) -> Prior:
    """The prior of `kind` (one of `KINDS`) at `scale`, as the module docstring's table says:
    normal(scale), fan_in_normal(scale), he_normal(2 scale^2) or cauchy(scale)."""
    if kind == "he_normal":
        return he_normal(2.0 * scale * scale)
    return {"normal": normal, "fan_in": fan_in_normal, "cauchy": cauchy}[kind](scale)


@PRIORS.register("per_site")
def per_site(kind="normal", scale=1.0, *, default_kind: str = "normal", default_scale: float = 1.0) -> Prior:
    """The prior of a catalogue entry's ``prior`` and ``prior_scale`` arguments.

    Args:
      kind: one of `KINDS`, or {shell pattern: kind} (e.g. ``{"*/b": "normal", "*": "fan_in"}``).
      scale: a positive number, or {shell pattern: positive number} (e.g. ``{"*/b": 1.0, "*": 2.0}``);
        what it means depends on the site's kind (module docstring).
      default_kind, default_scale: what a site that no pattern matches takes (a ``"*"`` pattern matches
        every site). In a dict the first pattern that matches the site name wins (as in `by_pattern`).

    Returns `scaled(kind, scale)` when both are single values (its spec is that prior's own); otherwise a
    prior choosing kind and scale per site, whose ``spec`` is {"kind": "per_site", "prior": kind or a list of
    [pattern, kind] pairs (the order matters), "prior_scale": likewise, "default_kind", "default_scale"}.
    It has ``unmatched(site_names) -> {"prior": [...], "prior_scale": [...]}``: the patterns that are the
    first match of none of the names (a typo, or a pattern shadowed by an earlier one).
    Raises InputError naming ``prior`` / ``prior_scale`` for anything else.
    """
    kinds, scales = check_kind(kind), check_scale(scale)
    check_kind(default_kind, "default_kind")
    check_scale(default_scale, "default_scale")
    if isinstance(kinds, str) and not isinstance(scales, tuple):
        return scaled(kinds, scales)

    def resolve(name):
        return (_first(kinds, name, default_kind), _first(scales, name, default_scale))

    def prior(name, shape):
        return scaled(*resolve(name))(name, shape)

    def unmatched(site_names):
        names = list(site_names)
        return {arg: [p for p, _ in rules if not any(_first_pattern(rules, n) == p for n in names)]
                for arg, rules in (("prior", kinds), ("prior_scale", scales)) if isinstance(rules, tuple)}

    return _tagged(prior, resolve=resolve, unmatched=unmatched,
                   spec={"kind": "per_site", "prior": _rules_spec(kinds), "prior_scale": _rules_spec(scales),
                         "default_kind": default_kind, "default_scale": default_scale})


def check_kind(kind, argument: str = "prior"):
    """`kind` checked: a name of `KINDS`, or a non-empty {pattern: name} (returned as a tuple of pairs)."""
    expected = f"one of {list(KINDS)} or a dict {{site pattern: kind}}"
    if isinstance(kind, str):
        if kind not in KINDS:
            raise InputError(argument, kind, expected, "unknown prior")
        return kind
    pairs = _pairs(kind, argument, expected)
    for pattern, value in pairs:
        if not isinstance(value, str) or value not in KINDS:
            raise InputError(argument, kind, f"a kind of {list(KINDS)} for every pattern",
                             f"pattern {pattern!r} has {value!r}")
    return pairs


def check_scale(scale, argument: str = "prior_scale"):
    """`scale` checked: a positive finite number, or a non-empty {pattern: positive finite number}
    (returned as a tuple of (pattern, float) pairs)."""
    expected = "a positive real number or a dict {site pattern: positive real number}"
    if not isinstance(scale, (Mapping, list, tuple)):
        if not _is_positive(scale):
            raise (InputError if _is_real(scale) else ArgumentTypeError)(argument, scale, expected)
        return float(scale)
    pairs = _pairs(scale, argument, expected)
    for pattern, value in pairs:
        if not _is_positive(value):
            raise InputError(argument, scale, "a positive finite real number for every pattern",
                             f"pattern {pattern!r} has {value!r}")
    return tuple((p, float(v)) for p, v in pairs)


def check_patterns(prior: Prior, site_names) -> None:
    """Refuse (InputError naming ``prior`` or ``prior_scale``) a `per_site` prior with a pattern that is the
    first match of none of `site_names` (the sites this prior is asked about): it would do nothing."""
    unmatched = getattr(prior, "unmatched", None)
    if unmatched is None:
        return
    names = list(site_names)
    for argument, patterns in unmatched(names).items():
        if patterns:
            raise InputError(argument, patterns, "site patterns each matching a site (first match wins)",
                             f"no site takes its {argument.replace('_', ' ')} from {patterns}; the sites are "
                             f"{names[:8]}{' ...' if len(names) > 8 else ''}")


def by_pattern(rules: Mapping[str, Prior], default: Prior | None = None) -> Prior:
    """Choose a prior per site by shell-style name pattern; the first matching rule wins.

    Example: ``by_pattern({"*/w": he_normal(), "*/b": normal(1.0)})``; ``"mlp/~/linear_0/*"``
    selects one layer. A site no rule matches takes `default`, or raises ValueError naming it.
    ``prior.route(name)`` is the rule (or default) a site takes.
    """
    rules = dict(rules)

    def route(name):
        for pattern, rule in rules.items():
            if fnmatch.fnmatchcase(name, pattern):
                return rule
        if default is None:
            raise InputError.worded("prior",
                f"prior: no pattern matches site {name!r}; patterns are {list(rules)} and no default was given"
            )
        return default

    def prior(name, shape):
        return route(name)(name, shape)

    return _tagged(prior, route=route, spec={
        "kind": "by_pattern",
        "rules": {k: getattr(v, "spec", None) for k, v in rules.items()},
        "default": getattr(default, "spec", None),
    })


def reaches(prior: Prior, part: Prior, name: str) -> bool:
    """Whether site `name` takes its prior from `part` inside `prior` (following `by_pattern` routes)."""
    while prior is not part and hasattr(prior, "route"):
        prior = prior.route(name)
    return prior is part


def describe(spec) -> str:
    """A prior's ``spec`` in words, e.g. "normal, scale 1.0", "fan_in, sigma_w 2.0",
    "*/alpha, */gamma: normal(loc 1.0, scale 0.1); else normal, scale 1.0" (None: "unknown")."""
    if not isinstance(spec, dict):
        return "unknown"
    kind = spec.get("kind")
    if kind == "fan_in_normal":
        return f"fan_in, sigma_w {spec['scale']}"
    if kind == "he_normal":
        return f"he_normal, gain {spec['gain']}"
    if kind in ("normal", "cauchy"):
        return f"{kind}, scale {spec['scale']}" + (f", loc {spec['loc']}" if spec.get("loc") else "")
    if kind == "per_site":
        return (f"per site: prior {spec['prior']}, prior_scale {spec['prior_scale']} (else {spec['default_kind']}, "
                f"{spec['default_scale']})")
    if kind == "by_pattern":
        groups: dict = {}
        for pattern, rule in spec["rules"].items():
            groups.setdefault(describe(rule), []).append(pattern)
        parts = [f"{', '.join(p)}: {text}" for text, p in groups.items()]
        return "; ".join(parts + ([f"else {describe(spec['default'])}"] if spec.get("default") else []))
    return str(kind)


@PRIORS.register("log_uniform")
def log_uniform() -> Prior:
    """The improper log-uniform prior p(w) ∝ 1/|w| (variance networks; see `models.variance`)."""
    from models.variance import log_uniform_prior

    return log_uniform_prior()


def from_spec(spec) -> Prior:
    """Rebuild a prior from its ``.spec`` dict (used by checkpoints and the CLI): ``PRIORS[kind](**rest)``, the
    kind's factory as registered in `base.registry.PRIORS` (a ``by_pattern`` spec rebuilds its rules)."""
    if callable(spec):
        return spec
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind == "by_pattern":
        return by_pattern({k: from_spec(v) for k, v in spec["rules"].items()},
                          from_spec(spec["default"]) if spec.get("default") else None)
    if kind not in PRIORS:
        raise InputError.worded("prior",
                                f"prior: unknown kind {kind!r}; expected one of {sorted(PRIORS) + ['by_pattern']}")
    if kind == "per_site":
        return per_site(_rules_value(spec.pop("prior")), _rules_value(spec.pop("prior_scale")), **spec)
    return PRIORS[kind](**spec)


def _pairs(rules, argument, expected) -> tuple:
    """A dict (or list of pairs) of {str pattern: value} as a non-empty tuple of pairs, in order."""
    if not isinstance(rules, Mapping):
        raise ArgumentTypeError(argument, rules, expected)
    if not rules:
        raise InputError(argument, rules, expected, "the dict is empty")
    for pattern in rules:
        if not isinstance(pattern, str) or not pattern:
            raise ArgumentTypeError(argument, rules, expected, f"key {pattern!r} is not a site pattern (a string)")
    return tuple(rules.items())


def _first_pattern(rules: tuple, name: str):
    return next((p for p, _ in rules if fnmatch.fnmatchcase(name, p)), None)


def _first(rules, name, default):
    if not isinstance(rules, tuple):
        return rules
    return next((v for p, v in rules if fnmatch.fnmatchcase(name, p)), default)


def _rules_spec(rules):
    """A kind / scale as JSON: the value, or [[pattern, value], ...] in order (order decides the match)."""
    return [list(pair) for pair in rules] if isinstance(rules, tuple) else rules


def _rules_value(rules):
    return dict(rules) if isinstance(rules, list) else rules


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_positive(value) -> bool:
    return _is_real(value) and value > 0 and math.isfinite(value)


def _check_positive(arg, value):
    if not _is_positive(value):
        raise InputError(arg, value, "a positive finite real number")
