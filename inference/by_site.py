"""`by_site`: one guide whose variational family is chosen per site by shell pattern.

    inference.by_site.by_site(model, {"*/linear_0/*": "zero_mean", "*/w": ("k_tied", {"k": 2})},
                      default="point_estimate")

puts the zero-mean family on the first dense layer (a variance layer, variance networks paper
section 6), the k-tied Normal on the other weight matrices (the k-tied paper also combined k-tied dense
layers with mean-field conv layers) and a point estimate (Delta) on everything else. Each site gets the
family of the FIRST pattern (in dict order) that matches its name, else `default`; see `SiteGuide`.

A family spec is a name of `FAMILIES` (`inference.registry`: every family class registers itself there with
`register_family`, built-ins included) or a (name, {keyword arguments}) pair; the keywords are the
family's fields (the same names its single-family guide takes, e.g. ``init_scale``, ``k``).
"""

from __future__ import annotations

from inference.registry import FAMILIES, register_family, register_guide
from inference.site_guide import SiteGuide
from base.errors import InputError

__all__ = ["FAMILIES", "by_site", "make_family", "normalize_spec", "register_family"]


def normalize_spec(spec, arg: str) -> list:
    """A family spec ("name" or (name, {kwargs})) as the JSON-stable list [name, {kwargs}]."""
    if isinstance(spec, str):
        return [spec, {}]
    if isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], dict):
        return [spec[0], dict(spec[1])]
    raise InputError.worded(arg, f"{arg}: expected a family name or a (name, kwargs dict) pair, got {spec!r}")


def make_family(spec: list, arg: str = "families"):
    """The family object of a normalised spec [name, kwargs]; ValueError naming `arg` for an unknown name
    or keywords the family does not take."""
    name, kwargs = spec
    if name not in FAMILIES:
        raise InputError.worded(arg, f"{arg}: unknown family {name!r}; expected one of {sorted(FAMILIES)}")
    try:
        return FAMILIES[name](**kwargs)
    except TypeError as e:
        raise InputError.worded(arg,
                                f"{arg}: family {name!r} does not take the keyword arguments {kwargs}: {e}") from None


@register_guide("by_site", example={"families": {"*/w": "mean_field"}, "default": "point_estimate"})
def by_site(model, families: dict, *, default="point_estimate", prefix: str = "auto") -> SiteGuide:
    """One guide with a family per site: `families` {shell pattern: spec}, first match wins; sites no
    pattern matches get `default` (a spec, or None to refuse them). See the module docstring."""
    if not isinstance(families, dict) or not families:
        raise InputError.worded("families",
                                f"families: expected a non-empty {{pattern: family}} dict, got {families!r}")
    specs = {str(p): normalize_spec(s, f"families[{p!r}]") for p, s in families.items()}
    default_spec = None if default is None else normalize_spec(default, "default")
    objects = {p: make_family(s) for p, s in specs.items()}
    default_family = None if default_spec is None else make_family(default_spec, "default")
    return SiteGuide(model, objects, default=default_family, prefix=prefix,
                     config={"name": "by_site", "families": specs, "default": default_spec})
