"""`nuts`: NUTS on the identical model object, chains started from draws of an SVI posterior.

The driver is NumPyro's public functional NUTS (``numpyro.infer.hmc.hmc(potential_fn_gen=..., algo="NUTS")``,
the kernel `numpyro.infer.NUTS` runs) under one jitted program per piece:

- ``init``: every chain's HMC state from its start value and key, chains mapped (vmap, ``jax.shard_map`` over a
  "chains" device mesh, or lax.map); the
  kernel's position is one flat vector of all the weights (`flat_potential`), not a dict of sites;
- ``chunk``: L consecutive NUTS iterations of every chain (``lax.scan``; iterations past the end of the run
  are masked with ``lax.cond`` and leave the state untouched), returning the constrained draws and the
  per-iteration statistics.

Warm-up and draws run as host-side chunks of L iterations (a tqdm bar advances per chunk). The data, the
network state, the start values and the key are ARGUMENTS of both programs, never baked-in constants; both are
module-level ``jax.jit`` functions (`sampler_init`, `sampler_chunk`) whose static argument, a `SamplerSpec`, is
compared by the model's value key (`base.value_key`), the sites' shapes and supports and the settings
(num_chains, chain_method, num_warmup, target_accept_prob, max_tree_depth, L): jit's own cache is the only
cache, and a second call with the same model (value key), data shapes and settings compiles nothing, whatever
its seed, data values or init posterior.

The keys follow NumPyro's ``MCMC`` + ``NUTS``: the seed's key is split into one key per chain (not split for a
single chain) and each chain key is split again, the first half starting the kernel. From the same start
values and key, chain_method="parallel" gives ``MCMC(NUTS(potential_fn=<the same flat potential>),
chain_method="parallel")``'s draws to float tolerance (1e-6 over 43 iterations, tested; both trace init and
sampling inside one program). Against NumPyro's own dict-of-sites position, or with "vectorized" (NumPyro's MCMC
computes the initial gradient op by op outside jit, the driver inside it), the last bits differ (~1e-7) and
NUTS trajectories amplify that, so the tests check agreement to 1e-4 over a short run (7 iterations) only:
the same algorithm, not the same numbers over a long run.

Pure pieces underneath: `initial_positions` (where each chain starts), `network_state` (batch-norm state
for evaluation mode), `unconstrained_potential` (the potential energy; with the model and site priors bound
it is the kernel's ``potential_fn_gen``), `compiled_sampler` (the programs with their spec bound) and
`run_sampler` (the chunk loop); `nuts` is the thin front end (validation, defaults, assembling the Posterior).
"""

from __future__ import annotations

import math
import time
import warnings
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P
from numpyro.distributions import biject_to, constraints
from numpyro.infer.hmc import hmc
from numpyro.infer.util import log_density

from inference.checkpoint import check_config
from inference.fit import labelled_arrays
from inference.model_identity import data_fingerprint
from base.validation import (MAX_SEED, check_choice, check_memory, check_nuts_settings, check_seed, num_latent,
                                  site_mismatch)
from inference.posterior import MCMCPosterior, Posterior
from inference.run_info import NutsInfo
from base.value_key import Static
from models.bridge import unconstrain
from inference.mesh import CHAIN_AXIS, chain_mesh
from base.errors import ArgumentTypeError, InputError

EXTRA_FIELDS = ("diverging", "num_steps", "accept_prob", "energy")
CHAIN_METHODS = ("parallel", "vectorized", "sequential")
DIVERGENCE_THRESHOLD = 0.01  # nuts warns when more than this fraction of the kept draws diverged
CHUNK_LEN = 50  # NUTS iterations per compiled chunk (fewer when the whole run is shorter)


