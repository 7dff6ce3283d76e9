"""`fit`: stochastic variational inference with minibatches, KL warm-up, a likelihood temperature and a
scanned, jitted update; it judges whether the ELBO converged (`inference.convergence`).

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

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from numpyro import handlers
from numpyro.distributions import biject_to

from inference import data_args, kl_schedules, validation
from inference.collapse import PosteriorCollapseWarning, check_collapse
from inference.convergence import ConvergenceWarning, judge
from inference.per_example import per_example_estimator, per_example_mode
from inference.atomic_dir import check_folder, check_writable, folder_lock
from inference.batches import MinibatchOrder, minibatch_blocks
from inference.checkpoint import check_config
from inference.fit_state import load_fit_state, run_identity, save_fit_state, saved_step
from inference.guide_params import guide_params
from inference.model_identity import data_fingerprint
from inference.posterior import ConstrainedParams, Posterior, SVIPosterior
from inference.run_info import FitInfo
from models import structure
from models.bridge import BNN, STATE_SITE
from models.errors import CheckpointWarning, InputError, ZooError
from models.prng import flat_key


class NonFiniteLossError(ZooError, FloatingPointError):
    """Training hit a NaN/inf loss or gradient. ``.posterior`` holds the last finite state, ``.step`` the bad step."""

    exit_status = 3  # the `zoo` command's exit status for a NaN loss (models.errors.ZooError.exit_status)
    nonfinite_rows: tuple | None = None  # (bad rows, rows checked) of the data check, None when not checked

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


def make_chunk(model, guide, optimizer, constraints, n_data, num_particles, trace_counter=None, per_example=False):
    """A jittable ``chunk(state, key, x, y, idx, steps, kl, temperature) -> (state, (losses, updated,
    grad_norms), params)``.

    idx: (C, B) int32 minibatch indices; steps: (C,) int32 global step numbers (-1 = padding, no update);
    kl: the KL weights, (C,) float32 beta of each step (`fit` passes its ``kl_schedule``'s), or a scalar
    kl_warmup, beta_t = min(1, (t + 1) / kl_warmup) (1 when kl_warmup <= 0); temperature: scalar
    T > 0, the log-likelihood is divided by it (`inference.elbo`). Both are traced: no value recompiles.
    losses: (C,) float32, the loss of each step (NaN for padding and after a stop); updated: (C,) bool,
    whether the step updated the state; grad_norms: (C,) float32, the global norm of each step's gradient
    (NaN for padding); params: the returned state's guide parameters constrained (`constrain_params`), computed
    in the same program, so that a fit compiles no second program to read its result. A step whose loss or
    gradient is not finite leaves the state unchanged and sets ``stopped``; nothing updates after that. Padding
    steps and steps after a stop skip the computation (a ``lax.cond``), so a chunk of fixed length C serves any
    number of steps.
    `constraints` is read when the chunk is traced (it may be filled after this call);
    `trace_counter`: a one-element list incremented at every trace; `per_example`: the likelihood with a guide
    draw per example (`inference.per_example`).
    """

    elbo_loss = per_example_estimator(per_example)

    def loss_fn(params_u, mutable, key, xb, yb, beta, temperature):
        params = constrain_params(params_u, constraints)
        return elbo_loss(key, params, model, guide, beta, num_particles, xb, yb, n_data, temperature=temperature,
                         mutable=mutable)

    def one_step(carry, inputs):
        state, key, x, y, temperature = carry
        idx, t, beta = inputs
        if trace_counter is not None:
            trace_counter[0] += 1

        def step(state):
            (loss, mutable), grads = jax.value_and_grad(loss_fn, has_aux=True)(
                state.params, state.mutable, jax.random.fold_in(key, t), x[idx], y[idx], beta, temperature)
            grad_norm = optax.tree.norm(grads)
            ok = jnp.isfinite(loss) & jnp.isfinite(grad_norm)

            def update(_):
                updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
                return SVIState(optax.apply_updates(state.params, updates), opt_state, mutable, state.stopped)

            def stop(_):
                return state._replace(stopped=jnp.array(True))

            return (jax.lax.cond(ok, update, stop, None), loss.astype(jnp.float32), ok,
                    grad_norm.astype(jnp.float32))

        def skip(state):
            return state, jnp.array(jnp.nan, jnp.float32), jnp.array(False), jnp.array(jnp.nan, jnp.float32)

        new_state, loss, ok, grad_norm = jax.lax.cond((t >= 0) & ~state.stopped, step, skip, state)
        return (new_state, key, x, y, temperature), (loss, ok, grad_norm)

    def chunk(state, key, x, y, idx, steps, kl, temperature):
        key = flat_key(key)  # the same draws, compiled faster (`models.prng`)
        betas = kl if jnp.ndim(kl) == 1 else jnp.where(
            kl > 0, jnp.minimum(1.0, (steps + 1.0) / jnp.maximum(kl, 1.0)), 1.0)
        (state, *_), outputs = jax.lax.scan(one_step, (state, key, x, y, temperature), (idx, steps, betas))
        return state, outputs, constrain_params(state.params, constraints)

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

    def __init__(self, model, guide, optimizer, n_data, num_particles, per_example=False):
        self.constraints: dict = {}
        self.param_shapes: dict | None = None
        self.traces = [0]
        self.model, self.guide, self.optimizer, self.n_data = model, guide, optimizer, n_data
        self.init = jax.jit(self._init)
        self.constrain = jax.jit(lambda params_u: constrain_params(params_u, self.constraints))
        self.chunk = jax.jit(make_chunk(model, guide, optimizer, self.constraints, n_data, num_particles,
                                        self.traces, per_example))

    def _init(self, key, xb, yb, start):
        params_u, constraints = guide_params(self.guide, key, xb, yb, self.n_data)
        self.constraints.update(constraints)
        self.param_shapes = {k: jax.ShapeDtypeStruct(jnp.shape(v), jnp.result_type(v)) for k, v in params_u.items()}
        # every leaf strongly typed (an initialiser's constants are weakly typed), so that a state read back
        # from a checkpoint (NumPy arrays, never weak) has the very types of this one: no retrace on resuming
        params_u = {k: jnp.asarray(v if start is None else start[k], dtype=jnp.result_type(v))
                    for k, v in params_u.items()}
        mutable = initial_mutable(self.model, self.guide, key, xb, yb, self.n_data)
        return SVIState(params_u, self.optimizer.init(params_u), mutable, jnp.array(False))

    def ensure_traced(self, key, xb, yb) -> None:
        """Trace `init` (no compile) if it has not been, so that `constraints` and `param_shapes` are known."""
        if self.param_shapes is None:
            jax.eval_shape(self.init, key, xb, yb, None)


def compiled_fit(model, guide, optimizer, n_data: int, num_particles: int, xb, yb, chunk_len: int,
                 per_example: bool = False) -> CompiledFit:
    """The `CompiledFit` for this structure, from the process-wide cache (`models.structure.cached`): keyed by the
    model's and the set-up guide's structure, the optimiser's (its code and hyperparameters), n_data,
    num_particles, the minibatch shapes and dtypes and the chunk length, never by object identity."""
    parts = _fit_parts(model, guide, optimizer, n_data, num_particles, xb, yb, chunk_len, per_example)
    return structure.cached("fit", parts, lambda: CompiledFit(model, guide, optimizer, n_data, num_particles,
                                                              per_example_mode(per_example)))


def _fit_parts(model, guide, optimizer, n_data, num_particles, xb, yb, chunk_len, per_example) -> tuple:
    """What `compiled_fit` keys its cache entry by."""
    return (model, guide, optimizer, int(n_data), int(num_particles), _spec(xb), _spec(yb), int(chunk_len),
            per_example_mode(per_example))


def _spec(a) -> tuple:
    return (tuple(np.shape(a)), str(jnp.result_type(a)))


def minibatch_indices(n: int, batch_size: int, steps: int, seed: int) -> np.ndarray:
    """(steps, batch_size) int32 indices, all at once: the rows `fit` draws block by block
    (`inference.batches.minibatch_blocks`)."""
    return np.concatenate(list(minibatch_blocks(n, batch_size, steps, seed, steps)))


DEFAULT_LR = 1e-2
DEFAULT_FINAL_LR = 1e-4


DEFAULT_STEPS = 1000


def default_steps(n_data: int, batch_size: int = 128) -> int:
    """`fit`'s number of steps when none is given, for `n_data` examples in minibatches of `batch_size` (positive
    integers, else InputError): `DEFAULT_STEPS` (1,000) whatever the data. Measured on real 28 x 28 digits
    (3,200 examples, batch 128, docs/defaults.md): mean field under the default sigma cap beat the point estimate
    on every validation score at 1,000 steps and not at 4,000, so the default was not raised with the data."""
    validation.check_positive_ints(n_data=n_data, batch_size=batch_size)
    return DEFAULT_STEPS


def default_optimizer(steps: int):
    """`fit`'s optimiser when none is given: Adam with its rate cosine-decayed from `DEFAULT_LR` (1e-2) to
    `DEFAULT_FINAL_LR` (1e-4) over `steps` updates. The rate is this library's choice, not a paper's: the
    k-tied paper (app. D) picks Adam's rate per model on validation data from {1e-4, 3e-4, 1e-3, 3e-3}; only
    the guides' sigma init 0.01 comes from there (app. D, and D.4 for the k-tied factors). The schedule
    depends on `steps`, so fits with the same `steps` share one compiled update and another `steps`
    compiles its own."""
    # a float: optax's schedule turns an int decay_steps into a float on its first call (a nonlocal), which
    # would change the optimiser's structure key after the first fit and recompile the second one
    return optax.adam(optax.cosine_decay_schedule(DEFAULT_LR, float(steps), alpha=DEFAULT_FINAL_LR / DEFAULT_LR))


def fit(model, guide, data, *, steps: int | None = None, batch_size: int = 128, optimizer=None,
        kl_warmup: int = 0, kl_schedule=None, temperature: float = 1.0, num_particles: int = 1, seed: int = 0, progress: bool = True,
        chunk_size: int = 500, init_params=None, config: dict | None = None,
        checkpoint_dir: str | None = None, checkpoint_every: int | None = None, resume: bool = False,
        on_chunk=None, per_example_noise: bool = False) -> Posterior:
    """Fit `guide` to `model` by SVI and return the `Posterior`.

    Args:
      model: a `models.BNN` (or any NumPyro model with signature ``model(x, y, n_data)``).
      guide: an AutoGuide of `inference` (e.g. ``inference.mean_field(model)``).
      data: a `zoo.data.Dataset` or (x, y): x (N, ...) float, y (N,).
      steps: number of SVI updates; batch_size: minibatch size B (clipped to N). How many are enough,
        measured with the defaults (docs/defaults.md, "Earlier: the prior grid"; N = 1,078
        digits, B = 128): about 700 epochs (steps = 700 N / B, 6,000 here) for every prior and guide on an
        MLP of 9k weights; on one of 478k weights 350 epochs (3,000 steps) were enough for 2-tied, not for
        mean field. Check ``posterior.info.converged`` and raise `steps` until it holds;
      optimizer: any optax GradientTransformation (default `default_optimizer(steps)`: Adam, its rate
        cosine-decayed from 1e-2 to 1e-4 over `steps`: this library's choice (the k-tied paper's app. D
        picks its rate on validation data from 1e-4 .. 3e-3; only the guides' sigma init 0.01 is from
        there); at a constant 1e-3 from sigma 1e-3 mean field's sigmas barely move on a large net in
        thousands of steps). The schedule depends on `steps`: a second fit with the same `steps`
        compiles nothing, another `steps` compiles its own update;
      kl_warmup: steps of linear KL warm-up, beta_t = min(1, (t+1)/kl_warmup) multiplying the KL exactly
        (`inference.kl_schedules.linear`);
      kl_schedule: any KL schedule, a callable step t -> beta_t >= 0 (an optax-like schedule, e.g.
        `inference.kl_schedules.stepwise_linear(5e-5)`, the k-tied paper's); evaluated on the host for every
        step and passed to the compiled update as data (no schedule recompiles it). Not with `kl_warmup`
        (InputError). The last step's beta is ``posterior.info.final_kl_weight`` (also recorded for
        `kl_warmup`, 1 without either), saved in checkpoints and part of the run's identity;
      temperature: T > 0, the likelihood temperature: the fit targets the tempered posterior
        p_T(w | D) proportional to p(D | w)^(1/T) p(w) by minimising
        -(E_q[log p(D | w)] / T - beta_t KL(q || p)) (`inference.elbo`). T = 1 (default) is the Bayesian
        posterior; T < 1 a "cold" posterior (sharper, the likelihood counts 1/T times), T > 1 a warm one.
        A KL weight lambda (E_q[log p(D | w)] - lambda KL, as in beta-VAEs) has the same optimum as
        temperature=lambda. With `kl_warmup`, beta_t ramps the KL to 1 while the likelihood stays tempered
        by T throughout. Only the likelihood is tempered: the cold-posterior literature's
        p(D | w)^(1/T) p(w)^(1/T) equals this with a Normal prior's scale multiplied by sqrt(T).
        Recorded in ``posterior.info.temperature``, in checkpoints and in the run's identity (resuming with
        another temperature is refused); a traced argument of the compiled step (no recompile per value);
        ``losses`` are those of the tempered objective;
      num_particles: Monte Carlo draws per step; seed: controls the minibatches and the noise;
      per_example_noise: estimate the likelihood term with an independent guide draw per example (the same
        ELBO, a lower-variance gradient: `inference.per_example`; the local reparameterisation trick's
        estimator); B draws of every stochastic weight per step; refused for models with batch norm;
        "local": the local reparameterisation trick on dense Gaussian / dropout layers (`inference.local_reparam`:
        the same estimator's marginal, per-example pre-activations, no B weight draws) and Flipout on Gaussian
        convolution kernels;
      progress: a tqdm bar over chunks, with the running loss; chunk_size: steps per scanned chunk (every
        chunk has this length, the last one padded with skipped steps, so any number of steps reuses one
        compiled update);
      init_params: where to start: a fitted SVI `Posterior` of a guide with the same parameters (warm start
        at its exact unconstrained parameters, `Posterior.unconstrained_params`), or unconstrained guide
        parameters {name: array}, every parameter of the guide with its shape (e.g. from
        `inference.from_mean_field`). ``posterior.params`` (constrained: scales > 0) is refused, since it
        would be read as unconstrained values;
      config: extra JSON-able configuration saved with the posterior (checkpoints use it to rebuild);
      checkpoint_dir: a folder for the fit's state (`inference.fit_state`: unconstrained guide parameters,
        optimiser state, step, PRNG key, position in the minibatch order, mutable state, losses so far and
        what identifies the run), written atomically (`inference.atomic_dir`): every `checkpoint_every`
        steps, at the end of the first chunk that reaches each multiple (chunks end every `chunk_size`
        steps), when the fit is interrupted (KeyboardInterrupt: Ctrl-C, or a signal handler raising it; the
        state at the last finished chunk), and at the end. A folder that already holds a fit state is
        refused unless `resume`;
      checkpoint_every: steps between saves (None: only on interruption and at the end);
      resume: continue the fit saved in `checkpoint_dir` (a warning says so when there is none and the fit
        starts at step 0). The state is checked against this call (model, guide, steps, batch size, seed,
        KL warm-up, temperature, particles, chunk size, optimiser, data, init_params; a difference raises
        CheckpointError naming it), and the resumed fit's Posterior equals the uninterrupted fit's bit for bit (params and
        losses). A finished fit's state returns its Posterior without a step. An absent or empty folder holds
        no state: the warning, then step 0.

    The checkpoint folder, before any work (`inference.atomic_dir`): it must be absent, empty or a fit state
    this package saved (a folder of the user's files or a saved posterior raises `FolderNotOwnedError`: saving
    replaces the folder whole), writable with room for the state on its disk (a probe file and the free
    space; else `UnwritableError`), and no other process's (the fit holds its lock, a file beside it naming
    this process, until it returns; another fit there raises `FolderLockedError` naming the holder's pid).
    A save that fails during the fit (disk full or read-only meanwhile) warns (`CheckpointWarning`) and
    training goes on: the result is returned as without checkpoints, the folder keeps the last state saved.

    Defaults (docs/defaults.md, chosen on validation data of real 28 x 28 digits): `default_steps` (1,000) steps,
    batch 128, `default_optimizer(steps)`, the plain ELBO (no KL warm-up, temperature 1); the guides
    `mean_field` and `k_tied` limit q's sd of every weight to c / sqrt(fan_in), c = 1.5 (their `scale_cap`; a bias
    takes its layer's kernel's limit, `bias_limit`), so that weights the data do not pin add bounded noise rather
    than their prior's. Nothing of that changes the
    target: ``info.temperature`` is 1 unless `temperature` is passed.

    Compiled once per structure: the initialisation and the scanned update are cached process-wide by what
    determines them (the model's and guide's structure, the optimiser, n_data, num_particles, minibatch
    shapes, chunk_size; `inference.compiled`), so another seed, another guide instance of the same kind,
    other data of the same shape or another number of steps compile nothing.

    Convergence: at the end, `inference.convergence.judge` reads the losses and the gradient norms (computed
    inside the scanned update, no extra host round trip): converged unless the smoothed loss of the last 20 %
    of the steps still has a clear trend (|t| > 3 of its slope) that is also relevant (over 1 % of the loss's
    size); fewer than 100 steps are not judged. ``info.converged`` and ``info.convergence`` hold the result,
    the progress bar's closing line (``progress=True``) shows it, and a `ConvergenceWarning` says when the
    ELBO has not converged.

    Collapse: at the end, `inference.collapse.check_collapse` scores the posterior predictive on a fixed
    subsample of 256 training examples (32 draws) against the prior predictive and an input-free predictor;
    a posterior whose log predictive density is less than 0.05 nats per example above the better of them
    ignores the data: ``info.collapsed`` is True, ``info.collapse`` holds the numbers, the summary line says
    "POSTERIOR COLLAPSED" and a `PosteriorCollapseWarning` is issued. Not judged (None) for models that are
    not a `models.BNN`.

    Returns:
      SVIPosterior with constrained guide params, their unconstrained values (``unconstrained``),
      ``losses`` (steps,) and ``info`` a `FitInfo` (first_step_s, fit_s, traces: 0 when the compiled update
      was reused; first_step_s None when a resumed fit had no step left; temperature; converged and
      convergence; collapsed and collapse; ``info.summary()`` is a one-line account).

    Raises:
      NonFiniteLossError when a loss or gradient is NaN/inf: ``err.posterior`` has the last finite state
      (the state saved in `checkpoint_dir` stays the last one saved before).
    """
    check_checkpoint_args(checkpoint_dir, checkpoint_every, resume)
    with checkpoint_folder(checkpoint_dir):
        return _fit(model, guide, data, steps=steps, batch_size=batch_size, optimizer=optimizer,
                    kl_warmup=kl_warmup, kl_schedule=kl_schedule, temperature=temperature,
                    num_particles=num_particles, seed=seed,
                    progress=progress, chunk_size=chunk_size, init_params=init_params, config=config,
                    checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, resume=resume,
                    on_chunk=on_chunk, per_example_noise=per_example_noise)


def _fit(model, guide, data, *, steps, batch_size, optimizer, kl_warmup, kl_schedule, temperature, num_particles, seed,
         progress, chunk_size, init_params, config, checkpoint_dir, checkpoint_every, resume, on_chunk,
         per_example_noise) -> Posterior:
    """`fit`'s work (the same arguments and result), inside its checkpoint folder's lock."""
    # the arguments first (a bad `steps` is named before the data are read), the default steps from the data
    check_fit_args(steps=DEFAULT_STEPS if steps is None else steps, batch_size=batch_size,
                   num_particles=num_particles, chunk_size=chunk_size, kl_warmup=kl_warmup)
    temperature = validation.check_real("temperature", temperature, low=0.0)
    validation.check_seed(seed)
    validation.check_callable("on_chunk", on_chunk, "on_chunk(step, posterior)")
    config = check_config(config)
    x, y = labelled_arrays(model, data, "training")
    if steps is None:
        steps = default_steps(x.shape[0], batch_size)
    betas = kl_betas(kl_warmup, kl_schedule, steps)
    check_guide(model, guide, tuple(np.shape(x)[1:]))
    n = x.shape[0]
    batch_size = min(batch_size, n)
    check_fit_memory(model, tuple(np.shape(x)[1:]), batch_size, chunk_size, num_particles)
    probe = optimizer is not None  # the default one descends at every step
    optimizer = optimizer if optimizer is not None else default_optimizer(steps)
    start = start_params(init_params)
    t0 = time.perf_counter()
    init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    # the first batch cut on the host: slicing device arrays compiles an op by op program per shape
    x_dev, y_dev = jnp.asarray(x), jnp.asarray(y)
    xb, yb = jnp.asarray(x[:batch_size]), jnp.asarray(y[:batch_size])
    guide.setup(xb)
    fns = compiled_fit(model, guide, optimizer, n, num_particles, xb, yb, chunk_size, per_example_noise)
    if probe:  # after the lookup, which keys the optimiser as it was given (the probe may rewrite it, see below),
        validation.check_optimizer(optimizer, steps=steps)  # before anything is compiled for the fit
    traces_before = fns.traces[0]
    state = init_state(fns, init_key, xb, yb, start)
    initial = state  # at step 0 (a resumed fit's too): whether the parameters moved is judged against it
    order, done, saver = MinibatchOrder(n, batch_size, seed), 0, None
    losses_before, norms_before = np.zeros(0, np.float32), np.zeros(0, np.float32)
    if checkpoint_dir is not None:
        identity = run_identity(model, guide, optimizer, x, y, feature_shape=tuple(np.shape(x)[1:]), steps=steps,
                                batch_size=batch_size, seed=seed, kl_warmup=kl_warmup, temperature=temperature,
                                per_example_noise=per_example_noise, num_particles=num_particles,
                                chunk_size=chunk_size, init_params=start,
                                kl_schedule=None if kl_schedule is None else kl_schedules.betas_digest(betas))
        saver = Checkpoints(checkpoint_dir, identity, checkpoint_every, run_key)
        resumed = saver.restore(state, resume)
        if resumed is not None:
            state, done, losses_before = resumed.state, resumed.step, resumed.losses
            norms_before = resumed.grad_norms
            run_key = saver.rng_key = jnp.asarray(resumed.rng_key)
            order = MinibatchOrder(n, batch_size, state=resumed.order)
    temp = np.float32(temperature)  # a host scalar: no eager conversion compiled

    def run_chunk(state, idx, step_ids):  # the betas: host data of the chunk's steps (padding: 0)
        kl = np.where(step_ids >= 0, betas[np.clip(step_ids, 0, max(steps - 1, 0))], 0).astype(np.float32)
        return fns.chunk(state, run_key, x_dev, y_dev, idx, step_ids, kl, temp)

    def chunk_done(state, params, step, losses, norms):
        if saver is not None:
            saver.chunk_done(state, step, (losses_before, norms_before), (losses, norms), order.state())
        if on_chunk is not None:
            on_chunk(step, svi_posterior(model, guide, state, params, np.concatenate([losses_before, *losses]),
                                         feature_shape=tuple(np.shape(x)[1:]), config=config, info=None,
                                         training_data=data_fingerprint(x, y)))

    bar = _progress(steps, progress, getattr(model, "name", "model"))
    bar.update(done)
    try:
        run = run_steps(run_chunk, state, order.blocks(steps - done, chunk_size), chunk_size, bar, t0,
                        start=done, on_chunk=chunk_done if saver is not None or on_chunk is not None else None)
        if saver is not None and run.bad_step is None:
            saver.save_last(final=True)
    except KeyboardInterrupt:
        if saver is not None:
            saver.save_last()  # the state at the last finished chunk, then the interruption goes on
        raise
    finally:
        bar.close()
    if fns.traces[0] != traces_before:
        # tracing the update (after `compiled_fit` built the entry) may rewrite what the optimiser closes over, as
        # building may (`models.structure.cached`): keep the update under the key the optimiser has now as well,
        # or the next fit with this very optimiser would compile again
        structure.cached("fit", _fit_parts(model, guide, optimizer, n, num_particles, xb, yb, chunk_size,
                                           per_example_noise), lambda: fns)
    losses = np.concatenate([losses_before, run.losses])
    moved = None if not len(losses) else not _same_values(initial.params, run.state.params)
    convergence = judge(losses, np.concatenate([norms_before, run.grad_norms]), moved=moved)
    info = FitInfo(first_step_s=run.first_step_s, fit_s=time.perf_counter() - t0,
                   traces=fns.traces[0] - traces_before, temperature=temperature,
                   final_kl_weight=float(betas[-1]) if steps else None,
                   converged=convergence["converged"], convergence=convergence)
    params = fns.constrain(run.state.params) if run.params is None else run.params  # None: no chunk ran
    post = svi_posterior(model, guide, run.state, params, losses,
                         feature_shape=tuple(np.shape(x)[1:]), config=config, info=info,
                         training_data=data_fingerprint(x, y))
    if run.bad_step is not None:
        raise non_finite_error(run, post, x)
    collapse = check_collapse(post, x, y)
    if collapse is not None:
        post.info = info = info._replace(collapsed=collapse["collapsed"], collapse=collapse)
    if progress:
        print(f"SVI {getattr(model, 'name', 'model')}: {len(losses)} steps, final loss "
                  f"{float(np.mean(losses[-max(1, len(losses) // 20):])):.6g}; {info.summary()}", file=sys.stderr)
    if not convergence["converged"]:
        warnings.warn(ConvergenceWarning(f"fit: the ELBO has not converged ({convergence['reason']}). "
                                         "Run more steps (or raise the learning rate); "
                                         "posterior.info.convergence has the numbers", convergence), stacklevel=3)
    if info.collapsed and collapse is not None:
        warnings.warn(PosteriorCollapseWarning(
            f"fit: the posterior ignores the data ({collapse['reason']}); it predicts like the prior. "
            "posterior.info.collapse has the numbers", collapse), stacklevel=3)
    return post


@contextlib.contextmanager
def checkpoint_folder(path):
    """The block runs with the fit-state folder `path` checked and locked (nothing to do for None): raises
    `FolderNotOwnedError` unless it is absent, empty or a fit state (`inference.atomic_dir.check_folder`),
    `UnwritableError` unless a probe file can be written where it goes, and `FolderLockedError` while another
    process holds it; then holds its lock ("fit") until the block ends."""
    if path is None:
        yield
        return
    check_folder(path, "fit state", "checkpoint_dir")
    check_writable(path, "checkpoint_dir")
    with folder_lock(path, "fit", "checkpoint_dir"):
        yield


class Checkpoints:
    """What `fit` saves in its `checkpoint_dir` and when (the files: `inference.fit_state`).

    `restore` reads the state to resume from; `chunk_done` (after every finished chunk) remembers that
    chunk's state and saves it when a multiple of `every` steps was reached; `save_last` saves the
    remembered state unless it is saved already (at the end, and when the fit is interrupted). A save that
    fails warns (`CheckpointWarning`, the first failure and the last one) and the fit goes on.
    """

    def __init__(self, path: str, identity: dict, every: int | None, rng_key):
        self.path, self.identity, self.every, self.rng_key = path, identity, every, rng_key
        self.saved_step, self.failures = 0, 0
        self.last: tuple | None = None

    def restore(self, template: SVIState, resume: bool):
        """The `inference.fit_state.FitState` to continue from (checked against this run and `template`, the
        initial state), or None to start at step 0. Without `resume`, a folder holding a fit state raises
        InputError; with it and no state (an absent or empty folder), a warning says that the fit starts at
        step 0. First checks that the folder's disk has room for a state like `template` (UnwritableError)."""
        steps = int(self.identity.get("steps") or 0)
        needed = sum(v.nbytes for v in jax.tree_util.tree_leaves(template)) + 16 * steps + (1 << 16)
        check_writable(self.path, "checkpoint_dir", needed_bytes=needed)
        if not resume:
            found = saved_step(self.path)
            if found is not None:
                raise InputError("checkpoint_dir", self.path, "a folder without a saved fit state, or resume=True",
                                 hint=f"it holds a fit saved after {found} steps; pass resume=True to continue "
                                      "it, or another folder to start afresh")
            return None
        if self.identity.get("optimizer") is None:
            warnings.warn(CheckpointWarning(
                "checkpoint_dir: the optimiser cannot be fingerprinted (it does not run on a 3-vector probe), so "
                "resuming cannot tell whether it is the one the state was saved with; only its state's structure "
                "is compared"), stacklevel=4)
        resumed = load_fit_state(self.path, self.identity, template)
        if resumed is None:
            warnings.warn(f"checkpoint_dir: no saved fit state at {str(self.path)!r}; the fit starts at step 0",
                          stacklevel=4)
            return None
        self.saved_step = resumed.step
        return resumed

    def chunk_done(self, state: SVIState, step: int, before: tuple, chunks: tuple, order: tuple):
        """Remember the state after `step` steps (before: (losses, gradient norms) of a resumed fit's earlier
        steps; chunks: (losses, gradient norms), two lists of the chunks' arrays that only grow) and the
        minibatch order's state; save when a multiple of `every` was passed."""
        self.last = (state, step, before, chunks, len(chunks[0]), order)
        if self.every is not None and step // self.every > self.saved_step // self.every:
            self.save_last()

    def save_last(self, final: bool = False) -> None:
        """Save the remembered state, if newer than the saved one. A save that fails (a full or read-only disk,
        the folder taken by other files meanwhile) warns on the first failure and, with `final` (the last save
        of the fit), once more; training goes on."""
        if self.last is None or self.last[1] == self.saved_step:
            return
        state, step, before, chunks, count, order = self.last
        losses, norms = (np.concatenate([b] + c[:count]) for b, c in zip(before, chunks))
        try:
            save_fit_state(self.path, self.identity, state, step, losses, self.rng_key, order, grad_norms=norms)
        except (OSError, ZooError) as err:
            self.failures += 1
            if self.failures == 1 or final:
                kept = f"the state after step {self.saved_step}" if self.saved_step else "no state"
                warnings.warn(CheckpointWarning(
                    f"checkpoint_dir: the fit state after step {step} could not be saved ({err}); "
                    + ("the fit returns its result all the same" if final else "training goes on")
                    + f", and {str(self.path)!r} keeps {kept} ({self.failures} save(s) failed)"), stacklevel=5)
            return
        self.saved_step = step


