"""One SVI step of bnn-zoo's guides against the same step written by hand and by NumPyro, in one process.

Network: MLP 784-400-400-10 (ReLU), softmax likelihood, N = 10,000 synthetic examples (speed does not depend
on the values), Adam. Every row is a jitted 200-step scanned chunk, compiled and run once before timing; a
round runs one chunk of every row, in turn, so that the shared machine's load hits the rows alike. Rows:

  deterministic    plain JAX: the network's cross-entropy and Adam (the least any method computes)
  hand-written MF  plain JAX mean field: w = loc + softplus(rho) * eps with one ``jax.random.normal`` per
                   site, the closed-form KL to N(0, 1), Adam (the floor for this estimator)
  NumPyro          ``AutoNormal`` + ``TraceMeanField_ELBO`` (closed-form KL) + ``svi.update`` in a scan
  zoo MF           ``inference.fit``'s compiled chunk with ``mean_field`` (one weight draw per minibatch)
  zoo MF local     the same with ``estimator="local"`` (pre-activations drawn per example and unit)
  zoo 2-tied       ``inference.fit`` with the 2-tied guide
  zoo 2-tied local the 2-tied guide without its scale cap (sd = U Vᵀ exactly) with ``estimator="local"``:
                   the k-tied local reparameterisation (output variance in O(k² (in + out)) per example, no
                   weight-sized draw)
  zoo rank-1 K=4   ``rank1_mlp`` with ``rank1_mixture(family="normal")``; its ratio is to the deterministic
                   step on the K-tiled batch (B * 4 examples), the work a rank-1 step shares with it

A ratio is the median over rounds of the per-round ratio of two rows' ms per step (min-max in brackets), in
this process's CPU time (the work a step does: on shared cores, other processes' load moves it far less than
the wall clock) and in wall-clock time.

Run: python benchmarks/compare_peers.py [--batch 128,1024] [--rounds 5]
"""

import argparse
import functools
import importlib
import statistics
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from numpyro.infer import SVI, TraceMeanField_ELBO
from numpyro.infer.autoguide import AutoNormal

import inference
import zoo
from inference import svi

SIZES = (784, 400, 400, 10)
N_DATA = 10_000
CHUNK = 200
inference_fit = importlib.import_module("inference.fit")  # the module (inference.fit is the function)


def synthetic_data(seed=0, n=N_DATA, shape=(SIZES[0],), classes=SIZES[-1]):
    """(x (n, *shape) float32 standard normal, y (n,) int32 uniform over `classes`) and a zoo data tuple
    (x, y, x_test, y_test) of them with 500 more examples as the test split."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n + 500, *shape)).astype(np.float32)
    y = rng.integers(0, classes, n + 500).astype(np.int32)
    return x[:n], y[:n], (x[:n], y[:n], x[n:], y[n:])


def forward(weights, x):
    """The MLP's logits: weights [(w (in, out), b (out,))] per layer, x (B, 784) -> (B, 10)."""
    for i, (w, b) in enumerate(weights):
        x = x @ w + b
        if i < len(weights) - 1:
            x = jax.nn.relu(x)
    return x


def init_weights(key, sizes=SIZES):
    """[(w, b)] of an MLP of layer `sizes` with Haiku's default scale (truncated normal, sd 1/sqrt(fan_in)),
    zero biases."""
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.truncated_normal(k, -2, 2, (m, n)) / np.sqrt(m), jnp.zeros(n))
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


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


class Deferred(NamedTuple):
    """A row's state still to be computed, as ``fn(*args)`` (fn a jitted function: `warm_up` compiles it with the
    other rows' in parallel)."""
    fn: object
    args: tuple