def nuts(model, data, *, init: Posterior | None = None, num_chains: int = 2, num_warmup: int = 500,
         draws_per_chain: int = 500, seed: int = 0, target_accept_prob: float = 0.8, max_tree_depth: int = 10,
         chain_method: str | None = None, progress: bool = True, config: dict | None = None,
         divergence_threshold: float = DIVERGENCE_THRESHOLD, dense_mass: bool = False, **removed) -> Posterior:
    """Run NUTS (diagonal mass matrix, or dense with ``dense_mass=True``) on `model` with the full data set and return a `Posterior`.

    Warm-up and sampling of all chains compile once per (model value key, data shapes, settings): a second
    call with the same model (value key), data shapes and settings (another seed, other data values of the
    same shapes, another init posterior) runs without compiling anything.

    Args:
      model: the same `models.BNN` object SVI used. The likelihood is not rescaled (n_data=None).
      data: `Dataset` or (x, y): x (N, ...), y (N,).
      init: an SVI Posterior: each chain starts at its own draw from it (honest R-hat; starting every
        chain at the median gives an optimistic one). None: Haiku's initialisation for every chain.
      num_chains: independent chains C.
      num_warmup: warm-up (adaptation) steps PER CHAIN, discarded, as NumPyro's ``num_warmup``.
      draws_per_chain: kept draws PER CHAIN D; the posterior holds C * D draws in all. (It was called
        ``num_samples``, NumPyro's name; renamed because everywhere else in the package ``num_samples``
        is the total number of draws. Passing ``num_samples=`` raises TypeError.)
      seed: an integer; target_accept_prob: in (0, 1); max_tree_depth: an integer >= 1 (or NumPyro's pair
        (warm-up, sampling)); as NumPyro's.
      chain_method: how the C chains run, always inside one compiled program (never a Python loop):
        "parallel": one device per chain (``jax.shard_map`` over a "chains" axis of C devices,
        `inference.mesh.chain_mesh`: each device runs its chain's program, the draws NumPyro's pmapped
        "parallel" MCMC gives; on CPU call ``numpyro.set_host_device_count(n)`` before JAX starts, as the
        `zoo` CLI does; with fewer devices than chains it warns and runs on one device); "vectorized": all
        chains on one device, batched (``jax.vmap``; a batch's tree doubling lasts as long as its longest
        chain's); "sequential": one chain after the other on one
        device (``jax.lax.map``). Default: "parallel" when there are at least C > 1 devices, else
        "sequential" on a CPU (batching gains nothing there; `single_device_method`) and "vectorized" on an
        accelerator.
      progress: a tqdm bar over the warm-up and draws, advanced per chunk of iterations; False silences it.
      config: extra JSON-able configuration saved with the posterior.
      divergence_threshold: a `DivergenceWarning` is issued when the fraction of divergent draws (after
        warm-up, over all chains) exceeds it; default 0.01 (1 %); 0 warns at the first divergence (as Stan
        does), 1 never. The divergences are kept either way: ``sample_stats["diverging"]`` and
        ``info.divergences``.
      dense_mass: False (default): a diagonal mass matrix adapted in warm-up, as NumPyro's NUTS; True: a dense
        one (NumPyro's ``dense_mass=True``: the warm-up's regularised sample covariance of all P weights, P x P;
        for small networks, P up to a few thousand), which follows posteriors whose narrow directions are not
        aligned with the weights' axes (a nearly noiseless regression: docs/uci.md).
    Raises:
      InputError (a ValueError) naming the argument for bad settings (num_chains, draws_per_chain < 1,
      num_warmup < 0, target_accept_prob outside (0, 1), max_tree_depth < 1, ...), for data that do not fit
      the model, and for an `init` posterior of another feature shape.
    Returns:
      MCMCPosterior with samples {site: (C, D, *site_shape)} (constrained, NumPy), sample_stats
      {diverging, num_steps, accept_prob, energy}: (C, D) each, and ``info`` a `NutsInfo`
      (nuts_s: seconds of warm-up + sampling, compiles included, divergences, mean_leapfrog_steps,
      chain_method: the method that ran).
    """
    reject_removed_arguments(removed)
    config = check_config(config)
    check_nuts_settings(num_chains=num_chains, num_warmup=num_warmup, draws_per_chain=draws_per_chain,
                        target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                        divergence_threshold=divergence_threshold)
    if not isinstance(dense_mass, (bool, np.bool_)):
        raise ArgumentTypeError("dense_mass", repr(dense_mass), "True or False")
    check_seed(seed)
    if init is not None and not isinstance(init, Posterior):
        raise ArgumentTypeError("init", f"<{type(init).__name__}>", "an inference.Posterior or None")
    chain_method = resolve_chain_method(chain_method, num_chains)
    x, y = labelled_arrays(model, data, "NUTS")
    feature_shape = tuple(x.shape[1:])
    if init is not None and tuple(init.feature_shape) != feature_shape:
        raise InputError("init", f"<a posterior for feature shape {tuple(init.feature_shape)}>",
                         f"a posterior of this model for the data's feature shape {feature_shape}")
    if init is not None:
        # sites the init posterior has beyond this model's are allowed: a model that holds some of them fixed
        # (zoo run's rank-1 NUTS, on the factors with W fixed) starts from the posterior of the whole one
        problem = site_mismatch(model.site_shapes(feature_shape), init.site_shapes(), got_name="the init posterior",
                                extra_ok=True)
        if problem:
            raise InputError("init", f"<a posterior of another model: {problem}>",
                             "a posterior holding every latent site of this model at its shape, to start the "
                             "chains from")
    check_memory("draws_per_chain", draws_per_chain,
                 4.0 * num_chains * draws_per_chain * num_latent(model, feature_shape),
                 f"the kept draws ({num_chains} chains x {draws_per_chain} draws of the weights, float32)")
    site_priors = model.site_priors(feature_shape)
    key = jax.random.PRNGKey(seed)
    init_u = initial_positions(model, site_priors, feature_shape, init, num_chains, key, seed)
    if num_chains == 1:
        init_u = {k: v[None] for k, v in init_u.items()}
    state = network_state(model, feature_shape, init)
    total = int(num_warmup) + int(draws_per_chain)
    sampler = compiled_sampler(model, site_priors, x, y, state, num_chains=int(num_chains),
                               chain_method=chain_method, num_warmup=int(num_warmup),
                               target_accept_prob=float(target_accept_prob), max_tree_depth=max_tree_depth,
                               chunk_len=min(CHUNK_LEN, total), dense_mass=bool(dense_mass))
    t0 = time.perf_counter()
    samples, stats, _ = run_sampler(sampler, key, init_u, jnp.asarray(x), jnp.asarray(y), state,
                                 int(draws_per_chain), progress=progress)
    seconds = time.perf_counter() - t0
    divergences = int(stats["diverging"].sum())
    info = NutsInfo(nuts_s=seconds, divergences=divergences,
                    mean_leapfrog_steps=float(stats["num_steps"].mean()), chain_method=chain_method)
    warn_divergences(divergences, int(stats["diverging"].size), divergence_threshold)
    return MCMCPosterior(model=model, samples=samples, sample_stats=stats,
                     feature_shape=feature_shape, state=state, config=dict(config or {}), info=info,
                     training_data=data_fingerprint(x, y))


