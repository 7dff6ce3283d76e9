"""Per-step SVI time of every guide on the same network and batch, as a ratio to mean field.

k-tied paper Table 4 (TF, 2 dense layers): mean field 7.17 ms, 2-tied 6.14 ms per step (ratio 0.86).
Each guide runs `inference.fit` (one jitted, scanned chunk per 200 steps); the first chunk, which holds
the compile, is excluded: per step = (fit_s - first_step_s) / (steps - chunk). Rounds are interleaved
and the median per guide is reported, so load on this shared machine hits all guides alike.

Run: python benchmarks/bench_guide_steps.py [--hidden 400,400] [--batch 128] [--rounds 3]
"""

import argparse
import statistics

import inference
import zoo
from zoo.experiments.analysis.step_time import fit_step_ms

GUIDES = [
    ("mean_field", "mlp", "mean_field", {}),
    ("point_estimate", "mlp", "point_estimate", {}),
    ("1-tied", "mlp", "k_tied", {"k": 1}),
    ("2-tied", "mlp", "k_tied", {"k": 2}),
    ("3-tied", "mlp", "k_tied", {"k": 3}),
    ("zero_mean", "mlp", "zero_mean", {"variance_sites": ["mlp/~/linear_1/w"]}),
    ("rank1_normal K=4", "rank1_mlp", "rank1_mixture", {"family": "normal"}),
]


def step_ms(entry, guide_name, guide_kwargs, batch, steps=1200, chunk=200):
    guide = inference.make_guide(guide_name, entry.model, **guide_kwargs)
    return fit_step_ms(entry.model, guide, entry.train, steps=steps, batch_size=batch, chunk_size=chunk)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", default="400,400")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    hidden = tuple(int(h) for h in args.hidden.split(","))
    entries = {name: zoo.get(name, data="digits", hidden=hidden) for name in ("mlp", "rank1_mlp")}
    times = {label: [] for label, *_ in GUIDES}
    for _ in range(args.rounds):
        for label, entry_name, guide_name, kwargs in GUIDES:
            times[label].append(step_ms(entries[entry_name], guide_name, kwargs, args.batch))
    base = statistics.median(times["mean_field"])
    print(f"digits MLP 64-{'-'.join(map(str, hidden))}-10, batch {args.batch}, median of {args.rounds} interleaved rounds")
    print(f"{'guide':18s} {'ms/step':>8s} {'ratio to mean field':>20s}")
    for label in times:
        m = statistics.median(times[label])
        print(f"{label:18s} {m:8.3f} {m / base:20.2f}")


if __name__ == "__main__":
    main()
