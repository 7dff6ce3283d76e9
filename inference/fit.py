"""`fit`: stochastic variational inference with minibatches, KL warm-up and a scanned, jitted update.

Pure pieces underneath (blackjax style): `init_state` and `make_chunk` build the state and the scanned
update, `run_steps` runs the chunks and stops at the first non-finite step, `svi_posterior` builds the
result; `fit` is the thin front end (validation, minibatch indices, progress bar, NaN stop).
Minibatch indices are drawn on the host with a seeded NumPy generator (fixed batch size, last partial
batch dropped, reshuffled every epoch) and passed in, never drawn by NumPyro's plate (measured on 2 CPU
cores: plate subsampling, a Fisher-Yates ``lax.scan``, cost 436-496 us/step vs 76.5 us/step with indices
passed in, about 6x). The whole chunk of steps is one ``lax.scan`` inside one ``jax.jit``; the training
data are jit arguments, and the jitted initialisation and update are cached by structure
(`compiled_fit`), so a fit compiles once and a second fit of the same structure not at all.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import optax
from numpyro import handlers
from numpyro.distributions import biject_to

from inference import data_args, validation
from inference.elbo import annealed_elbo_loss
from inference.posterior import Posterior
from inference.run_info import FitInfo
from models.bridge import BNN, STATE_SITE
from models import structure
from models.errors import ZooError
from inference.batches import minibatch_blocks


class NonFiniteLossError(ZooError, FloatingPointError):
    """Training hit a NaN/inf loss or gradient. ``.posterior`` holds the last finite state, ``.step`` the bad step."""

    def __init__(self, message, posterior, step):
        super().__init__(message)
        self.posterior = posterior
        self.step = step


class SVIState(NamedTuple):
    """params: unconstrained guide parameters; opt_state: the optimiser's; mutable: the model's mutable
    sites (batch-norm state); stopped: a non-finite step was seen."""

    params: dict
    opt_state: object
    mutable: dict
    stopped: jnp.ndarray


def guide_params(guide, rng_key, x, y, n_data) -> tuple[dict, dict]:
    """(unconstrained params {name: array}, constraints {name: constraint or None}) of `guide`'s parameters,
    traceable (fit runs it inside its jitted initialisation).

    The guide runs once with zeros in place of its draws, so the graph holds only the parameter
    initialisers (no random draws, no network forward pass). x (B, ...), y (B,): a minibatch.
    """

    def zeros_for_draws(site):
        return jnp.zeros(site["fn"].shape()) if site["type"] == "sample" and not site["is_observed"] else None

    seeded = handlers.substitute(handlers.seed(guide, rng_key), substitute_fn=zeros_for_draws)
    params, constraints = {}, {}
    # NumPyro validates distribution arguments that are concrete (here: the initial values, constants of
    # the trace) eagerly, one small compile per check and shape; the initialisers need no such check
    with numpyro.validation_enabled(False):
        trace = handlers.trace(seeded).get_trace(x, y, n_data)
    for name, site in trace.items():
        if site["type"] == "param":
            c = site["kwargs"].get("constraint")
            constraints[name] = c
            params[name] = biject_to(c).inv(site["value"]) if c is not None else site["value"]
    return params, constraints


def guide_param_init(guide, rng_key, x, y, n_data):
    """Initial guide parameters and model state: (unconstrained params {name: array},
    constraints {name: constraint}, mutable {site: value} of the model's mutable sites) (`fit` does the
    same inside its cached, jitted initialisation)."""
    guide.setup(x)
    constraints = {}

    def init(key, xb, yb):
        params, found = guide_params(guide, key, xb, yb, n_data)
        constraints.update(found)
        return params

    params = jax.jit(init)(rng_key, x, y)
    return params, constraints, initial_mutable(guide.model, guide, rng_key, x, y, n_data)


def initial_mutable(model, guide, rng_key, x, y, n_data) -> dict:
    """The model's mutable sites before training: a `BNN`'s network state from the bridge; other models
    are traced once (replayed against the guide)."""
    if isinstance(model, BNN):
        return {STATE_SITE: {"state": model.initial_state(x)}} if model.is_stateful(x) else {}
    guide_trace = handlers.trace(handlers.seed(guide, rng_key)).get_trace(x, y, n_data)
    model_trace = handlers.trace(handlers.replay(handlers.seed(model, rng_key), guide_trace)).get_trace(x, y, n_data)
    return {k: s["value"] for k, s in model_trace.items() if s["type"] == "mutable"}


def constrain_params(params_u: dict, constraints: dict) -> dict:
    """Map unconstrained guide parameters to their constraint sets."""
    return {k: biject_to(constraints[k])(v) if constraints.get(k) is not None else v for k, v in params_u.items()}


def make_chunk(model, guide, optimizer, constraints, n_data, num_particles, trace_counter=None):
    """A jittable ``chunk(state, key, x, y, idx, steps, kl_warmup) -> (state, (losses, updated))``.

    idx: (C, B) int32 minibatch indices; steps: (C,) int32 global step numbers (-1 = padding, no update);
    kl_warmup: scalar, beta_t = min(1, (t + 1) / kl_warmup) (1 when kl_warmup <= 0).
    losses: (C,) float32, the loss of each step (NaN for padding and after a stop); updated: (C,) bool,
    whether the step updated the state. A step whose loss or gradient is not finite leaves the state
    unchanged and sets ``stopped``; nothing updates after that. Padding steps and steps after a stop
    skip the computation (a ``lax.cond``), so a chunk of fixed length C serves any number of steps.
    `constraints` is read when the chunk is traced (it may be filled after this call);
    `trace_counter`: a one-element list incremented at every trace.
    """

    def loss_fn(params_u, mutable, key, xb, yb, beta):
        params = constrain_params(params_u, constraints)
        return annealed_elbo_loss(key, params, model, guide, beta, num_particles, xb, yb, n_data, mutable=mutable)

    def one_step(carry, inputs):
        state, key, x, y, kl_warmup = carry
        idx, t = inputs
        if trace_counter is not None:
            trace_counter[0] += 1

        def step(state):
            beta = jnp.where(kl_warmup > 0, jnp.minimum(1.0, (t + 1.0) / jnp.maximum(kl_warmup, 1.0)), 1.0)
            (loss, mutable), grads = jax.value_and_grad(loss_fn, has_aux=True)(
                state.params, state.mutable, jax.random.fold_in(key, t), x[idx], y[idx], beta)
            ok = jnp.isfinite(loss) & jnp.isfinite(optax.tree.norm(grads))

            def update(_):
                updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
                return SVIState(optax.apply_updates(state.params, updates), opt_state, mutable, state.stopped)

            def stop(_):
                return state._replace(stopped=jnp.array(True))

            return jax.lax.cond(ok, update, stop, None), loss.astype(jnp.float32), ok

        def skip(state):
            return state, jnp.array(jnp.nan, jnp.float32), jnp.array(False)

        new_state, loss, ok = jax.lax.cond((t >= 0) & ~state.stopped, step, skip, state)
        return (new_state, key, x, y, kl_warmup), (loss, ok)

    def chunk(state, key, x, y, idx, steps, kl_warmup):
        (state, *_), losses = jax.lax.scan(one_step, (state, key, x, y, kl_warmup), (idx, steps))
        return state, losses

    return chunk


class CompiledFit:
    """The jitted initialisation and scanned update of one fit structure (built by `compiled_fit`).

    Attributes:
      init: ``init(key, xb, yb, start) -> SVIState`` at step 0 for the minibatch xb (B, ...), yb (B,);
        start: unconstrained guide parameters {name: array} to begin from, or None for the guide's own.
      chunk: the jitted `make_chunk` update; constrain: jitted `constrain_params` with `constraints`.
      constraints: {param name: constraint or None}; param_shapes: {param name: ShapeDtypeStruct}: filled
        by the first trace of `init` (`ensure_traced`).
      traces: a one-element list, how many times the update has been traced.
    """

    def __init__(self, model, guide, optimizer, n_data, num_particles):
        self.constraints: dict = {}
        self.param_shapes: dict | None = None
        self.traces = [0]
        self.model, self.guide, self.optimizer, self.n_data = model, guide, optimizer, n_data
        self.init = jax.jit(self._init)
        self.constrain = jax.jit(lambda params_u: constrain_params(params_u, self.constraints))
        self.chunk = jax.jit(make_chunk(model, guide, optimizer, self.constraints, n_data, num_particles,
                                        self.traces))

    def _init(self, key, xb, yb, start):
        params_u, constraints = guide_params(self.guide, key, xb, yb, self.n_data)
        self.constraints.update(constraints)
        self.param_shapes = {k: jax.ShapeDtypeStruct(jnp.shape(v), jnp.result_type(v)) for k, v in params_u.items()}
        if start is not None:
            params_u = {k: jnp.asarray(start[k], params_u[k].dtype) for k in params_u}
        mutable = initial_mutable(self.model, self.guide, key, xb, yb, self.n_data)
        return SVIState(params_u, self.optimizer.init(params_u), mutable, jnp.array(False))

    def ensure_traced(self, key, xb, yb) -> None:
        """Trace `init` (no compile) if it has not been, so that `constraints` and `param_shapes` are known."""
        if self.param_shapes is None:
            jax.eval_shape(self.init, key, xb, yb, None)


def compiled_fit(model, guide, optimizer, n_data: int, num_particles: int, xb, yb, chunk_len: int) -> CompiledFit:
    """The `CompiledFit` for this structure, from the process-wide cache (`models.structure.cached`): keyed by the
    model's and the set-up guide's structure, the optimiser's (its code and hyperparameters), n_data,
    num_particles, the minibatch shapes and dtypes and the chunk length, never by object identity."""
    parts = (model, guide, optimizer, int(n_data), int(num_particles), _spec(xb), _spec(yb), int(chunk_len))
    return structure.cached("fit", parts, lambda: CompiledFit(model, guide, optimizer, n_data, num_particles))


def _spec(a) -> tuple:
    return (tuple(np.shape(a)), str(jnp.result_type(a)))


def minibatch_indices(n: int, batch_size: int, steps: int, seed: int) -> np.ndarray:
    """(steps, batch_size) int32 indices, all at once: the rows `fit` draws block by block
    (`inference.batches.minibatch_blocks`)."""
    return np.concatenate(list(minibatch_blocks(n, batch_size, steps, seed, steps)))


def fit(model, guide, data, *, steps: int = 1000, batch_size: int = 128, optimizer=None,
        kl_warmup: int = 0, num_particles: int = 1, seed: int = 0, progress: bool = True,
        chunk_size: int = 500, init_params: dict | None = None, config: dict | None = None) -> Posterior:
    """Fit `guide` to `model` by SVI and return the `Posterior`.

    Args:
      model: a `models.BNN` (or any NumPyro model with signature ``model(x, y, n_data)``).
      guide: an AutoGuide of `inference` (e.g. ``inference.mean_field(model)``).
      data: a `zoo.data.Dataset` or (x, y): x (N, ...) float, y (N,).
      steps: number of SVI updates; batch_size: minibatch size B (clipped to N);
      optimizer: any optax GradientTransformation (default Adam, lr 1e-3);
      kl_warmup: steps of linear KL warm-up, beta_t = min(1, (t+1)/kl_warmup) multiplying the KL exactly;
      num_particles: Monte Carlo draws per step; seed: controls the minibatches and the noise;
      progress: a tqdm bar over chunks, with the running loss; chunk_size: steps per scanned chunk (every
        chunk has this length, the last one padded with skipped steps, so any number of steps reuses one
        compiled update);
      init_params: unconstrained guide parameters {name: array} to start from, every parameter of the
        guide with its shape (e.g. from `inference.from_mean_field`);
      config: extra JSON-able configuration saved with the posterior (checkpoints use it to rebuild).

    Compiled once per structure: the initialisation and the scanned update are cached process-wide by what
    determines them (the model's and guide's structure, the optimiser, n_data, num_particles, minibatch
    shapes, chunk_size; `inference.compiled`), so another seed, another guide instance of the same kind,
    other data of the same shape or another number of steps compile nothing.

    Returns:
      Posterior(kind="svi") with constrained guide params, ``losses`` (steps,) and ``info`` a
      `FitInfo` (first_step_s, fit_s, traces: 0 when the compiled update was reused).

    Raises:
      NonFiniteLossError when a loss or gradient is NaN/inf: ``err.posterior`` has the last finite state.
    """
    check_fit_args(steps=steps, batch_size=batch_size, num_particles=num_particles, chunk_size=chunk_size,
                   kl_warmup=kl_warmup)
    x, y = labelled_arrays(model, data, "training")
    n = x.shape[0]
    batch_size = min(batch_size, n)
    optimizer = optimizer if optimizer is not None else optax.adam(1e-3)
    validation.check_optimizer(optimizer)
    t0 = time.perf_counter()
    init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    x_dev, y_dev = jnp.asarray(x), jnp.asarray(y)
    xb, yb = x_dev[:batch_size], y_dev[:batch_size]
    guide.setup(xb)
    fns = compiled_fit(model, guide, optimizer, n, num_particles, xb, yb, chunk_size)
    traces_before = fns.traces[0]
    state = init_state(fns, init_key, xb, yb, init_params)
    warmup = jnp.float32(kl_warmup)

    def run_chunk(state, idx, step_ids):
        return fns.chunk(state, run_key, x_dev, y_dev, idx, step_ids, warmup)

    bar = _progress(steps, progress, getattr(model, "name", "model"))
    try:
        run = run_steps(run_chunk, state, minibatch_blocks(n, batch_size, steps, seed, chunk_size), chunk_size,
                        bar, t0)
    finally:
        bar.close()
    info = FitInfo(first_step_s=run.first_step_s, fit_s=time.perf_counter() - t0,
                   traces=fns.traces[0] - traces_before)
    post = svi_posterior(model, guide, run.state, fns.constrain, run.losses,
                         feature_shape=tuple(np.shape(x)[1:]), config=config, info=info)
    if run.bad_step is not None:
        raise non_finite_error(run, post)
    return post


def check_fit_args(*, kl_warmup, **positive) -> None:
    """Raise InputError naming the argument unless every `positive` value (steps, batch_size, ...) is a
    positive integer and `kl_warmup` is a non-negative number."""
    validation.check_positive_ints(**positive)
    validation.check_real("kl_warmup", kl_warmup, low=0.0, low_open=False)


def check_positive_ints(**values) -> None:
    """Raise InputError naming the first argument whose value is not a positive integer."""
    validation.check_positive_ints(**values)


def labelled_arrays(model, data, purpose: str) -> tuple[np.ndarray, np.ndarray]:
    """(x (N, *feature_shape) float32, y (N,)) of `data` (a `Dataset` or (x, y)), checked against `model`
    (`inference.data_args.labelled_arrays`: raises InputError naming what does not fit)."""
    return data_args.labelled_arrays(model, data, purpose)


def init_state(compiled: CompiledFit, rng_key, xb, yb, init_params: dict | None = None) -> SVIState:
    """The SVIState at step 0 from `compiled.init` for the minibatch xb (B, ...), yb (B,).

    `init_params`: unconstrained guide parameters {name: array} to start from instead of the guide's
    initialisers; it must hold every guide parameter with its shape (extra entries are ignored).
    Raises ValueError naming the missing parameters or the first one of another shape.
    """
    if init_params is None:
        return compiled.init(rng_key, xb, yb, None)
    compiled.ensure_traced(rng_key, xb, yb)
    missing = sorted(set(compiled.param_shapes) - set(init_params))
    if missing:
        raise ValueError(f"init_params: missing guide parameters {missing[:5]}"
                         + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    for name, want in compiled.param_shapes.items():
        if tuple(np.shape(init_params[name])) != tuple(want.shape):
            raise ValueError(f"init_params[{name!r}]: expected shape {tuple(want.shape)}, got "
                             f"{tuple(np.shape(init_params[name]))}")
    return compiled.init(rng_key, xb, yb, {k: init_params[k] for k in compiled.param_shapes})


class StepsRun(NamedTuple):
    """What `run_steps` returns. state: the last SVIState (the last finite one if stopped); losses:
    (done,) the loss of every step that updated the state; first_step_s: seconds from t0 to the end of the
    first chunk; bad_step, bad_what: the first non-finite step and "loss" or "gradient" (None, None when
    every step was finite)."""

    state: SVIState
    losses: np.ndarray
    first_step_s: float
    bad_step: int | None
    bad_what: str | None


def run_steps(run_chunk, state: SVIState, blocks, chunk_len: int, bar, t0: float) -> StepsRun:
    """Run the steps of `blocks`, a chunk at a time, stopping at the first non-finite one.

    run_chunk(state, idx (chunk_len, B), step_ids (chunk_len,)) -> (state, (losses, updated)) is the jitted
    chunk with the key, data and warm-up bound; blocks: an iterable of (count, B) minibatch index arrays,
    count <= chunk_len, in step order (`inference.batches.minibatch_blocks`); each is padded to `chunk_len`
    (step id -1), so every chunk has one compiled shape. `bar`: a tqdm bar advanced per chunk.
    """
    losses, first_step_s, start = [], None, 0
    for block in blocks:
        count = len(block)
        idx = np.zeros((chunk_len,) + block.shape[1:], np.int32)
        idx[:count] = block
        step_ids = np.full(chunk_len, -1, np.int32)
        step_ids[:count] = np.arange(start, start + count)
        state, (chunk_losses, updated) = run_chunk(state, idx, step_ids)
        chunk_losses = np.asarray(chunk_losses)[:count]
        if first_step_s is None:
            first_step_s = time.perf_counter() - t0
        if bool(state.stopped):
            bad = int(np.flatnonzero(~np.asarray(updated)[:count])[0])
            what = "loss" if not np.isfinite(chunk_losses[bad]) else "gradient"
            return StepsRun(state, _concat(losses + [chunk_losses[:bad]]), first_step_s, start + bad, what)
        losses.append(chunk_losses)
        bar.update(count)
        bar.set_postfix(loss=f"{float(np.mean(chunk_losses)):.4g}")
        start += count
    return StepsRun(state, _concat(losses), first_step_s, None, None)


def non_finite_error(run: StepsRun, posterior: Posterior) -> NonFiniteLossError:
    """The NonFiniteLossError of a run stopped at ``run.bad_step``, carrying `posterior` (the last finite state)."""
    step = run.bad_step
    return NonFiniteLossError(
        f"fit: the {run.bad_what} became NaN/inf at step {step}; "
        "training stopped and err.posterior holds "
        + (f"the parameters after step {step - 1}. " if step else "the initial parameters. ")
        + "Lower the learning rate, raise kl_warmup or check the data for extreme values.",
        posterior, step)


def svi_posterior(model, guide, state: SVIState, constrain, losses: np.ndarray, *, feature_shape: tuple,
                  config: dict | None, info: FitInfo) -> Posterior:
    """Posterior(kind="svi") of `state`: constrained guide params (``constrain(state.params)``, e.g.
    `CompiledFit.constrain`) and the network state on the host, losses (steps,), feature_shape (x.shape[1:])."""
    params = constrain(state.params)
    network_state = state.mutable.get(STATE_SITE, {}).get("state") if state.mutable else None
    return Posterior(
        model=model, kind="svi", guide=guide, params=jax.device_get(params),
        state=jax.device_get(network_state), losses=losses,
        feature_shape=feature_shape, config=dict(config or {}), info=info,
    )


def _concat(losses: list) -> np.ndarray:
    return np.concatenate(losses) if losses else np.zeros(0, np.float32)


def _progress(total, enabled, desc):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=f"SVI {desc}", leave=False, mininterval=0.5)