class DivergenceWarning(UserWarning):
    """NUTS diverged on more draws than `nuts`'s ``divergence_threshold`` allows: the sampler could not follow
    the posterior's curvature there, so the draws may be biased. ``count`` and ``fraction`` say how many."""

    def __init__(self, count: int, total: int):
        self.count, self.total, self.fraction = count, total, count / total
        super().__init__(
            f"nuts: {count} of {total} draws after warm-up diverged ({self.fraction:.1%}); the draws may not "
            "represent the posterior. Raise target_accept_prob (e.g. 0.95), use a longer warm-up, or "
            "reparameterise; posterior.sample_stats['diverging'] marks them.")


def warn_divergences(count: int, total: int, threshold: float) -> None:
    """Issue a `DivergenceWarning` when count / total (divergent draws over all kept draws) exceeds `threshold`."""
    if total and count and count / total > threshold:
        warnings.warn(DivergenceWarning(count, total), stacklevel=3)


def reject_removed_arguments(removed: dict) -> None:
    """Raise TypeError for keyword arguments `nuts` does not take, explaining ``num_samples``'s rename."""
    if "num_samples" in removed:
        raise ArgumentTypeError.worded("num_samples",
            f"num_samples: nuts got num_samples={removed['num_samples']!r}, but the argument was renamed to "
            "draws_per_chain: everywhere else in the package (Posterior.predict, draws, to_arviz, evals.score) "
            "num_samples is the TOTAL number of posterior draws, while nuts takes draws per chain "
            "(total = num_chains * draws_per_chain). Pass draws_per_chain= instead.")
    if removed:
        raise ArgumentTypeError.worded("nuts", f"nuts: unexpected keyword arguments {sorted(removed)}")


