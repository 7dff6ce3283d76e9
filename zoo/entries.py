"""The catalogue's entries (registered on import of `zoo`)."""

from __future__ import annotations

from models import likelihoods, priors
from models.bridge import bnn
from models.networks.mlp import deep_linear, mlp
from zoo.registry import register


def _likelihood(train, noise):
    return likelihoods.categorical() if train.num_classes is not None else likelihoods.normal(noise)


def _out_dim(train):
    return train.num_classes if train.num_classes is not None else (1 if train.y.ndim == 1 else train.y.shape[1])


@register("mlp", default_data="digits", description="multilayer perceptron (widths, activation as arguments)")
def build_mlp(train, hidden=(64, 64), activation="relu", prior_scale=1.0, prior="normal", noise=0.1):
    """An MLP BNN: ``hidden`` widths, ``activation``, Normal(0, prior_scale) (or "he_normal"/"cauchy") priors."""
    return bnn(mlp(tuple(hidden), _out_dim(train), activation), _prior(prior, prior_scale),
               _likelihood(train, noise), name="mlp")


@register("deep_linear", default_data="digits",
          description="deep linear network x W1...WL, product matrix exposed (Liberty or Depth)")
def build_deep_linear(train, depth=3, width=32, prior_scale=1.0, prior="normal", noise=0.1):
    """A deep linear BNN of `depth` bias-free linear layers of `width` units."""
    return bnn(deep_linear(depth, width, _out_dim(train)), _prior(prior, prior_scale),
               _likelihood(train, noise), name="deep_linear")


def _prior(kind, scale):
    if kind == "normal":
        return priors.normal(scale)
    if kind == "he_normal":
        return priors.he_normal()
    if kind == "cauchy":
        return priors.cauchy(scale)
    raise ValueError(f"prior: expected 'normal', 'he_normal' or 'cauchy', got {kind!r}")
