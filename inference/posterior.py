"""`Posterior`: the interface of a fitted posterior, and its kinds: `SVIPosterior` (a guide and its
parameters, from `inference.fit`), `MCMCPosterior` (stored draws, from `inference.nuts`) and
`inference.laplace_posterior.LaplacePosterior` (a Gaussian around a point estimate, from `inference.laplace`; it lives in
`inference.laplace_posterior`). `OnDemandPosterior` is what the SVI and Laplace kinds share (draws made on demand).

Everything downstream (predict, to_arviz, evals.score, save/load) takes a `Posterior` and asks nothing of it
beyond this interface: `draws`, `draws_by_chain`, `median`, `num_chains`, `num_draws` and the per-draw
functions built on them (`predict`, `log_predict`, `log_likelihood`). Each kind implements the draws its own
way; the per-draw functions are shared. Code that needs one kind tests ``isinstance(p, SVIPosterior)``.
"""

from __future__ import annotations

import abc
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import biject_to

from inference.data_args import check_model_data
from inference.guide_params import guide_constraints
from inference.run_info import FitInfo, NutsInfo, check_info
from base.validation import (
    check_choice,
    check_memory,
    check_positive_ints,
    check_seed,
    num_latent,
    site_mismatch,
)
from base.errors import ArgumentTypeError, InputError
from base.prng import flat_key
from base.value_key import Static

if TYPE_CHECKING:
    from models.bridge import BNN

# Draws per compiled call: the default chunk of `predict` and its kin, and the smallest SVI sampler (`draws` of
# fewer takes the first of this many), so one compiled sampler per guide serves them all
DRAW_CHUNK = 50


class ConstrainedParams(dict):
    """{name: array}: an SVI posterior's guide parameters in their constrained space (`SVIPosterior.params`).

    A dict in every other respect (and a JAX pytree like one, so it goes into jitted functions as is);
    its type lets `inference.fit` refuse ``init_params=posterior.params``, which it would read as
    unconstrained values (pass the posterior itself, or ``posterior.unconstrained_params()``)."""


jax.tree_util.register_pytree_node(
    ConstrainedParams,
    lambda d: ([d[k] for k in sorted(d)], tuple(sorted(d))),
    lambda keys, values: ConstrainedParams(zip(keys, values)))


