"""Guides by name, so that the CLI and checkpoints can build them from a string."""

from __future__ import annotations

from inference.block_diagonal import block_diagonal
from inference.by_site import by_site
from inference.full_covariance import full_covariance, low_rank
from inference.k_tied import k_tied
from inference.mean_field import mean_field
from inference.point_estimate import point_estimate
from inference.rank1_mixture import rank1_mixture
from inference.zero_mean import variance_layers, zero_mean

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


def register_guide(name: str, factory) -> None:
    """Make ``factory(model, **kwargs) -> guide`` available as `name`."""
    GUIDES[name] = factory


def make_guide(name: str, model, **kwargs):
    """Build the guide called `name` for `model`; unknown names raise ValueError listing the known ones."""
    if name not in GUIDES:
        raise ValueError(f"guide: unknown name {name!r}; expected one of {sorted(GUIDES)}")
    return GUIDES[name](model, **kwargs)
