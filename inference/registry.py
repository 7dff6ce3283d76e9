"""Guides by name, so that the CLI and checkpoints can build them from a string."""

from __future__ import annotations

from inference.mean_field import mean_field
from inference.point_estimate import point_estimate

GUIDES = {"mean_field": mean_field, "point_estimate": point_estimate}


def register_guide(name: str, factory) -> None:
    """Make ``factory(model, **kwargs) -> guide`` available as `name`."""
    GUIDES[name] = factory


def make_guide(name: str, model, **kwargs):
    """Build the guide called `name` for `model`; unknown names raise ValueError listing the known ones."""
    if name not in GUIDES:
        raise ValueError(f"guide: unknown name {name!r}; expected one of {sorted(GUIDES)}")
    return GUIDES[name](model, **kwargs)