@dataclass(kw_only=True)
class Posterior(abc.ABC):
    """A posterior over a BNN's latent sites: the interface every kind implements (build an `SVIPosterior` or
    an `MCMCPosterior`; ``Posterior(...)`` itself raises ArgumentTypeError naming them).

    Attributes (both kinds):
      model: the `models.BNN` it belongs to.
      feature_shape: the input shape the model was built for (x.shape[1:]).
      state: the network's Haiku state after training (batch-norm moving averages), or None.
      config: JSON-able description (zoo entry, guide, training settings) that checkpoints store.
      info: what the run recorded: a `FitInfo` (SVI: first_step_s, fit_s, traces, temperature, converged,
        convergence; ``info.summary()`` says whether the ELBO converged), a `NutsInfo` (MCMC:
        nuts_s, divergences, mean_leapfrog_steps, chain_method), or None (built by hand); see
        `inference.run_info` for the fields and their units.
      losses: (steps,) the SVI losses of the fit (None for NUTS's draws, or when unknown).
      training_data: the fingerprint of the data it was fitted to (`inference.model_identity.data_fingerprint`
        of x, y as validated; `inference.training_data`), or None when unknown; `to_arviz` builds the
        log_likelihood group only from these data; `inference.save` / `load` keep it.
      kind: "svi" or "mcmc", read-only: the name checkpoints store (``isinstance`` is the way to test a kind).
      guide, params (SVI) and samples, sample_stats (MCMC): the other kind's are None.
    """

    model: BNN
    feature_shape: tuple = ()
    state: dict | None = None
    config: dict = field(default_factory=dict)
    info: FitInfo | NutsInfo | None = None
    losses: np.ndarray | None = None
    training_data: dict | None = None
    if TYPE_CHECKING:  # each kind's own fields, None on the other kind (declared here for the type checker only)
        @property
        def guide(self) -> Any: ...
        @property
        def params(self) -> dict | None: ...
        @property
        def samples(self) -> dict | None: ...
        @property
        def sample_stats(self) -> dict | None: ...

    def __new__(cls, *args, **kwargs):
        if cls is Posterior:
            raise ArgumentTypeError("kind", kwargs.get("kind"), "the class of the kind instead: "
                                    "inference.SVIPosterior(model=, guide=, params=, ...) or "
                                    "inference.MCMCPosterior(model=, samples=, ...)",
                                    "inference.Posterior is the interface both implement and cannot be built")
        return super().__new__(cls)

    def __post_init__(self):
        check_info(self.info)

    @property
    @abc.abstractmethod
    def kind(self) -> str:
        """"svi" or "mcmc": the name `inference.save` stores (read-only)."""

    @property
    @abc.abstractmethod
    def num_chains(self) -> int:
        """Chains of an MCMC posterior (the leading axis of every ``samples`` array); 1 for SVI."""

    @property
    @abc.abstractmethod
    def num_draws(self) -> int | None:
        """The stored draws of an MCMC posterior, chains x draws; None for SVI (its draws are made on demand)."""

    @abc.abstractmethod
    def draws(self, num_samples: int | None = None, seed: int = 0) -> dict:
        """{site: (S, *site_shape)} draws of every latent site (see each kind's)."""

    @abc.abstractmethod
    def draws_by_chain(self, num_samples: int = 100, seed: int = 0) -> dict:
        """{site: (chains, draws, *site_shape)} (see each kind's)."""

    @abc.abstractmethod
    def median(self) -> dict:
        """{site: site_shape array}: the posterior's median (see each kind's)."""

    @abc.abstractmethod
    def unconstrained_params(self) -> dict:
        """{name: array}: the SVI guide parameters in the unconstrained space `inference.fit` optimises (an
        MCMC posterior raises InputError)."""

    # ----- checkpoints -------------------------------------------------------------------------
    def checkpoint_arrays(self) -> dict:
        """{name: array} `inference.save` writes beyond guide params, samples, losses and state ({} here; a
        `inference.laplace_posterior.LaplacePosterior` adds its theta* and curvature)."""
        return {}

    def checkpoint_record(self) -> dict | None:
        """The JSON-able record `inference.save` writes as the checkpoint's ``guide`` field: the guide's config
        (what rebuilds it), or None without a guide."""
        return getattr(self.guide, "config", None) if self.guide is not None else None

    # ----- draws ------------------------------------------------------------------------------
    @property
    def site_names(self) -> list:
        """The latent sites' names, in the model's order (their shapes: ``model.site_shapes(feature_shape)``)."""
        return list(self.model.site_shapes(self.feature_shape))

    # ----- predictions ------------------------------------------------------------------------
    def predict(self, x, num_samples: int = 100, seed: int = 0, chunk_size: int = DRAW_CHUNK,
                draws: dict | None = None, reduce: str | None = None) -> np.ndarray:
        """Predictive probabilities per draw for x (N, *feature_shape): (S, N, C) (classification) or means
        (S, N, ...) (regression); S = `num_samples`, the total number of draws (MCMC: over all chains).

        Draws are made and pushed through the network `chunk_size` at a time (one compile per shape) and
        each chunk is written into one preallocated output, so memory is the output plus one chunk's work
        (the network's activations for chunk_size draws x N inputs, often larger than the chunk's output:
        lower `chunk_size` to lower it; SVI draws chunk i with the key ``fold_in(PRNGKey(seed), i)``, so
        for SVI the draws depend on `chunk_size`). MCMC uses `num_samples` evenly spaced draws, or all of
        them if fewer exist. `draws`: {site: (S, ...)} to use instead (e.g. from `draws`, so that several
        quantities share the same weights). `num_samples` and `chunk_size`: positive integers.

        reduce: None (the draws, (S, N, ...)) or "mean": their average over draws, (N, ...), without
        ever holding (S, N, ...); equal to ``predict(...).mean(0)`` (the same float32 running sum over
        draws in order).
        """
        return self._per_draw(self.model.predictive, x, None, num_samples, seed, chunk_size, draws,
                              reduce, PREDICT_REDUCTIONS)

    def log_predict(self, x, num_samples: int = 100, seed: int = 0, chunk_size: int = DRAW_CHUNK,
                    draws: dict | None = None) -> np.ndarray:
        """Log predictive probabilities per draw for x (N, *feature_shape): (S, N, C), by a log-softmax in the
        model, so a class probability far below float32's smallest (about 1e-38) keeps its exact log; the same
        draws as `predict` with the same `num_samples`, `seed`, `chunk_size` (``exp`` of it is `predict`'s
        output up to rounding). One pass gives both the probabilities and, at the labels, the per-draw
        log-likelihoods (`evals.scoring`). Classification models only: a regression model raises InputError.
        """
        if not getattr(self.model.likelihood, "classification", False) or not hasattr(self.model.likelihood,
                                                                                       "log_predictive"):
            raise InputError("posterior", f"<a posterior of the {type(self.model.likelihood).__name__} "
                             "likelihood>", "a classification posterior for log_predict",
                             "use predict (predictive means) or log_likelihood for regression")
        return self._per_draw(self.model.log_predictive, x, None, num_samples, seed, chunk_size, draws,
                              None, PREDICT_REDUCTIONS)

    def log_likelihood(self, x, y, num_samples: int = 100, seed: int = 0, chunk_size: int = DRAW_CHUNK,
                       draws: dict | None = None, reduce: str | None = None) -> np.ndarray:
        """Pointwise log p(y_n | x_n, w_s) for x (N, *feature_shape), y (N,): (S, N); S, `draws`, chunks as in
        `predict`.

        reduce: None ((S, N)), "mean" (N,): the expected log-likelihood over draws, or "log_mean_exp" (N,):
        log (1/S) sum_s p(y_n | x_n, w_s), the log pointwise predictive density, by a running logsumexp.
        """
        return self._per_draw(self.model.log_likelihood, x, y, num_samples, seed, chunk_size, draws,
                              reduce, LOG_LIKELIHOOD_REDUCTIONS)

    def _per_draw(self, fn, x, y, num_samples, seed, chunk_size, draws, reduce, reductions):
        """fn(params, *args, state) of every draw, folded chunk by chunk by the `reductions[reduce]` reducer."""
        check_positive_ints(num_samples=num_samples, chunk_size=chunk_size)
        check_seed(seed)
        check_choice("reduce", reduce, list(reductions))
        x, y = check_model_data(self.model, x, y, arg="x", feature_shape=self.feature_shape)
        if draws is not None:
            draws = self.checked_draws(draws)
        if draws is None:  # draws made on demand: a chunk at a time
            self._check_chunk_memory(chunk_size)
        if reduce is None:  # the whole (S, N, ...) output is held: refused before any work when it cannot be
            total = len(next(iter(draws.values()))) if draws is not None else num_samples
            width = self.model.output_width(x.shape[1:]) if hasattr(self.model, "output_width") else 1
            check_memory("num_samples", num_samples, 4.0 * total * x.shape[0] * width,
                         f"the per-draw output ({total}, {x.shape[0]}, {width}) float32")
        args = tuple(jax.device_put(a) for a in ((x,) if y is None else (x, y)))  # on the device once, not per chunk
        # the network state is an argument, not a captured constant, so the compiled function depends only on
        # `fn` (a static argument compared by its value key, `base.value_key`) and the shapes, never on this
        # Posterior's contents; it is shared by every Posterior of an equal model
        reducer = None
        fn, state = self._network(fn)
        for start, chunk, n, total in self._draw_chunks(num_samples, seed, chunk_size, draws):
            values = np.asarray(_apply_draws(Static(fn), chunk, state, *args))[:n]
            if reducer is None:  # the output's shape and dtype are the first chunk's
                reducer = reductions[reduce](total, values)
            reducer.add(start, values)
            del values  # the chunk's buffer goes before the next one is computed
        return reducer.result()

    def _network(self, fn):
        """(fn, state): the per-draw function to run for the model's method `fn` and the state it is given: the
        model's own and the network state here (`inference.laplace_posterior.LaplacePosterior` swaps in its linearised network)."""
        return fn, self.state

    def _check_chunk_memory(self, chunk_size: int) -> None:
        """Raise InputError when a chunk of `chunk_size` draws made on demand would not fit (`SVIPosterior`);
        stored draws (MCMC) are in memory already."""

    def _draw_chunks(self, num_samples, seed, chunk_size, draws=None):
        """(start, {site: (width, ...)}, n, total) per chunk: draws start:start + n of `total`, padded to one
        compiled shape: `draws`, or ``self.draws(num_samples)`` (see `draws`), the last chunk padded with
        repeats of its last draw. When all the draws fit in one chunk (total < chunk_size) the chunk holds
        just them, unpadded: the network runs on `total` draws, not `chunk_size`, e.g. 10 draws on the 43k
        rows of digits-C cost a fifth of 50. (`SVIPosterior` makes its own draws chunk by chunk.)"""
        draws = self.draws(num_samples) if draws is None else draws  # `_per_draw` checked them
        total = next(iter(draws.values())).shape[0]
        width = min(chunk_size, total)
        for start in range(0, total, width):
            chunk = {k: v[start:start + width] for k, v in draws.items()}
            n = next(iter(chunk.values())).shape[0]
            if n < width:
                chunk = {k: np.concatenate([v, np.repeat(v[-1:], width - n, 0)]) for k, v in chunk.items()}
            yield start, chunk, n, total

    def site_shapes(self) -> dict:
        """{latent site: shape} of this posterior's model for its feature shape (model order)."""
        return {k: tuple(v) for k, v in self.model.site_shapes(self.feature_shape).items()}

    def checked_draws(self, draws, arg: str = "draws") -> dict:
        """`draws` {site: (S, *site_shape)} as NumPy arrays, checked to be draws of this posterior's model: a dict
        with every latent site (extra entries are ignored) of its shape, the same S >= 1 for all. Raises
        InputError naming `arg` and what differs (draws of another model would otherwise be broadcast or fail
        inside the compiled network)."""
        if not isinstance(draws, dict) or not draws:
            raise ArgumentTypeError(arg, draws, "a non-empty dict {site: (S, *site_shape) array} (Posterior.draws)")
        want = self.site_shapes()
        arrays = {k: np.atleast_1d(np.asarray(v)) for k, v in draws.items() if k in want}
        got = {k: v.shape[1:] for k, v in arrays.items()}
        problem = site_mismatch(want, got, got_name=arg)
        if problem:
            raise InputError(arg, f"<draws of other sites: {problem}>", "draws {site: (S, *site_shape)} of this "
                             "posterior's model", "draws of another model cannot be pushed through this network")
        counts = {v.shape[0] for v in arrays.values()}
        if len(counts) != 1 or 0 in counts:
            raise InputError(arg, f"<draws counts {sorted(counts)}>", "the same number S >= 1 of draws for every site")
        return arrays


