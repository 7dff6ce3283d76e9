"""Bit-identity of the core across a refactor: fits, predictions and NUTS draws for every guide and estimator.

Run once before a change to the core with ``--save BEFORE.npz`` and once after with ``--compare BEFORE.npz``: the
second run prints, for every case (guide x estimator, NUTS), whether its losses, fitted parameters and predictive
probabilities are bit-identical to the first, and exits 1 when any differs. Cases a guide refuses (an estimator it
has no rule for) are recorded as refused and must still be refused after.

Tiny on purpose (a 2-layer MLP on 64 rows of 4 features, 30 steps, 4 draws on 8 rows; NUTS 2 chains of 20 + 20):
it checks that the numbers are the same, not that they are good.

    python benchmarks/core_identity.py --save /tmp/core-before.npz
    python benchmarks/core_identity.py --compare /tmp/core-before.npz
"""

from __future__ import annotations

import argparse
import sys

import numpyro

numpyro.set_host_device_count(2)

import jax  # noqa: E402
import numpy as np  # noqa: E402

import inference  # noqa: E402
import models  # noqa: E402
from models.networks.mlp import mlp  # noqa: E402
from models.rank1 import rank1_likelihood, rank1_mlp, rank1_prior  # noqa: E402

ESTIMATORS = ("standard", "per_example", "local")


def data() -> tuple[np.ndarray, np.ndarray]:
    """64 rows of 4 features and their labels of 3 classes (a fixed draw)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int32) + (x[:, 2] > 1).astype(np.int32)
    return x, y


def leaves(tree) -> dict[str, np.ndarray]:
    """{path: array} of a pytree's leaves."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in flat}


def cases():
    """Yield (name, {array name: array}) for every guide x estimator, then NUTS."""
    x, y = data()
    plain = models.bnn(mlp((8,), 3), feature_shape=x.shape[1:])
    rank1 = models.bnn(rank1_mlp([8], 3, 2), rank1_prior("normal"),
                       rank1_likelihood(models.likelihoods.categorical(), 2), feature_shape=x.shape[1:])
    for name in sorted(inference.GUIDES):
        model = rank1 if name in ("rank1_mixture", "batch_ensemble") else plain
        for estimator in ESTIMATORS:
            case = f"{name}/{estimator}"
            try:
                guide = inference.make_guide(name, model, **inference.registry.example_options(name))
                posterior = inference.fit(model, guide, (x, y), steps=30, batch_size=16, seed=1, progress=False,
                                          estimator=estimator)
            except (inference.InputError, AttributeError) as error:  # an AttributeError: a refusal without its name
                print(f"refused {case}: {type(error).__name__}: {str(error).splitlines()[0][:100]}")
                yield case, {"refused": np.array(True)}
                continue
            arrays = {f"params{k}": v for k, v in leaves(posterior.params).items()}
            arrays["losses"] = np.asarray(posterior.losses)
            arrays["probs"] = np.asarray(posterior.predict(x[:8], num_samples=4, seed=2))
            yield case, arrays
    posterior = inference.nuts(plain, (x[:32], y[:32]), num_warmup=20, draws_per_chain=20, num_chains=2, seed=3,
                               progress=False)
    arrays = {f"samples{k}": v for k, v in leaves(posterior.samples).items()}
    arrays["probs"] = np.asarray(posterior.predict(x[:8], num_samples=4, seed=2))
    yield "nuts", arrays


def flatten(results: dict) -> dict[str, np.ndarray]:
    """{"case|array": array} for np.savez."""
    return {f"{case}|{name}": value for case, arrays in results.items() for name, value in arrays.items()}


def main(argv=None) -> int:
    """--save PATH writes every case's arrays; --compare PATH checks them bit for bit and prints the count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", help="write the arrays to this .npz")
    group.add_argument("--compare", help="compare with the arrays in this .npz")
    args = parser.parse_args(argv)
    results = {}
    for case, arrays in cases():
        results[case] = arrays
        print(f"ran {case}", flush=True)
    now = flatten(results)
    if args.save:
        np.savez(args.save, **now)
        print(f"saved {len(results)} cases ({len(now)} arrays) to {args.save}")
        return 0
    before = dict(np.load(args.compare))
    before_cases = sorted({key.split("|")[0] for key in before})
    same, differ = [], []
    for case in before_cases:
        keys = sorted(k for k in before if k.split("|")[0] == case)
        now_keys = sorted(k for k in now if k.split("|")[0] == case)
        ok = keys == now_keys and all(np.array_equal(before[k], now[k]) for k in keys)
        (same if ok else differ).append(case)
        if not ok:
            missing = sorted(set(keys) ^ set(now_keys))
            unequal = [k for k in set(keys) & set(now_keys) if not np.array_equal(before[k], now[k])]
            print(f"DIFFERS {case}: arrays missing on one side {missing[:4]}, unequal {sorted(unequal)[:4]}")
    print(f"bit-identical: {len(same)} of {len(before_cases)} cases; differ: {differ or 'none'}")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