def check_checkpoint_args(checkpoint_dir, checkpoint_every, resume) -> None:
    """Raise InputError unless `checkpoint_dir` is None or a path, `checkpoint_every` None or a positive
    integer (and then with a `checkpoint_dir`), and `resume` a bool (True only with a `checkpoint_dir`)."""
    if checkpoint_dir is not None and not isinstance(checkpoint_dir, (str, os.PathLike)):
        raise InputError("checkpoint_dir", checkpoint_dir, "a folder path (str) or None")
    if checkpoint_every is not None:
        validation.check_positive_ints(checkpoint_every=checkpoint_every)
        if checkpoint_dir is None:
            raise InputError("checkpoint_every", checkpoint_every, "None when no checkpoint_dir is given",
                             hint="pass checkpoint_dir=... to say where the fit state goes")
    if not isinstance(resume, (bool, np.bool_)):
        raise InputError("resume", resume, "True or False")
    if resume and checkpoint_dir is None:
        raise InputError("resume", resume, "False when no checkpoint_dir is given",
                         hint="pass checkpoint_dir=... the folder of the fit to resume")


def start_params(init_params) -> Mapping | None:
    """Unconstrained guide parameters {name: array} to start from, from `fit`'s `init_params`: None, a
    Posterior (its `Posterior.unconstrained_params`) or such a dict. Raises InputError for an MCMC posterior
    and for ``posterior.params`` (the constrained values of a live Posterior)."""
    if init_params is None:
        return None
    if isinstance(init_params, Posterior):
        return init_params.unconstrained_params()
    if not isinstance(init_params, Mapping):
        raise InputError("init_params", init_params, "None, an SVI Posterior or a dict of unconstrained guide "
                         "parameters {name: array}")
    if isinstance(init_params, ConstrainedParams):
        raise InputError("init_params", "<posterior.params, the constrained parameters of a Posterior>",
                         "unconstrained guide parameters",
                         hint="pass init_params=posterior (or posterior.unconstrained_params()) to start from a "
                              "fitted posterior; read as unconstrained values, its scales would change")
    return init_params