class OnDemandPosterior(Posterior):
    """A posterior whose draws are made on demand as one chain (`SVIPosterior`, `inference.laplace_posterior.LaplacePosterior`):
    ``num_chains`` 1, ``num_draws`` None, ``draws_by_chain`` = ``draws`` with a chain axis."""

    @property
    def num_chains(self) -> int:
        """1: draws made on demand form one chain."""
        return 1

    @property
    def num_draws(self) -> None:
        """None: draws are made on demand, none are stored."""
        return None

    def draws_by_chain(self, num_samples: int = 100, seed: int = 0) -> dict:
        """{site: (1, num_samples, *site_shape)}: `num_samples` draws as one chain."""
        check_positive_ints(num_samples=num_samples)
        check_seed(seed)
        return {k: v[None] for k, v in self.draws(num_samples, seed).items()}


@dataclass(kw_only=True)
class SVIPosterior(OnDemandPosterior):
    """A variational posterior: a guide and its fitted parameters (`inference.fit` returns one).

    Attributes (beyond `Posterior`'s):
      guide: the AutoGuide; params: its constrained parameters {name: array}, held as `ConstrainedParams`.
      unconstrained: the guide parameters as the optimiser saw them {name: array} (unconstrained, as
        `inference.fit` ends; None when not kept, e.g. a loaded checkpoint): `unconstrained_params` returns
        them exactly, so that a fit started from this posterior starts at this very point.
    """

    guide: Any
    params: dict
    unconstrained: dict | None = field(default=None, repr=False, compare=False)
    samples = None  # an SVI posterior stores no draws
    sample_stats = None

    def __post_init__(self):
        super().__post_init__()
        if self.guide is None or self.params is None:
            raise InputError.worded("params", "an SVI Posterior needs both guide and params")
        if not isinstance(self.params, ConstrainedParams):
            self.params = ConstrainedParams(self.params)

    @property
    def kind(self) -> str:
        """"svi" (read-only)."""
        return "svi"

    def unconstrained_params(self) -> dict:
        """{name: array}: the guide parameters in the unconstrained space `inference.fit` optimises, what
        ``fit(..., init_params=...)`` takes (or pass the Posterior itself as ``init_params``).

        The exact values the fit ended with when this Posterior kept them (`unconstrained`); otherwise (a loaded
        checkpoint) ``params`` mapped through the inverse of each parameter's constraint (`biject_to`),
        checked to map back: raises InputError naming the parameter when one does not (e.g. a scale of 0,
        whose unconstrained value is -inf).
        """
        if self.unconstrained is not None:
            return dict(self.unconstrained)
        constraints = guide_constraints(self.guide, self.feature_shape)
        out = {}
        for name, value in self.params.items():
            c = constraints.get(name)
            if c is None:
                out[name] = np.asarray(value)
                continue
            u = np.asarray(biject_to(c).inv(value))
            back = np.asarray(biject_to(c)(u))
            if not (np.all(np.isfinite(u)) and np.allclose(back, value, rtol=1e-5, atol=0.0)):
                bad = np.flatnonzero(~np.isfinite(u) | ~np.isclose(back, value, rtol=1e-5, atol=0.0))
                raise InputError(f"posterior.params[{name!r}]", f"<{bad.size} entries such as "
                                 f"{np.ravel(value)[bad[0]]!r}>", f"values inside the support of {c} that map to "
                                 "finite unconstrained values and back")
            out[name] = u
        return out

    def draws(self, num_samples: int | None = None, seed: int = 0) -> dict:
        """{site: (S, *site_shape)}: S = num_samples fresh draws from the guide (default 100); fewer than
        `DRAW_CHUNK` are the first S of that many draws with the same key, so that one compiled sampler serves
        every small S (the same numbers as S draws made alone: element i of a threefry draw depends only on the
        key and i; a dense covariance's product L eps may round differently). `num_samples`: a positive
        integer (or None); `seed`: an integer in [0, 2**32 - 1] (InputError otherwise, as `predict`).
        """
        if num_samples is not None:
            check_positive_ints(num_samples=num_samples)
        check_seed(seed)
        wanted = max(100 if num_samples is None else num_samples, DRAW_CHUNK)
        check_memory("num_samples", num_samples, 4.0 * wanted * num_latent(self.model, self.feature_shape),
                     f"{wanted} draws of the weights (float32)")
        num_samples = 100 if num_samples is None else int(num_samples)
        return self._svi_draws(jax.random.PRNGKey(seed), max(num_samples, DRAW_CHUNK), keep=num_samples)

    def _svi_draws(self, key, num_samples, keep=None):
        """{site: (keep, ...)} the first `keep` (default all) of `num_samples` guide draws with `key` (the same
        numbers whatever `keep`: the sampler always draws `num_samples`, and the first `keep` are cut on the
        host, so one compiled sampler serves every `keep`); the jitted sampler is shared by every Posterior
        whose guide is equal (a static argument compared by its value key, `base.value_key`)."""
        draws = _guide_draws(Static(self.guide), tuple(self.site_names), (1,) + tuple(self.feature_shape),
                             int(num_samples), key, self.params)
        if keep is None or int(keep) >= num_samples:
            return draws
        # on the host: slicing a device array op by op would compile one small program per shape
        return {k: np.asarray(v)[:int(keep)] for k, v in draws.items()}

    def median(self) -> dict:
        """{site: site_shape array}: the guide's median."""
        med = self.guide.median(self.params)
        return {k: med[k] for k in self.site_names}

    def _check_chunk_memory(self, chunk_size: int) -> None:
        """Raise InputError naming `chunk_size` when a chunk of that many draws of the weights would not fit."""
        check_memory("chunk_size", chunk_size, 4.0 * chunk_size * num_latent(self.model, self.feature_shape),
                     f"a chunk of {chunk_size} draws of the weights (float32)")

    def _draw_chunks(self, num_samples, seed, chunk_size, draws=None):
        """As `Posterior._draw_chunks`; without `draws`, `num_samples` guide draws made chunk by chunk, chunk i
        from ``fold_in(PRNGKey(seed), i)`` (a lone chunk of total < chunk_size holds the first `total` of its
        `chunk_size` draws), so the draws depend on `chunk_size`."""
        if draws is not None:
            yield from super()._draw_chunks(num_samples, seed, chunk_size, draws)
            return
        total = int(num_samples)
        base = jax.random.PRNGKey(seed)
        for i, start in enumerate(range(0, total, chunk_size)):
            chunk = self._svi_draws(jax.random.fold_in(base, i), chunk_size, keep=min(chunk_size, total))
            yield start, chunk, min(chunk_size, total - start), total


