"""One SVI step of bnn-zoo's guides against the same step written by hand and by NumPyro, in one process.

Network: MLP 784-400-400-10 (ReLU), softmax likelihood, N = 10,000 synthetic examples (speed does not depend
on the values), Adam. Every step runs in 200-step scanned chunks; the first chunk (the compile) is not timed.
Rows, interleaved in every round (so that the shared machine's load hits them alike):

  deterministic    plain JAX: the network's cross-entropy and Adam (the least any method computes)
  hand-written MF  plain JAX mean field: w = loc + softplus(rho) * eps with one ``jax.random.normal`` per
                   site, the closed-form KL to N(0, 1), Adam (the floor for this estimator)
  NumPyro          ``AutoNormal`` + ``TraceMeanField_ELBO`` (closed-form KL) + ``svi.update`` in a scan
  zoo MF           ``inference.fit`` with ``mean_field`` (one weight draw per minibatch)
  zoo MF local     the same with ``per_example_noise="local"`` (pre-activations drawn per example and unit)
  zoo 2-tied       ``inference.fit`` with the 2-tied guide
  zoo rank-1 K=4   ``rank1_mlp`` with ``rank1_mixture(family="normal")``; its ratio is to the deterministic
                   step on the K-tiled batch (B * 4 examples), the work a rank-1 step shares with it

Each round gives each row's ms per step; a row's ratio is the median over rounds of its per-round ratio to
the deterministic step (min-max over rounds in brackets).

Run: python benchmarks/compare_peers.py [--batch 128,1024] [--rounds 3] [--steps 600]
"""

import argparse
import statistics
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from numpyro.infer import SVI, TraceMeanField_ELBO
from numpyro.infer.autoguide import AutoNormal

import inference
import zoo
from inference.step_time import fit_step_ms

SIZES = (784, 400, 400, 10)
N_DATA = 10_000
CHUNK = 200


def synthetic_data(seed=0):
    """(x (N, 784) float32, y (N,) int32) and a zoo data tuple (train, test) of them."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N_DATA + 500, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], N_DATA + 500).astype(np.int32)
    return x[:N_DATA], y[:N_DATA], (x[:N_DATA], y[:N_DATA], x[N_DATA:], y[N_DATA:])


def forward(weights, x):
    """The MLP's logits: weights [(w (in, out), b (out,))] per layer, x (B, 784) -> (B, 10)."""
    for i, (w, b) in enumerate(weights):
        x = x @ w + b
        if i < len(weights) - 1:
            x = jax.nn.relu(x)
    return x


def init_weights(key):
    """[(w, b)] with Haiku's default scale (truncated normal, sd 1/sqrt(fan_in)), zero biases."""
    keys = jax.random.split(key, len(SIZES) - 1)
    return [(jax.random.truncated_normal(k, -2, 2, (m, n)) / np.sqrt(m), jnp.zeros(n))
            for k, m, n in zip(keys, SIZES[:-1], SIZES[1:])]


def deterministic_loss(params, key, x, y):
    """Summed-over-data cross-entropy estimate (N/B * sum over the minibatch)."""
    del key
    return N_DATA / x.shape[0] * optax.softmax_cross_entropy_with_integer_labels(forward(params, x), y).sum()


def mean_field_params(key):
    """{"loc": [(w, b)], "rho": [(w, b)]}: q = N(loc, softplus(rho)²), softplus(rho) = 0.01 at the start."""
    loc = init_weights(key)
    rho = jax.tree.map(lambda a: jnp.full(a.shape, np.log(np.expm1(0.01)), jnp.float32), loc)
    return {"loc": loc, "rho": rho}


def mean_field_loss(params, key, x, y):
    """Negative ELBO, one weight draw per minibatch: N/B * cross-entropy + KL(N(loc, s²) || N(0, 1))."""
    leaves, tree = jax.tree.flatten(params["loc"])
    scales = [jax.nn.softplus(r) for r in jax.tree.leaves(params["rho"])]
    eps = [jax.random.normal(k, a.shape) for k, a in zip(jax.random.split(key, len(leaves)), leaves)]
    weights = jax.tree.unflatten(tree, [m + s * e for m, s, e in zip(leaves, scales, eps)])
    nll = N_DATA / x.shape[0] * optax.softmax_cross_entropy_with_integer_labels(forward(weights, x), y).sum()
    kl = sum(jnp.sum(0.5 * (s ** 2 + m ** 2 - 1.0) - jnp.log(s)) for m, s in zip(leaves, scales))
    return nll + kl


def plain_chunk(loss, params, optimizer):
    """A jitted 200-step scan of Adam on `loss`: (state, keys (200, 2), x, y, idx (200, B)) -> state."""

    @jax.jit
    def chunk(state, keys, x, y, idx):
        def body(state, inputs):
            key, rows = inputs
            p, opt_state = state
            grads = jax.grad(loss)(p, key, jnp.take(x, rows, axis=0), jnp.take(y, rows, axis=0))
            updates, opt_state = optimizer.update(grads, opt_state, p)
            return (optax.apply_updates(p, updates), opt_state), None

        return lax.scan(body, state, (keys, idx))[0]

    return chunk, (params, optimizer.init(params))


