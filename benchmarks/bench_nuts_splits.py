"""NUTS on a UCI set's splits: cost per gradient evaluation of `inference.nuts_splits` (all splits and chains in one
vectorised program) against `inference.nuts` per split, NumPyro's own MCMC and BlackJAX's NUTS, in one process.

Model: the benchmark's (``zoo.experiments.benchmarks.uci.entry_for``: the mlp 50 ReLU units, fan_in prior,
learned noise) on the first `--splits` splits of `--dataset`; every sampler starts from the same Haiku
initialisation per (split, chain) and runs `--warmup` + `--draws` iterations at tree depth <= `--max-tree-depth`:

  (a) zoo nuts_splits: the K splits x C chains vmapped in one program (``chain_method="vectorized"``, data per
      chain);
  (b) zoo nuts per split, chains "sequential" (the CPU default) and "vectorized";
  (c) NumPyro: ``MCMC(NUTS(potential_fn=<the same flat potential>), chain_method="vectorized")`` on split 0;
  (d) BlackJAX: ``window_adaptation(blackjax.nuts)`` + ``blackjax.nuts`` vmapped over C chains on split 0, one
      jitted program, the same log density (-potential).

Each is called twice (the first call compiles: for (a) and (b) a call on the same shapes, for (c) and (d) split 0
with another key; their potentials hold the split's data as constants, so every split would compile anew) and
the second is timed; its cost is seconds / leapfrog steps of
warm-up + draws summed over every chain of every split (each chain's own steps: a vmapped batch that waits for
its longest tree pays for steps this count does not hold, which is what the ratio shows). Prints each per-step
cost and its ratio to the fastest. BlackJAX is optional (``pip install 'bnn-zoo[bench]'``).

    python benchmarks/bench_nuts_splits.py [--dataset yacht] [--splits 4] [--chains 4] [--warmup 200]
                                           [--draws 200] [--max-tree-depth 8]
"""

from __future__ import annotations

import argparse
import importlib
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="yacht")
    p.add_argument("--splits", type=int, default=4)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--max-tree-depth", type=int, default=8)
    return p.parse_args(argv)


def timed(fn, *args):
    """(seconds, result) of fn(*args) with every output on the host (JAX's asynchronous dispatch waited for)."""
    import jax

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0, out


def main(argv=None):
    args = parse_args(argv)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from numpyro.infer import MCMC, NUTS

    import inference
    from inference.nuts_splits import nuts_splits
    from zoo.experiments.benchmarks.uci import FULL, entry_for

    nuts_module = importlib.import_module("inference.nuts")
    K, C, W, D, depth = args.splits, args.chains, args.warmup, args.draws, args.max_tree_depth
    entries = [entry_for(args.dataset, k, None, FULL) for k in range(K)]
    model = entries[0].model
    feature_shape = tuple(entries[0].train.x.shape[1:])
    site_priors = model.site_priors(feature_shape)
    unravel = nuts_module.site_unraveller(site_priors)
    print(f"{args.dataset}: {K} splits x {C} chains, {W} + {D} iterations, tree depth <= {depth}; "
          f"{len(entries[0].train)} training rows, backend {jax.default_backend()}")
    starts = [nuts_module.initial_positions(model, site_priors, feature_shape, None, C, jax.random.PRNGKey(k), k)
              for k in range(K)]
    flat = [jnp.stack([nuts_module.ravel_sites({s: v[c] for s, v in u.items()}) for c in range(C)]) for u in starts]
    costs = {}

    def report(label, seconds, steps):
        costs[label] = seconds / steps
        print(f"{label}: {seconds:.1f} s, {steps} leapfrog steps: {seconds / steps * 1e6:.1f} us per step", flush=True)

    # (a) nuts_splits: K * C chains in one program; the leapfrog steps recounted by the same pieces it runs
    settings = dict(num_chains=C, num_warmup=W, draws_per_chain=D, max_tree_depth=depth)
    data = [e.train for e in entries]
    nuts_splits(model, data, seed=0, **settings)
    seconds, posts = timed(lambda: nuts_splits(model, data, seed=0, **settings))
    warm = warmup_steps_of_splits(nuts_module, model, site_priors, data, C, W, D, depth)
    report("(a) zoo nuts_splits (vectorized, K x C chains)", seconds,
           warm + sum(int(p.sample_stats["num_steps"].sum()) for p in posts))

    # (b) zoo nuts per split
    for method in ("sequential", "vectorized"):
        inference.nuts(model, data[0], seed=0, chain_method=method, progress=False, **settings)
        total_s, steps = 0.0, 0
        for k in range(K):
            s, post = timed(lambda: inference.nuts(model, data[k], seed=k, chain_method=method, progress=False,
                                                   **settings))
            total_s += s
            steps += int(post.sample_stats["num_steps"].sum()) + warmup_steps_of_splits(
                nuts_module, model, site_priors, [data[k]], C, W, D, depth, method=method, seeds=[k])
        report(f"(b) zoo nuts per split ({method})", total_s, steps)

    # (c) NumPyro's own MCMC on the same flat potential, vectorized chains
    potentials = [nuts_module.flat_potential(model, site_priors, unravel, jnp.asarray(e.train.x),
                                             jnp.asarray(e.train.y)) for e in entries]
    mcmc = MCMC(NUTS(potential_fn=potentials[0], max_tree_depth=depth), num_warmup=W, num_samples=D, num_chains=C,
                chain_method="vectorized", progress_bar=False)

    def numpyro_run(key):
        mcmc.warmup(key, init_params=flat[0], collect_warmup=True, extra_fields=("num_steps",))
        warm_steps = mcmc.get_extra_fields()["num_steps"]
        mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=("num_steps",))
        return warm_steps, mcmc.get_extra_fields()["num_steps"]

    numpyro_run(jax.random.PRNGKey(100))  # compiles
    s, (warm_steps, draw_steps) = timed(numpyro_run, jax.random.PRNGKey(0))
    report("(c) NumPyro MCMC, split 0 (vectorized chains)", s, int(np.sum(warm_steps)) + int(np.sum(draw_steps)))

    # (d) BlackJAX
    try:
        import blackjax
    except ImportError:
        print("(d) BlackJAX is not installed (pip install 'bnn-zoo[bench]'): skipped")
        blackjax = None
    if blackjax is not None:
        runner = blackjax_runner(blackjax, W, D, depth)
        fn = jax.jit(lambda key, z0: runner(lambda z: -potentials[0](z), key, z0))
        jax.block_until_ready(fn(jax.random.PRNGKey(100), flat[0]))  # compiles
        s, (warm_steps, draw_steps) = timed(fn, jax.random.PRNGKey(0), flat[0])
        report("(d) BlackJAX, split 0 (vmapped chains)", s, int(np.sum(warm_steps)) + int(np.sum(draw_steps)))

    best = min(costs.values())
    print("ratio to the fastest per leapfrog step: " + "; ".join(f"{k.split(' ')[0]} {v / best:.2f}"
                                                              for k, v in costs.items()))