def default_chain_method(num_chains: int) -> str:
    """"parallel" when there is one device per chain (and more than one chain), else `single_device_method`."""
    return "parallel" if jax.local_device_count() >= num_chains > 1 else single_device_method(num_chains)


def single_device_method(num_chains: int) -> str:
    """How C chains share one device: "sequential" on a CPU, "vectorized" on an accelerator (and for one chain).

    On a CPU batching the chains buys nothing: XLA already spreads one chain's operations over the cores, while
    vmapped NUTS runs each tree doubling as long as the longer chain's (every chain waits for the deepest tree).
    ``benchmarks/bench_nuts.py`` measures the time per chain-leapfrog of both methods."""
    return "sequential" if num_chains > 1 and jax.default_backend() == "cpu" else "vectorized"


def resolve_chain_method(chain_method: str | None, num_chains: int) -> str:
    """The chain method that will run: the default for None; "parallel" with fewer devices than
    `num_chains` warns and becomes `single_device_method`. Raises ValueError for an unknown method."""
    if chain_method is None:
        return default_chain_method(num_chains)
    check_choice("chain_method", chain_method, CHAIN_METHODS + (None,))
    if chain_method == "parallel" and jax.local_device_count() < num_chains:
        fallback = single_device_method(num_chains)
        warnings.warn(f"chain_method='parallel' needs {num_chains} devices, but {jax.local_device_count()} "
                      f"are available: running the chains {fallback} on one device instead (on CPU, call "
                      "numpyro.set_host_device_count(n) before JAX starts)", stacklevel=3)
        return fallback
    return chain_method


def initial_positions(model, site_priors: dict, feature_shape: tuple, init: Posterior | None, num_chains: int,
                      key, seed: int) -> dict:
    """Unconstrained start values {site: (C, *site_shape)} (no chain axis when C = 1): one draw of `init`
    per chain (drawn with seed + 1, modulo 2**32), or Haiku's initialisation with key split per chain when
    `init` is None."""
    if init is not None:
        start = init.draws(num_chains, seed=(seed + 1) % (MAX_SEED + 1))
    else:
        keys = jax.random.split(key, num_chains)
        per_chain = jax.device_get([model.init_values(k, feature_shape) for k in keys])
        start = {k: np.stack([p[k] for p in per_chain]) for k in site_priors}
    # host arrays in: stacking or converting device arrays op by op would compile a small program per site
    init_u = unconstrain(site_priors, {k: start[k] for k in site_priors})
    if num_chains == 1:
        init_u = {k: v[0] for k, v in init_u.items()}
    return init_u


def network_state(model, feature_shape: tuple, init: Posterior | None):
    """The Haiku state NUTS evaluates a stateful (batch-norm) network with, in evaluation mode: the SVI
    posterior's state when it has one, else the network's initial state; None for a stateless network."""
    if not model.is_stateful(feature_shape):
        return None
    return init.state if init is not None and init.state is not None else model.initial_state(feature_shape)


def site_transforms(site_priors: dict) -> dict:
    """{site: the bijection from unconstrained space onto the support of the site's prior}."""
    return {k: biject_to(d.support) for k, d in site_priors.items()}


