"""Guides and variational families by name, so that the CLI, `by_site` and checkpoints can build them from a string."""

from __future__ import annotations

from inference.by_site import FAMILIES, by_site, register_family
from inference.joint_gaussian import block_diagonal, full_covariance, low_rank
from inference.k_tied import k_tied
from inference.mean_field import mean_field
from inference.point_estimate import point_estimate
from inference.rank1_mixture import rank1_mixture
from inference.zero_mean import variance_layers, zero_mean
from models.errors import InputError

GUIDES = {
    "mean_field": mean_field,
    "point_estimate": point_estimate,
    "k_tied": k_tied,
    "zero_mean": zero_mean,
    "variance_layers": variance_layers,
    "rank1_mixture": rank1_mixture,  # family="delta" is BatchEnsemble (inference.batch_ensemble)
    "full_covariance": full_covariance,
    "low_rank": low_rank,
    "block_diagonal": block_diagonal,
    "by_site": by_site,
}
"""Guide factories by name: {name: ``factory(model, **kwargs) -> guide``}."""

__all__ = ["GUIDES", "FAMILIES", "register_guide", "register_family", "make_guide"]


def register_guide(name: str, factory) -> None:
    """Make ``factory(model, **kwargs) -> guide`` available as `name`."""
    if not isinstance(name, str) or not name or not callable(factory):
        raise InputError.worded("register_guide",
                                f"register_guide: expected a non-empty name and a callable factory, got {name!r}, {factory!r}")
    GUIDES[name] = factory


def make_guide(name: str, model, **kwargs):
    """Build the guide called `name` for `model`; unknown names raise ValueError listing the known ones."""
    if name not in GUIDES:
        raise InputError.worded("guide", f"guide: unknown name {name!r}; expected one of {sorted(GUIDES)}")
    return GUIDES[name](model, **kwargs)
