"""Steps per second of bnn-zoo's SVI steps on whatever device JAX sees (made for one GPU), in one process.

Networks: the MLP 784-400-400-10 at batch 128 and 1,024 (N = 10,000 synthetic examples) and a WRN-16-4 (the
zoo's ``wide_resnet`` entry, depth 16, widen factor 4, 32x32x3 random inputs, 10 classes, N = 2,048) at batch
128; speed does not depend on the values. Rows, each ``inference.fit``'s own compiled chunk
(`compare_peers.zoo_runner`, default optimiser) unless said otherwise:

  deterministic       the point estimate (``point_estimate``): the network's loss and the prior, Adam
  MF                  mean field, one weight draw per minibatch
  MF local            mean field with ``per_example_noise="local"``: pre-activations drawn per example and unit
                      on dense layers (on the WRN only its last layer is dense: its convolutions keep one draw)
  2-tied              the k-tied guide with k = 2
  deterministic B*4   the point estimate on batch 4B, the work a rank-1 step with K = 4 shares
  rank-1 K=4          the rank-1 network (``rank1_mlp`` / ``wide_resnet(num_components=4)``) with
                      ``rank1_mixture(family="normal")``
  plain JAX det.      (MLP only) `compare_peers`' hand-written deterministic step, the floor

Every row is compiled and run once first (the rows of one network compile in parallel threads), then timed in
interleaved rounds: a round runs one chunk of every row in turn. Times are wall clock (on a GPU the process's
CPU time measures the host's waiting, not the work); a ratio is the median over rounds of the per-round ratio
to the deterministic row, min-max in brackets (rank-1 also to deterministic B*4). A row that the library refuses
is skipped with its reason printed; a network whose build would start after `--budget` seconds is skipped. The
table (markdown) and a CSV are written into `--out` after every network, so a run cut short keeps what it
measured.

Run: python benchmarks/gpu_steps.py --out DIR [--rounds 3] [--budget 120] [--tiny] [--only WRN]
(`--tiny`: a small MLP, and a WRN-10-1 on 8x8 images with the deterministic and rank-1 rows only, short chunks:
a check of the script on a CPU.)
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
import warnings
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import optax

import compare_peers
import inference
import zoo
from models.errors import ZooError

COLUMNS = ("network", "batch", "row", "ms_per_step", "ms_min", "ms_max", "steps_per_s", "ratio", "ratio_min",
           "ratio_max", "ratio_to")


@dataclass(frozen=True)
class Bench:
    """One network and batch size: `entry` / `rank1` the zoo entries' names and options, x of `shape`, `n`
    examples, chunks of `chunk` steps."""
    label: str
    entry: str
    options: dict
    shape: tuple
    n: int
    batch: int
    chunk: int
    plain_sizes: tuple | None = None  # MLP layer sizes for the plain-JAX row (None: no such row)
    rows: tuple | None = None  # the rows measured (None: all)


def benches(tiny: bool) -> list[Bench]:
    """The networks measured: the module docstring's, or with `tiny` their small stand-ins."""
    if tiny:
        mlp = dict(hidden=(64, 64))
        return [Bench("MLP 784-64-64-10", "mlp", mlp, (784,), 1_000, 32, 10, (784, 64, 64, 10)),
                Bench("WRN-10-1 8x8x3", "wide_resnet", dict(depth=10, k=1), (8, 8, 3), 64, 8, 4,
                      rows=("deterministic", "rank-1 K=4"))]
    mlp = dict(hidden=(400, 400))
    return [Bench("MLP 784-400-400-10", "mlp", mlp, (784,), 10_000, 128, 200, (784, 400, 400, 10)),
            Bench("MLP 784-400-400-10", "mlp", mlp, (784,), 10_000, 1024, 100, (784, 400, 400, 10)),
            Bench("WRN-16-4 32x32x3", "wide_resnet", dict(depth=16, k=4), (32, 32, 3), 2_048, 128, 20)]


def build_rows(bench: Bench) -> tuple[dict, list[str]]:
    """({row: Runner} not yet compiled, [skip messages]) for `bench`; a row whose build raises the library's
    `ZooError` (a refusal) is skipped with its message."""
    x, y, data = compare_peers.synthetic_data(0, bench.n, bench.shape, 10)
    xd, yd = jnp.asarray(x), jnp.asarray(y)
    net = zoo.get(bench.entry, data=data, **bench.options)
    rank1_name = "rank1_mlp" if bench.entry == "mlp" else bench.entry
    rank1_options = bench.options if bench.entry == "mlp" else dict(bench.options, num_components=4)
    specs = {  # row: (entry builder, guide builder, batch, per_example_noise)
        "deterministic": (lambda: net, lambda e: inference.make_guide("point_estimate", e.model), 1, False),
        "MF": (lambda: net, lambda e: inference.mean_field(e.model), 1, False),
        "MF local": (lambda: net, lambda e: inference.mean_field(e.model), 1, "local"),
        "2-tied": (lambda: net, lambda e: inference.make_guide("k_tied", e.model, k=2), 1, False),
        "deterministic B*4": (lambda: net, lambda e: inference.make_guide("point_estimate", e.model), 4, False),
        "rank-1 K=4": (lambda: zoo.get(rank1_name, data=data, **rank1_options),
                       lambda e: inference.make_guide("rank1_mixture", e.model, family="normal"), 1, False),
    }
    rows, skipped = {}, []
    for row, (entry_of, guide_of, times, noise) in specs.items():
        if bench.rows is not None and row not in bench.rows:
            continue
        try:
            entry = entry_of()
            rows[row] = compare_peers.zoo_runner(entry, guide_of(entry), times * bench.batch, xd, yd, noise,
                                                 chunk_len=bench.chunk, warm=False)
        except ZooError as err:
            skipped.append(f"{bench.label} batch {bench.batch}: {row} skipped: {type(err).__name__}: {err}")
    if bench.plain_sizes is not None:
        chunk, state = compare_peers.plain_chunk(compare_peers.deterministic_loss,
                                                 compare_peers.init_weights(jax.random.PRNGKey(0),
                                                                            bench.plain_sizes), optax.adam(1e-3))
        rows["plain JAX det."] = compare_peers.Runner(chunk, state, xd, yd, bench.batch, chunk_len=bench.chunk,
                                                      warm=False)
    return rows, skipped


