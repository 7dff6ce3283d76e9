"""Estimators of the ELBO's likelihood term, as small frozen objects: what ``fit(..., estimator=)`` and
`inference.svi` take.

    Standard()     one guide draw per minibatch                   (`inference.elbo.annealed_elbo_loss`)
    PerExample()   an independent guide draw per example          (`inference.per_example`)
    Local()        the local reparameterisation trick on dense layers, Flipout on convolution kernels
                   (`inference.local_reparam`: each variational family's own ``local_rule``)

All three estimate the same loss, -(E_q[log p(D | w)] / T - beta KL(q || p)); they differ in the variance of its
gradient and in cost. An estimator is a value (equal objects are equal configurations, so jit's own cache serves
another one) with a ``name`` (checkpoints and run identities record it) and a ``loss(rng_key, params, model, guide,
beta, num_particles, x, y, n_data, *, temperature, mutable) -> (loss, mutable)`` of the signature of
`inference.elbo.annealed_elbo_loss`. The strings "standard", "per_example" and "local" are shorthands
(`as_estimator`). Nothing here knows a concrete guide or family.
"""

from __future__ import annotations

from dataclasses import dataclass

from base.errors import InputError
from base.registry import ESTIMATORS
from inference.elbo import annealed_elbo_loss
from inference.local_reparam import local_reparam_elbo_loss
from inference.per_example import per_example_elbo_loss

__all__ = ["Standard", "PerExample", "Local", "as_estimator"]


@dataclass(frozen=True)
class Standard:
    """One guide draw w ~ q per minibatch: -( (N/B) sum_n log p(y_n | x_n, w) / T - beta KL ) (the plain ELBO)."""

    name = "standard"

    def loss(self, *args, **kwargs):
        """`inference.elbo.annealed_elbo_loss`."""
        return annealed_elbo_loss(*args, **kwargs)


@dataclass(frozen=True)
class PerExample:
    """An independent guide draw per example (`inference.per_example`): the same expectation, a lower-variance
    gradient; B draws of every stochastic weight per step; refused for models with batch norm."""

    name = "per_example"

    def loss(self, *args, **kwargs):
        """`inference.per_example.per_example_elbo_loss`."""
        return per_example_elbo_loss(*args, **kwargs)


@dataclass(frozen=True)
class Local:
    """The local reparameterisation trick (Kingma et al., 2015) on the dense weight sites whose family offers a
    ``local_rule``, Flipout (Wen et al., 2018) on convolution kernels (`inference.local_reparam`); refused (a named
    InputError) for a guide with no such site."""

    name = "local"

    def loss(self, *args, **kwargs):
        """`inference.local_reparam.local_reparam_elbo_loss`."""
        return local_reparam_elbo_loss(*args, **kwargs)


ESTIMATORS.register("standard", Standard())
ESTIMATORS.register("per_example", PerExample())
ESTIMATORS.register("local", Local())


def as_estimator(estimator):
    """`estimator` as an estimator object: a shorthand string of `ESTIMATORS`, or an object with a ``name`` and a
    callable ``loss`` (`Standard`, `PerExample`, `Local` or one of the user's); InputError naming ``estimator``,
    the value and the choices otherwise."""
    if isinstance(estimator, str) and estimator in ESTIMATORS:
        return ESTIMATORS[estimator]
    if not isinstance(estimator, str) and isinstance(getattr(estimator, "name", None), str) and \
            callable(getattr(estimator, "loss", None)):
        return estimator
    raise InputError("estimator", estimator, f"one of {tuple(ESTIMATORS)} or an estimator object (Standard(), "
                     "PerExample(), Local()): one guide draw per minibatch, a guide draw per example, or the local "
                     "reparameterisation trick")