class Runner:
    """One row: a jitted chunk of `chunk_len` steps and its state (or a `Deferred` one); `__call__` runs one
    chunk and returns ms per step (wall clock, and this process's CPU time: the work done, which other processes'
    load on shared cores barely moves). Built (compiled, one warm-up chunk run) once, or with ``warm=False`` when
    `__call__` is first called (`warm_up` compiles several rows at once); every round then times one chunk of
    every row. Minibatch rows are drawn uniformly from x's N rows."""

    def __init__(self, chunk, state, x, y, batch, extra=(), chunk_len=CHUNK, warm=True):
        self.chunk, self.state, self.x, self.y, self.extra = chunk, state, x, y, extra
        self.rng, self.batch, self.calls, self.chunk_len = np.random.default_rng(0), batch, 0, chunk_len
        if warm:
            self()  # compile and warm up

    def inputs(self) -> tuple:
        """The next chunk's arguments: (state, keys (chunk_len, 2), x, y, idx (chunk_len, batch), *extra)."""
        if isinstance(self.state, Deferred):
            self.state = self.state.fn(*self.state.args)
        idx = self.rng.integers(0, self.x.shape[0], (self.chunk_len, self.batch)).astype(np.int32)
        self.calls += 1
        keys = jax.random.split(jax.random.PRNGKey(self.calls), self.chunk_len)
        return (self.state, keys, self.x, self.y, idx, *self.extra)

    def __call__(self):
        inputs = self.inputs()
        t0, c0 = time.perf_counter(), time.process_time()
        self.state = jax.block_until_ready(self.chunk(*inputs))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if getattr(self.state, "stopped", False):  # fit's chunk skips the steps after a non-finite loss
            raise RuntimeError("a zoo fit stopped on a non-finite loss: its time would not be a step's")
        return 1000 * wall / self.chunk_len, 1000 * cpu / self.chunk_len


def _attempt(step, arg):
    """(step(arg), None), or (None, the exception it raised)."""
    try:
        return step(arg), None
    except Exception as err:  # noqa: BLE001 - handed back to the caller, which reports it
        return None, err


def _compile_all(calls) -> list:
    """[(executable, None) or (None, exception)] for `calls` [(fn, args) or an exception]: each ``jax.jit(fn)``
    traced for its args one after the other (NumPyro's and Haiku's tracing state is global), then compiled from
    one thread each (XLA compiles in parallel on a machine with several cores)."""
    lowered = [(None, c) if isinstance(c, Exception) else _attempt(lambda c: jax.jit(c[0]).lower(*c[1]), c)
               for c in calls]
    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        return list(pool.map(lambda lo: lo if lo[1] is not None else _attempt(lambda lo: lo.compile(), lo[0]),
                             lowered))


def warm_up(runners, log=lambda message: None) -> list:
    """Compile every `Runner` in `runners` (built with ``warm=False``) ahead of time, its `Deferred` state's
    function first, then its chunk (`_compile_all`: traced in turn, compiled in parallel), and run one chunk;
    `log` gets a line after each of the two stages. Returns, per runner, None or the exception that tracing,
    compiling or running raised (a refusal found while tracing, an out-of-memory error...)."""
    t0 = time.perf_counter()
    errors = [None] * len(runners)
    deferred = [i for i, run in enumerate(runners) if isinstance(run.state, Deferred)]
    for i, (executable, err) in zip(deferred, _compile_all([(runners[i].state.fn, runners[i].state.args)
                                                            for i in deferred])):
        errors[i] = err if err is not None else _attempt(
            lambda run: setattr(run, "state", executable(*run.state.args)), runners[i])[1]
    log(f"initial states of {len(deferred)} rows compiled and computed in {time.perf_counter() - t0:.1f} s")
    calls = []
    for run, err in zip(runners, errors):
        if err is None:
            inputs, err = _attempt(lambda r: r.inputs(), run)
        calls.append(err if err is not None else (run.chunk, inputs))
    for i, (run, (executable, err)) in enumerate(zip(runners, _compile_all(calls))):
        if err is None:
            run.chunk = executable
            err = _attempt(lambda r: r(), run)[1]
        errors[i] = err
    log(f"chunks of {len(runners)} rows compiled and run once in {time.perf_counter() - t0:.1f} s in all")
    return errors


def zoo_runner(entry, guide, batch, x, y, estimator="standard", chunk_len=CHUNK, warm=True):
    """`inference.fit`'s own compiled chunk of `chunk_len` steps (`inference.svi.run_chunk`, default
    optimiser, n_data = len(x)) for `guide`, as a `Runner`: every step of it is a step of ``fit``."""
    optimizer = inference_fit.default_optimizer(10 * chunk_len)
    xb, yb = jnp.asarray(entry.train.x[:batch]), jnp.asarray(entry.train.y[:batch])
    settings = svi.compiled_settings(entry.model, guide, x.shape[0], 1, estimator)
    # fit's step 0 when no start is given (`inference.svi.initial_state`), deferred so that warm_up
    # compiles it with the other rows' in parallel
    state = Deferred(functools.partial(svi.initial_state, **settings),
                     (jax.random.PRNGKey(0), xb, yb, None, optimizer))
    steps = np.arange(chunk_len, dtype=np.int32)

    def chunk(state, keys, x, y, idx, *_):
        # fit's chunk takes one key and folds in the step number; the same steps every round (a fixed schedule)
        return svi.run_chunk(state, keys[0], x, y, idx, steps, np.float32(0), np.float32(1), optimizer,
                             **settings)[0]

    return Runner(chunk, state, x, y, batch, chunk_len=chunk_len, warm=warm)