def warmup_steps_of_splits(nuts_module, model, site_priors, data, C, W, D, depth, method=None, seeds=None):
    """Leapfrog steps of the warm-up of the same runs (`run_sampler` returns them; the runs are deterministic)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from inference.fit import labelled_arrays

    if method is None:  # nuts_splits: one vectorised program with data per chain
        from inference.nuts_splits import groups_by_shape

        arrays = [labelled_arrays(model, d, "NUTS") for d in data]
        total = 0
        for members in groups_by_shape(arrays):
            x = jnp.asarray(np.repeat(np.stack([arrays[k][0] for k in members]), C, axis=0))
            y = jnp.asarray(np.repeat(np.stack([arrays[k][1] for k in members]), C, axis=0))
            sampler = nuts_module.compiled_sampler(model, site_priors, x, y, None, num_chains=len(members) * C,
                                                   chain_method="vectorized", num_warmup=W, target_accept_prob=0.8,
                                                   max_tree_depth=depth, chunk_len=min(nuts_module.CHUNK_LEN, W + D),
                                                   data_per_chain=True)
            fs = tuple(arrays[0][0].shape[1:])
            init_u = {s: np.concatenate([np.asarray(nuts_module.initial_positions(
                model, site_priors, fs, None, C, jax.random.PRNGKey(k), k)[s]) for k in members]) for s in site_priors}
            keys = jnp.concatenate([jax.random.split(jax.random.PRNGKey(k), C) for k in members])
            _, _, warm = nuts_module.run_sampler(sampler, keys, init_u, x, y, None, D, progress=False, split_key=False)
            total += int(warm.sum())
        return total
    x, y = labelled_arrays(model, data[0], "NUTS")
    fs = tuple(x.shape[1:])
    sampler = nuts_module.compiled_sampler(model, site_priors, x, y, None, num_chains=C, chain_method=method,
                                           num_warmup=W, target_accept_prob=0.8, max_tree_depth=depth,
                                           chunk_len=min(nuts_module.CHUNK_LEN, W + D))
    init_u = nuts_module.initial_positions(model, site_priors, fs, None, C, jax.random.PRNGKey(seeds[0]), seeds[0])
    _, _, warm = nuts_module.run_sampler(sampler, jax.random.PRNGKey(seeds[0]), init_u, jnp.asarray(x),
                                         jnp.asarray(y), None, D, progress=False)
    return int(warm.sum())


def blackjax_runner(blackjax, W, D, depth):
    """run(logdensity, key, z0 (C, P)) -> (warm-up steps (C, W), draw steps (C, D)): window adaptation then NUTS
    (`bench_nuts.blackjax_adapted`), vmapped over the C chains."""
    import jax
    from jax import lax

    from bench_nuts import blackjax_adapted  # benchmarks/ is this script's folder

    def run(logdensity, key, z0):
        def one_chain(key, u0):
            kernel, state, key_draws, warm_steps = blackjax_adapted(blackjax, logdensity, key, u0, W, depth)

            def step(state, key):
                state, step_info = kernel.step(key, state)
                return state, step_info.num_integration_steps

            _, steps = lax.scan(step, state, jax.random.split(key_draws, D))
            return warm_steps, steps

        return jax.vmap(one_chain)(jax.random.split(key, z0.shape[0]), z0)

    return run


if __name__ == "__main__":
    main()