def unconstrained_potential(model, site_priors, x, y, state=None):
    """The potential energy U(u) = -log p(y, w = T(u) | x) - log|det dT/du| of the full data set over the
    unconstrained values u {site: site_shape array}, for NUTS; x (N, ...), y (N,), state: Haiku state or None.

    ``partial(unconstrained_potential, model, site_priors)`` is the kernel's ``potential_fn_gen``: called with
    the (traced) data ``(x, y, state)`` it returns the potential, so the data stay arguments of the compiled
    programs. Built from the BNN's static site table, so NUTS needs none of NumPyro's ``initialize_model``
    (which compiles the model op by op, outside jit); the model itself is evaluated by
    ``numpyro.infer.util.log_density``.
    """
    transforms = site_transforms(site_priors)
    kwargs = {} if state is None else {"state": state}

    def potential(u):
        params = {k: transforms[k](v) for k, v in u.items()}
        log_jac = sum(jnp.sum(transforms[k].log_abs_det_jacobian(u[k], params[k])) for k in u)
        log_joint, _ = log_density(model, (x, y), kwargs, params)
        return -(log_joint + log_jac)

    return potential


def flat_potential(model, site_priors, unravel, x, y, state=None):
    """`unconstrained_potential` over ONE flat vector z (P,), P the number of weights: ``U(unravel(z))``.

    The kernel's position: with a dict of S sites NumPyro ravels and unravels the momentum at every leapfrog
    step and maps every integrator update over the S leaves; with one vector each is a single operation, and
    the compiled program is smaller. unravel: (P,) -> {site: site_shape} (`site_unraveller`)."""
    potential = unconstrained_potential(model, site_priors, x, y, state)
    return lambda z: potential(unravel(z))


def ravel_sites(values: dict):
    """{site: array} -> (P,): the sites' values raveled and concatenated in sorted site order, the order of
    ``jax.flatten_util.ravel_pytree`` (so NumPyro's momentum draws land on the same weights as with a dict
    position). For use inside a trace (op by op it would compile every reshape)."""
    return jnp.concatenate([jnp.ravel(values[k]) for k in sorted(values)])


def site_unraveller(site_priors: dict) -> Callable:
    """The inverse of `ravel_sites` for these sites: (P,) -> {site: site_shape array} in sorted site order;
    built from the priors' shapes alone (no array is made)."""
    layout, start = [], 0
    for name in sorted(site_priors):
        shape = tuple(site_priors[name].shape())
        layout.append((name, start, shape))
        start += math.prod(shape)

    def unravel(z):
        return {name: lax.slice_in_dim(z, lo, lo + math.prod(shape)).reshape(shape) for name, lo, shape in layout}

    return unravel


class CompiledSampler(NamedTuple):
    """The compiled NUTS programs of one (model value key, data shapes, settings), chains mapped.

    init(chain_keys (C, 2), z0 {site: (C, *site_shape)} unconstrained, x (N, ...), y (N,), state) -> HMC state
      with a leading chain axis C (NumPyro's ``HMCState``; its position z is (C, P), every site's values in
      one flat vector, `flat_potential`);
    chunk(hmc_state, active (L,) bool, x, y, state) -> (hmc_state, (draws {site: (C, L, *site_shape)}
      constrained, stats {diverging, num_steps, accept_prob, energy: (C, L)})): L iterations, those with
      ``active`` False leaving the state unchanged (their outputs repeat the last state).
    """

    init: Callable
    chunk: Callable
    num_chains: int
    chain_method: str
    num_warmup: int
    chunk_len: int


class SamplerSpec:
    """What a NUTS program computes, as the static argument of `sampler_init` / `sampler_chunk` (jit's own cache
    is the only cache): the model, its site priors {site: distribution} and the settings (num_chains,
    chain_method, num_warmup, target_accept_prob, max_tree_depth, chunk_len, dense_mass, data_per_chain).
    Equal (and equally hashed) when the model's value key (`base.value_key.Static`: a ``zoo.get`` model by its
    entry, arguments, data, prior and likelihood; any other model by identity), every site's name, prior class,
    batch and event shapes and support, and the settings are; the data's shapes and dtypes are jit's own key."""

    __slots__ = ("model", "site_priors", "settings", "_key")

    def __init__(self, model, site_priors: dict, settings: dict):
        self.model, self.site_priors, self.settings = model, site_priors, settings
        sites = tuple((name, type(d).__name__, tuple(d.batch_shape), tuple(d.event_shape), support_key(d.support))
                      for name, d in site_priors.items())
        self._key = (Static(model), sites, tuple(sorted(settings.items())))

    def __eq__(self, other) -> bool:
        return isinstance(other, SamplerSpec) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)