def table_rows(bench: Bench, times: dict) -> list[dict]:
    """One dict of `COLUMNS` per row of `times` ({row: [(wall ms, CPU ms) per round]}): wall ms per step
    (median, min, max over rounds), steps per second (1000 / median ms), the ratio to the deterministic row
    (rank-1 also to deterministic B*4, as a second line)."""
    out = []
    for row, ms in times.items():
        wall = [w for w, _ in ms]
        bases = ["deterministic"] + (["deterministic B*4"] if row == "rank-1 K=4" else [])
        for base in [b for b in bases if b in times and b != row] or [None]:
            ratio = compare_peers.ratio_summary(times, row, base, 0) if base else (None, None, None)
            out.append(dict(network=bench.label, batch=bench.batch, row=row,
                            ms_per_step=statistics.median(wall), ms_min=min(wall), ms_max=max(wall),
                            steps_per_s=1000 / statistics.median(wall), ratio=ratio[0], ratio_min=ratio[1],
                            ratio_max=ratio[2], ratio_to=base or ""))
    return out


def markdown(rows: list[dict], device: str, rounds: int) -> str:
    """The markdown table of `table_rows` output, headed by the device and the number of rounds."""
    lines = [f"Device: {device}; JAX {jax.__version__}; {rounds} interleaved rounds; wall-clock medians "
             "[min-max over rounds]", "",
             "| network | batch | row | ms / step | steps / s | ratio | to |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['ratio']:.2f} [{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]" if r["ratio_to"] else ""
        lines.append(f"| {r['network']} | {r['batch']} | {r['row']} | {r['ms_per_step']:.3f} "
                     f"[{r['ms_min']:.3f}-{r['ms_max']:.3f}] | {r['steps_per_s']:.1f} | {ratio} | "
                     f"{r['ratio_to']} |")
    return "\n".join(lines) + "\n"


def write(out: str, rows: list[dict], notes: list[str], device: str, rounds: int) -> None:
    """`out`/gpu_steps.md (the table and the notes) and `out`/gpu_steps.csv (`COLUMNS`)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "gpu_steps.md"), "w") as f:
        f.write(markdown(rows, device, rounds) + "".join(f"\n{n}" for n in notes) + "\n")
    with open(os.path.join(out, "gpu_steps.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def measure(bench: Bench, rounds: int, start: float) -> tuple[list[dict], list[str]]:
    """(`table_rows` of `bench`, [notes on skipped rows]): its rows built, compiled (`compare_peers.warm_up`)
    and timed in `rounds` interleaved rounds; progress printed with seconds since `start`."""
    title = f"{bench.label} batch {bench.batch}"

    def log(message):
        print(f"{title}: {message}", flush=True)

    t0 = time.perf_counter()
    log(f"building the rows at {t0 - start:.1f} s")
    runners, notes = build_rows(bench)
    log(f"{len(runners)} rows built in {time.perf_counter() - t0:.1f} s")
    for row, err in zip(list(runners), compare_peers.warm_up(list(runners.values()), log)):
        if err is not None:
            del runners[row]
            why = "skipped (the library refuses it)" if isinstance(err, ZooError) else "failed"
            notes.append(f"{title}: {row} {why}: {type(err).__name__}: {err}")
    for note in notes:
        print(note, flush=True)
    log(f"{len(runners)} rows ready in {time.perf_counter() - t0:.1f} s")
    times = {row: [] for row in runners}
    for _ in range(rounds):
        for row, run_chunk in runners.items():
            times[row].append(run_chunk())
    return table_rows(bench, times), notes


def main(argv=None):
    """The command line (module docstring): measure every network of `benches` within the budget, writing the
    table after each."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for gpu_steps.md and gpu_steps.csv")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5; 2 with --tiny)")
    p.add_argument("--budget", type=float, default=120.0,
                   help="seconds after which no further network is built (those are skipped, said so)")
    p.add_argument("--tiny", action="store_true", help="small networks and chunks: a check on a CPU")
    p.add_argument("--only", default=None,
                   help="measure only the networks whose label starts with this (e.g. 'WRN' or 'MLP')")
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 2 if args.tiny else 5
    warnings.simplefilter("ignore")  # timing fits of random labels: collapse and convergence warnings expected
    start = time.perf_counter()
    dev = jax.devices()[0]
    device = f"{dev.platform} {dev.device_kind} (x{jax.device_count()})"
    print(f"JAX {jax.__version__} on {device}", flush=True)
    rows, notes = [], []
    for bench in benches(args.tiny):
        if args.only is not None and not bench.label.startswith(args.only):
            continue
        if time.perf_counter() - start > args.budget:
            notes.append(f"{bench.label} batch {bench.batch}: skipped: the {args.budget:.0f} s budget was spent "
                         "before its build")
            print(notes[-1], flush=True)
            continue
        new_rows, new_notes = measure(bench, args.rounds, start)
        rows, notes = rows + new_rows, notes + new_notes
        write(args.out, rows, notes, device, args.rounds)
        print(markdown(new_rows, device, args.rounds), flush=True)
    print(f"total {time.perf_counter() - start:.1f} s; table in {args.out}", flush=True)


if __name__ == "__main__":
    main()
