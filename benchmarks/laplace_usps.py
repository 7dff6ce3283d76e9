"""The Laplace posterior after a default point-estimate fit on real images (issue 43, item 1): USPS digits resized
to 28x28, the MLP 784-400-400-10 of the catalogue, ``inference.fit(model, point_estimate(model), train)`` with
every default, then ``inference.laplace(..., structure=S, predictive="glm")`` for each structure, scored on the
VALIDATION split (train perm[:3200], score perm[3200:4000]; `benchmarks/real_data.py` describes the split and the
preprocessing) with 100 draws: accuracy, NLL, ECE, and the seconds of the fit and of the Laplace step.

    python benchmarks/laplace_usps.py --data ../shared/data/usps5k.npz [--structures last_layer,kfac]
        [--predictives glm,mc] [--prior-structures layer,scalar] [--select evidence,validation,weight_scale] [--seed 0]
        [--split val|test]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import pandas as pd
from scipy import optimize, special

import evals
import inference
from evals import metrics
from real_data import build, load_usps  # benchmarks/ is on the path when run as a script


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--structures", default="last_layer,kfac")
    parser.add_argument("--predictives", default="glm")
    parser.add_argument("--prior-structures", default="layer")
    parser.add_argument("--select", default="evidence",
                        help="evidence,validation,weight_scale: how the prior precision is chosen; 'validation' "
                             "chooses it on the "
                             "first half of the scored images, and then every row is scored on the second half")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=("val", "test"), default="val")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    x_train, y_train, x_eval, y_eval = load_usps(args.data, args.split, 28)
    half = len(y_eval) // 2
    if "validation" in args.select:
        x_pick, y_pick, x_eval, y_eval = x_eval[:half], y_eval[:half], x_eval[half:], y_eval[half:]
    mean, sd = float(x_train.mean()), float(x_train.std())

    def standardise(x):
        return ((x - mean) / sd).astype(np.float32)

    entry, guide = build("mlp", "point_estimate", x_train, y_train, x_eval, y_eval, standardise)
    t0 = time.perf_counter()
    point = inference.fit(entry.model, guide, entry.train, seed=args.seed, progress=False)
    fit_s = time.perf_counter() - t0
    rows = [{"method": "point estimate", "fit_s": fit_s, "laplace_s": 0.0, "prior_precision": None,
             **evals.score(point, entry.test, num_samples=1, verbose=False).iloc[0][["accuracy", "nll", "ece"]]}]
    if "validation" in args.select:  # the baseline a practitioner would pick: one temperature on the same images
        rows.append(temperature_row(point, standardise(x_pick).reshape(half, -1), y_pick, entry.test, fit_s))
    for structure, predictive, prior, select in itertools.product(
            args.structures.split(","), args.predictives.split(","), args.prior_structures.split(","),
            args.select.split(",")):
        if select != "evidence" and prior != args.prior_structures.split(",")[0]:
            continue  # prior_structure only shapes the evidence's choice
        t1 = time.perf_counter()
        validation = (standardise(x_pick).reshape(half, -1), y_pick) if select == "validation" else None
        post = inference.laplace(entry.model, point, entry.train, structure=structure, predictive=predictive,
                                 prior_structure=prior, validation=validation,
                                 prior_precision="weight_scale" if select == "weight_scale" else None)
        lap_s = time.perf_counter() - t1
        scores = evals.score(post, entry.test, num_samples=100, verbose=False).iloc[0]
        how = {"validation": "delta by validation", "weight_scale": "delta by the weights' scale"}
        rows.append({"method": f"laplace {structure} {predictive} " + how.get(select, f"evidence per {prior}"),
                     "fit_s": fit_s,
                     "laplace_s": lap_s, "prior_precision": " ".join(f"{d:.3g}" for d in post.prior_precision),
                     **scores[["accuracy", "nll", "ece"]]})
        print(pd.DataFrame(rows).to_string(float_format=lambda v: f"{v:.4f}"), flush=True)
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False)
    return table


def temperature_row(point, x_pick, y_pick, test, fit_s) -> dict:
    """Temperature scaling of the point estimate (Guo et al. 2017): logits / T with T minimising the NLL of
    (x_pick, y_pick), scored on `test` (accuracy, NLL, ECE)."""
    t0 = time.perf_counter()
    theta = point.median()
    pick = np.asarray(point.model.apply(theta, x_pick), np.float64)
    logits = np.asarray(point.model.apply(theta, test.x), np.float64)

    def nll(log_t, z, y):
        return -np.mean(special.log_softmax(z / np.exp(log_t), axis=1)[np.arange(len(y)), y])

    log_t = optimize.minimize_scalar(nll, bounds=(-3, 3), method="bounded", args=(pick, y_pick)).x
    probs = special.softmax(logits / np.exp(log_t), axis=1)
    return {"method": f"point estimate + temperature (T = {np.exp(log_t):.2f})", "fit_s": fit_s,
            "laplace_s": time.perf_counter() - t0, "prior_precision": None,
            "accuracy": metrics.accuracy(probs, test.y), "nll": nll(log_t, logits, test.y),
            "ece": metrics.ece(probs, test.y)}


if __name__ == "__main__":
    main()