@dataclass(kw_only=True)
class MCMCPosterior(Posterior):
    """A posterior of stored draws (`inference.nuts` returns one).

    Attributes (beyond `Posterior`'s):
      samples: {site: (chains, draws, *site_shape)}.
      sample_stats: {name: (chains, draws)} MCMC diagnostics (divergences, ...), or None.
    """

    samples: dict
    sample_stats: dict | None = None
    guide = None  # an MCMC posterior has no guide or parameters
    params = None
    unconstrained = None

    def __post_init__(self):
        super().__post_init__()
        if self.samples is None:
            raise InputError.worded("samples", "an MCMC Posterior needs samples")

    @property
    def kind(self) -> str:
        """"mcmc" (read-only)."""
        return "mcmc"

    @property
    def num_chains(self) -> int:
        """Chains: the leading axis of every ``samples`` array."""
        return next(iter(self.samples.values())).shape[0]

    @property
    def num_draws(self) -> int:
        """The stored draws, chains x draws."""
        return int(np.prod(next(iter(self.samples.values())).shape[:2]))

    def unconstrained_params(self) -> dict:
        """Raises InputError: an MCMC posterior has draws, not guide parameters."""
        raise InputError("posterior", "<an 'mcmc' Posterior>", "an SVI posterior (guide parameters); "
                         "an MCMC posterior has draws, not parameters")

    def draws(self, num_samples: int | None = None, seed: int = 0) -> dict:
        """{site: (S, *site_shape)}: all chains x draws flattened chain-major, or `num_samples` of them (the
        total, not per chain) evenly spaced when given. `num_samples`: a positive integer (or None); `seed`: an
        integer in [0, 2**32 - 1], unused (InputError otherwise, as `predict`)."""
        if num_samples is not None:
            check_positive_ints(num_samples=num_samples)
        check_seed(seed)
        # on the host: reshaping, picking and chunking device arrays op by op compiles one small program each
        flat = {k: np.asarray(v).reshape((-1,) + v.shape[2:]) for k, v in self.samples.items()}
        total = next(iter(flat.values())).shape[0]
        if num_samples is not None and num_samples < total:
            pick = np.linspace(0, total - 1, num_samples).round().astype(int)
            flat = {k: v[pick] for k, v in flat.items()}
        return flat

    def draws_by_chain(self, num_samples: int = 100, seed: int = 0) -> dict:
        """{site: (chains, draws, *site_shape)}: the samples as stored (`num_samples`, `seed` checked, unused)."""
        check_positive_ints(num_samples=num_samples)
        check_seed(seed)
        return dict(self.samples)

    def median(self) -> dict:
        """{site: site_shape array}: the per-entry median of all draws."""
        return {k: jnp.median(v, axis=0) for k, v in self.draws().items()}


