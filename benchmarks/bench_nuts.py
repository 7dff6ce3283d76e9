"""NUTS cost per leapfrog step and ESS per second: the zoo's `inference.nuts` against the gradient floor and BlackJAX.

Model: the two-moons MLP 2-16-16-2 (``zoo.get("mlp", data="two_moons", hidden=(16, 16), data_kwargs={"n": N,
"noise": 0.1})``), the full-data potential ``inference.nuts.unconstrained_potential``; every sampler starts from
the same Haiku initialisation per chain (what ``nuts(init=None)`` uses). In one process:

  (a) gradient floor: ``jax.value_and_grad`` of the potential, jitted, 1000 evaluations in a ``lax.fori_loop``
      (each evaluation at a point moved by the previous gradient, so nothing is hoisted); per evaluation, for
      one chain, vmapped over C chains and, with --chain-method parallel, pmapped over C devices (per
      chain-evaluation); the ratio uses the floor run as the chains run;
  (b) the zoo's nuts, warm calls (seeds 1..K after the compiling seed 0; nothing compiles): seconds / all
      leapfrog steps of warm-up + draws, summed over chains and seeds (the warm-up steps are counted by running
      the same inputs through the pieces nuts runs, ``compiled_sampler`` + ``run_sampler``; the run is
      deterministic);
  (c) BlackJAX: ``window_adaptation(blackjax.nuts)`` + ``blackjax.nuts`` steps in one jitted program vmapped over
      C chains (pmapped over C devices with --chain-method parallel), the same log density (-potential),
      warm-up length, draws and tree depth (max_num_doublings), the same start values per seed, warm calls
      timed: seconds / all leapfrog steps;
  (d) ESS per second of p(y = 1 | x) at the first 20 test points: ``arviz.ess`` of each point's (C, D) draws,
      min and median over the points, divided by the run's seconds, averaged over the K seeds, for the zoo and
      BlackJAX.

Prints the ratios zoo per-leapfrog / gradient floor (goal <= 1.15) and zoo ESS/s / BlackJAX ESS/s (goal >= 1).

BlackJAX is optional: ``pip install 'bnn-zoo[bench]'`` (or ``pip install 'blackjax>=1.2'``); without it (c) and
(d) for BlackJAX are skipped. Run:

    python benchmarks/bench_nuts.py [--n 2000] [--warmup 500] [--draws 500] [--chains 2] [--max-tree-depth 10]
                                    [--chain-method vectorized] [--devices K] [--seeds 3]

--devices K (CPU only) gives JAX K host devices, e.g. for --chain-method parallel.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="two-moons training points (default 2000)")
    p.add_argument("--warmup", type=int, default=500, help="warm-up iterations per chain (default 500)")
    p.add_argument("--draws", type=int, default=500, help="kept draws per chain (default 500)")
    p.add_argument("--chains", type=int, default=2, help="chains C (default 2)")
    p.add_argument("--max-tree-depth", type=int, default=10, help="NUTS max tree depth (default 10)")
    p.add_argument("--chain-method", default="vectorized", choices=("vectorized", "parallel", "sequential"),
                   help="the zoo's chain method (default vectorized, as BlackJAX's vmap)")
    p.add_argument("--devices", type=int, default=0, help="host (CPU) devices to give JAX (default: JAX's)")
    p.add_argument("--seeds", type=int, default=3,
                   help="timed runs (seeds 1..K) per sampler after the compiling seed 0 (default 3): one run's ESS "
                        "of a few hundred draws is noisy, so ESS/s is the mean over seeds")
    return p.parse_args(argv)


def one_run(label, seconds, note, warmup_steps, steps, accept, divergences, ess) -> tuple:
    """Print one timed run and return (seconds, leapfrog steps of warm-up + draws, ESS min, ESS median).
    warmup_steps (C,) or (C, W): leapfrog steps of the warm-up; steps, accept (C, D): per kept draw."""
    import numpy as np

    warm, steps = int(np.asarray(warmup_steps).sum()), np.asarray(steps)
    total = warm + int(steps.sum())
    print(f"{label}: {seconds:.2f} s ({note}); {total} leapfrog steps ({warm} in warm-up), mean {steps.mean():.1f} "
          f"per draw, accept {np.asarray(accept).mean():.3f}, {divergences} divergences: "
          f"{seconds / total * 1e6:.1f} us per leapfrog step; ESS of p(y=1|x) at 20 test points min {ess[0]:.0f}, "
          f"median {ess[1]:.0f}")
    return (seconds, total) + tuple(ess)


def blackjax_adapted(blackjax, logdensity, key, u0, num_warmup: int, depth: int):
    """BlackJAX's NUTS after its window adaptation (target acceptance 0.8, at most `depth` doublings) from u0:
    (kernel with the adapted step size and mass matrix, state, the key left for the draws, warm-up leapfrog steps
    (num_warmup,)). For one chain; vmap or pmap it over chains."""
    import jax
    from blackjax.adaptation.base import get_filter_adapt_info_fn

    key_warmup, key_draws = jax.random.split(key)
    warmup = blackjax.window_adaptation(
        blackjax.nuts, logdensity, target_acceptance_rate=0.8, max_num_doublings=depth,
        adaptation_info_fn=get_filter_adapt_info_fn(info_keys={"num_integration_steps"}))
    (state, params), info = warmup.run(key_warmup, u0, num_steps=num_warmup)
    return blackjax.nuts(logdensity, **params), state, key_draws, info.info.num_integration_steps


def summarise(label, runs) -> tuple:
    """(seconds per leapfrog step over all runs, [mean over runs of ESS min / s, of ESS median / s]), printed."""
    import numpy as np

    per_step = sum(r[0] for r in runs) / sum(r[1] for r in runs)
    ess_s = [float(np.mean([r[k] / r[0] for r in runs])) for k in (2, 3)]
    print(f"{label} over {len(runs)} seeds: {per_step * 1e6:.1f} us per leapfrog step; ESS/s of p(y=1|x) at 20 "
          f"test points, mean over seeds: min {ess_s[0]:.1f}, median {ess_s[1]:.1f}")
    return per_step, ess_s


def main(argv=None):
    args = parse_args(argv)
    if args.devices:
        import numpyro

        numpyro.set_host_device_count(args.devices)

    import arviz as az
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax, monitoring

    import inference
    import zoo

    nuts_module = importlib.import_module("inference.nuts")
    compiles: list = []
    monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **kw: compiles.append(event) if "backend_compile" in event else None)

    C, W, D, depth = args.chains, args.warmup, args.draws, args.max_tree_depth
    moons = zoo.get("mlp", data="two_moons", hidden=(16, 16), data_kwargs={"n": args.n, "noise": 0.1})
    model, x, y = moons.model, moons.train.x, moons.train.y
    x_test = moons.test.x[:20]
    feature_shape = tuple(x.shape[1:])
    site_priors = model.site_priors(feature_shape)
    num_params = sum(int(np.prod(s)) for s in model.site_shapes(feature_shape).values())
    potential = nuts_module.unconstrained_potential(model, site_priors, jnp.asarray(x), jnp.asarray(y))
    print(f"device: {jax.devices()[0].device_kind} x {jax.local_device_count()}; two-moons MLP 2-16-16-2 "
          f"({num_params} weights), N = {args.n}; C = {C} chains, {W} warm-up + {D} draws each, "
          f"max tree depth {depth}")

    def start_values(seed):
        init_u = nuts_module.initial_positions(model, site_priors, feature_shape, None, C, jax.random.PRNGKey(seed),
                                               seed)
        return {k: v[None] for k, v in init_u.items()} if C == 1 else init_u

    # (a) the gradient floor
    evals = 1000
    value_and_grad = jax.value_and_grad(potential)

    def gradient_loop(u):
        def body(_, carry):
            u, total = carry
            value, grad = value_and_grad(u)
            return jax.tree.map(lambda a, g: a - 1e-6 * g, u, grad), total + value

        return lax.fori_loop(0, evals, body, (u, jnp.zeros(())))

    u0 = start_values(0)
    floors = {}
    ways = [("1 chain", jax.jit(gradient_loop), {k: v[0] for k, v in u0.items()}),
            (f"{C} chains vmapped", jax.jit(jax.vmap(gradient_loop)), u0)]
    if args.chain_method == "parallel" and jax.local_device_count() >= C:
        ways.append((f"{C} chains pmapped", jax.pmap(gradient_loop), u0))  # one device per chain, as the zoo's
    for name, fn, arg in ways:
        jax.block_until_ready(fn(arg))
        t0 = time.perf_counter()
        jax.block_until_ready(fn(arg))
        per_chain_evals = evals * (1 if name == "1 chain" else C)
        floors[name] = (time.perf_counter() - t0) / per_chain_evals
        print(f"(a) gradient floor, {name}: {floors[name] * 1e6:.1f} us per (chain-)evaluation")
    floor_name = {"vectorized": f"{C} chains vmapped", "parallel": f"{C} chains pmapped"}.get(args.chain_method,
                                                                                             "1 chain")
    floor_name = floor_name if floor_name in floors else "1 chain"
    floor = floors[floor_name]

    # (b) the zoo's nuts, warm: seed 0 compiles, seeds 1..K are timed
    settings = dict(num_chains=C, num_warmup=W, draws_per_chain=D, max_tree_depth=depth,
                    chain_method=args.chain_method, progress=False)
    seeds = range(1, args.seeds + 1)
    compiles.clear()
    t0 = time.perf_counter()
    inference.nuts(model, moons.train, seed=0, **settings)
    first_s, first_compiles = time.perf_counter() - t0, len(compiles)
    print(f"(b) zoo nuts: first call {first_s:.1f} s ({first_compiles} compiles)")
    sampler = None

    def ess_of(posterior):
        probs = posterior.predict(x_test, num_samples=C * D)[..., 1].reshape(C, D, -1)
        ess = np.array([float(az.ess(probs[:, :, j])) for j in range(probs.shape[-1])])
        return ess.min(), float(np.median(ess))

    zoo_runs = []  # (seconds, leapfrog steps, ESS min, ESS median)
    for seed in seeds:
        compiles.clear()
        t0 = time.perf_counter()
        post = inference.nuts(model, moons.train, seed=seed, **settings)
        seconds, again = time.perf_counter() - t0, len(compiles)
        if sampler is None:
            sampler = nuts_module.compiled_sampler(model, site_priors, x, y, None, num_chains=C,
                                                   chain_method=post.info.chain_method, num_warmup=W,
                                                   target_accept_prob=0.8, max_tree_depth=depth,
                                                   chunk_len=min(nuts_module.CHUNK_LEN, W + D))
        _, stats, warmup_steps = nuts_module.run_sampler(sampler, jax.random.PRNGKey(seed), start_values(seed),
                                                         jnp.asarray(x), jnp.asarray(y), None, D, progress=False)
        assert np.array_equal(stats["num_steps"], post.sample_stats["num_steps"]), "the recount is not the same run"
        zoo_runs.append(one_run(f"(b) zoo nuts ({post.info.chain_method}), seed {seed}", seconds, f"{again} compiles",
                                warmup_steps, post.sample_stats["num_steps"], post.sample_stats["accept_prob"],
                                post.info.divergences, ess_of(post)))
    zoo_per_step, zoo_ess_s = summarise("(b) zoo", zoo_runs)

    # (c) BlackJAX
    try:
        import blackjax
    except ImportError:
        blackjax = None
        print("(c) BlackJAX is not installed: pip install 'bnn-zoo[bench]' (or pip install 'blackjax>=1.2'); "
              "skipping the BlackJAX rows")
    if blackjax is not None:
        def logdensity(u):
            return -potential(u)

        def one_chain(key, u0):
            kernel, state, key_draws, warm_steps = blackjax_adapted(blackjax, logdensity, key, u0, W, depth)

            def step(state, key):
                state, step_info = kernel.step(key, state)
                return state, (state.position, step_info.num_integration_steps, step_info.is_divergent,
                               step_info.acceptance_rate)

            _, draws = lax.scan(step, state, jax.random.split(key_draws, D))
            return draws, warm_steps

        mapped = "pmapped" if floor_name.endswith("pmapped") else "vmapped"  # the chains run as the zoo's do
        run = jax.pmap(one_chain) if mapped == "pmapped" else jax.jit(jax.vmap(one_chain))
        t0 = time.perf_counter()
        jax.block_until_ready(run(jax.random.split(jax.random.PRNGKey(0), C), start_values(0)))
        print(f"(c) BlackJAX {blackjax.__version__} ({mapped}): first call {time.perf_counter() - t0:.1f} s")
        transforms = nuts_module.site_transforms(site_priors)
        bj_runs = []
        for seed in seeds:
            keys, u1 = jax.random.split(jax.random.PRNGKey(seed), C), start_values(seed)
            t0 = time.perf_counter()
            (positions, steps, divergent, accept), warm_steps = jax.block_until_ready(run(keys, u1))
            seconds = time.perf_counter() - t0
            samples = {k: np.asarray(transforms[k](v)) for k, v in positions.items()}
            bj_post = inference.MCMCPosterior(model=model, samples=samples, feature_shape=feature_shape)
            bj_runs.append(one_run(f"(c) BlackJAX, seed {seed}", seconds, "warm", warm_steps, steps, accept,
                                   int(np.asarray(divergent).sum()), ess_of(bj_post)))
        bj_per_step, bj_ess_s = summarise("(c) BlackJAX", bj_runs)

    print(f"ratio zoo per-leapfrog / gradient floor ({floor_name}): "
          f"{zoo_per_step / floor:.2f} (goal <= 1.15); / 1-chain floor: {zoo_per_step / floors['1 chain']:.2f}")
    if blackjax is not None:
        print(f"ratio zoo per-leapfrog / BlackJAX per-leapfrog: {zoo_per_step / bj_per_step:.2f}")
        print(f"ratio zoo ESS/s / BlackJAX ESS/s (means over {len(zoo_runs)} seeds): min "
              f"{zoo_ess_s[0] / bj_ess_s[0]:.2f}, median {zoo_ess_s[1] / bj_ess_s[1]:.2f} (goal >= 1)")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
