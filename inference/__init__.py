"""Guides, variational families, SVI (`fit`, over the pure core `svi`), NUTS (`nuts`), the `Posterior` type, ArviZ conversion and checkpoints.

The top level holds what a user needs (`__all__`, at most 30 names, a test holds the bound); everything else is
imported from its module (``from inference.k_tied import k_tied, KTiedFamily``). A guide is found by name through
the registry: ``inference.make_guide("k_tied", model, k=2)``, ``inference.GUIDES`` (`base.registry`). Every guide
and family registers itself where it is defined (``@register_guide(name)``, ``@register_family``); importing its
module here is what makes a built-in one known by name."""

# the built-in guides and families register themselves when their modules load, in this order
import inference.by_site
import inference.point_estimate
import inference.mean_field
import inference.zero_mean
import inference.dropout
import inference.k_tied
import inference.joint_gaussian
import inference.rank1_mixture  # noqa: F401
import inference.kl_schedules  # noqa: F401  (inference.kl_schedules.linear(...), as before)
from inference import svi
from inference.checkpoint import load, save
from inference.collapse import PosteriorCollapseWarning
from inference.convergence import ConvergenceWarning
from inference.ensemble import ensemble
from inference.fit import NonFiniteLossError, fit
from inference.ivon import ivon
from inference.laplace import laplace
from inference.mean_field import mean_field
from inference.nuts import DivergenceWarning, nuts
from inference import estimators, optimizers
from inference.posterior import MCMCPosterior, Posterior, SVIPosterior
from inference.predictive_density import predictive_density_table
from inference.registry import GUIDES, make_guide, register_family, register_guide
from base.errors import InputError, ZooError


def to_arviz(posterior, data=None, **kwargs):
    """ArviZ InferenceData of a Posterior (see `inference.arviz.to_arviz`; imported lazily: ArviZ is slow to import)."""
    from inference.arviz import to_arviz as convert

    return convert(posterior, data, **kwargs)


__all__ = [
    # guides: the default one, and every other by name through the registry (`base.registry.GUIDES`)
    "mean_field", "GUIDES", "make_guide", "register_guide", "register_family",
    # training, sampling, after-training posteriors
    "fit", "svi", "optimizers", "estimators", "nuts", "laplace", "ivon", "ensemble",
    # results: one Posterior type for SVI and MCMC, saved and loaded, converted to ArviZ, scored on held-out data
    "Posterior", "SVIPosterior", "MCMCPosterior", "save", "load", "to_arviz", "predictive_density_table",
    # what a run may warn or raise (every bad input raises an InputError, a ZooError: base.errors)
    "ConvergenceWarning", "PosteriorCollapseWarning", "DivergenceWarning", "NonFiniteLossError", "ZooError",
    "InputError",
]