def kl_betas(kl_warmup, kl_schedule, steps: int) -> np.ndarray:
    """beta_t of every step, float32 (steps,): `kl_schedule`'s (`inference.kl_schedules.schedule_betas`), else
    `kl_schedules.linear(kl_warmup)`'s, else ones. Raises InputError when both are given."""
    if kl_schedule is not None and kl_warmup:
        raise InputError("kl_schedule", kl_schedule, "None when kl_warmup is given",
                         hint=f"kl_warmup={kl_warmup} is the schedule inference.kl_schedules.linear({kl_warmup}); "
                              "pass one of the two")
    if kl_schedule is None:
        return kl_schedules.linear(kl_warmup)(np.arange(steps)) if kl_warmup > 0 else np.ones(steps, np.float32)
    return kl_schedules.schedule_betas(kl_schedule, steps)


def check_fit_args(*, kl_warmup, **positive) -> None:
    """Raise InputError naming the argument unless every `positive` value (steps, batch_size, ...) is a
    positive integer and `kl_warmup` is a non-negative number."""
    validation.check_positive_ints(**positive)
    validation.check_real("kl_warmup", kl_warmup, low=0.0, low_open=False)


def labelled_arrays(model, data, purpose: str) -> tuple[np.ndarray, np.ndarray]:
    """(x (N, *feature_shape) float32, y (N,)) of `data` (a `Dataset` or (x, y)), checked against `model`
    (`inference.data_args.labelled_arrays`: raises InputError naming what does not fit)."""
    return data_args.labelled_arrays(model, data, purpose)