def compiled_sampler(model, site_priors: dict, x, y, state, *, num_chains: int, chain_method: str,
                     num_warmup: int, target_accept_prob: float, max_tree_depth, chunk_len: int,
                     dense_mass: bool = False, data_per_chain: bool = False) -> CompiledSampler:
    """The `CompiledSampler` for this model and settings: `sampler_init` and `sampler_chunk` with their
    `SamplerSpec` bound, so a second call with an equal spec and data of the same shapes compiles nothing. x, y
    and state are not read (kept for the callers' signature: their shapes and dtypes are jit's key when the
    sampler runs). data_per_chain (with chain_method "vectorized"): x (C, N, ...) and y (C, N) carry a leading
    chain axis, each chain its own data set of the same shapes (`inference.nuts_splits`: the splits of a benchmark
    in one program)."""
    del x, y, state
    if data_per_chain and chain_method != "vectorized":
        raise InputError("chain_method", chain_method, "'vectorized' for chains with their own data")
    if chain_method not in CHAIN_METHODS:
        raise InputError.worded("chain_method", f"chain_method: expected one of {CHAIN_METHODS}, got {chain_method!r}")
    spec = SamplerSpec(model, site_priors, dict(
        num_chains=num_chains, chain_method=chain_method, num_warmup=num_warmup,
        target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth, chunk_len=chunk_len,
        dense_mass=dense_mass, data_per_chain=data_per_chain))
    return CompiledSampler(partial(sampler_init, spec=spec), partial(sampler_chunk, spec=spec), num_chains,
                           chain_method, num_warmup, chunk_len)


@partial(jax.jit, static_argnames="spec")
def sampler_init(chain_keys, z0, x, y, state, *, spec: SamplerSpec):
    """Every chain's HMC state from its key (C, 2) and start value z0 {site: (C, *site_shape)} (`build_sampler`'s
    ``init``), compiled once per `spec` and data shapes."""
    return build_sampler(spec.model, spec.site_priors, **spec.settings).init(chain_keys, z0, x, y, state)


@partial(jax.jit, static_argnames="spec")
def sampler_chunk(hmc_state, active, x, y, state, *, spec: SamplerSpec):
    """`build_sampler`'s ``chunk``: L NUTS iterations of every chain, compiled once per `spec` and data shapes.
    NumPyro's kernel pair keeps the settings ``init_kernel`` set as Python state that ``sample_kernel`` reads, so
    the pair built here runs its ``init`` abstractly first (``jax.eval_shape``: nothing computed) on start values
    shaped like the chains'."""
    sampler = build_sampler(spec.model, spec.site_priors, **spec.settings)
    keys = jax.ShapeDtypeStruct((spec.settings["num_chains"], 2), jnp.uint32)
    z0 = {k: jax.ShapeDtypeStruct((spec.settings["num_chains"],) + tuple(v.shape), v.dtype)
          for k, v in unravel_shapes(hmc_state.z, spec.site_priors).items()}
    jax.eval_shape(sampler.init, keys, z0, x, y, state)
    return sampler.chunk(hmc_state, active, x, y, state)


def unravel_shapes(z, site_priors: dict) -> dict:
    """{site: ShapeDtypeStruct (*site_shape)} of one chain's position (z (C, D) flat, `ravel_sites`)."""
    dtype = jnp.result_type(z)
    return {name: jax.ShapeDtypeStruct(tuple(d.batch_shape) + tuple(d.event_shape), dtype)
            for name, d in site_priors.items()}


def support_key(support) -> tuple:
    """A hashable description of a NumPyro constraint: its class and its attributes (bounds as values)."""
    items: list[tuple[str, object]] = []
    for name, value in sorted(vars(support).items()):
        if isinstance(value, constraints.Constraint):
            items.append((name, support_key(value)))
        else:
            try:
                items.append((name, repr(np.asarray(value).tolist())))
            except Exception:  # noqa: BLE001 - an attribute NumPy cannot hold: its repr
                items.append((name, repr(value)))
    return (type(support).__name__, tuple(items))


