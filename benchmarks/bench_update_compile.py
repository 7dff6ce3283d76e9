"""Compile seconds of the scanned SVI update and of a guide's draws, in fresh processes (persistent cache off).

  update:  ``inference.fit``'s compiled chunk (500 steps, `inference.fit.compiled_fit`) for the digits MLP 64-64 and
           the tiny ResNet-18 of the architecture tests (width 1/32, one block per stage, 8x8x3 inputs; 38 sites),
           mean-field guide, lowered and compiled (``jax.jit(...).lower(...).compile()``)
  draws:   every site's standard normal draw of that ResNet-18 in one program: one ``jax.random.normal`` per site
           against `models.prng.normal_draws` (one threefry hash for all sites; the same numbers, checked here)

Run: python benchmarks/bench_update_compile.py [repeats]   (median of interleaved fresh processes)
"""

import json
import os
import statistics
import subprocess
import sys

COMMON = """
import json, math, sys, time
import jax, jax.numpy as jnp, numpy as np, optax, importlib
import inference, zoo
from models.prng import flat_key, normal_draws
fit = importlib.import_module("inference.fit")
rng = np.random.default_rng(0)
images = rng.uniform(size=(12, 8, 8, 3)).astype(np.float32)
labels = (np.arange(12) % 3).astype(np.int32)
def entry(name):
    if name == "mlp":
        return zoo.get("mlp", data="digits", hidden=(64, 64))
    return zoo.get("resnet18", data=(images[:8], labels[:8], images[8:], labels[8:]), width_multiplier=1 / 32,
                   blocks=(1, 1, 1, 1))
"""

UPDATE = COMMON + """
e = entry(sys.argv[1])
xb, yb = e.train.x[:4], e.train.y[:4]
fns = fit.compiled_fit(e.model, inference.mean_field(e.model), optax.adam(1e-3), len(e.train.x), 1, xb, yb, 500, False)
state = fns.init(jax.random.PRNGKey(0), xb, yb, None)
idx, steps = np.zeros((500, 4), np.int32), np.full(500, -1, np.int32)
lowered = fns.chunk.lower(state, jax.random.PRNGKey(1), jnp.asarray(e.train.x), jnp.asarray(e.train.y), idx, steps,
                          np.float32(0), np.float32(1))
t0 = time.perf_counter()
lowered.compile()
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""

DRAWS = COMMON + """
e = entry("resnet18")
shapes = [tuple(s) for s in e.model.site_shapes(images[:1]).values()]
def per_site(key):
    return [jax.random.normal(k, s) for k, s in zip(jax.random.split(flat_key(key), len(shapes)), shapes)]
def one_hash(key):
    return normal_draws(list(jax.random.split(flat_key(key), len(shapes))), shapes)
fn = {"per_site": per_site, "one_hash": one_hash}[sys.argv[1]]
lowered = jax.jit(fn).lower(jax.random.PRNGKey(0))
t0 = time.perf_counter()
compiled = lowered.compile()
seconds = time.perf_counter() - t0
reference = jax.jit(per_site)(jax.random.PRNGKey(0))
same = all(np.array_equal(a, b) for a, b in zip(compiled(jax.random.PRNGKey(0)), reference))
print(json.dumps({"seconds": seconds, "sites": len(shapes), "equal": same}))
"""


def run(code: str, arg: str) -> dict:
    env = {**os.environ, "BNN_ZOO_COMPILATION_CACHE": "off"}
    out = subprocess.run([sys.executable, "-c", code, arg], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(repeats: int = 3):
    rows = {("update", "mlp"): [], ("update", "resnet18"): [], ("draws", "per_site"): [], ("draws", "one_hash"): []}
    for _ in range(repeats):  # interleaved, so that the machine's load hits every row alike
        for (kind, arg), results in rows.items():
            results.append(run(UPDATE if kind == "update" else DRAWS, arg))
    for (kind, arg), results in rows.items():
        extra = (f" ({results[0]['sites']} sites; equal draws: {all(r['equal'] for r in results)})"
                 if kind == "draws" else "")
        print(f"{kind} {arg}: compile {statistics.median(r['seconds'] for r in results):.2f} s (median of {repeats}; "
              + ", ".join(f"{r['seconds']:.2f}" for r in results) + ")" + extra)
    per_site = statistics.median(r["seconds"] for r in rows["draws", "per_site"])
    one_hash = statistics.median(r["seconds"] for r in rows["draws", "one_hash"])
    print(f"ratio draws per site / one hash: {per_site / one_hash:.2f}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
