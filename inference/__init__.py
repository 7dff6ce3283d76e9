"""Guides, SVI (`fit`), NUTS (`nuts`), the `Posterior` type, ArviZ conversion and checkpoints."""

from inference.checkpoint import load, save
from inference.block_diagonal import BlockDiagonal, block_diagonal
from inference.by_site import BySite, by_site
from inference.fit import NonFiniteLossError, fit
from inference.warm_start import from_mean_field
from inference.full_covariance import FullCovariance, LowRank, full_covariance, low_rank
from inference.k_tied import KTiedNormal, k_tied
from inference.mean_field import MeanField, mean_field
from inference.nuts import nuts
from inference.point_estimate import PointEstimate, point_estimate
from inference.posterior import Posterior
from inference.rank1_mixture import Rank1Mixture, batch_ensemble, rank1_mixture
from inference.zero_mean import VarianceLayers, ZeroMean, predictions_by_procedure, variance_layers, zero_mean
from inference.registry import GUIDES, make_guide, register_guide



def to_arviz(posterior, data=None, **kwargs):
    """ArviZ InferenceData of a Posterior (see `inference.arviz.to_arviz`; imported lazily: ArviZ is slow to import)."""
    from inference.arviz import to_arviz as convert

    return convert(posterior, data, **kwargs)


__all__ = ["full_covariance", "FullCovariance", "low_rank", "LowRank", "block_diagonal", "BlockDiagonal",
           "by_site", "BySite", "k_tied", "KTiedNormal", "zero_mean", "ZeroMean", "variance_layers", "VarianceLayers",
           "rank1_mixture", "batch_ensemble", "Rank1Mixture", "predictions_by_procedure", "fit", "nuts", "NonFiniteLossError", "mean_field", "MeanField", "point_estimate", "PointEstimate", "Posterior", "to_arviz",
           "save", "load", "GUIDES", "make_guide", "register_guide", "from_mean_field"]