def build_sampler(model, site_priors: dict, *, num_chains: int, chain_method: str, num_warmup: int,
                  target_accept_prob: float, max_tree_depth, chunk_len: int,
                  dense_mass: bool = False, data_per_chain: bool = False) -> CompiledSampler:
    """The (init, chunk) functions, not jitted (`sampler_init` / `sampler_chunk` jit them), as a `CompiledSampler`:
    NumPyro's ``hmc(potential_fn_gen=..., algo="NUTS")`` pair, created anew per trace because ``init_kernel`` sets
    the settings (warm-up length, tree depth, adaptation) as Python state that ``sample_kernel`` reads when traced
    (`sampler_chunk` runs init abstractly first). Kernel options are NumPyro NUTS's defaults (step size 1, step-size and diagonal
    mass-matrix adaptation (diagonal, or dense with `dense_mass`), regularised mass matrix, no heuristic step
    size). data_per_chain: "vectorized" chains each with its own data (x, y mapped over their leading axis)."""
    unravel = site_unraveller(site_priors)
    init_kernel, sample_kernel = hmc(potential_fn_gen=partial(flat_potential, model, site_priors, unravel),
                                     algo="NUTS")
    transforms = site_transforms(site_priors)

    def init_one(chain_key, z0, x, y, state):
        rng_key, _ = jax.random.split(chain_key)  # as NumPyro's HMC.init: (kernel key, model-init key)
        return init_kernel(ravel_sites(z0), num_warmup, step_size=1.0, inverse_mass_matrix=None,
                           adapt_step_size=True, adapt_mass_matrix=True, dense_mass=dense_mass,
                           target_accept_prob=target_accept_prob, trajectory_length=None, max_tree_depth=max_tree_depth, find_heuristic_step_size=False,
                           regularize_mass_matrix=True, model_args=(x, y, state), rng_key=rng_key)

    def chunk_one(hmc_state, active, x, y, state):
        def step(s, is_active):
            s = lax.cond(is_active, lambda s: sample_kernel(s, model_args=(x, y, state)), lambda s: s, s)
            draws = {k: transforms[k](v) for k, v in unravel(s.z).items()}
            stats = {"diverging": s.diverging, "num_steps": s.num_steps, "accept_prob": s.accept_prob,
                     "energy": s.energy}
            return s, (draws, stats)

        return lax.scan(step, hmc_state, active)

    init: Callable
    chunk: Callable
    if data_per_chain and chain_method != "vectorized":
        raise InputError("chain_method", chain_method, "'vectorized' for chains with their own data")
    if chain_method == "vectorized":
        data_axis = 0 if data_per_chain else None
        init = jax.vmap(init_one, in_axes=(0, 0, data_axis, data_axis, None))
        chunk = jax.vmap(chunk_one, in_axes=(0, None, data_axis, data_axis, None))
    elif chain_method == "parallel":
        init, chunk = per_device(init_one, num_chains, 2), per_device(chunk_one, num_chains, 1)
    elif chain_method == "sequential":
        def init_seq(chain_keys, z0, x, y, state):
            return lax.map(lambda a: init_one(a[0], a[1], x, y, state), (chain_keys, z0))

        def chunk_seq(hmc_state, active, x, y, state):
            return lax.map(lambda s: chunk_one(s, active, x, y, state), hmc_state)

        init, chunk = init_seq, chunk_seq
    else:
        raise InputError.worded("chain_method", f"chain_method: expected one of {CHAIN_METHODS}, got {chain_method!r}")
    return CompiledSampler(init, chunk, num_chains, chain_method, num_warmup, chunk_len)


