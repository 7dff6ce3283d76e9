"""Guides, variational families, SVI (`fit`, over the pure core `svi`), NUTS (`nuts`), the `Posterior` type, ArviZ conversion and checkpoints.

Every guide and family registers itself where it is defined (`inference.registry`: ``@register_guide(name)``,
``@register_family``); importing its module here is what makes a built-in one known by name (`GUIDES`,
`FAMILIES`)."""

from inference.by_site import by_site
from inference.checkpoint import load, save
from inference.collapse import PosteriorCollapseWarning
from inference.convergence import ConvergenceWarning
from inference.dropout import BinaryDropoutFamily, binary_dropout
from inference.families import Family, ParamSpec
from inference.ensemble import ensemble, member_start
from inference.fit import Callback, FitRun, NonFiniteLossError, default_optimizer, default_steps, fit
from inference.guide_base import BNNGuide
from inference.ivon import IVON, IVONState, ivon
from inference.guide_protocol import Guide, HasSiteMoments
from inference import kl_schedules, svi
from inference.joint_gaussian import JointGaussian, block_diagonal, full_covariance, low_rank
from inference.k_tied import KTiedFamily, k_tied
from inference.laplace import laplace
from inference.laplace_posterior import LaplacePosterior
from inference.mean_field import NormalFamily, mean_field
from inference.nuts import DivergenceWarning, nuts
from inference import optimizers
from inference.optimizers import adam, cosine_adam, sgd
from inference.estimators import Local, PerExample, Standard
from inference.point_estimate import DeltaFamily, point_estimate
from inference.posterior import ConstrainedParams, MCMCPosterior, Posterior, SVIPosterior
from inference.predictive_density import PredictiveDensity, log_predictive_density, predictive_density_table
from inference.rank1_mixture import Rank1FactorFamily, batch_ensemble, rank1_mixture
from inference.registry import FAMILIES, GUIDES, Registry, example_options, make_guide, register_family, register_guide
from inference.run_info import FitInfo, NutsInfo
from inference.site_guide import SiteGuide
from inference.site_names import arviz_name, site_name
from inference.sites import Site, site_table
from inference.training_data import remember_training_data
from inference.warm_start import from_mean_field
from base.errors import ArgumentTypeError, CheckpointError, InputError, ZooError
from inference.zero_mean import (VarianceLayerFamily, ZeroMeanFamily, predictions_by_procedure, variance_layers,
                                 zero_mean)


def to_arviz(posterior, data=None, **kwargs):
    """ArviZ InferenceData of a Posterior (see `inference.arviz.to_arviz`; imported lazily: ArviZ is slow to import)."""
    from inference.arviz import to_arviz as convert

    return convert(posterior, data, **kwargs)


__all__ = [
    # guides (swap with one argument) and their registry
    "mean_field", "point_estimate", "k_tied", "zero_mean", "variance_layers", "rank1_mixture", "batch_ensemble",
    "full_covariance", "low_rank", "block_diagonal", "by_site", "binary_dropout", "GUIDES", "make_guide",
    "register_guide", "example_options", "Registry",
    # the machinery under them
    "SiteGuide", "JointGaussian", "BNNGuide", "Guide", "HasSiteMoments", "Site", "site_table",
    "Family", "ParamSpec", "FAMILIES", "register_family", "NormalFamily", "DeltaFamily", "KTiedFamily",
    "ZeroMeanFamily", "VarianceLayerFamily", "Rank1FactorFamily", "BinaryDropoutFamily",
    # training, sampling, results
    "fit", "svi", "optimizers", "adam", "sgd", "cosine_adam", "Standard", "PerExample", "Local", "ensemble", "member_start", "ivon", "IVON", "IVONState", "Callback", "FitRun", "kl_schedules", "default_optimizer", "default_steps", "nuts", "laplace", "LaplacePosterior", "NonFiniteLossError", "ConvergenceWarning", "PosteriorCollapseWarning", "DivergenceWarning", "Posterior", "SVIPosterior", "MCMCPosterior",
    "ConstrainedParams", "FitInfo", "NutsInfo", "to_arviz", "save", "load", "from_mean_field",
    "predictions_by_procedure",
    # ArviZ names <-> site names, the training data a posterior remembers, held-out scores
    "arviz_name", "site_name", "remember_training_data", "log_predictive_density", "predictive_density_table",
    "PredictiveDensity",
    # the errors every bad input raises (base.errors)
    "ZooError", "InputError", "ArgumentTypeError", "CheckpointError",
]