def numpyro_chunk(model, optimizer, xb, yb):
    """NumPyro's own loop: ``AutoNormal`` + ``TraceMeanField_ELBO``, ``svi.update`` scanned over 200 steps."""
    svi = SVI(model, AutoNormal(model), optimizer, TraceMeanField_ELBO())
    state = svi.init(jax.random.PRNGKey(0), xb, yb, N_DATA)

    @jax.jit
    def chunk(state, keys, x, y, idx):
        del keys  # the SVI state carries its own key

        def body(s, rows):
            return svi.update(s, jnp.take(x, rows, axis=0), jnp.take(y, rows, axis=0), N_DATA)[0], None

        return lax.scan(body, state, idx)[0]

    return chunk, state


def chunk_step_ms(chunk, state, x, y, batch, steps):
    """ms per step of `chunk` over (steps - 200) steps, after one untimed chunk (the compile)."""
    rng = np.random.default_rng(0)
    chunks = steps // CHUNK
    idx = rng.integers(0, N_DATA, (chunks, CHUNK, batch)).astype(np.int32)
    keys = jax.random.split(jax.random.PRNGKey(1), chunks * CHUNK).reshape(chunks, CHUNK, -1)
    state = jax.block_until_ready(chunk(state, keys[0], x, y, idx[0]))
    t0 = time.perf_counter()
    for c in range(1, chunks):
        state = chunk(state, keys[c], x, y, idx[c])
    jax.block_until_ready(state)
    return 1000 * (time.perf_counter() - t0) / ((chunks - 1) * CHUNK)


def rows_for(batch, steps, x, y, mlp, rank1):
    """{row: () -> ms per step} for one batch size."""
    xd, yd = jnp.asarray(x), jnp.asarray(y)
    adam = optax.adam(1e-3)

    def plain(loss, params, b):
        return lambda: chunk_step_ms(*plain_chunk(loss, params, adam), xd, yd, b, steps)

    def ours(entry, guide, **kw):
        return lambda: fit_step_ms(entry.model, guide, entry.train, steps=steps, batch_size=batch, chunk_size=CHUNK,
                                   **kw)

    key = jax.random.PRNGKey(0)
    return {
        "deterministic": plain(deterministic_loss, init_weights(key), batch),
        "hand-written MF": plain(mean_field_loss, mean_field_params(key), batch),
        "NumPyro AutoNormal": lambda: chunk_step_ms(*numpyro_chunk(mlp.model, adam, x[:batch], y[:batch]), xd, yd,
                                                    batch, steps),
        "zoo MF": ours(mlp, inference.mean_field(mlp.model)),
        "zoo MF local": ours(mlp, inference.mean_field(mlp.model), per_example_noise="local"),
        "zoo 2-tied": ours(mlp, inference.make_guide("k_tied", mlp.model, k=2)),
        "deterministic B*4": plain(deterministic_loss, init_weights(key), 4 * batch),
        "zoo rank-1 K=4": ours(rank1, inference.make_guide("rank1_mixture", rank1.model, family="normal")),
    }


RATIOS = [  # (row, baseline row)
    ("hand-written MF", "deterministic"), ("NumPyro AutoNormal", "deterministic"), ("zoo MF", "deterministic"),
    ("zoo MF local", "deterministic"), ("zoo 2-tied", "deterministic"), ("zoo rank-1 K=4", "deterministic B*4"),
    ("NumPyro AutoNormal", "hand-written MF"), ("zoo MF", "hand-written MF"), ("zoo MF local", "zoo MF"),
    ("zoo 2-tied", "zoo MF"),
]


def report(batch, times, rounds):
    """Print ms per step and the ratios of `RATIOS` (median of per-round ratios, min-max)."""
    print(f"\nMLP 784-400-400-10, batch {batch}, {rounds} interleaved rounds (median [min-max])")
    print(f"{'row':22s} {'ms/step':>8s}")
    for row, ms in times.items():
        print(f"{row:22s} {statistics.median(ms):8.2f}")
    print(f"{'ratio':40s} {'median':>7s}  {'min-max':>11s}")
    for row, base in RATIOS:
        r = [a / b for a, b in zip(times[row], times[base])]
        print(f"{row + ' / ' + base:40s} {statistics.median(r):7.2f}  [{min(r):.2f}-{max(r):.2f}]")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", default="128,1024")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=600, help="steps per measurement; the first 200 are not timed")
    args = p.parse_args()
    warnings.simplefilter("ignore")  # timing fits of random labels: collapse and convergence warnings expected
    x, y, data = synthetic_data()
    mlp = zoo.get("mlp", data=data, hidden=SIZES[1:-1])
    rank1 = zoo.get("rank1_mlp", data=data, hidden=SIZES[1:-1])
    print(f"JAX {jax.__version__} on {jax.devices()[0].device_kind}")
    for batch in (int(b) for b in args.batch.split(",")):
        rows = rows_for(batch, args.steps, x, y, mlp, rank1)
        times = {row: [] for row in rows}
        for _ in range(args.rounds):
            for row, measure in rows.items():
                times[row].append(measure())
        report(batch, times, args.rounds)


if __name__ == "__main__":
    main()