def init_state(compiled: CompiledFit, rng_key, xb, yb, init_params: Mapping | None = None) -> SVIState:
    """The SVIState at step 0 from `compiled.init` for the minibatch xb (B, ...), yb (B,).

    `init_params`: unconstrained guide parameters {name: array} to start from instead of the guide's
    initialisers; it must hold every guide parameter with its shape (extra entries are ignored).
    Raises ValueError naming the missing parameters or the first one of another shape.
    """
    if init_params is None:
        return compiled.init(rng_key, xb, yb, None)
    compiled.ensure_traced(rng_key, xb, yb)
    shapes: dict = compiled.param_shapes or {}  # filled by ensure_traced
    missing = sorted(set(shapes) - set(init_params))
    if missing:
        raise InputError.worded("init_params", f"init_params: missing guide parameters {missing[:5]}"
                         + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    for name, want in shapes.items():
        if tuple(np.shape(init_params[name])) != tuple(want.shape):
            raise InputError.worded(f"init_params[{name!r}]",
                                    f"init_params[{name!r}]: expected shape {tuple(want.shape)}, got "
                                    f"{tuple(np.shape(init_params[name]))}")
    return compiled.init(rng_key, xb, yb, {k: init_params[k] for k in shapes})


class StepsRun(NamedTuple):
    """What `run_steps` returns. state: the last SVIState (the last finite one if stopped); params: its constrained
    guide parameters (None when no chunk ran: a resumed fit that had finished); losses:
    (done,) the loss of every step that updated the state; first_step_s: seconds from t0 to the end of the
    first chunk; bad_step, bad_what: the first non-finite step and "loss" or "gradient" (None, None when
    every step was finite); grad_norms: (done,) the gradient norm of those steps."""

    state: SVIState
    params: dict | None
    losses: np.ndarray
    first_step_s: float | None
    bad_step: int | None
    bad_what: str | None
    grad_norms: np.ndarray


def run_steps(run_chunk, state: SVIState, blocks, chunk_len: int, bar, t0: float, *, start: int = 0,
              on_chunk=None) -> StepsRun:
    """Run the steps of `blocks`, a chunk at a time, stopping at the first non-finite one.

    run_chunk(state, idx (chunk_len, B), step_ids (chunk_len,)) -> (state, (losses, updated, grad_norms),
    params) is the jitted chunk (`make_chunk`) with the key, data and warm-up bound; blocks: an iterable of
    (count, B) minibatch index arrays, count <= chunk_len, in step order (`inference.batches.minibatch_blocks`);
    each is padded to `chunk_len` (step id -1), so every chunk has one compiled shape. `bar`: a tqdm bar
    advanced per chunk.
    start: the global number of the first step (a resumed fit's steps done); on_chunk(state, params, steps done,
    [losses (count,) of every chunk so far], [their gradient norms (count,)]) is called after every finished
    chunk, before the next block is asked for. The returned ``losses`` are this call's steps, ``bad_step``
    is global.
    """
    losses: list = []
    norms: list = []
    first_step_s, params = None, None
    for block in blocks:
        count = len(block)
        idx = np.zeros((chunk_len,) + block.shape[1:], np.int32)
        idx[:count] = block
        step_ids = np.full(chunk_len, -1, np.int32)
        step_ids[:count] = np.arange(start, start + count)
        state, (chunk_losses, updated, chunk_norms), params = run_chunk(state, idx, step_ids)
        chunk_losses, chunk_norms = np.asarray(chunk_losses)[:count], np.asarray(chunk_norms)[:count]
        if first_step_s is None:
            first_step_s = time.perf_counter() - t0
        if bool(state.stopped):
            bad = int(np.flatnonzero(~np.asarray(updated)[:count])[0])
            what = "loss" if not np.isfinite(chunk_losses[bad]) else "gradient"
            return StepsRun(state, params, _concat(losses + [chunk_losses[:bad]]), first_step_s, start + bad, what,
                            _concat(norms + [chunk_norms[:bad]]))
        losses.append(chunk_losses)
        norms.append(chunk_norms)
        bar.update(count)
        bar.set_postfix(loss=f"{float(np.mean(chunk_losses)):.4g}")
        start += count
        if on_chunk is not None:
            on_chunk(state, params, start, losses, norms)
    return StepsRun(state, params, _concat(losses), first_step_s, None, None, _concat(norms))


def non_finite_error(run: StepsRun, posterior: Posterior, x=None) -> NonFiniteLossError:
    """The NonFiniteLossError of a run stopped at ``run.bad_step``, carrying `posterior` (the last finite state).

    x (N, ...): training inputs; when given, `posterior` is checked on up to `PREDICTION_CHECK_ROWS` of them
    (`prediction_check`): parameters driven to extreme values before the stop predict NaN/inf for some inputs,
    and the message says so (``err.nonfinite_rows``: (bad rows, rows checked), None when not checked)."""
    step = run.bad_step
    check = None if x is None or not hasattr(posterior.model, "predictive") else prediction_check(posterior, x)
    note = ""
    if check is not None and check[0]:
        note = (f" Its parameters are extreme (largest |value| {check[2]:.3g}) and it predicts NaN/inf for "
                f"{check[0]} of {check[1]} training inputs ({check[0] / check[1]:.0%}): do not use it for "
                "predictions.")
    error = NonFiniteLossError(
        f"fit: the {run.bad_what} became NaN/inf at step {step}; "
        "training stopped and err.posterior holds "
        + (f"the parameters after step {step - 1}." if step else "the initial parameters.") + note
        + " Lower the learning rate, raise kl_warmup or check the data for extreme values.",
        posterior, step)
    error.nonfinite_rows = None if check is None else check[:2]
    return error


PREDICTION_CHECK_ROWS = 256  # training inputs a NaN-stopped fit's posterior is checked on
PREDICTION_CHECK_DRAWS = 10  # its draws per input


def prediction_check(posterior: Posterior, x) -> tuple[int, int, float]:
    """(rows with a NaN/inf prediction, rows checked, largest |parameter|) of `posterior` on the first
    `PREDICTION_CHECK_ROWS` rows of x (N, ...), `PREDICTION_CHECK_DRAWS` draws each."""
    rows = np.asarray(x[:PREDICTION_CHECK_ROWS])
    largest = max((float(np.max(np.abs(v))) for v in jax.tree.leaves(posterior.params) if np.size(v)), default=0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        probs = posterior.predict(rows, num_samples=PREDICTION_CHECK_DRAWS)
    bad = ~np.isfinite(probs).reshape(probs.shape[0], probs.shape[1], -1).all(axis=(0, 2))
    return int(bad.sum()), int(rows.shape[0]), largest


def check_fit_memory(model, feature_shape: tuple, batch_size: int, chunk_size: int, num_particles: int) -> None:
    """Refuse (InputError) a `chunk_size` whose minibatch indices (chunk_size, B) int32, or a `num_particles`
    whose weight draws (num_particles, weights) float32, would not fit in memory, before anything is compiled."""
    validation.check_memory("chunk_size", chunk_size, 8.0 * chunk_size * batch_size,
                            f"the minibatch indices of a chunk ({chunk_size}, {batch_size})")
    validation.check_memory("num_particles", num_particles,
                            4.0 * num_particles * validation.num_latent(model, feature_shape),
                            f"{num_particles} draws of the weights")


def check_guide(model, guide, feature_shape: tuple) -> None:
    """Refuse a guide built for another model: its model's latent sites (names and shapes) for inputs of
    `feature_shape`, or the sites it was already set up with, must be `model`'s (a guide reused for another
    network would otherwise fail inside Haiku, or fit sites the model does not have). Guides that do not say
    which model they belong to (no ``model`` attribute) are not checked."""
    own = getattr(guide, "model", None)
    if own is None or not hasattr(model, "site_shapes"):
        return
    want = model.site_shapes(feature_shape)
    if own is not model and hasattr(own, "site_shapes"):
        problem = validation.site_mismatch(want, own.site_shapes(feature_shape), got_name="the guide's model")
        if problem:
            raise InputError("guide", f"<a guide built for another model: {problem}>",
                             "a guide built for this model, e.g. inference.mean_field(model)")
    sites = getattr(guide, "sites", None)
    if sites is not None:
        problem = validation.site_mismatch(want, {k: v.shape for k, v in sites.items()}, got_name="the guide")
        if problem:
            raise InputError("guide", f"<a guide set up for other inputs or another model: {problem}>",
                             "a guide of this model for these inputs: build a new one, e.g. "
                             "inference.mean_field(model)")


def _same_values(a, b) -> bool:
    """Whether the pytrees `a` and `b` (of one structure) hold equal values, compared on the host."""
    return all(np.array_equal(u, v) for u, v in zip(jax.tree.leaves(jax.device_get(a)),
                                                   jax.tree.leaves(jax.device_get(b))))


def svi_posterior(model, guide, state: SVIState, params, losses: np.ndarray, *, feature_shape: tuple,
                  config: dict | None, info: FitInfo, training_data: dict | None = None) -> SVIPosterior:
    """SVIPosterior of `state`: its constrained guide params `params` (a chunk's third output, or
    `CompiledFit.constrain` of ``state.params``), the unconstrained ones and the network state on the host,
    losses (steps,), feature_shape (x.shape[1:]), training_data: the fingerprint of the data fitted
    (`inference.model_identity.data_fingerprint`), which `to_arviz` checks before a log_likelihood group."""
    network_state = state.mutable.get(STATE_SITE, {}).get("state") if state.mutable else None
    return SVIPosterior(
        model=model, guide=guide, params=jax.device_get(params),
        state=jax.device_get(network_state), losses=losses,
        feature_shape=feature_shape, config=dict(config or {}), info=info,
        unconstrained=jax.device_get(state.params), training_data=training_data,
    )


def _concat(losses: list) -> np.ndarray:
    return np.concatenate(losses) if losses else np.zeros(0, np.float32)


def _progress(total, enabled, desc):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=f"SVI {desc}", leave=False, mininterval=0.5)
