"""`nuts`: NUTS on the identical model object, chains started from draws of an SVI posterior.

Pure pieces underneath: `initial_positions` (where each chain starts), `network_state` (batch-norm state
for evaluation mode), `unconstrained_potential` (the potential energy) and `run_chains` (NumPyro's MCMC);
`nuts` is the thin front end (validation, defaults, assembling the Posterior).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import biject_to
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import log_density

from inference.fit import check_positive_ints, labelled_arrays
from inference.posterior import Posterior
from inference.run_info import NutsInfo
from models.bridge import unconstrain

EXTRA_FIELDS = ("diverging", "num_steps", "accept_prob", "energy")


def nuts(model, data, *, init: Posterior | None = None, num_chains: int = 2, num_warmup: int = 500,
         draws_per_chain: int = 500, seed: int = 0, target_accept_prob: float = 0.8, max_tree_depth: int = 10,
         chain_method: str | None = None, progress: bool = True, config: dict | None = None,
         **removed) -> Posterior:
    """Run NUTS (diagonal mass matrix) on `model` with the full data set and return a `Posterior`.

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
      seed, target_accept_prob, max_tree_depth: as NumPyro's.
      chain_method: "parallel" (one CPU/GPU device per chain; on CPU call
        ``numpyro.set_host_device_count(n)`` before JAX starts, as the `zoo` CLI does), "sequential",
        or "vectorized"; default parallel when enough devices exist, else sequential.
    Returns:
      Posterior(kind="mcmc") with samples {site: (C, D, *site_shape)}, sample_stats
      {diverging, num_steps, accept_prob, energy}: (C, D) each, and ``info`` a `NutsInfo`
      (nuts_s, divergences, mean_leapfrog_steps, chain_method).
    """
    reject_removed_arguments(removed)
    check_positive_ints(num_chains=num_chains, draws_per_chain=draws_per_chain)
    if not isinstance(num_warmup, (int, np.integer)) or num_warmup < 0:
        raise ValueError(f"num_warmup: expected a non-negative integer, got {num_warmup!r}")
    if init is not None and not isinstance(init, Posterior):
        raise ValueError(f"init: expected an inference.Posterior or None, got {type(init).__name__}")
    x, y = labelled_arrays(model, data, "NUTS")
    chain_method = default_chain_method(num_chains) if chain_method is None else chain_method
    feature_shape = tuple(x.shape[1:])
    site_priors = model.site_priors(feature_shape)
    key = jax.random.PRNGKey(seed)
    init_u = initial_positions(model, site_priors, feature_shape, init, num_chains, key, seed)
    state = network_state(model, feature_shape, init)
    potential = unconstrained_potential(model, site_priors, jnp.asarray(x), jnp.asarray(y), state)
    kernel = NUTS(potential_fn=potential, target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                  dense_mass=False)
    mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=draws_per_chain, num_chains=num_chains,
                chain_method=chain_method, progress_bar=progress)
    samples, stats, seconds = run_chains(mcmc, key, init_u, site_transforms(site_priors))
    info = NutsInfo(nuts_s=seconds, divergences=int(stats["diverging"].sum()),
                    mean_leapfrog_steps=float(stats["num_steps"].mean()), chain_method=chain_method)
    return Posterior(model=model, kind="mcmc", samples=samples, sample_stats=stats,
                     feature_shape=feature_shape, state=state, config=dict(config or {}), info=info)


def reject_removed_arguments(removed: dict) -> None:
    """Raise TypeError for keyword arguments `nuts` does not take, explaining ``num_samples``'s rename."""
    if "num_samples" in removed:
        raise TypeError(
            f"num_samples: nuts got num_samples={removed['num_samples']!r}, but the argument was renamed to "
            "draws_per_chain: everywhere else in the package (Posterior.predict, draws, to_arviz, evals.score) "
            "num_samples is the TOTAL number of posterior draws, while nuts takes draws per chain "
            "(total = num_chains * draws_per_chain). Pass draws_per_chain= instead.")
    if removed:
        raise TypeError(f"nuts: unexpected keyword arguments {sorted(removed)}")


def default_chain_method(num_chains: int) -> str:
    """"parallel" when there is one device per chain (and more than one chain), else "sequential"."""
    # one device per chain when there are enough: NumPyro then traces the kernel's setup once
    # (a single chain, or sequential chains, run it eagerly: ~250 small compiles, ~7 s on 2 cores)
    return "parallel" if jax.local_device_count() >= num_chains > 1 else "sequential"


def initial_positions(model, site_priors: dict, feature_shape: tuple, init: Posterior | None, num_chains: int,
                      key, seed: int) -> dict:
    """Unconstrained start values {site: (C, *site_shape)} (no chain axis when C = 1): one draw of `init`
    per chain (drawn with seed + 1), or Haiku's initialisation with key split per chain when `init` is None."""
    if init is not None:
        start = init.draws(num_chains, seed=seed + 1)
    else:
        keys = jax.random.split(key, num_chains)
        per_chain = [model.init_values(k, feature_shape) for k in keys]
        start = {k: jnp.stack([p[k] for p in per_chain]) for k in site_priors}
    init_u = unconstrain(site_priors, {k: jnp.asarray(start[k]) for k in site_priors})
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


def run_chains(mcmc: MCMC, key, init_u: dict, transforms: dict) -> tuple[dict, dict, float]:
    """Run `mcmc` from `init_u` and return (samples {site: (C, D, *site_shape)} constrained by `transforms`,
    stats {diverging, num_steps, accept_prob, energy: (C, D)}, seconds) as NumPy arrays.

    seconds: the run plus the device->host copy of the draws (parallel chains run asynchronously).
    """
    t0 = time.perf_counter()
    mcmc.run(key, init_params=init_u, extra_fields=EXTRA_FIELDS)
    samples = {k: np.asarray(transforms[k](v)) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    seconds = time.perf_counter() - t0
    stats = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
    return samples, stats, seconds


def unconstrained_potential(model, site_priors, x, y, state=None):
    """The potential energy U(u) = -log p(y, w = T(u) | x) - log|det dT/du| of the full data set over the
    unconstrained values u {site: site_shape array}, for NUTS; x (N, ...), y (N,), state: Haiku state or None.

    Built from the BNN's static site table, so NUTS needs none of NumPyro's ``initialize_model`` (whose
    eager compiles cost ~10 s per model); the model itself is evaluated by ``numpyro.infer.util.log_density``.
    """
    transforms = site_transforms(site_priors)
    kwargs = {} if state is None else {"state": state}

    def potential(u):
        params = {k: transforms[k](v) for k, v in u.items()}
        log_jac = sum(jnp.sum(transforms[k].log_abs_det_jacobian(u[k], params[k])) for k in u)
        log_joint, _ = log_density(model, (x, y), kwargs, params)
        return -(log_joint + log_jac)

    return potential
