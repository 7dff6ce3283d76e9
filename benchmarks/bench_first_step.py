"""Time from process start to the first finished SVI step, in fresh processes, side by side.

  ours:   zoo.get + inference.mean_field + inference.fit(steps=1)   (fast prototype, one jitted chunk)
  naive:  the same BNN model with NumPyro's AutoNormal + SVI(Trace_ELBO).init + one jitted update
          (initialize_model's eager compiles: the first svi.init in a fresh process took 12.5 s,
          313 small compiles, measured on 2 CPU cores with NumPyro 0.22 / JAX 0.10)

Model: the digits MLP 64-64 (8,970 weights), batch 128. Run: python benchmarks/bench_first_step.py [repeats]
Prints seconds per run and the ratio naive / ours measured in this one run.
"""

import subprocess
import sys
import time

OURS = """
import zoo, inference
e = zoo.get("mlp", data="digits", hidden=(64, 64))
p = inference.fit(e.model, inference.mean_field(e.model), e.train, steps=1, batch_size=128, progress=False)
print(float(p.losses[0]))
"""

NAIVE = """
import jax, numpy as np, optax, zoo
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.autoguide import AutoNormal
e = zoo.get("mlp", data="digits", hidden=(64, 64))
svi = SVI(e.model, AutoNormal(e.model), optax.adam(1e-3), Trace_ELBO())
x, y = e.train.x[:128], e.train.y[:128]
state = svi.init(jax.random.PRNGKey(0), x, y, len(e.train))
state, loss = jax.jit(svi.update)(state, x, y, len(e.train))
print(float(loss))
"""


def wall(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - t0


def main(repeats: int = 2):
    rows = {"ours": [], "naive": []}
    for _ in range(repeats):
        rows["ours"].append(wall(OURS))
        rows["naive"].append(wall(NAIVE))
    for name, times in rows.items():
        print(f"{name:6s} process start -> first SVI step: " + ", ".join(f"{t:.1f} s" for t in times))
    print(f"ratio naive / ours (best of {repeats}): {min(rows['naive']) / min(rows['ours']):.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