def per_device(fn: Callable, num_chains: int, chain_args: int) -> Callable:
    """fn(*args) for one chain mapped over C = `num_chains` chains, one chain per device: ``jax.shard_map`` over
    the "chains" axis of `inference.mesh.chain_mesh` (C devices). The first `chain_args` arguments and every
    output carry a leading chain axis C split over the devices; the other arguments (data, network state, the
    active mask) are replicated. Each device runs `fn` on its one chain unbatched, as ``jax.pmap`` did: the same
    program per chain, so the same draws."""
    mesh = chain_mesh(num_chains)

    def one_chain(*args):
        args = [jax.tree.map(lambda v: v[0], a) for a in args[:chain_args]] + list(args[chain_args:])
        return jax.tree.map(lambda v: v[None], fn(*args))

    def mapped(*args):
        # check_vma=False: NumPyro's kernel builds lax.cond branches from per-chain values and constants, whose
        # varying-across-devices types differ (the check refuses them); every value here is per chain anyway
        specs = (P(CHAIN_AXIS),) * chain_args + (P(),) * (len(args) - chain_args)
        return jax.shard_map(one_chain, mesh=mesh, in_specs=specs, out_specs=P(CHAIN_AXIS), check_vma=False)(*args)

    return mapped


def run_sampler(sampler: CompiledSampler, key, init_u: dict, x, y, state, draws_per_chain: int,
                progress: bool = True, split_key: bool = True) -> tuple[dict, dict, np.ndarray]:
    """Warm up and sample: ``sampler.num_warmup + draws_per_chain`` NUTS iterations per chain in chunks of
    ``sampler.chunk_len``, keeping the iterations after warm-up.

    key: the run's PRNG key (split per chain as NumPyro's MCMC does), or with ``split_key=False`` the chain
    keys themselves (C, 2); init_u: {site: (C, *site_shape)}
    unconstrained start values; x (N, ...), y (N,), state: the data and network state (jit arguments).
    Returns (samples {site: (C, D, *site_shape)} constrained, stats {diverging, num_steps, accept_prob,
    energy: (C, D)}, warmup_steps (C,): leapfrog steps of each chain's warm-up), NumPy arrays filled chunk by
    chunk (the next chunk is queued on the device while the host copies the previous one).
    """
    num_chains, chunk_len, num_warmup = sampler.num_chains, sampler.chunk_len, sampler.num_warmup
    total = num_warmup + draws_per_chain
    if not split_key:
        chain_keys = key
    else:
        chain_keys = jax.random.split(key, num_chains) if num_chains > 1 else jnp.expand_dims(key, 0)
    hmc_state = sampler.init(chain_keys, init_u, x, y, state)
    kept: dict = {}
    warmup_steps = np.zeros(num_chains, np.int64)
    bar = _progress(total, progress)

    def collect(start: int, out) -> None:
        lo, hi = max(num_warmup - start, 0), min(chunk_len, total - start)
        if lo >= hi:  # warm-up only: copy the step counts (C, L) and no draws
            warmup_steps[:] += np.asarray(out[1]["num_steps"])[:, :hi].sum(axis=1)
        else:
            host = jax.device_get(out)
            warmup_steps[:] += host[1]["num_steps"][:, :lo].sum(axis=1)
            for group, arrays in zip(("draws", "stats"), host):
                for name, value in arrays.items():
                    if (group, name) not in kept:
                        kept[group, name] = np.empty((num_chains, draws_per_chain) + value.shape[2:], value.dtype)
                    kept[group, name][:, start + lo - num_warmup:start + hi - num_warmup] = value[:, lo:hi]
        bar.update(min(chunk_len, total - start))

    pending = None
    try:
        for start in range(0, total, chunk_len):
            active = np.arange(start, start + chunk_len) < total
            hmc_state, out = sampler.chunk(hmc_state, active, x, y, state)
            if pending is not None:
                collect(*pending)
            pending = (start, out)
        if pending is not None:
            collect(*pending)
    finally:
        bar.close()
    samples = {name: kept["draws", name] for name in init_u}  # the model's site order
    stats = {name: kept["stats", name] for name in EXTRA_FIELDS}
    return samples, stats, warmup_steps


def _progress(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc="NUTS", unit="it", leave=False, mininterval=0.5)
