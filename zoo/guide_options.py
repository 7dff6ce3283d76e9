"""A guide's options on the command line, checked against its factory's signature before any work.

``zoo fit --guide k_tied --guide-option k=3 --guide-option init_scale=0.01`` or ``--guide-options '{"k": 3}'``:
each value is read as JSON where it parses (``k=2`` -> 2, ``rank=null`` -> None,
``variance_sites='["mlp/~/linear_0/w"]'`` -> a list) and as a string otherwise (``granularity=neuron``).
`check_guide_options` accepts exactly the keyword parameters of ``inference.GUIDES[name]`` (after the model)
and values of their annotated kind; `check_required_options` names a required option that was not given.
The guide's own config (``guide.config``, saved with the posterior) then records every option, so
``zoo score`` / ``zoo.load`` rebuild the same guide.
"""

from __future__ import annotations

import argparse
import inspect
import json
import types
import typing

from inference.registry import GUIDES, example_options
from base.errors import InputError

EXAMPLES = {  # what a required option looks like, by option name
    "variance_sites": "--guide-option variance_sites=mlp/~/linear_0/w (the variance layers: a site name or shell "
                      "pattern, or a JSON list of them; the variance networks paper makes the first dense layer one)",
    "families": "--guide-option families='{\"*/w\": \"k_tied\"}' (a JSON object {site pattern: family})",
}


def parse_option(text: str) -> tuple[str, object]:
    """An argparse type for ``--guide-option``: "key=value" -> (key, value), the value JSON where it parses,
    else the text as a string. Raises argparse.ArgumentTypeError without a '=' or with an empty key."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value such as k=2, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


parse_option.__name__ = "key=value"


def parse_options_object(text: str) -> dict:
    """An argparse type for ``--guide-options``: a JSON object -> dict; argparse.ArgumentTypeError otherwise."""
    try:
        value = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"k\": 2}}', got {text!r} "
                                         f"(invalid JSON: {err})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"k\": 2}}', got {text!r} "
                                         f"(a {type(value).__name__})")
    return value


parse_options_object.__name__ = "JSON object"


def merged_options(options_object: dict | None, pairs: list | None) -> dict:
    """{key: value} from ``--guide-options`` and the (key, value) pairs of ``--guide-option``; a key given
    twice raises InputError."""
    merged = dict(options_object or {})
    for key, value in pairs or ():
        if key in merged:
            raise InputError("--guide-option", f"{key}={json.dumps(value)}", "each option once",
                             hint=f"{key} is also given as {key}={json.dumps(merged[key])}")
        merged[key] = value
    return merged


def guide_parameters(factory) -> tuple[dict, bool]:
    """({name: inspect.Parameter} of the options `factory(model, ...)` takes by keyword, whether it takes
    any keyword (**kwargs)). The first parameter (the model) is not an option."""
    params = list(inspect.signature(factory).parameters.values())[1:]
    named = {p.name: p for p in params
             if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    return named, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def check_guide_options(name: str, factory, options: dict) -> dict:
    """`options` checked against the signature of guide `name`'s `factory`: every key one of its keyword
    parameters, every value of the parameter's annotated kind (int, float, str, bool, dict, list, None;
    an int is taken for a float and becomes one). Returns the options (floats as floats); raises InputError
    naming the option, the value and the accepted keys (the CLI prints one line, exit status 2)."""
    named, any_keyword = guide_parameters(factory)
    hints = _type_hints(factory)
    checked = {}
    for key, value in options.items():
        if key not in named and not any_keyword:
            raise InputError("--guide-option", f"{key}={json.dumps(value)}",
                             f"an option of guide {name!r}: one of {', '.join(named) or '(none)'}")
        hint = hints.get(key)
        ok, checked[key] = _conform(value, hint) if hint is not None else (True, value)
        if not ok:
            raise InputError(f"--guide-option {key}", value,
                             f"{_kind_name(hint)} (guide {name!r} option {key}: {_annotation(named[key])})")
    return checked


def missing_required_options(factory, options: dict) -> list:
    """The required options of guide `factory` (keyword parameters without a default) that `options` lacks."""
    named, _ = guide_parameters(factory)
    return [key for key, param in named.items() if param.default is inspect.Parameter.empty and key not in options]


def check_required_options(name: str, factory, options: dict, sites=()) -> None:
    """Raise InputError naming the first required option of guide `name` (no default) missing from
    `options`, with an example (`EXAMPLES`, else the guide's registered ``example``) and the model's `sites`
    (names) to choose from."""
    missing = missing_required_options(factory, options)
    if missing:
        key = missing[0]
        shown = ", ".join(list(sites)[:8]) + (", ..." if len(sites) > 8 else "")
        registered = example_options(name) if name in GUIDES else {}
        fallback = f"--guide-option {key}={json.dumps(registered[key])}" if key in registered else \
            f"--guide-option {key}=VALUE"
        hint = f"e.g. {EXAMPLES.get(key, fallback)}"
        raise InputError(f"--guide-option {key}", "<not given>",
                         f"a value for option {key} of guide {name!r} (required: it has no default)",
                         hint=hint + (f"; the model's sites: {shown}" if shown else ""))


def _type_hints(factory) -> dict:
    """The factory's evaluated annotations, {} where they cannot be evaluated (no kind check then)."""
    try:
        return typing.get_type_hints(factory)
    except Exception:  # noqa: BLE001 - an annotation naming something not importable: skip the kind checks
        return {}


_KINDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false", dict: "a JSON object",
          list: "a JSON list", tuple: "a JSON list", type(None): "null"}


def _members(hint) -> tuple:
    """The types a hint allows: (int, NoneType) for ``int | None``; (hint,) otherwise."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (typing.get_origin(hint) or hint,)


def _conform(value, hint) -> tuple[bool, object]:
    """(whether `value` is of the kind `hint` allows, the value with an int made a float for a float hint).
    Kinds this does not know (a class, Any) accept every value: the factory checks those itself."""
    members = _members(hint)
    if not all(m in _KINDS for m in members):
        return True, value
    for kind in members:
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        if kind in (int, float) and isinstance(value, bool):
            continue
        if (kind in (list, tuple) and isinstance(value, list)) or isinstance(value, kind):
            return True, value
    return False, value


def _kind_name(hint) -> str:
    return " or ".join(_KINDS.get(m, getattr(m, "__name__", str(m))) for m in _members(hint))


def _annotation(param: inspect.Parameter) -> str:
    ann = param.annotation
    return ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
