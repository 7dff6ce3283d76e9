"""Haiku architectures and how networks (Haiku, Flax NNX, Equinox: `models.adapters`) become NumPyro models
(priors, likelihoods, the bridge)."""

from models import likelihoods, priors
from models.bridge import BNN, bnn, flatten_params, unflatten_params

__all__ = ["BNN", "bnn", "flatten_params", "unflatten_params", "priors", "likelihoods"]
