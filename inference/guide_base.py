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
    """AutoGuide base for `models.BNN` models (see the module docstring): a value, built once for its model.

    Args:
      model: a `models.BNN` that knows its input shape (``model.feature_shape``: set by ``zoo.get``, or
        ``models.bnn(..., feature_shape=...)``); InputError naming ``model`` otherwise.
      prefix: the parameter name prefix (NumPyro's convention, default ``"auto"``).
      config: JSON-able {"name": registry name, **keyword arguments} that rebuilds the guide with
        ``inference.make_guide(config["name"], model, **rest)`` (checkpoints store it).

    The site table (`inference.sites.site_table`) is read at construction and the subclass's own layout made
    from it (``check_sites``, called by `finish` at the end of a subclass's ``__init__``): the guide is complete
    and never changes afterwards (setting an attribute raises AttributeError). Two guides are equal (and equally
    hashed) when their classes declare their whole configuration (``__value_key__``: `SiteGuide`,
    `JointGaussian`) and those are equal, so that jit's own cache serves another guide of the same
    configuration; any other guide is equal only to itself. Subclasses implement ``__call__``,
    ``sample_posterior``, ``median``, ``quantiles`` and ``num_params_formula``; they may validate and lay out the
    site table in ``check_sites``.
    """

    def __init__(self, model, *, prefix: str = "auto", config: dict):
        if not isinstance(prefix, str) or not prefix:
            raise InputError.worded("prefix", f"prefix: expected a non-empty string, got {prefix!r}")
        feature_shape = getattr(model, "feature_shape", None)
        if feature_shape is None:
            raise InputError("model", f"<a {type(model).__name__} without a feature_shape>",
                             "a model that knows its input shape, so that the guide is built whole once",
                             "build it with models.bnn(network, ..., feature_shape=x.shape[1:]) or zoo.get(...)")
        super().__init__(model, prefix=prefix)
        self.feature_shape = tuple(int(d) for d in feature_shape)
        self._guide_config = {**config, "prefix": prefix}
        with jax.ensure_compile_time_eval():  # concrete even when a guide is built inside a trace
            self.sites: dict[str, Site] = site_table(model, self.feature_shape)

    def finish(self) -> None:
        """Lay out the site table (``check_sites``) and freeze the guide; a subclass calls it last in ``__init__``."""
        self.check_sites()
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"{type(self).__name__} is a value built once for its model: {name!r} cannot be "
                                 "set (build another guide)")
        object.__setattr__(self, name, value)

    @property
    def config(self) -> dict:
        """A copy of the JSON-able {"name": ..., **kwargs} that rebuilds this guide."""
        return dict(self._guide_config)

    def check_same_sites(self, x) -> None:
        """Refuse (InputError naming ``x``) inputs of another feature shape than the guide's (a batch with an extra
        feature column would otherwise meet a guide of the old width). Reads x's shape only (x may be a tracer)."""
        if tuple(x.shape[1:]) != self.feature_shape:
            raise InputError("x", f"<inputs of feature shape {tuple(x.shape[1:])}>",
                             f"inputs of the feature shape {self.feature_shape} this guide was built for")

    def __value_key__(self):
        """None: a guide is equal only to itself unless its class declares its whole configuration (`SiteGuide`,
        `JointGaussian` do)."""
        return None

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return False
        key = self.__value_key__()
        return key is not None and key == other.__value_key__()

    def __hash__(self) -> int:
        key = self.__value_key__()
        return id(self) if key is None else hash(key)

    def model_key(self) -> tuple:
        """What every guide's value key shares: its model's value key, its prefix and its site shapes."""
        sites = tuple((n, tuple(s.shape)) for n, s in self.sites.items())
        return (value_key(self.model), self.prefix, sites)

    def check_sites(self) -> None:
        """Validate the guide's options against `self.sites` and lay them out (at construction); raise `InputError`
        naming the option if they do not fit."""

    def checked_sites(self) -> dict[str, Site]:
        """{latent site: Site} in model order."""
        return self.sites

    def site_shapes(self) -> dict:
        """{latent site: shape} in model order."""
        return {name: site.shape for name, site in self.sites.items()}

    def latent_names(self) -> list:
        """Names of the model's latent sites, in model order."""
        return list(self.site_shapes())

    def num_latent(self) -> int:
        """Number of scalar latent values."""
        return int(sum(math.prod(shape) for shape in self.site_shapes().values()))

    @abstractmethod
    def num_params_formula(self) -> int:
        """Scalar variational parameters by the guide's formula."""

    def init_params(self, rng_key, x) -> dict:
        """Fresh constrained guide parameters {param name: array} for inputs shaped like `x` (B, ...)."""
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
