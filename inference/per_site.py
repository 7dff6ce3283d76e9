"""`PerSiteGuide`: a BNN guide whose variational family is chosen site by site.

The k-tied Normal, zero-mean / variance-layer and rank-1 mixture guides differ only in the
distribution they put on each latent site (and in the parameters behind it). A subclass implements

    site_distribution(name, shape, param) -> distribution over the *unconstrained* site value

where ``param(suffix, init, constraint=real)`` returns the guide parameter ``"{name}_{prefix}_{suffix}"``
(``init``: an array or a callable ``key -> array``). This base turns that one method into
``__call__`` (a NumPyro guide: ``numpyro.param`` + ``numpyro.sample`` per site), ``sample_posterior``,
``median``, ``quantiles`` (read from a params dict, each site drawn with its own key) and
``num_params``. Sites on a constrained support are pushed through ``biject_to(support)``.
"""

from __future__ import annotations

import math
from abc import abstractmethod

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.distributions import biject_to, constraints
from numpyro.infer.autoguide import AutoNormal

from inference.guide_base import BNNGuide


class PerSiteGuide(AutoNormal, BNNGuide):
    """Base class; subclasses define `site_distribution` and `num_params_formula` (see module docstring)."""

    def __init__(self, model, *, init_scale: float, prefix: str = "auto"):
        if not init_scale > 0:
            raise ValueError(f"init_scale: expected a positive number, got {init_scale!r}")
        super().__init__(model, init_scale=init_scale, prefix=prefix)

    # ----- what a subclass provides ----------------------------------------------------------
    @abstractmethod
    def site_distribution(self, name: str, shape: tuple, param):
        """Distribution over the unconstrained value of site `name` (batch shape (), event shape `shape`)."""

    @abstractmethod
    def num_params_formula(self) -> int:
        """The variational parameter count predicted by the paper's formula (after `setup`)."""

    # ----- NumPyro guide ------------------------------------------------------------------------
    def site_shapes(self) -> dict:
        """{latent site: shape} of the unconstrained values, in model order (after `setup`)."""
        if self.prototype_trace is None:
            raise ValueError(f"{type(self).__name__}: the guide has not seen the model's inputs yet; call "
                             "guide.setup(x) (fit does) before asking for sites or parameter counts")
        return {k: tuple(jnp.shape(v)) for k, v in self._init_locs.items()}

    def init_params(self, rng_key, x) -> dict:
        """Fresh constrained guide parameters {param name: array} for inputs shaped like x (B, ...)."""
        self.setup(x)
        with handlers.block():
            trace = handlers.trace(handlers.seed(self, rng_key)).get_trace(x)
        return {k: s["value"] for k, s in trace.items() if s["type"] == "param"}

    def init_loc(self, name: str):
        """The starting location of site `name` (unconstrained): Haiku's initial value or `init_loc_fn`'s."""
        return self._init_locs[name]

    def _distributions(self, param_of) -> dict:
        return {
            name: self.site_distribution(name, shape, lambda suffix, init, constraint=constraints.real, _n=name:
                                         param_of(_n, suffix, init, constraint))
            for name, shape in self.site_shapes().items()
        }

    def _param_name(self, name, suffix):
        return f"{name}_{self.prefix}_{suffix}"

    def __call__(self, *args, **kwargs):
        """The NumPyro guide: one ``numpyro.sample`` per latent site; returns {site: constrained value}."""
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)

        def param_of(name, suffix, init, constraint):
            return numpyro.param(self._param_name(name, suffix), init, constraint=constraint)

        result = {}
        for name, fn in self._distributions(param_of).items():
            support = self.prototype_trace[name]["fn"].support
            if _is_real(support):
                result[name] = numpyro.sample(name, fn)
            else:
                result[name] = numpyro.sample(name, dist.TransformedDistribution(fn, biject_to(support)))
        return result

    def distributions(self, params: dict) -> dict:
        """{site: unconstrained guide distribution} built from constrained guide `params`."""
        return self._distributions(lambda name, suffix, init, constraint: params[self._param_name(name, suffix)])

    def sample_posterior(self, rng_key, params, *args, sample_shape=(), **kwargs):
        """{site: sample_shape + site shape} constrained draws, one independent key per site."""
        dists = self.distributions(params)
        keys = jax.random.split(rng_key, len(dists))
        latent = {name: fn.sample(key, sample_shape) for (name, fn), key in zip(dists.items(), keys)}
        return self._constrain(latent)

    def median(self, params):
        """{site: site shape}: the elementwise median (the location for Normal, Cauchy, Delta), constrained."""
        return self._constrain({name: _icdf(fn, 0.5) for name, fn in self.distributions(params).items()})

    def quantiles(self, params, quantiles):
        """{site: (Q,) + site shape}: elementwise quantiles of the factorised guide, constrained."""
        q = jnp.asarray(quantiles)
        latent = {name: _icdf(fn, q.reshape((-1,) + (1,) * len(fn.event_shape))) for name, fn in
                  self.distributions(params).items()}
        return self._constrain(latent)

    def num_params(self, params: dict | None = None) -> int:
        """Scalar variational parameters: counted from `params`, or by the paper's formula when None."""
        if params is None:
            return int(self.num_params_formula())
        return int(sum(math.prod(jnp.shape(v)) for v in jax.tree.leaves(params)))


def _is_real(support) -> bool:
    return support is constraints.real or (
        isinstance(support, constraints.independent) and support.base_constraint is constraints.real
    )


def _icdf(fn, q):
    """Elementwise quantile `q` of a factorised distribution (Independent of Normal/Cauchy/Delta)."""
    while isinstance(fn, (dist.Independent, dist.ExpandedDistribution)):
        fn = fn.base_dist
    if isinstance(fn, dist.Delta):
        return jnp.broadcast_to(fn.v, jnp.broadcast_shapes(jnp.shape(q), jnp.shape(fn.v)))
    return fn.icdf(q)
