"""XLA's CPU optimisation level: compile cost against run cost, each level in a fresh process.

    python benchmarks/bench_xla_opt_level.py [--levels 0 1 default]

For every level, a child process (XLA_FLAGS=--xla_backend_optimization_level=L, persistent compilation cache
off) times, in CPU seconds, a first call (compile + run) and a second identical call (run only) of
(a) a 2,000-step mean-field fit of the digits MLP 64-64 and (b) NUTS (1 chain, 100 + 100 draws) on the
two-moons MLP 2-16-16-2 (600 points) started from a 500-step mean-field fit, and saves that fit's losses;
the parent prints the table and whether the losses equal the default level's bit for bit. The test suite runs at
the level that compiles cheapest without slowing the compiled code (tests/conftest.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, time
import numpy as np
import inference, zoo

def cpu(f):
    c = time.process_time(); f(); return time.process_time() - c

e = zoo.get("mlp", data="digits", hidden=(64, 64))
g = inference.mean_field(e.model)
fit = lambda seed: inference.fit(e.model, g, e.train, steps=2000, batch_size=128, progress=False, seed=seed)
out = {"fit_first": cpu(lambda: fit(0)), "fit_second": cpu(lambda: fit(1))}
m = zoo.get("mlp", data="two_moons", hidden=(16, 16), data_kwargs={"n": 600, "noise": 0.1})
post = inference.fit(m.model, inference.mean_field(m.model), m.train, steps=500, progress=False)
nuts = lambda seed: inference.nuts(m.model, m.train, init=post, num_chains=1, num_warmup=100, draws_per_chain=100,
                                   progress=False, seed=seed)
out.update(nuts_first=cpu(lambda: nuts(0)), nuts_second=cpu(lambda: nuts(1)))
np.save(sys.argv[1], post.losses)
print("RESULT " + json.dumps(out))
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", nargs="+", default=["0", "1", "default"])
    args = parser.parse_args(argv)
    print("load average before:", os.getloadavg(), flush=True)
    tmp = tempfile.mkdtemp()
    rows, losses = {}, {}
    for level in args.levels:
        flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_backend_optimization_level" not in f]
        if level != "default":
            flags.append(f"--xla_backend_optimization_level={level}")
        env = {**os.environ, "XLA_FLAGS": " ".join(flags), "BNN_ZOO_COMPILATION_CACHE": "off"}
        path = os.path.join(tmp, f"losses_{level}.npy")
        done = subprocess.run([sys.executable, "-W", "ignore", "-c", CHILD, path], env=env, capture_output=True,
                              text=True, check=True)
        rows[level] = json.loads(done.stdout.split("RESULT ", 1)[1])
        losses[level] = path
        print(f"level {level}: " + ", ".join(f"{k} {v:.1f} s" for k, v in rows[level].items()), flush=True)
    print("load average after:", os.getloadavg())
    if "default" in losses:
        import numpy as np

        ref = np.load(losses["default"])
        for level, path in losses.items():
            diff = float(np.max(np.abs(np.load(path) - ref)))
            print(f"level {level}: fit losses vs the default level: max |difference| {diff:.3g}")


if __name__ == "__main__":
    main()