# ----- reducers: fold per-draw values (n, *shape) chunk by chunk, never holding more than one chunk -------
class _Stack:
    """Every draw: (total, *shape), one preallocated array filled slice by slice."""

    def __init__(self, total: int, first: np.ndarray):
        self.out = np.empty((total,) + first.shape[1:], first.dtype)

    def add(self, start: int, values: np.ndarray):
        self.out[start:start + len(values)] = values

    def result(self) -> np.ndarray:
        return self.out


class _Mean:
    """The mean over draws: (*shape), a running sum in the values' dtype over draws in order, divided by
    `total`: the very arithmetic of ``stacked.mean(0)``."""

    def __init__(self, total: int, first: np.ndarray):
        self.total, self.sum = total, np.zeros(first.shape[1:], first.dtype)

    def add(self, start: int, values: np.ndarray):
        for draw in values:
            self.sum += draw

    def result(self) -> np.ndarray:
        return self.sum / self.total


class _LogMeanExp:
    """log mean exp over draws: (*shape), a running logsumexp in float64 minus log(total), in the values' dtype."""

    def __init__(self, total: int, first: np.ndarray):
        self.total, self.dtype = total, first.dtype
        self.lse = np.full(first.shape[1:], -np.inf)

    def add(self, start: int, values: np.ndarray):
        self.lse = np.logaddexp(self.lse, np.logaddexp.reduce(values.astype(np.float64), axis=0))

    def result(self) -> np.ndarray:
        return (self.lse - np.log(self.total)).astype(self.dtype)


PREDICT_REDUCTIONS = {None: _Stack, "mean": _Mean}
LOG_LIKELIHOOD_REDUCTIONS = {**PREDICT_REDUCTIONS, "log_mean_exp": _LogMeanExp}


@functools.partial(jax.jit, static_argnums=0)
def _apply_draws(fn: Static, draws: dict, state, *args):
    """``fn.obj(params, *args, state=state)`` of every draw: (S, ...) for draws {site: (S, ...)}."""
    return jax.vmap(lambda params: fn.obj(params, *args, state=state))(draws)


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _guide_draws(guide: Static, names: tuple, shape: tuple, num_samples: int, key, params) -> dict:
    """{site: (num_samples, ...)} of the guide ``guide.obj`` at `params` with `key`, for inputs of `shape`."""
    out = guide.obj.sample_posterior(flat_key(key), params, jnp.zeros(shape), sample_shape=(num_samples,))
    return {k: out[k] for k in names}
