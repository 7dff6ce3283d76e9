"""Time digits-C: corrupting the digits test set with all 19 types x 5 severities, and scoring a
predictor with 10 draws on every set (target: under 60 s together on 2 CPU cores).

    python benchmarks/bench_corruptions.py [--steps 1000] [--draws 10]

The predictor is the zoo's digits MLP fitted by mean-field SVI (``zoo.get("mlp", data="digits")``,
``inference.fit``) when those import; otherwise a NumPy softmax regression with 10 bootstrap
members. The output says which one ran. Fitting is not timed.
"""

import argparse
import time
from types import SimpleNamespace

import numpy as np

from evals import ood
from evals.corruptions import CORRUPTIONS, corrupted


def raw_digits():
    """(train x, train y, test x, test y) of the digits split, raw pixels in [0, 1], flat (N, 64)."""
    try:
        from zoo.data import digits

        train, test = digits(standardise=False)
        return train.x, train.y, test.x, test.y
    except ImportError:
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
        order = np.random.default_rng(0).permutation(len(x))
        x, y = (x[order] / 16).astype(np.float32), y[order]
        cut = int(0.75 * len(x))
        return x[:cut], y[:cut], x[cut:], y[cut:]


def zoo_predictor(steps, draws):
    """('zoo digits MLP 64-64, mean-field SVI', predictor, preprocess) or None if the zoo is missing."""
    try:
        import inference
        import zoo
        from zoo.data.embedded import digits_standardiser
    except ImportError:
        return None
    entry = zoo.get("mlp", data="digits")
    posterior = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=steps,
                              batch_size=128, kl_warmup=steps // 5, progress=False)
    mu, sd = digits_standardiser(raw_digits()[0])
    label = f"zoo digits MLP 64-64, mean-field SVI ({steps} steps), {draws} draws"
    return label, lambda x: posterior.predict(x, num_samples=draws, seed=0), lambda x: (x - mu) / sd


def softmax_members(x, y, members, steps=300, lr=0.5, seed=0):
    """Softmax regressions (weights (members, 65, 10)) fitted by gradient descent on bootstrap resamples."""
    rng = np.random.default_rng(seed)
    xb = np.concatenate([x, np.ones((len(x), 1), np.float32)], axis=1)
    weights = np.zeros((members, xb.shape[1], 10))
    for m in range(members):
        idx = rng.integers(0, len(x), len(x))
        onehot = np.eye(10)[y[idx]]
        for _ in range(steps):
            logits = xb[idx] @ weights[m]
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            weights[m] -= lr * xb[idx].T @ (p - onehot) / len(idx)
    return weights


def numpy_predictor(draws):
    """('NumPy softmax regression, N bootstrap members', predictor, None)."""
    xtr, ytr, _, _ = raw_digits()
    weights = softmax_members(xtr, ytr, draws)

    def predict(x):
        logits = np.concatenate([x, np.ones((len(x), 1), np.float32)], axis=1) @ weights
        p = np.exp(logits - logits.max(-1, keepdims=True))
        return p / p.sum(-1, keepdims=True)

    return f"NumPy softmax regression, {draws} bootstrap members", predict, None


def main(argv=None):
    """Fit (untimed), then time corrupting and scoring; prints the seconds and the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=10)
    args = parser.parse_args(argv)
    _, _, xte, yte = raw_digits()
    label, predict, preprocess = zoo_predictor(args.steps, args.draws) or numpy_predictor(args.draws)
    print(f"predictor: {label}")

    start = time.perf_counter()
    sets = list(corrupted(SimpleNamespace(x=xte, y=yte, image_shape=(8, 8, 1))))
    corrupt_s = time.perf_counter() - start
    start = time.perf_counter()
    results = ood.score_sets({"model": predict}, sets, clean=(xte, yte), preprocess=preprocess)
    score_s = time.perf_counter() - start
    print(f"digits test set: {len(yte)} images 8x8x1, {len(CORRUPTIONS)} types x 5 severities = {len(sets)} sets")
    print(f"corrupt: {corrupt_s:.1f} s   score ({args.draws} draws): {score_s:.1f} s   total: {corrupt_s + score_s:.1f} s")
    print(ood.format_table(ood.summary_table(results, reference=None)))
    print(ood.by_severity(results.table)[["accuracy", "nll", "ece"]].round(3).to_string())


if __name__ == "__main__":
    main()
