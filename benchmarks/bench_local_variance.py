"""Variance of the ELBO gradient over the estimator's noise on one fixed minibatch: the weight draw (one per
minibatch) against the local estimator (``estimator="local"``): the local reparameterisation trick on
dense layers (Kingma et al., 2015, sec. 2.3 and Table 1: its gradient variance is that of an independent weight
draw per example, below one draw per batch) and Flipout on convolutions (Wen et al., 2018).

A mean-field network is fitted to the digits (`--steps` steps): ``--net mlp``, an MLP 64-400-400-10;
``--net lenet5``, LeNet-5 (`zoo.get("lenet5")`: two convolutions, three dense layers). At its parameters,
`zoo.experiments.analysis.elbo_gradients.elbo_gradients(same_batch=True)` gives `--draws` gradients on one minibatch of 128, each with its
own noise. Printed per parameter group (convolution kernels, dense weights, biases; locations and scales):
the summed variance over draws of the gradient's entries, and its ratio to the weight draw's.

Run: python benchmarks/bench_local_variance.py [--net mlp|lenet5] [--steps 1000] [--draws 64]
"""

import argparse
import warnings

import numpy as np

import inference
import zoo
from zoo.experiments.analysis.elbo_gradients import elbo_gradients

ESTIMATORS = {"weight draw": "standard", "local": "local"}
NETS = {"mlp": ("digits MLP 64-400-400-10", lambda: zoo.get("mlp", data="digits", hidden=(400, 400))),
        "lenet5": ("digits LeNet-5", lambda: zoo.get("lenet5", data="digits"))}


def group_of(name, grad) -> str:
    """'conv w loc', 'dense w scale', 'b loc'...: a gradient's group from its parameter name and its array
    (draws, ...) (a kernel of 3 dimensions or more is a convolution's)."""
    param = name.rpartition("_")[2]
    if "/w_" not in name:
        return f"b {param}"
    return f"{'conv' if grad.ndim >= 4 else 'dense'} w {param}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--net", choices=sorted(NETS), default="mlp")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--draws", type=int, default=64)
    args = p.parse_args()
    title, make = NETS[args.net]
    entry = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=args.steps,
                             progress=False)
    grads = {label: elbo_gradients(post, entry.train, num_batches=args.draws, same_batch=True,
                                   estimator=mode)
             for label, mode in ESTIMATORS.items()}
    print(f"{title}, mean field after {args.steps} steps, one minibatch of 128, {args.draws} draws")
    print(f"{'group':14s} " + " ".join(f"{label:>26s}" for label in ESTIMATORS)
          + "   (summed variance; ratio to weight draw)")
    base_grads = grads["weight draw"]
    for group in sorted({group_of(k, g) for k, g in base_grads.items()}):
        total = {label: sum(float(np.var(g, axis=0).sum()) for k, g in grads[label].items()
                            if group_of(k, np.asarray(base_grads[k])) == group)
                 for label in ESTIMATORS}
        base = total["weight draw"]
        print(f"{group:14s} " + " ".join(f"{total[label]:14.4g} ({total[label] / base:7.3f}x)" for label in ESTIMATORS))


if __name__ == "__main__":
    main()