def ratio_summary(times, row, base, i):
    """(median, min, max) over rounds of the per-round ratio ``times[row][r][i] / times[base][r][i]`` (i = 0:
    wall clock, 1: CPU time; times {row: [(wall ms, CPU ms) per round]})."""
    r = [a[i] / b[i] for a, b in zip(times[row], times[base])]
    return statistics.median(r), min(r), max(r)


def rows_for(batch, x, y, mlp, rank1):
    """{row: Runner} for one batch size."""
    xd, yd = jnp.asarray(x), jnp.asarray(y)
    adam = optax.adam(1e-3)
    key = jax.random.PRNGKey(0)
    mf = inference.mean_field(mlp.model)
    return {
        "deterministic": Runner(*plain_chunk(deterministic_loss, init_weights(key), adam), xd, yd, batch),
        "hand-written MF": Runner(*plain_chunk(mean_field_loss, mean_field_params(key), adam), xd, yd, batch),
        "NumPyro AutoNormal": Runner(*numpyro_chunk(mlp.model, adam, x[:batch], y[:batch]), xd, yd, batch),
        "zoo MF": zoo_runner(mlp, mf, batch, xd, yd),
        "zoo MF local": zoo_runner(mlp, mf, batch, xd, yd, estimator="local"),
        "zoo 2-tied": zoo_runner(mlp, inference.make_guide("k_tied", mlp.model, k=2), batch, xd, yd),
        "zoo 2-tied local": zoo_runner(mlp, inference.make_guide("k_tied", mlp.model, k=2, scale_cap=None), batch, xd,
                                       yd, estimator="local"),
        "deterministic B*4": Runner(*plain_chunk(deterministic_loss, init_weights(key), adam), xd, yd, 4 * batch),
        "zoo rank-1 K=4": zoo_runner(rank1, inference.make_guide("rank1_mixture", rank1.model, family="normal"),
                                     batch, xd, yd),
    }


RATIOS = [  # (row, baseline row)
    ("hand-written MF", "deterministic"), ("NumPyro AutoNormal", "deterministic"), ("zoo MF", "deterministic"),
    ("zoo MF local", "deterministic"), ("zoo 2-tied", "deterministic"), ("zoo 2-tied local", "deterministic"),
    ("zoo rank-1 K=4", "deterministic B*4"), ("NumPyro AutoNormal", "hand-written MF"), ("zoo MF", "hand-written MF"),
    ("zoo MF local", "zoo MF"), ("zoo 2-tied", "zoo MF"), ("zoo 2-tied local", "zoo MF"),
]


def report(batch, times, rounds):
    """Print ms per step and the ratios of `RATIOS`: medians of per-round ratios of CPU time [min-max], and of
    wall-clock time."""
    print(f"\nMLP 784-400-400-10, batch {batch}, {rounds} interleaved rounds of one 200-step chunk per row")
    print(f"{'row':22s} {'CPU ms/step':>12s} {'wall ms/step':>13s}   (medians)")
    for row, ms in times.items():
        print(f"{row:22s} {statistics.median(c for _, c in ms):12.2f} {statistics.median(w for w, _ in ms):13.2f}")
    print(f"{'ratio':40s} {'CPU time':>8s} {'min-max':>12s} {'wall':>6s} {'min-max':>12s}")
    for row, base in RATIOS:
        line = f"{row + ' / ' + base:40s}"
        for i in (1, 0):
            med, lo, hi = ratio_summary(times, row, base, i)
            line += f" {med:{8 if i else 6}.2f} [{lo:.2f}-{hi:.2f}]"
        print(line)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", default="128,1024")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    warnings.simplefilter("ignore")  # timing fits of random labels: collapse and convergence warnings expected
    x, y, data = synthetic_data()
    mlp = zoo.get("mlp", data=data, hidden=SIZES[1:-1])
    rank1 = zoo.get("rank1_mlp", data=data, hidden=SIZES[1:-1])
    print(f"JAX {jax.__version__} on {jax.devices()[0].device_kind}")
    for batch in (int(b) for b in args.batch.split(",")):
        rows = rows_for(batch, x, y, mlp, rank1)
        times = {row: [] for row in rows}
        for _ in range(args.rounds):
            for row, run_chunk in rows.items():
                times[row].append(run_chunk())
        report(batch, times, args.rounds)


if __name__ == "__main__":
    main()
