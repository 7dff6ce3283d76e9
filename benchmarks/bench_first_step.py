"""Process start to the first finished SVI step, in fresh processes, side by side (issue: <= 1.3x plain).

  plain:  a plain Haiku + optax program: the same MLP 64-64 on the digits, softmax cross-entropy, Adam,
          ``hk.transform`` + ``net.init`` + one jitted update (the least a JAX user compiles for this network)
  ours:   zoo.get + inference.mean_field + inference.fit(steps=1), persistent compilation cache off (cold)
  warm:   the same with the persistent compilation cache on, in a folder filled by a previous run
  naive:  the same BNN with NumPyro's AutoNormal + SVI(Trace_ELBO).init + one jitted update

Every snippet counts its backend compiles (jax.monitoring) and prints seconds from interpreter start.
Model: the digits MLP 64-64 (8,970 weights), batch 128.
Run: python benchmarks/bench_first_step.py [repeats]   (prints per-run seconds and compiles, best-of ratios)
"""

import json
import os
import subprocess
import sys
import tempfile

PROLOGUE = """
import time
T0 = time.perf_counter()
import jax
from jax import monitoring
COMPILES = []
monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kw: COMPILES.append(seconds) if "backend_compile" in event else None)
"""

EPILOGUE = """
import json
print(json.dumps({"seconds": time.perf_counter() - T0, "compiles": len(COMPILES),
                  "compile_seconds": sum(COMPILES), "loss": float(LOSS)}))
"""

PLAIN = """
import haiku as hk, jax.numpy as jnp, numpy as np, optax
from sklearn.datasets import load_digits
x, y = load_digits(return_X_y=True)
x = ((x - x.mean(0)) / (x.std(0) + 1e-6)).astype(np.float32)[:128]
y = y.astype(np.int32)[:128]
net = hk.without_apply_rng(hk.transform(lambda x: hk.nets.MLP([64, 64, 10])(x)))
params = net.init(jax.random.PRNGKey(0), x)
opt = optax.adam(1e-3)
state = opt.init(params)

@jax.jit
def step(params, state, x, y):
    def loss(p):
        return optax.softmax_cross_entropy_with_integer_labels(net.apply(p, x), y).mean()
    value, grads = jax.value_and_grad(loss)(params)
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state, value

params, state, LOSS = step(params, state, x, y)
LOSS.block_until_ready()
"""

OURS = """
import zoo, inference
zoo.enable_compilation_cache()  # $BNN_ZOO_COMPILATION_CACHE: "off" (cold) or the folder of a previous run (warm)
e = zoo.get("mlp", data="digits", hidden=(64, 64))
p = inference.fit(e.model, inference.mean_field(e.model), e.train, steps=1, batch_size=128, progress=False)
LOSS = p.losses[0]
"""

NAIVE = """
import numpy as np, optax, zoo
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.autoguide import AutoNormal
e = zoo.get("mlp", data="digits", hidden=(64, 64))
svi = SVI(e.model, AutoNormal(e.model), optax.adam(1e-3), Trace_ELBO())
x, y = e.train.x[:128], e.train.y[:128]
state = svi.init(jax.random.PRNGKey(0), x, y, len(e.train))
state, LOSS = jax.jit(svi.update)(state, x, y, len(e.train))
"""


def run(code: str, cache: str) -> dict:
    """Run PROLOGUE + code + EPILOGUE in a fresh interpreter with BNN_ZOO_COMPILATION_CACHE=cache."""
    env = {**os.environ, "BNN_ZOO_COMPILATION_CACHE": cache}
    out = subprocess.run([sys.executable, "-c", PROLOGUE + code + EPILOGUE], check=True, capture_output=True,
                         text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(repeats: int = 3):
    rows = {"plain": [], "ours": [], "warm": [], "naive": []}
    with tempfile.TemporaryDirectory() as cache:
        run(OURS, cache)  # fills the cache that "warm" reads
        for _ in range(repeats):  # interleaved, so that the machine's load hits every path alike
            rows["plain"].append(run(PLAIN, "off"))
            rows["ours"].append(run(OURS, "off"))
            rows["warm"].append(run(OURS, cache))
            rows["naive"].append(run(NAIVE, "off"))
    for name, results in rows.items():
        print(f"{name:6s} start -> first step: " + ", ".join(
            f"{r['seconds']:.1f} s ({r['compiles']} compiles, {r['compile_seconds']:.1f} s compiling)" for r in results))
    best = {name: min(r["seconds"] for r in results) for name, results in rows.items()}
    print(f"ratio ours / plain (best of {repeats}, cold): {best['ours'] / best['plain']:.2f}   (goal <= 1.3)")
    print(f"ratio warm / plain (persistent cache warm): {best['warm'] / best['plain']:.2f}")
    print(f"ratio naive NumPyro / ours: {best['naive'] / best['ours']:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
