"""What every guide of the zoo shares: NumPyro's public AutoGuide interface over a BNN's site table.

A guide subclasses ``numpyro.infer.autoguide.AutoGuide`` and implements its public methods
(``__call__``, ``sample_posterior``, ``median``, ``quantiles``), so that ``Predictive``, SVI and every
function of this package work with it. It reads the model's sites from `inference.sites.site_table`
(no ``initialize_model``) and touches no private attribute of NumPyro. What a guide offers beyond
that is declared in `inference.guide_protocol`.
"""

from __future__ import annotations

import math
from abc import abstractmethod

import jax
from numpyro import handlers
from numpyro.infer.autoguide import AutoGuide

from inference.sites import Site, site_table
from base.errors import InputError
from base.value_key import value_key


class BNNGuide(AutoGuide):
    """AutoGuide base for `models.BNN` models (see the module docstring).

    Args:
      model: a `models.BNN`.
      prefix: the parameter name prefix (NumPyro's convention, default ``"auto"``).
      config: JSON-able {"name": registry name, **keyword arguments} that rebuilds the guide with
        ``inference.make_guide(config["name"], model, **rest)`` (checkpoints store it).
    Subclasses implement ``__call__``, ``sample_posterior``, ``median``, ``quantiles`` and
    ``num_params_formula``; they may validate the site table in ``check_sites``.
    """

    def __init__(self, model, *, prefix: str = "auto", config: dict):
        if not isinstance(prefix, str) or not prefix:
            raise InputError.worded("prefix", f"prefix: expected a non-empty string, got {prefix!r}")
        super().__init__(model, prefix=prefix)
        self.sites: dict[str, Site] | None = None  # {name: Site} once `setup` has seen the inputs' shape
        self._guide_config = {**config, "prefix": prefix}

    @property
    def config(self) -> dict:
        """A copy of the JSON-able {"name": ..., **kwargs} that rebuilds this guide."""
        return dict(self._guide_config)

    def setup(self, x):
        """Read the model's sites for inputs shaped like `x` (B, ...) if not done yet; returns self.

        Only x's shape is read (x may be a tracer). The table holds concrete arrays only, even when `setup` is
        first called inside a user's ``jax.jit`` or an abstract trace: it is computed under
        ``jax.ensure_compile_time_eval`` (the initial locations are constants of the model, never values of
        the trace), so no tracer outlives the transformation that set the guide up (issue 45).
        """
        if self.sites is None:
            with jax.ensure_compile_time_eval():
                sites = site_table(self.model, x)
            traced = [name for name, site in sites.items()
                      if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tuple(site)))]
            if traced:  # a model whose initial values depend on the trace: keep nothing rather than leak it
                raise InputError.worded("model", f"model: the initial values of sites {traced[:3]} depend on the "
                                        "traced inputs; a guide caches only concrete values (set it up outside jit "
                                        "with guide.setup(x))")
            self.sites = sites
            self.check_sites()
        else:
            self.check_same_sites(x)
        return self

    def check_same_sites(self, x) -> None:
        """Refuse (InputError naming ``x``) inputs whose feature shape gives the model other site shapes than the
        ones this guide was set up with (a batch with an extra feature column would otherwise meet a guide of the
        old width). One cached abstract trace per new feature shape (`models.BNN.site_shapes`)."""
        shapes, sites = self.model.site_shapes(x), self.checked_sites()
        other = [name for name, site in sites.items() if tuple(shapes.get(name, ())) != tuple(site.shape)]
        if other:
            name = other[0]
            raise InputError("x", f"<inputs of feature shape {tuple(x.shape[1:])}>",
                             "inputs of the feature shape this guide was set up with",
                             f"site {name!r} would be {tuple(shapes.get(name, ()))}, the guide's is "
                             f"{tuple(sites[name].shape)}")

    def __value_key__(self):
        """None: a guide is keyed by identity (`base.value_key`) unless its class declares its whole
        configuration (`SiteGuide`, `JointGaussian` do)."""
        return None

    def setup_key(self) -> tuple:
        """What every guide's value key shares: its model's value key, its prefix and the site shapes it was set up
        with (None before `setup`)."""
        sites = None if self.sites is None else tuple((n, tuple(s.shape)) for n, s in self.sites.items())
        return (value_key(self.model), self.prefix, sites)

    def check_sites(self) -> None:
        """Validate the guide's options against `self.sites` (after `setup`); raise `InputError` naming the option if they do not fit."""

    def setup_from_call(self, args, kwargs) -> None:
        """`setup` from the arguments a NumPyro guide is called with: ``(x, ...)`` or ``x=...``."""
        self.setup(args[0] if args else kwargs["x"])

    def checked_sites(self) -> dict[str, Site]:
        """{latent site: Site} in model order (after `setup`; InputError naming the guide before)."""
        if self.sites is None:
            raise InputError.worded("guide",
                                    f"{type(self).__name__}: the guide has not seen the model's inputs yet; call "
                                    "guide.setup(x) (fit does) before asking for sites or parameter counts")
        return self.sites

    def site_shapes(self) -> dict:
        """{latent site: shape} in model order (after `setup`)."""
        return {name: site.shape for name, site in self.checked_sites().items()}

    def latent_names(self) -> list:
        """Names of the model's latent sites, in model order (after `setup`)."""
        return list(self.site_shapes())

    def num_latent(self) -> int:
        """Number of scalar latent values (after `setup`)."""
        return int(sum(math.prod(shape) for shape in self.site_shapes().values()))

    @abstractmethod
    def num_params_formula(self) -> int:
        """Scalar variational parameters by the guide's formula (after `setup`)."""

    def init_params(self, rng_key, x) -> dict:
        """Fresh constrained guide parameters {param name: array} for inputs shaped like `x` (B, ...)."""
        self.setup(x)
        with handlers.block():
            trace = handlers.trace(handlers.seed(self, rng_key)).get_trace(x)
        return {k: s["value"] for k, s in trace.items() if s["type"] == "param"}

    def num_free_params(self, params: dict) -> int:
        """Free scalar variational parameters counted from the constrained `params` {name: array}."""
        if not isinstance(params, dict):
            raise InputError.worded("params",
                                    f"params: expected the guide parameters as a dict (Posterior.params), got "
                                    f"{type(params).__name__}")
        return int(sum(math.prod(v.shape) for v in jax.tree.leaves(params)))
