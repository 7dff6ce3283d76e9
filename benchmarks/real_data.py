"""Do the library's defaults give posteriors that beat the point estimate on real images? The table of
docs/defaults.md: USPS handwritten digits (5,000 real 16x16 images; resized to 28x28 by default), the MLP
784-400-400-10 and LeNet-5 of the catalogue built on the user's arrays (`zoo.get(name, data=(x_train, y_train,
x_test, y_test))`), every guide fitted by ``inference.fit(entry.model, guide, entry.train)`` with nothing but
the defaults, scored on the clean test images (accuracy, NLL, ECE; 100 draws) and on the zoo's corruption
suite (19 types x 5 severities; cNLL / cA / cECE, `--corrupt-draws` (30) draws, on the first `--corrupt-images`
(200) test images of each set), mean +- standard error over seeds, and seconds (the fit, compile included, and the scoring).

    python benchmarks/real_data.py --data ../shared/data/usps5k.npz [--net mlp|lenet5|both] [--seeds 0,1,2]
        [--steps-mult 1,2,4] [--split val|test] [--size 28|16] [--guides point_estimate,mean_field,...]
        [--corrupt-images 200] [--corrupt-draws 30] [--fit-kwargs JSON] [--scale-cap C|none] [--out results.csv]

The split (fixed): ``perm = numpy.random.default_rng(0).permutation(5000)``; training images perm[:4000], test
perm[4000:]. ``--split val`` trains on perm[:3200] and scores on perm[3200:4000] (choose settings there, never on
the test images). Pixels are scaled to [0, 1], resized (bilinear, `scipy.ndimage.zoom`) and standardised by the
training images' mean and sd (one number each; corrupted images are corrupted in [0, 1] and standardised the
same way). ``--steps-mult m`` fits with ``steps = m x`` the default steps for these data
(`inference.fit.default_steps`). ``--fit-kwargs`` passes settings to every fit and ``--scale-cap`` the sigma cap to
mean field and k-tied (for trying a candidate default on the validation split; the table of docs/defaults.md
uses neither).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np
import pandas as pd
from scipy import ndimage

import evals
import inference
from inference.fit import default_steps
import zoo
from evals import ood

GUIDES = {"mlp": ("point_estimate", "mean_field", "k_tied", "low_rank", "rank1"),
          "lenet5": ("point_estimate", "mean_field", "k_tied")}  # LeNet-5 has no rank-1 form in the catalogue


def load_usps(path: str, split: str, size: int):
    """(x_train (N, size, size, 1), y_train, x_eval, y_eval) in [0, 1], by the fixed split of the module docstring."""
    data = np.load(path)
    imgs, labs = data["imgs"].astype(np.float32) / 254.0, data["labs"].astype(np.int32)
    if size != imgs.shape[1]:
        imgs = np.clip(ndimage.zoom(imgs, (1, size / imgs.shape[1], size / imgs.shape[2]), order=1), 0.0, 1.0)
    perm = np.random.default_rng(0).permutation(len(imgs))
    train, held = (perm[:3200], perm[3200:4000]) if split == "val" else (perm[:4000], perm[4000:])
    return imgs[train][..., None], labs[train], imgs[held][..., None], labs[held]


def build(net: str, guide: str, x_train, y_train, x_eval, y_eval, standardise, cap_kwargs=None):
    """(entry, guide object) for network `net` ("mlp": 784-400-400-10 on flat rows; "lenet5") and guide name;
    `cap_kwargs`: {"scale_cap": c} for mean field and k-tied (None: their default)."""
    flat = net == "mlp"
    rows = (lambda a: a.reshape(len(a), -1)) if flat else (lambda a: a)
    data = (rows(standardise(x_train)), y_train, rows(standardise(x_eval)), y_eval)
    if guide == "rank1":
        entry = zoo.get("rank1_mlp", data=data, hidden=(400, 400), num_components=4)
        return entry, inference.rank1_mixture.rank1_mixture(entry.model)
    entry = zoo.get(net, data=data, **({"hidden": (400, 400)} if flat else {}))
    cap = dict(cap_kwargs or {})
    make = {"point_estimate": inference.point_estimate.point_estimate, "mean_field": lambda m: inference.mean_field(m, **cap),
            "k_tied": lambda m: inference.k_tied.k_tied(m, k=2, **cap), "low_rank": inference.joint_gaussian.low_rank}[guide]
    return entry, make(entry.model)


def run_one(net, guide, seed, mult, arrays, args, fit_kwargs):
    """One row: fit with the defaults (times `mult` steps), score clean and corrupted."""
    x_train, y_train, x_eval, y_eval = arrays
    mean, sd = float(x_train.mean()), float(x_train.std())

    def standardise(x):
        return ((x - mean) / sd).astype(np.float32)

    entry, g = build(net, guide, x_train, y_train, x_eval, y_eval, standardise, args.cap_kwargs)
    kwargs = dict(fit_kwargs)
    if mult != 1:
        kwargs["steps"] = mult * default_steps(len(y_train), **{k: v for k, v in kwargs.items()
                                                                          if k == "batch_size"})
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        post = inference.fit(entry.model, g, entry.train, seed=seed, progress=False, **kwargs)
    fit_s = time.perf_counter() - t0
    clean = evals.score(post, entry.test, num_samples=100, verbose=False).iloc[0]
    t1 = time.perf_counter()
    n = min(args.corrupt_images, len(y_eval))
    test_images = type("Images", (), {"x": x_eval[:n], "y": y_eval[:n]})
    shape = x_eval.shape[1:]
    pre = (lambda x: standardise(x).reshape(len(x), -1)) if net == "mlp" else standardise
    # a few sets per call: LeNet-5's activations for 30 draws x 9,500 corrupted images would take about 13 GB
    res = ood.score({guide: post}, test_images, num_samples=args.corrupt_draws, preprocess=pre, include_clean=False,
                    image_shape=shape, max_rows=1000)
    corrupted = res.table.groupby("severity")[["nll", "accuracy", "ece"]].mean().mean()
    info = post.info
    return {"net": net, "guide": guide, "seed": seed, "steps_mult": mult, "steps": len(post.losses),
            "accuracy": clean["accuracy"], "nll": clean["nll"], "ece": clean["ece"],
            "cnll": corrupted["nll"], "cacc": corrupted["accuracy"], "cece": corrupted["ece"],
            "fit_s": fit_s, "score_s": time.perf_counter() - t1, "converged": info.converged,
            "collapsed": info.collapsed, "temperature": info.temperature,
            "warnings": ";".join(sorted({w.category.__name__ for w in record}))}


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean +- standard error over seeds per (net, steps_mult, guide)."""
    cols = ["accuracy", "nll", "ece", "cnll", "cece", "fit_s", "score_s"]
    out = []
    for key, g in rows.groupby(["net", "steps_mult", "guide"], sort=False):
        row = dict(zip(["net", "steps_mult", "guide"], key), seeds=len(g))
        for c in cols:
            v = g[c].to_numpy(float)
            se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
            row[c] = f"{v.mean():.3f}" + (f" ± {se:.3f}" if len(v) > 1 else "")
        row["collapsed"] = int(g["collapsed"].fillna(False).sum())
        out.append(row)
    return pd.DataFrame(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="path of usps5k.npz (imgs (5000, 16, 16) uint8, labs (5000,))")
    p.add_argument("--net", default="mlp", choices=["mlp", "lenet5", "both"])
    p.add_argument("--seeds", default="0")
    p.add_argument("--steps-mult", default="1")
    p.add_argument("--split", default="test", choices=["val", "test"])
    p.add_argument("--size", type=int, default=28, choices=[28, 16])
    p.add_argument("--guides", default=None, help="comma-separated subset of the network's guides")
    p.add_argument("--corrupt-images", type=int, default=200, help="test images per corrupted set")
    p.add_argument("--corrupt-draws", type=int, default=30, help="posterior draws on every corrupted set")
    p.add_argument("--fit-kwargs", default="{}", help="JSON of fit arguments (candidates on --split val only)")
    p.add_argument("--scale-cap", default=None, help="mean field's and k-tied's scale_cap c, or 'none' (candidates "
                   "on --split val only; default: the library's)")
    p.add_argument("--out", default=None, help="CSV of every row")
    args = p.parse_args(argv)
    fit_kwargs = json.loads(args.fit_kwargs)
    args.cap_kwargs = (None if args.scale_cap is None else
                       {"scale_cap": None if args.scale_cap.lower() == "none" else float(args.scale_cap)})
    if (fit_kwargs or args.cap_kwargs) and args.split == "test":
        p.error("--fit-kwargs / --scale-cap: settings are tried on --split val only; the test table uses the defaults")
    arrays = load_usps(args.data, args.split, args.size)
    nets = ["mlp", "lenet5"] if args.net == "both" else [args.net]
    rows = []
    for net in nets:
        guides = GUIDES[net] if args.guides is None else [g for g in args.guides.split(",") if g in GUIDES[net]]
        for mult in [int(m) for m in args.steps_mult.split(",")]:
            for seed in [int(s) for s in args.seeds.split(",")]:
                for guide in guides:
                    row = run_one(net, guide, seed, mult, arrays, args, fit_kwargs)
                    rows.append(row)
                    print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                          flush=True)
                    if args.out:
                        pd.DataFrame(rows).to_csv(args.out, index=False)
    table = summarise(pd.DataFrame(rows))
    print(f"\nUSPS {args.size}x{args.size}, split {args.split}, fit kwargs {fit_kwargs or 'none (defaults)'}; "
          f"corruptions on the first {args.corrupt_images} evaluation images, {args.corrupt_draws} draws; clean 100 draws")
    print(table.to_markdown(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
