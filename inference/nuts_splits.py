"""`nuts_splits`: NUTS on several data sets of one model at once (a benchmark's splits), in one compiled program.

The K data sets (e.g. the 20 train splits of a UCI set) are grouped by shape (a split one row longer runs in its
own group); within a group, every (data set, chain) pair is one chain of `inference.nuts`'s "vectorized" driver
whose data carry the chain axis (``compiled_sampler(..., data_per_chain=True)``: ``jax.vmap`` over K * C chains,
x (K * C, N, ...) and y (K * C, N) mapped with them). So the K * C chains advance together through one jitted
warm-up-and-draws loop, each with its own step size and mass matrix adapted on its own data: on an accelerator
a set's splits cost about what one split costs; on a CPU every batch waits for its longest tree (as NumPyro's
own "vectorized" chains), so there `inference.nuts` per split ("sequential" chains) is the faster choice
(``benchmarks/bench_nuts_splits.py`` measures both).

Data set k is run as ``inference.nuts(model, datasets[k], init=inits[k], seed=seed + k,
chain_method="vectorized")`` would run it: the same start values (draws of its own `init` posterior) and the
same chain keys (``PRNGKey(seed + k)`` split per chain), so its draws are that call's, up to the float rounding
of a larger batch (tested), whichever data sets run beside it.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from base.errors import InputError
from base.validation import check_nuts_settings, check_seed, num_latent, check_memory
from inference.fit import labelled_arrays
from inference.model_identity import data_fingerprint
from inference.nuts import (CHUNK_LEN, compiled_sampler, initial_positions, run_sampler, warn_divergences,
                            DIVERGENCE_THRESHOLD)
from inference.posterior import MCMCPosterior, Posterior
from inference.run_info import NutsInfo


def nuts_splits(model, datasets, *, inits=None, num_chains: int = 4, num_warmup: int = 500,
                draws_per_chain: int = 500, seed: int = 0, target_accept_prob: float = 0.8,
                max_tree_depth: int = 10, dense_mass: bool = False, progress: bool = False,
                divergence_threshold: float = DIVERGENCE_THRESHOLD) -> list[Posterior]:
    """NUTS of `model` on each of K data sets, all data sets of one shape vectorised in one compiled program.

    Args:
      model: one `models.BNN` (a stateless network) for every data set: the same architecture, prior and
        likelihood; only the data differ.
      datasets: K `Dataset` s or (x, y) pairs, x (N_k, ...), y (N_k,); the feature shapes must agree.
      inits: None, or K SVI posteriors: data set k's chains start from draws of inits[k] (`inference.nuts`'s
        `init`).
      num_chains, num_warmup, draws_per_chain, seed, target_accept_prob, max_tree_depth, dense_mass,
      divergence_threshold: as `inference.nuts` (per data set: C chains each).
    Returns:
      K MCMC Posteriors, in the order of `datasets`: samples {site: (C, D, *site_shape)}, sample_stats (C, D)
      each, info a `NutsInfo` whose nuts_s is the seconds of the data set's group (shared by its members).
    Raises:
      InputError naming the argument: settings as `inference.nuts`, an empty `datasets`, `inits` of another
      length, data sets of other feature shapes, a stateful (batch-norm) network.
    """
    check_nuts_settings(num_chains=num_chains, num_warmup=num_warmup, draws_per_chain=draws_per_chain,
                        target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                        divergence_threshold=divergence_threshold)
    check_seed(seed)
    datasets = list(datasets)
    if not datasets:
        raise InputError("datasets", "<an empty list>", "one data set or more")
    if inits is not None and len(inits) != len(datasets):
        raise InputError("inits", f"<{len(inits)} posteriors>", f"one posterior per data set ({len(datasets)})")
    arrays = [labelled_arrays(model, d, "NUTS") for d in datasets]
    feature_shape = tuple(arrays[0][0].shape[1:])
    for k, (x, _) in enumerate(arrays):
        if tuple(x.shape[1:]) != feature_shape:
            raise InputError("datasets", f"<data set {k} of feature shape {tuple(x.shape[1:])}>",
                             f"data sets of one feature shape {feature_shape}")
    if model.is_stateful(feature_shape):
        raise InputError("model", "<a network with batch-norm state>", "a stateless network (use inference.nuts)")
    check_memory("draws_per_chain", draws_per_chain,
                 4.0 * len(datasets) * num_chains * draws_per_chain * num_latent(model, feature_shape),
                 f"the kept draws ({len(datasets)} data sets x {num_chains} chains x {draws_per_chain} draws)")
    site_priors = model.site_priors(feature_shape)
    keys = [jax.random.PRNGKey(seed + k) for k in range(len(datasets))]  # data set k: nuts(seed=seed + k)
    out: list = [None] * len(datasets)
    for members in groups_by_shape(arrays):
        for k, post in zip(members, run_group(model, site_priors, feature_shape, [arrays[k] for k in members],
                                              [keys[k] for k in members],
                                              None if inits is None else [inits[k] for k in members],
                                              [seed + k for k in members], num_chains, num_warmup,
                                              draws_per_chain, target_accept_prob, max_tree_depth, dense_mass,
                                              progress, divergence_threshold)):
            out[k] = post
    return out


def groups_by_shape(arrays) -> list[list[int]]:
    """The indices of `arrays` ((x, y) pairs) grouped by the shapes of x and y, in order of first appearance."""
    groups: dict[tuple, list[int]] = {}
    for k, (x, y) in enumerate(arrays):
        groups.setdefault((np.shape(x), np.shape(y)), []).append(k)
    return list(groups.values())


def run_group(model, site_priors, feature_shape, arrays, keys, inits, seeds, num_chains, num_warmup,
              draws_per_chain, target_accept_prob, max_tree_depth, dense_mass, progress, divergence_threshold):
    """The Posteriors of G data sets of one shape (`arrays`: G (x, y)), their G * C chains vmapped together."""
    G, C = len(arrays), int(num_chains)
    starts = []
    for g in range(G):
        u = initial_positions(model, site_priors, feature_shape, None if inits is None else inits[g], C, keys[g],
                              seeds[g])
        starts.append({k: v[None] if C == 1 else v for k, v in u.items()})  # (C, *shape)
    init_u = {k: np.concatenate([np.asarray(s[k]) for s in starts]) for k in site_priors}  # (G * C, *shape)
    x = jnp.asarray(np.repeat(np.stack([a[0] for a in arrays]), C, axis=0))  # (G * C, N, ...)
    y = jnp.asarray(np.repeat(np.stack([a[1] for a in arrays]), C, axis=0))
    total = int(num_warmup) + int(draws_per_chain)
    sampler = compiled_sampler(model, site_priors, x, y, None, num_chains=G * C, chain_method="vectorized",
                               num_warmup=int(num_warmup), target_accept_prob=float(target_accept_prob),
                               max_tree_depth=max_tree_depth, chunk_len=min(CHUNK_LEN, total),
                               dense_mass=bool(dense_mass), data_per_chain=True)
    # one key per (data set, chain): data set g's C chain keys split from its own key, as nuts splits its seed's
    chain_keys = jnp.concatenate([jax.random.split(k, C) if C > 1 else k[None] for k in keys])
    t0 = time.perf_counter()
    samples, stats, _ = run_sampler(sampler, chain_keys, init_u, x, y, None, int(draws_per_chain),
                                    progress=progress, split_key=False)
    seconds = time.perf_counter() - t0
    posts = []
    for g, (xg, yg) in enumerate(arrays):
        part = slice(g * C, (g + 1) * C)
        s = {k: v[part] for k, v in samples.items()}
        st = {k: v[part] for k, v in stats.items()}
        divergences = int(st["diverging"].sum())
        warn_divergences(divergences, int(st["diverging"].size), divergence_threshold)
        info = NutsInfo(nuts_s=seconds, divergences=divergences,
                        mean_leapfrog_steps=float(st["num_steps"].mean()), chain_method="vectorized")
        posts.append(MCMCPosterior(model=model, samples=s, sample_stats=st, feature_shape=feature_shape, state=None,
                                   config={}, info=info, training_data=data_fingerprint(xg, yg)))
    return posts
