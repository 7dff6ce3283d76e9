"""Compile seconds of the scanned SVI update, and compile seconds and run time of a guide's draws, before and
after `base.prng`'s draw rule (persistent compilation cache off).

  update:  ``inference.fit``'s compiled chunk (500 steps, `inference.svi.run_chunk`) for the digits MLP 64-64 and
           the tiny ResNet-18 of the architecture tests (width 1/32, one block per stage, 8x8x3 inputs; 38 sites),
           mean-field guide, lowered and compiled (``jax.jit(...).lower(...).compile()``), in a fresh process each
  draws:   every site's standard normal draw of a network in one program, three ways, in one process (each
           compiled once, then timed in a 200-step scan, interleaved rounds): one ``jax.random.normal`` per site
           (per_site); `base.prng.normal_draws` as it was before (before: every site in ONE hash, JAX's own
           threefry with a key per value); `base.prng.normal_draws` now (now: the small sites so, each
           large site alone by `jax.random.normal`). All three give the same numbers (checked).
           Networks: the tiny ResNet-18 (38 small sites) and the MLP 784-400-400-10 (two weights of 160k+ values).

"before" is the library with `normal_draws` put back as it was for the run: ``own_hash_from`` above every draw
(`BEFORE` below).

Run: python benchmarks/bench_update_compile.py [repeats]   (medians of interleaved fresh processes / rounds)
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
from functools import partial
from base.prng import flat_key, normal_draws
fit = importlib.import_module("inference.fit")
from inference import svi
site_guide = importlib.import_module("inference.site_guide")
BEFORE = partial(normal_draws, own_hash_from=2 ** 32)  # normal_draws as it was: every draw in one hash

rng = np.random.default_rng(0)
images = rng.uniform(size=(12, 8, 8, 3)).astype(np.float32)
labels = (np.arange(12) % 3).astype(np.int32)
def entry(name):
    if name == "mlp":
        return zoo.get("mlp", data="digits", hidden=(64, 64))
    if name == "mlp784":
        x, y = rng.normal(size=(20, 784)).astype(np.float32), (np.arange(20) % 10).astype(np.int32)
        return zoo.get("mlp", data=(x[:16], y[:16], x[16:], y[16:]), hidden=(400, 400))
    return zoo.get("resnet18", data=(images[:8], labels[:8], images[8:], labels[8:]), width_multiplier=1 / 32,
                   blocks=(1, 1, 1, 1))
"""

UPDATE = COMMON + """
if sys.argv[2] == "before":
    site_guide.normal_draws = BEFORE
e = entry(sys.argv[1])
xb, yb = e.train.x[:4], e.train.y[:4]
guide = inference.mean_field(e.model)
settings = svi.compiled_settings(e.model, guide, len(e.train.x))
optimizer = inference.optimizers.adam(learning_rate=1e-3)
state = svi.initial_state(jax.random.PRNGKey(0), xb, yb, None, optimizer, **settings)
idx, steps = np.zeros((500, 4), np.int32), np.full(500, -1, np.int32)
lowered = svi.run_chunk.lower(state, jax.random.PRNGKey(1), jnp.asarray(e.train.x), jnp.asarray(e.train.y),
                              idx, steps, np.float32(0), np.float32(1), optimizer, **settings)
t0 = time.perf_counter()
lowered.compile()
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""

DRAWS = COMMON + """
e = entry(sys.argv[1])
x1 = e.train.x[:1] if sys.argv[1] == "mlp784" else images[:1]
shapes = [tuple(s) for s in e.model.site_shapes(x1).values()]
def keys_of(key):
    return list(jax.random.split(flat_key(key), len(shapes)))
def per_site(key):
    return [jax.random.normal(k, s) for k, s in zip(keys_of(key), shapes)]
def old(key):
    return BEFORE(keys_of(key), shapes)
def now(key):
    return normal_draws(keys_of(key), shapes)
def scanned(fn):  # the draws of 200 steps, each consumed (summed) so that none is optimised away
    return jax.jit(lambda keys: jax.lax.scan(lambda c, k: (c + sum(jnp.sum(d) for d in fn(k)), None), 0.0, keys)[0])
keys = jax.random.split(jax.random.PRNGKey(1), 200)
out, compiled, reference = {}, {}, None
for name, fn in {"per_site": per_site, "before": old, "now": now}.items():
    lowered = jax.jit(fn).lower(jax.random.PRNGKey(0))
    t0 = time.perf_counter()
    draw = lowered.compile()
    seconds = time.perf_counter() - t0
    reference = draw(jax.random.PRNGKey(0)) if reference is None else reference  # per_site's, compiled first
    out[name] = {"seconds": seconds, "ms": [], "sites": len(shapes),
                 "equal": all(np.array_equal(a, b) for a, b in zip(draw(jax.random.PRNGKey(0)), reference))}
    compiled[name] = scanned(fn).lower(keys).compile()
    compiled[name](keys).block_until_ready()
for _ in range(5):
    for name, fn in compiled.items():
        t0 = time.perf_counter()
        fn(keys).block_until_ready()
        out[name]["ms"].append(1000 * (time.perf_counter() - t0) / 200)
print(json.dumps(out))
"""


def run(code: str, *args: str) -> dict:
    env = {**os.environ, "BNN_ZOO_COMPILATION_CACHE": "off"}
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(repeats: int = 3):
    updates = {(net, variant): [] for net in ("mlp", "resnet18") for variant in ("before", "now")}
    draws = {net: [] for net in ("resnet18", "mlp784")}
    for _ in range(repeats):  # interleaved, so that the machine's load hits every row alike
        for (net, variant), results in updates.items():
            results.append(run(UPDATE, net, variant)["seconds"])
        for net, results in draws.items():
            results.append(run(DRAWS, net))
    for (net, variant), seconds in updates.items():
        print(f"update {net:8s} {variant:6s}: compile {statistics.median(seconds):.2f} s (median of {repeats}; "
              + ", ".join(f"{t:.2f}" for t in seconds) + ")")
    for net, results in draws.items():
        print(f"draws {net} ({results[0]['per_site']['sites']} sites), medians of {repeats} processes:")
        for variant in ("per_site", "before", "now"):
            rows = [r[variant] for r in results]
            compile_s = statistics.median(r["seconds"] for r in rows)
            ms = statistics.median(statistics.median(r["ms"]) for r in rows)
            print(f"  {variant:8s} compile {compile_s:5.2f} s   {ms:7.3f} ms per draw in a scan   "
                  f"equal to per_site: {all(r['equal'] for r in rows)}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
