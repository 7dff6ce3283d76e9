"""Variance of the ELBO gradient over the estimator's noise on one fixed minibatch: the weight draw (one per
minibatch) against the local reparameterisation trick (Kingma et al., 2015, sec. 2.3 and Table 1: the local
estimator's gradient variance is that of an independent weight draw per example, below one draw per batch).

A mean-field MLP 64-400-400-10 is fitted to the digits (`--steps` steps); at its parameters,
`inference.elbo_gradients(same_batch=True)` gives `--draws` gradients on one minibatch of 128, each with its
own noise. Printed per parameter group: the summed variance over draws of the gradient's entries, and its
ratio to the weight draw's.

Run: python benchmarks/bench_local_variance.py [--steps 1000] [--draws 64]
"""

import argparse
import warnings

import numpy as np

import inference
import zoo
from inference.elbo_gradients import elbo_gradients

ESTIMATORS = {"weight draw": False, "local": "local"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--draws", type=int, default=64)
    args = p.parse_args()
    entry = zoo.get("mlp", data="digits", hidden=(400, 400))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=args.steps,
                             progress=False)
    grads = {label: elbo_gradients(post, entry.train, num_batches=args.draws, same_batch=True,
                                             per_example_noise=mode)
             for label, mode in ESTIMATORS.items()}
    groups = {f"{leaf} {param}": (lambda k, leaf=leaf, param=param: f"/{leaf}_" in k and k.endswith(param))
              for leaf in ("w", "b") for param in ("loc", "scale")}
    print(f"digits MLP 64-400-400-10, mean field after {args.steps} steps, one minibatch of 128, {args.draws} draws")
    print(f"{'group':8s} " + " ".join(f"{label:>26s}" for label in ESTIMATORS) + "   (summed variance; ratio to weight draw)")
    for group, keep in groups.items():
        total = {label: sum(float(np.var(g, axis=0).sum()) for k, g in grads[label].items() if keep(k))
                 for label in ESTIMATORS}
        base = total["weight draw"]
        print(f"{group:8s} " + " ".join(f"{total[label]:14.4g} ({total[label] / base:7.3f}x)" for label in ESTIMATORS))


if __name__ == "__main__":
    main()
