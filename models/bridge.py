"""The network -> NumPyro bridge: every parameter tensor of a Haiku, Flax NNX or Equinox network becomes one
NumPyro sample site.

NumPyro dropped its Haiku bridge in 0.20.1; this is the project's own, kept thin: the bridge talks to a network
only through its adapter (`models.adapters`: Haiku, NNX, Equinox), so the guides never see the library.

Site names are the parameter's path in the module: Haiku's module path plus the parameter name, e.g.
``"mlp/~/linear_0/w"``; NNX ``"layers/0/kernel"``; Equinox ``"layers/0/weight"``. Shapes come from
``jax.eval_shape`` of the initialiser (no compile, no FLOPs).

Network *state* (batch-norm statistics: Haiku state, NNX ``BatchStat``, Equinox ``State``) is state, not a
random variable: in training the model records it in the NumPyro ``mutable`` site ``"network_state"`` (``fit``
carries it from step to step and the Posterior keeps the last value); predictions and NUTS run the network in
evaluation mode with a fixed state.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro.primitives import mutable as numpyro_mutable
from numpyro.distributions import biject_to, constraints

from models import likelihoods as likelihoods_lib
from models.adapters import adapter_for
from models.adapters.haiku import flatten_params, unflatten_params
from base.value_key import Identity, Static, frozen
from models import priors as priors_lib
from base.prng import flat_key
from base.errors import InputError, ZooError

__all__ = ["BNN", "bnn", "flatten_params", "unflatten_params", "constrain", "unconstrain", "STATE_SITE"]

STATE_SITE = "network_state"


@functools.partial(jax.jit, static_argnums=0)
def _network_init(model: Static, key, x):
    """(params, state) of ``model.obj``'s initialiser at x (1, *feature_shape), the raw `key` drawn flat
    (the same draws, compiled faster: `base.prng`). Compiled once per model value key (`base.value_key`):
    another ``zoo.get`` of the same entry, data and options reuses the code; a model built by hand is its own key.
    Only for adapters whose initialiser computes (Haiku's); NNX and Equinox modules hold their values."""
    return model.obj.init_fn(flat_key(key), x)

class BNN:
    """A Bayesian neural network: a Haiku, Flax NNX or Equinox network, a prior per weight tensor and a likelihood.

    Calling it is a NumPyro model::

        model(x, y=None, n_data=None)

    x: (B, *feature_shape) inputs; y: (B,) labels or None (then "y" is sampled); n_data: the size of the
    full data set when (x, y) is a minibatch, so that the log-likelihood is scaled by n_data / B (the
    unbiased minibatch ELBO). Sites: one per parameter tensor, plus the likelihood's own (e.g. a learned noise).

    Args:
      network: a Haiku network function ``x -> output`` (transformed here with ``hk.transform_with_state``; it
        may take ``is_training``), an ``nnx.Module`` instance, an ``eqx.Module`` instance or a pair
        (``eqx.Module``, ``eqx.nn.State``) (`models.adapters` says how each is called). An NNX or Equinox
        module's arrays are the initial values and give the shapes; the module itself is never changed.
      prior: a prior callable (see `models.priors`), chosen per site.
      likelihood: see `models.likelihoods`.
      name: a label used in reports.
      origin: an optional JSON-able description of what built this model (e.g. the catalogue entry's
        ``zoo.get`` arguments, set by ``zoo.get``); stored in `spec`, so that a checkpoint can rebuild it.
      feature_shape: the shape of one input (x.shape[1:]), or None; a guide is built for it (`inference`'s
        guides refuse a model without it) and the data `fit`, `nuts` and predictions take are checked against it.

    Two attributes, None unless set (``zoo.get`` sets both), make `identity` precise:
      arguments: {name: JSON value} of every argument that built the network, defaults included (e.g.
        ``{"hidden": [4], "activation": "relu", "prior_scale": 1.0, ...}``).
      data_identity: the training data: ``{"name": ..., "kwargs": {...}}`` for a named data set, or
        ``{"fingerprint": inference.model_identity.data_fingerprint(x, y)}`` for the user's own arrays.
    """

    def __init__(self, network, prior, likelihood, name: str = "bnn", origin: dict | None = None,
                 feature_shape: tuple | None = None):
        self.adapter = adapter_for(network)
        self.network_fn = network
        # the Haiku transform (None for NNX and Equinox modules), for tools that intercept Haiku modules
        self.transformed = getattr(self.adapter, "transformed", None)
        self.init_fn = self.adapter.init
        self.prior = prior
        self.likelihood = likelihood
        self.name = name
        self.origin = origin
        self.arguments: dict | None = None
        self.data_identity: dict | None = None
        # what built this model, as a value (`base.value_key`): set by ``zoo.get`` to (the entry's build
        # function, its arguments, the data set); None for a model built by hand (keyed by identity)
        self.build_key: tuple | None = None
        # the input shape the model was built for (set by zoo.get, or passed); guides are built for it, and fit,
        # nuts, predict and score check data against it
        self.feature_shape: tuple | None = None if feature_shape is None else _feature_shape(tuple(feature_shape))
        self._sites_cache: dict = {}
        self._output_width_cache: dict = {}
        self._stateful: dict = {}
        self._state_cache: dict = {}

    # ----- structure -------------------------------------------------------------------------
    def site_shapes(self, x_or_feature_shape) -> "OrderedDict[str, tuple]":
        """{site name: shape} for inputs of the given feature shape (or an example batch x)."""
        feature_shape = _feature_shape(x_or_feature_shape)
        if feature_shape not in self._sites_cache:
            example = jax.ShapeDtypeStruct((1,) + feature_shape, jnp.float32)
            shapes, state = jax.eval_shape(self.init_fn, jax.random.PRNGKey(0), example)
            if not self.adapter.compiled_init:
                self._check_module_inputs(feature_shape, shapes, state)
            sites = OrderedDict((k, tuple(v.shape)) for k, v in self.adapter.site_values(shapes).items())
            self._stateful[feature_shape] = bool(jax.tree.leaves(state))
            for name, (shape, _) in self.likelihood.latent_sites().items():
                sites[name] = tuple(shape)
            self._sites_cache[feature_shape] = sites
        return self._sites_cache[feature_shape]

    def _check_module_inputs(self, feature_shape: tuple, shapes, state) -> None:
        """An NNX or Equinox module holds its weights, so its sites do not follow the inputs: run it abstractly
        (``jax.eval_shape``, nothing compiled) on inputs of `feature_shape` and refuse, naming ``x``, inputs it
        cannot take (a module built for another input width), as `check_feature_shape` refuses them for a
        catalogue entry. Records the output width (`output_width` then traces nothing). A module that refuses the
        one-row probe itself (a package error, e.g. a rank-1 layer wanting a batch tiled over its components) is
        left to its real call."""
        example = jax.ShapeDtypeStruct((1,) + feature_shape, jnp.float32)
        try:
            output = jax.eval_shape(functools.partial(self.adapter.apply, is_training=False),
                                    self.adapter.site_values(shapes), state, example)[0]
        except ZooError:  # the module's own refusal of a one-row probe (rank-1 layers want K-tiled batches): the
            return  # real call names it
        except (TypeError, ValueError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            module = type(getattr(self.adapter, "module", None)).__name__
            raise InputError("x", f"<inputs of feature shape {feature_shape}>",
                             f"inputs the {self.adapter.library} module {module} can take "
                             "(was it built for another input width?)", f"running it on them: {first[:200]}") from err
        self._output_width_cache[feature_shape] = int(output.shape[-1])

    def site_priors(self, x_or_feature_shape) -> "OrderedDict[str, numpyro.distributions.Distribution]":
        """{site name: prior distribution with event dims} in model order."""
        lik_sites = self.likelihood.latent_sites()
        out = OrderedDict()
        for name, shape in self.site_shapes(x_or_feature_shape).items():
            if name in lik_sites:
                d = lik_sites[name][1]
                out[name] = d.to_event(len(shape)) if shape else d
            else:
                d = self.prior(name, shape)
                if tuple(d.batch_shape) != tuple(shape):
                    raise InputError.worded("prior",
                        f"prior: for site {name!r} expected a distribution of batch shape {shape}, "
                        f"got {tuple(d.batch_shape)}"
                    )
                out[name] = d.to_event(len(shape)) if shape else d
        return out

    def num_weights(self, x_or_feature_shape) -> int:
        """Total number of scalar latent values (weights, biases and likelihood parameters)."""
        return int(sum(math.prod(s) for s in self.site_shapes(x_or_feature_shape).values()))

    def output_width(self, x_or_feature_shape) -> int:
        """The network's output width (the last axis of its (B, out) output) for inputs of this feature shape.

        Found with ``jax.eval_shape`` (no compile, no FLOPs) and cached per feature shape, since tracing a
        large network takes seconds.
        """
        feature_shape = _feature_shape(x_or_feature_shape)
        if feature_shape not in self._output_width_cache:
            example = jax.ShapeDtypeStruct((1,) + feature_shape, jnp.float32)
            key = jax.ShapeDtypeStruct((2,), jnp.uint32)  # a raw PRNG key's shape: nothing is computed or compiled
            tree, state = jax.eval_shape(self.init_fn, key, example)
            output = jax.eval_shape(functools.partial(self.adapter.apply, is_training=False),
                                    self.adapter.site_values(tree), state, example)[0]
            self._output_width_cache[feature_shape] = int(output.shape[-1])
        return self._output_width_cache[feature_shape]

    def is_stateful(self, x_or_feature_shape) -> bool:
        """Whether the network keeps state (e.g. batch-norm statistics) for these inputs."""
        feature_shape = _feature_shape(x_or_feature_shape)
        self.site_shapes(feature_shape)
        return self._stateful[feature_shape]

    def initial_state(self, x_or_feature_shape):
        """The initial network state (host arrays: Haiku's nested dict, NNX's and Equinox's {path: array}; empty
        for stateless networks).

        Computed once per input shape, eagerly even when first asked for inside a trace, so that the
        initialiser is never inlined into a training step or a NUTS potential.
        """
        feature_shape = _feature_shape(x_or_feature_shape)
        if feature_shape not in self._state_cache:
            self._state_cache[feature_shape] = jax.device_get(self._run_init(None, feature_shape)[1])
        return self._state_cache[feature_shape]

    def init_values(self, rng_key, x_or_feature_shape) -> dict:
        """The network's own initial values {site: array} (Haiku's initialiser with `rng_key`; an NNX or Equinox
        module's own arrays, whatever the key); likelihood sites start at their prior median."""
        params = self.adapter.site_values(self._run_init(rng_key, _feature_shape(x_or_feature_shape))[0])
        for name, (shape, d) in self.likelihood.latent_sites().items():
            params[name] = jnp.broadcast_to(d.icdf(0.5) if hasattr(d, "icdf") else d.mean, shape)
        return params

    def _run_init(self, rng_key, feature_shape: tuple):
        """(params, state) of the adapter's initialiser on zeros (1, *feature_shape), with `rng_key` (None: the
        key of seed 0), jitted when it computes (Haiku's; an NNX or Equinox module's values are only read). Asked
        inside a trace, it runs at compile time, so the initialiser is never inlined into the traced program;
        outside one it is simply called (compile-time evaluation would run, and compile, every constant of the
        initialiser op by op)."""
        example = np.zeros((1,) + feature_shape, np.float32)
        key = jax.random.PRNGKey(0) if rng_key is None else rng_key
        if not self.adapter.compiled_init:
            params, state = self.adapter.init(key, example)
        elif isinstance(jnp.zeros(()), jax.core.Tracer):
            with jax.ensure_compile_time_eval():
                return _network_init(Static(self), key, example)
        else:
            params, state = _network_init(Static(self), key, example)
        if feature_shape not in self._state_cache and (not self.adapter.compiled_init or _is_seed_zero_key(key)):
            # what `initial_state` returns: kept now, so that asking for it inside a trace (a fit's jitted
            # initialisation) neither compiles the initialiser a second time under compile-time evaluation (another
            # tracing context, another compiled program) nor op by op
            self._state_cache[feature_shape] = jax.device_get(state)
        return params, state

    def prototype_sites(self, x_or_feature_shape, init_values: dict) -> "OrderedDict[str, dict]":
        """NumPyro-style trace entries for every latent site, built without running the model.

        Guides use these in place of ``initialize_model`` (which costs seconds of eager compiles).
        """
        trace = OrderedDict()
        for name, fn in self.site_priors(x_or_feature_shape).items():
            trace[name] = {
                "type": "sample", "name": name, "fn": fn, "args": (), "kwargs": {},
                "value": init_values[name], "scale": None, "is_observed": False,
                "intermediates": [], "cond_indep_stack": [], "infer": {},
            }
        return trace

    # ----- computation -----------------------------------------------------------------------
    def apply(self, params: dict, x, state=None):
        """Network output for one set of weights in evaluation mode: params {site: array},
        x (B, ...) -> (B, out). `state`: the network state (default: the network's initial state)."""
        if state is None:
            state = self.initial_state(x) if self.is_stateful(x) else {}
        return self.adapter.apply(params, state, x, False)[0]

    def log_likelihood(self, params: dict, x, y, state=None):
        """Pointwise log p(y | x, params): (B,)."""
        return self.likelihood.log_prob(self.apply(params, x, state), y, params)

    def predictive(self, params: dict, x, state=None):
        """Class probabilities (B, C) (classification) or predictive mean (regression) for one draw."""
        return self.likelihood.predictive(self.apply(params, x, state), params)

    def log_predictive(self, params: dict, x, state=None):
        """Log class probabilities (B, C) for one draw (classification likelihoods only), by a log-softmax."""
        return self.likelihood.log_predictive(self.apply(params, x, state), params)

    def __call__(self, x, y=None, n_data=None, state=None):
        params = {name: numpyro.sample(name, fn) for name, fn in self.site_priors(x).items()}
        if self.is_stateful(x) and state is None:
            # training mode: batch statistics, moving averages updated in the mutable site
            holder = numpyro_mutable(STATE_SITE, {"state": self.initial_state(x)})
            output, holder["state"] = self.adapter.apply(params, holder["state"], x, True)
        else:
            output = self.apply(params, x, state)
        scale = None if n_data is None else n_data / x.shape[0]
        return self.likelihood.sample(output, y, params, scale)

    def __value_key__(self):
        """This model's value key (`base.value_key`), or None (keyed by identity) unless ``zoo.get`` built it:
        the entry's build function, every argument, the data set it was built on (``build_key``), the prior's
        and the likelihood's specs (the very objects when they have none: they may have been replaced after
        the build) and the feature shape."""
        if self.build_key is None:
            return None
        return (self.build_key, _spec_key(self.prior), _spec_key(self.likelihood), frozen(self.feature_shape))

    # ----- checkpoints -----------------------------------------------------------------------
    def flatten_state(self, state) -> dict:
        """The network state as {name: array} (what checkpoints store); `unflatten_state` is its inverse."""
        return self.adapter.flatten_state(state)

    def unflatten_state(self, flat: dict):
        """The network state of {name: array} written by `flatten_state`."""
        return self.adapter.unflatten_state(flat)

    @property
    def spec(self) -> dict:
        """JSON-able description stored in checkpoints: name, prior and likelihood specs, and `origin`."""
        return {
            "name": self.name,
            "prior": getattr(self.prior, "spec", None),
            "likelihood": getattr(self.likelihood, "spec", None),
            "origin": self.origin,
        }

    @property
    def identity(self) -> dict:
        """What identifies this model, stored in checkpoints and compared on load (`inference.load` refuses a
        model whose identity differs): {"network": name, "arguments", "prior": spec, "likelihood": spec,
        "data": data_identity}. None marks a part that is unknown (e.g. the arguments of a network built by
        hand); unknown parts are not compared."""
        return {
            "network": self.name,
            "arguments": self.arguments,
            "prior": getattr(self.prior, "spec", None),
            "likelihood": getattr(self.likelihood, "spec", None),
            "data": self.data_identity,
        }


def bnn(network, prior=None, likelihood=None, name: str = "bnn", origin: dict | None = None,
        feature_shape: tuple | None = None) -> BNN:
    """Build a `BNN` NumPyro model from a network: a Haiku network function, a Flax ``nnx.Module``, an
    ``eqx.Module`` or an (``eqx.Module``, ``eqx.nn.State``) pair (see `BNN` and `models.adapters`).

    Defaults: a unit Normal prior on every tensor and a categorical likelihood; `origin` and `feature_shape` (the
    shape of one input, x.shape[1:]: what a guide is built for) as in `BNN`.
    """
    return BNN(network, prior or priors_lib.normal(1.0), likelihood or likelihoods_lib.categorical(), name,
               origin, feature_shape)


def unconstrain(site_priors: dict, values: dict) -> dict:
    """Map constrained site values to the unconstrained space of each site's support."""
    return {k: biject_to(site_priors[k].support).inv(v) for k, v in values.items()}


def constrain(supports: dict, values: dict) -> dict:
    """{name: value} mapped from the unconstrained space to each name's support (same shapes): the one map of the
    package (guide parameters, site draws, site priors). supports: {name: a NumPyro constraint, None (real), or
    anything with a ``support`` (a distribution, an `inference.sites.Site`)}; a real support, None, and names without
    an entry pass through unchanged; any other support goes through ``biject_to(support)``."""
    out = {}
    for name, value in values.items():
        support = getattr(supports.get(name), "support", supports.get(name))
        out[name] = value if support is None or is_real_support(support) else biject_to(support)(value)
    return out


def is_real_support(support) -> bool:
    """True for ``real`` and ``independent(real, k)`` supports (no transform between constrained and
    unconstrained values)."""
    return support is constraints.real or (
        isinstance(support, constraints.independent) and support.base_constraint is constraints.real)


def _spec_key(part):
    """A prior's or likelihood's value key: its JSON ``spec`` (complete by contract: checkpoints rebuild the part
    from it) and its type, or the object itself (`base.value_key.Identity`) when it has none."""
    spec = getattr(part, "spec", None)
    return (frozen(spec), type(part).__qualname__) if spec is not None else Identity(part)


def _is_seed_zero_key(key) -> bool:
    """Whether `key` is a concrete ``jax.random.PRNGKey(0)`` (the key `BNN.initial_state` initialises with)."""
    if isinstance(key, jax.core.Tracer) or jnp.issubdtype(jnp.result_type(key), jax.dtypes.prng_key):
        return False
    return np.array_equal(np.asarray(key), np.asarray(jax.random.PRNGKey(0)))


def _feature_shape(x_or_feature_shape) -> tuple:
    if isinstance(x_or_feature_shape, tuple):
        return tuple(int(d) for d in x_or_feature_shape)
    shape = np.shape(x_or_feature_shape)
    return tuple(int(d) for d in shape[1:])
