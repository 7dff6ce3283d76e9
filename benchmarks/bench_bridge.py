"""The cost of the Flax NNX bridge: SVI step time of an NNX MLP 784-400-400-10 against the same Haiku MLP under
a mean-field fit, and the compiles of a second fit of the NNX model.

Both networks start from the same weights (the Haiku model's initial values copied into the NNX module), fit the
same synthetic 784-dimensional data (N examples, 10 classes, labels of a random linear map) with the same seed.
Each network first runs one warm-up fit (it compiles); then rounds alternate Haiku and NNX fits of `steps` steps
(interleaved, so load on a shared machine hits both alike), each timed whole, in wall-clock and process CPU
seconds, per step. Printed: per-step min / median / max over rounds for each, and the NNX / Haiku ratio of the
medians with the ratio's range (min NNX / max Haiku .. max NNX / min Haiku). Compiles are counted with
``jax.monitoring`` (backend compiles and persistent-cache reads) during the second NNX fit.

Run: python benchmarks/bench_bridge.py [--hidden 400,400] [--steps 400] [--rounds 3] [--batch 128] [--n 2048]
"""

import argparse
import statistics
import time
import warnings

import haiku as hk
import jax
import numpy as np
import optax
from flax import nnx
from jax import monitoring

import inference
import models

COMPILES: list = []


def _count(event, seconds, **kwargs):
    if "backend_compile" in event or "cache_retrieval" in event:
        COMPILES.append(kwargs.get("fun_name", event))


class NnxMLP(nnx.Module):
    """784 -> hidden... -> 10 ReLU MLP whose layers take the given Haiku weights {"linear_i": {"w", "b"}}."""

    def __init__(self, sizes, params):
        self.layers = nnx.List([
            nnx.Linear(a, b, kernel_init=lambda *_, p=params[f"mlp/~/linear_{i}"]: p["w"],
                       bias_init=lambda *_, p=params[f"mlp/~/linear_{i}"]: p["b"], rngs=nnx.Rngs(0))
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))])

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = jax.nn.relu(layer(x))
        return self.layers[-1](x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", default="400,400")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--n", type=int, default=2048)
    args = p.parse_args()
    hidden = [int(h) for h in args.hidden.split(",")]
    sizes = [784, *hidden, 10]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.n, 784)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(784, 10)), axis=1).astype(np.int32)

    haiku = models.bnn(lambda z: hk.nets.MLP(sizes[1:])(z), name="haiku_mlp", feature_shape=x.shape[1:])
    start = models.unflatten_params(haiku.init_values(jax.random.PRNGKey(0), x))
    nets = {"haiku": haiku, "nnx": models.bnn(NnxMLP(sizes, start), name="nnx_mlp", feature_shape=x.shape[1:])}
    kw = dict(steps=args.steps, batch_size=args.batch, optimizer=optax.adam(1e-3), chunk_size=args.steps,
              progress=False)
    monitoring.register_event_duration_secs_listener(_count)
    warnings.simplefilter("ignore")  # timing fits, not fits to use
    first = {}
    for name, model in nets.items():  # warm-up: compiles
        first[name] = inference.fit(model, inference.mean_field(model), (x, y), seed=0, **kw).losses
    before = len(COMPILES)
    second = inference.fit(nets["nnx"], inference.mean_field(nets["nnx"]), (x, y), seed=1, **kw)
    nnx_second_compiles = len(COMPILES) - before
    wall = {name: [] for name in nets}
    cpu = {name: [] for name in nets}
    for r in range(args.rounds):
        for name, model in nets.items():
            t_wall, t_cpu = time.perf_counter(), time.process_time()
            post = inference.fit(model, inference.mean_field(model), (x, y), seed=2 + r, **kw)
            jax.block_until_ready(post.params)
            wall[name].append(1e3 * (time.perf_counter() - t_wall) / args.steps)
            cpu[name].append(1e3 * (time.process_time() - t_cpu) / args.steps)
    print(f"mean-field fit of an MLP {'-'.join(map(str, sizes))}, batch {args.batch}, {args.steps} steps per fit, "
          f"{args.rounds} interleaved rounds after a warm-up fit each; jax {jax.__version__}, "
          f"{jax.devices()[0].platform}")
    print(f"{'':8s} {'wall ms/step min / median / max':>34s} {'CPU ms/step min / median / max':>34s}")
    for name in nets:
        print(f"{name:8s} {min(wall[name]):10.2f} {statistics.median(wall[name]):10.2f} {max(wall[name]):10.2f}"
              f"   {min(cpu[name]):10.2f} {statistics.median(cpu[name]):10.2f} {max(cpu[name]):10.2f}")
    for label, t in (("wall", wall), ("CPU", cpu)):
        ratio = statistics.median(t["nnx"]) / statistics.median(t["haiku"])
        print(f"NNX / Haiku {label}: {ratio:.3f} (range {min(t['nnx']) / max(t['haiku']):.3f} .. "
              f"{max(t['nnx']) / min(t['haiku']):.3f})")
    same = np.allclose(first["nnx"], first["haiku"], rtol=1e-4)
    print(f"warm-up ELBO curves of the two equal (rtol 1e-4): {same}; compiles during the second NNX fit: "
          f"{nnx_second_compiles} (traces: {second.info.traces})")


if __name__ == "__main__":
    main()
