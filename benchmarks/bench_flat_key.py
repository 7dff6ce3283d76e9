"""Compile time of random draws: JAX's threefry key against `base.prng.flat_key`, interleaved in one process.

    python benchmarks/bench_flat_key.py [--repeats 3]

(a) one ``jax.random.bits(key, shape)`` per shape; (b) the posterior sampler of the digits MLP 64-64 (50 draws of
every site) for mean field, 2-tied and rank-1 (Cauchy, K = 4), each compiled from scratch (``jit(...).lower(...)
.compile()``, so neither the in-process nor the persistent cache serves it). Prints the median compile seconds of
each variant, their ratio, and whether the two draws are equal bit for bit (they must be).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("BNN_ZOO_COMPILATION_CACHE", "off")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from base.prng import flat_key  # noqa: E402


def compile_seconds(fn, *args):
    """Seconds to lower and compile ``jax.jit(fn)`` for `args`, and the compiled function."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return time.perf_counter() - start, compiled


def compare(label, make, args, repeats):
    """make(wrap) -> function of args; compiles both variants `repeats` times, interleaved; prints one row."""
    times = {False: [], True: []}
    outputs = {}
    for _ in range(repeats):
        for wrap in (False, True):
            seconds, compiled = compile_seconds(make(wrap), *args)
            times[wrap].append(seconds)
            outputs[wrap] = jax.tree.leaves(compiled(*args))
    equal = all(np.array_equal(a, b) for a, b in zip(outputs[False], outputs[True], strict=True))
    raw, flat = statistics.median(times[False]), statistics.median(times[True])
    print(f"{label:52s} {raw:8.2f} {flat:8.2f} {raw / flat:7.1f}x   {'equal' if equal else 'DIFFERENT'}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print("load average before:", os.getloadavg(), flush=True)
    title = f"compile seconds (median of {args.repeats})"
    print(f"{title:52s} {'threefry':>8s} {'flat_key':>8s} {'ratio':>8s}")
    key = jax.random.PRNGKey(0)
    for shape in [(50, 64), (50, 64, 64), (50, 64, 10), (8, 3, 3, 16, 16)]:
        compare(f"jax.random.bits {shape}",
                lambda wrap, shape=shape: (lambda k: jax.random.bits(flat_key(k) if wrap else k, shape)), (key,),
                args.repeats)

    import inference
    import zoo

    entry = zoo.get("mlp", data="digits", hidden=(64, 64))
    rank1 = zoo.get("rank1_mlp", data="digits", hidden=(64, 64), factor="cauchy")
    guides = {"mean field": (entry, inference.mean_field(entry.model)),
              "2-tied": (entry, inference.k_tied.k_tied(entry.model, k=2)),
              "rank-1 Cauchy, K = 4": (rank1, inference.make_guide("rank1_mixture", rank1.model, family="cauchy"))}
    for label, (e, guide) in guides.items():
        params = guide.init_params(key, e.train.x[:2])
        x = jnp.zeros((1,) + tuple(e.train.feature_shape))

        def make(wrap, guide=guide, x=x):
            return lambda k, p: guide.sample_posterior(flat_key(k) if wrap else k, p, x, sample_shape=(50,))

        compare(f"posterior sampler, MLP 64-64, {label}", make, (key, params), args.repeats)
    print("load average after:", os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()
