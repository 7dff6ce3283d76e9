"""Multi-host data-parallel SVI on one machine: 2 processes (CPU, 1 device each) against 1 process.

Launches two worker processes that each call ``jax.distributed.initialize(coordinator_address=
"127.0.0.1:<free port>", num_processes=2, process_id=i)`` (CPU collectives through gloo) and then
``inference.fit(..., mesh=Mesh(np.array(jax.devices()), ("data",)))``: one global mesh of 2 devices, one per
process, each minibatch split over them, the gradient summed across the processes by the compiler. Every
process loads the same training data and runs the same call with the same seed (so it draws the same global
minibatch rows). Each worker's fit is interrupted halfway (KeyboardInterrupt from a callback, in both processes
at the same step) after saving its state to its own checkpoint folder, then resumed from it. A third process fits the same model on one device without a mesh. The script prints the
largest absolute differences of the losses and of every constrained guide parameter between each worker and
the one-device fit, and exits non-zero unless they are within float tolerance (--tol, relative to the values'
size) and the two workers agree bit for bit. Run:

    python benchmarks/multihost_fit.py [--steps 200] [--batch-size 32] [--guide mean_field|k_tied] [--tol 1e-4]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port nothing listens on now (the coordinator's)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CHUNK = 25  # steps per compiled chunk (a fit is interrupted at the end of a chunk)


class InterruptAt:
    """A `fit` callback raising KeyboardInterrupt (as Ctrl-C would) after the chunk that reaches step `step`."""

    def __init__(self, step: int):
        self.step = step

    def on_chunk(self, run) -> None:
        if run.done >= self.step:
            raise KeyboardInterrupt


def fit_here(args, out: Path, process_id: int | None, port: int | None) -> None:
    """Fit in this process and save (losses, constrained params) to `out`: with `process_id` one worker of the
    2-process mesh (coordinator at 127.0.0.1:`port`), else one device without a mesh."""
    import jax

    jax.config.update("jax_platforms", "cpu")
    mesh = None
    if process_id is not None:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id,
                                   initialization_timeout=120)
    import numpy as np
    from jax.sharding import Mesh

    import inference
    import zoo
    from inference.fit_state import saved_step

    if process_id is not None:
        assert jax.process_count() == 2 and jax.device_count() == 2 and jax.local_device_count() == 1
        mesh = Mesh(np.array(jax.devices()), ("data",))
    entry = zoo.get("mlp", data="two_moons", hidden=(16, 16), data_kwargs={"n": 512, "noise": 0.1})
    guide = getattr(inference, args.guide)(entry.model)
    settings = dict(steps=args.steps, batch_size=args.batch_size, chunk_size=CHUNK, seed=args.seed, progress=False,
                    mesh=mesh)
    resumed_from = -1
    t0 = time.perf_counter()
    if process_id is None:
        post = inference.fit(entry.model, guide, entry.train, **settings)
    else:  # every process holds the whole (replicated) state: each saves its own copy
        folder = out.parent / f"checkpoint{process_id}"
        try:
            inference.fit(entry.model, guide, entry.train, checkpoint_dir=folder, callbacks=[InterruptAt(args.steps // 2)],
                          **settings)
        except KeyboardInterrupt:
            pass
        resumed_from = saved_step(folder)
        post = inference.fit(entry.model, guide, entry.train, checkpoint_dir=folder, resume=True, **settings)
    seconds = time.perf_counter() - t0
    np.savez(out, losses=post.losses, seconds=seconds, resumed_from=resumed_from, **{f"param:{k}": v for k, v in post.params.items()})


def compare(reference: dict, other: dict, tol: float) -> tuple[dict, bool]:
    """{name: max |difference|} of losses and params between two saved fits, and whether every difference is
    within `tol` times the reference's largest |value| (at least 1)."""
    import numpy as np

    diffs, ok = {}, True
    for name in reference:
        if name in ("seconds", "resumed_from"):
            continue
        d = float(np.max(np.abs(reference[name] - other[name])))
        diffs[name] = d
        ok &= d <= tol * max(1.0, float(np.max(np.abs(reference[name]))))
    return diffs, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--guide", default="mean_field", choices=["mean_field", "k_tied"])
    parser.add_argument("--tol", type=float, default=1e-4)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)  # internal: a worker's id
    parser.add_argument("--single", action="store_true", help=argparse.SUPPRESS)  # internal: the 1-device fit
    parser.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None or args.single:
        fit_here(args, Path(args.out), args.worker, args.port)
        return 0

    import numpy as np

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    common = [sys.executable, __file__, "--steps", str(args.steps), "--batch-size", str(args.batch_size),
              "--seed", str(args.seed), "--guide", args.guide]
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        outs = {name: Path(tmp) / f"{name}.npz" for name in ("process0", "process1", "one_device")}
        procs = [subprocess.Popen(common + ["--worker", str(i), "--port", str(port), "--out", str(outs[f"process{i}"])],
                                  env=env) for i in range(2)]
        single = subprocess.run(common + ["--single", "--out", str(outs["one_device"])], env=env)
        codes = [p.wait(timeout=600) for p in procs]
        if single.returncode or any(codes):
            print(f"a process failed: workers exited {codes}, the one-device fit {single.returncode}")
            return 1
        fits = {name: dict(np.load(path)) for name, path in outs.items()}
    print(f"{args.guide}, {args.steps} steps (the 2-process fits resumed from their checkpoints at steps "
          f"{int(fits['process0']['resumed_from'])}, {int(fits['process1']['resumed_from'])}), batch {args.batch_size} "
          f"({args.batch_size // 2} rows per process), "
          f"{len([k for k in fits['one_device'] if k.startswith('param:')])} parameter arrays; fit seconds: "
          + ", ".join(f"{name} {float(fit['seconds']):.1f}" for name, fit in fits.items()))
    ok = True
    for worker in ("process0", "process1"):
        diffs, good = compare(fits["one_device"], fits[worker], args.tol)
        ok &= good
        params = max(v for k, v in diffs.items() if k.startswith("param:"))
        print(f"{worker} vs one device: max |loss difference| {diffs['losses']:.3g} (losses up to "
              f"{float(np.max(np.abs(fits['one_device']['losses']))):.4g}), max |param difference| {params:.3g}"
              f"  {'OK' if good else 'FAIL'}")
    same, _ = compare(fits["process0"], fits["process1"], 0.0)
    workers_equal = all(v == 0.0 for v in same.values()) and int(fits["process0"]["resumed_from"]) > 0
    ok &= workers_equal
    print(f"process0 vs process1: max |difference| {max(same.values()):.3g}  {'OK' if workers_equal else 'FAIL'}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
