"""`zoo run` end to end with a per-stage breakdown of wall time and XLA compiles.

    python benchmarks/bench_zoo_run.py [--size main|quick|full] [--out DIR] [--names N] [--workers 1]

Runs ``zoo run`` in this process (the persistent compilation cache as the `zoo` command sets it: use
``XDG_CACHE_HOME=/tmp/empty-N`` or ``BNN_ZOO_COMPILATION_CACHE=/tmp/empty-N`` for a cold run) and prints, for
every progress line of the job (each digits row, NUTS, two moons, digits-C), the seconds since the previous
line, the backend compiles in that stage (compiled or read back from the persistent cache) and their
seconds, then the compiled functions by count. Prints a JSON line with the totals last. Times are wall
clock of a shared machine: read them with the load average (printed before and after). The breakdown needs
the job in this one process, so it runs with ``--workers 1`` (the parts one after the other); ``--workers 2``
times the parallel job as `zoo run` runs it, and then counts only this process's compiles.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

T0 = time.perf_counter()

from jax import monitoring  # noqa: E402

EVENTS = []  # (stage, fun_name, seconds)
STAGE = ["start"]


def _listen(event, seconds, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        EVENTS.append((STAGE[0], kwargs.get("fun_name", "?"), seconds))


monitoring.register_event_duration_secs_listener(_listen)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="main", choices=("main", "quick", "full"))
    parser.add_argument("--out", default="/tmp/bench-zoo-run")
    parser.add_argument("--names", type=int, default=40, help="how many compiled function names to list")
    parser.add_argument("--workers", type=int, default=1, help="zoo run's --workers (1: the per-stage breakdown)")
    args = parser.parse_args(argv)
    print("load average before:", os.getloadavg(), flush=True)

    import zoo.experiments.run
    from zoo import cli

    stages = []  # (label, seconds, compiles, compile seconds)
    last = [time.perf_counter(), 0]
    say = zoo.experiments.run._say

    def close_stage():
        now = time.perf_counter()
        ev = EVENTS[last[1]:]
        stages.append((STAGE[0], now - last[0], len(ev), sum(s for _, _, s in ev)))
        last[:] = [now, len(EVENTS)]

    def timed_say(msg, enabled):
        close_stage()
        STAGE[0] = msg.strip()[:70]
        say(msg, enabled)

    zoo.experiments.run._say = timed_say
    argv = ["run", "--out", args.out, "--workers", str(args.workers)] + (
        [] if args.size == "main" else [f"--{args.size}"])
    status = cli.main(argv)
    close_stage()
    print("\nload average after:", os.getloadavg())
    print(f"\n{'stage':72s} {'s':>7s} {'compiles':>8s} {'compile s':>9s}")
    for label, sec, n, cs in stages:
        print(f"{label:72s} {sec:7.1f} {n:8d} {cs:9.1f}")
    names = collections.Counter()
    secs = collections.Counter()
    for _, name, s in EVENTS:
        names[name] += 1
        secs[name] += s
    print(f"\n{'compiled function':60s} {'count':>5s} {'s':>7s}")
    for name, _ in secs.most_common(args.names):
        print(f"{name[:60]:60s} {names[name]:5d} {secs[name]:7.1f}")
    print(json.dumps({"status": status, "seconds": time.perf_counter() - T0, "compiles": len(EVENTS),
                      "compile_seconds": sum(s for _, _, s in EVENTS), "size": args.size}))
    return status


if __name__ == "__main__":
    sys.exit(main())
