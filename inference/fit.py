"""`fit`: stochastic variational inference with minibatches, a KL schedule and a likelihood temperature, run over
the pure SVI core `inference.svi`; it judges whether the ELBO converged (`inference.convergence`).

`fit` is a runner: it checks its arguments, draws the minibatch rows on the host with a seeded NumPy generator
(fixed batch size, last partial batch dropped, reshuffled every epoch; `inference.batches`) and passes them in,
and runs the steps a chunk at a time: `inference.svi.run_chunk`, one ``lax.scan`` of `inference.svi.step`
inside one ``jax.jit``, the training data its arguments. The chunk's program is compiled once per structure
(`inference.svi`'s module docstring: jit's own cache keyed by value objects), so a second fit of the same
structure compiles nothing.

The jobs around the steps are callbacks (`Callback`, the protocol below): the progress bar (`ProgressBar`,
`SummaryLine`), checkpoints (`Checkpoints`), the convergence judgement (`ConvergenceCheck`), the stop at a
non-finite loss (`NonFiniteStop`) and the collapse check (`CollapseCheck`) are built in and on by default;
``fit(..., callbacks=[...])`` adds the user's own after them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from inference import data_args, kl_schedules, svi
from base import validation
from base.defaults import DEFAULT_STEPS
from base.atomic_dir import check_folder, check_writable, folder_lock
from inference.batches import MinibatchOrder, minibatch_blocks
from inference.checkpoint import check_config
from inference.collapse import PosteriorCollapseWarning, check_collapse
from inference.convergence import ConvergenceWarning, judge
from inference.fit_state import load_fit_state, run_identity, save_fit_state, saved_step
from inference.mesh import check_mesh, put_replicated
from inference.optimizers import Optimizer, as_optimizer, cosine_adam
from inference.model_identity import data_fingerprint
from inference.estimators import as_estimator
from inference.posterior import ConstrainedParams, Posterior, SVIPosterior
from inference.run_info import FitInfo
from models.bridge import STATE_SITE
from base.errors import CheckpointWarning, InputError, ZooError


class NonFiniteLossError(ZooError, FloatingPointError):
    """Training hit a NaN/inf loss or gradient. ``.posterior`` holds the last finite state, ``.step`` the bad step."""

    exit_status = 3  # the `zoo` command's exit status for a NaN loss (base.errors.ZooError.exit_status)
    nonfinite_rows: tuple | None = None  # (bad rows, rows checked) of the data check, None when not checked

    def __init__(self, message, posterior, step):
        super().__init__(message)
        self.posterior = posterior
        self.step = step


def minibatch_indices(n: int, batch_size: int, steps: int, seed: int) -> np.ndarray:
    """(steps, batch_size) int32 indices, all at once: the rows `fit` draws block by block
    (`inference.batches.minibatch_blocks`)."""
    return np.concatenate(list(minibatch_blocks(n, batch_size, steps, seed, steps)))


DEFAULT_LR = 1e-2
DEFAULT_FINAL_LR = 1e-4


def default_steps(n_data: int, batch_size: int = 128) -> int:
    """`fit`'s number of steps when none is given, for `n_data` examples in minibatches of `batch_size` (positive
    integers, else InputError): `DEFAULT_STEPS` (1,000) whatever the data. Measured on real 28 x 28 digits
    (3,200 examples, batch 128, docs/defaults.md): mean field under the default sigma cap beat the point estimate
    on every validation score at 1,000 steps and not at 4,000, so the default was not raised with the data."""
    validation.check_positive_ints(n_data=n_data, batch_size=batch_size)
    return DEFAULT_STEPS


def default_optimizer(steps: int) -> Optimizer:
    """`fit`'s optimiser when none is given: Adam with its rate cosine-decayed from `DEFAULT_LR` (1e-2) to
    `DEFAULT_FINAL_LR` (1e-4) over `steps` updates (`inference.optimizers.cosine_adam`, a record whose numbers are
    data: another `steps` compiles nothing). The rate is this library's choice, not a paper's: the k-tied paper
    (app. D) picks Adam's rate per model on validation data from {1e-4, 3e-4, 1e-3, 3e-3}; only the guides' sigma
    init 0.01 comes from there (app. D, and D.4 for the k-tied factors)."""
    return cosine_adam(DEFAULT_LR, decay_steps=steps, alpha=DEFAULT_FINAL_LR / DEFAULT_LR)


def fit(model, guide, data, *, steps: int | None = None, batch_size: int = 128, optimizer=None,
        kl_warmup: int = 0, kl_schedule=None, temperature: float = 1.0, num_particles: int = 1, seed: int = 0, progress: bool = True,
        chunk_size: int = 500, init_params=None, config: dict | None = None,
        checkpoint_dir: str | None = None, checkpoint_every: int | None = None, resume: bool = False,
        estimator: str = "standard", callbacks=(), mesh=None, validation_data=None) -> Posterior:
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
      optimizer: an optimiser record (`inference.optimizers`: ``adam(learning_rate=...)``, its numbers
        data: another rate compiles nothing) or any optax GradientTransformation (one compile per object;
        default `default_optimizer(steps)`: Adam, its rate
        cosine-decayed from 1e-2 to 1e-4 over `steps`: this library's choice (the k-tied paper's app. D
        picks its rate on validation data from 1e-4 .. 3e-3; only the guides' sigma init 0.01 is from
        there); at a constant 1e-3 from sigma 1e-3 mean field's sigmas barely move on a large net in
        thousands of steps). Its decay steps are data: another `steps` compiles nothing;
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
      estimator: how the likelihood term is estimated (`inference.estimators`: an object, or its shorthand string;
        InputError naming the value and the choices otherwise): ``Standard()`` / "standard", one guide draw per
        minibatch; ``PerExample()`` / "per_example", an independent guide draw per example (the same ELBO, a
        lower-variance gradient: `inference.per_example`), B draws of every stochastic weight per step, refused
        for models with batch norm; ``Local()`` / "local": the local reparameterisation trick on the dense sites
        whose family offers a ``local_rule`` (`inference.local_reparam`: the same estimator's marginal,
        per-example pre-activations, no B weight draws) and Flipout on Gaussian convolution kernels; refused
        (InputError) for a guide without per-site families (full_covariance, low_rank, block_diagonal);
      progress: a tqdm bar over chunks, with the running loss; chunk_size: steps per scanned chunk (every
        chunk has this length, the last one padded with skipped steps, so any number of steps reuses one
        compiled update);
      init_params: where to start: a fitted SVI `Posterior` of a guide with the same parameters (warm start
        at its exact unconstrained parameters, `Posterior.unconstrained_params`), or unconstrained guide
        parameters {name: array}, every parameter of the guide with its shape (e.g. from
        `inference.warm_start.from_mean_field`). ``posterior.params`` (constrained: scales > 0) is refused, since it
        would be read as unconstrained values;
      config: extra JSON-able configuration saved with the posterior (checkpoints use it to rebuild);
      checkpoint_dir: a folder for the fit's state (`inference.fit_state`: unconstrained guide parameters,
        optimiser state, step, PRNG key, position in the minibatch order, mutable state, losses so far and
        what identifies the run), written atomically (`base.atomic_dir`): every `checkpoint_every`
        steps, at the end of the first chunk that reaches each multiple (chunks end every `chunk_size`
        steps), when the fit is interrupted (KeyboardInterrupt: Ctrl-C, or a signal handler raising it; the
        state at the last finished chunk), and at the end. A folder that already holds a fit state is
        refused unless `resume`;
      checkpoint_every: steps between saves (None: only on interruption and at the end);
      callbacks: more `Callback` objects (the protocol below), run after the built-in ones;
      validation_data: None, or held-out data (a `Dataset` or (x_val (M, *feature_shape), y_val (M,)), checked against the
        model as `data` is, InputError naming ``validation_data``) that the collapse check also judges (below); never
        trained on. Only the collapse check reads them (nothing is tuned on them);
      mesh: None (one device) or a ``jax.sharding.Mesh`` with a "data" axis, e.g.
        ``Mesh(np.array(jax.devices()), ("data",))``: data-parallel training (`inference.mesh`, docs/mesh.md).
        Each minibatch is split over the "data" axis (``NamedSharding(mesh, P("data"))``, B / D rows per
        device: `batch_size` must be a multiple of the axis's size D, else InputError), the training data,
        parameters and optimiser state are replicated, and the compiler partitions the step and sums the
        gradient across devices. The same seed gives the same minibatches, draws, losses and parameters as
        one device, to float rounding (the sums split over devices); checkpoints and resume work as without
        a mesh (a run may be resumed with another mesh or none). The mesh is part of the compiled program's
        key: a second fit with the same mesh compiles nothing. Several hosts: call
        ``jax.distributed.initialize(...)`` in every process, then ``fit(..., mesh=Mesh(np.array(jax.devices()),
        ("data",)))`` with the same data, seed and settings in every process (each loads the whole training
        set and draws the same global minibatch rows; every process returns the same Posterior; give each its
        own `checkpoint_dir`, e.g. by ``jax.process_index()``);
      resume: continue the fit saved in `checkpoint_dir` (a warning says so when there is none and the fit
        starts at step 0). The state is checked against this call (model, guide, steps, batch size, seed,
        KL warm-up, temperature, particles, chunk size, optimiser, data, init_params; a difference raises
        CheckpointError naming it), and the resumed fit's Posterior equals the uninterrupted fit's bit for bit (params and
        losses). A finished fit's state returns its Posterior without a step. An absent or empty folder holds
        no state: the warning, then step 0.

    The checkpoint folder, before any work (`base.atomic_dir`): it must be absent, empty or a fit state
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

    Compiled once per structure (`inference.svi`'s module docstring): the initialisation and the scanned update
    are module-level ``jax.jit`` functions whose static arguments are the model, the guide (compared by their
    declared configuration), n_data, num_particles, the estimator and the mesh; the optimiser is data (an
    `inference.optimizers` record's numbers live in its state). So another seed, another guide instance of the
    same kind, another ``zoo.get`` of the same entry, other data of the same shape, another learning rate or
    another number of steps compile nothing; a user's own optax object compiles once per object.

    Callbacks: the jobs around the steps are objects with any of four methods, called in list order:
    ``on_start(run)`` before the first chunk, ``on_chunk(run)`` after every finished chunk (not the one a
    non-finite step stopped), ``on_close(run, error)`` when the steps end (always; `error` the exception that
    ended them, e.g. KeyboardInterrupt, or None) and ``on_end(run, posterior) -> posterior`` once the result is
    built (it may return a new one or raise). `run` is the `FitRun` (the state, the losses so far, the steps
    done, the first non-finite step...). Built in, in this order: `Checkpoints` (with `checkpoint_dir`),
    `ProgressBar` (with `progress`), `ConvergenceCheck`, `NonFiniteStop`, `CollapseCheck`,
    `SummaryLine` (with `progress`); then `callbacks`.

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
    "POSTERIOR COLLAPSED" and a `PosteriorCollapseWarning` is issued. With `validation_data`, up to 256 of its rows are
    judged the same way and a posterior that predicts them no better than the prior / an input-free predictor
    has collapsed too (``info.collapse["held_out"]`` has those numbers): training rows alone miss a network
    that memorised them (digits with shuffled labels: held-out accuracy at chance, training rows well
    predicted). Not judged (None) for models that are not a `models.BNN`.

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
                    estimator=estimator, callbacks=callbacks, mesh=mesh,
                    validation_data=validation_data)


def _fit(model, guide, data, *, steps, batch_size, optimizer, kl_warmup, kl_schedule, temperature, num_particles, seed,
         progress, chunk_size, init_params, config, checkpoint_dir, checkpoint_every, resume,
         estimator, callbacks, mesh, validation_data) -> Posterior:
    """`fit`'s work (the same arguments and result), inside its checkpoint folder's lock."""
    # the arguments first (a bad `steps` is named before the data are read), the default steps from the data
    check_fit_args(steps=DEFAULT_STEPS if steps is None else steps, batch_size=batch_size,
                   num_particles=num_particles, chunk_size=chunk_size, kl_warmup=kl_warmup)
    temperature = validation.check_real("temperature", temperature, low=0.0)
    validation.check_seed(seed)
    estimator = as_estimator(estimator)
    callbacks = check_callbacks(callbacks)
    config = check_config(config)
    x, y = labelled_arrays(model, data, "training")
    if steps is None:
        steps = default_steps(x.shape[0], batch_size)
    betas = kl_betas(kl_warmup, kl_schedule, steps)
    feature_shape = tuple(np.shape(x)[1:])
    held_out = check_validation_data(model, validation_data, feature_shape)
    check_guide(model, guide, feature_shape)
    n = x.shape[0]
    batch_size = min(batch_size, n)
    mesh = check_mesh(mesh, batch_size)
    check_fit_memory(model, feature_shape, batch_size, chunk_size, num_particles)
    optimizer = as_optimizer(optimizer if optimizer is not None else default_optimizer(steps))
    start = start_params(init_params)
    t0 = time.perf_counter()
    init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    # the first batch cut on the host: slicing device arrays compiles an op by op program per shape
    x_dev, y_dev = (jnp.asarray(x), jnp.asarray(y)) if mesh is None else put_replicated((x, y), mesh)
    xb, yb = jnp.asarray(x[:batch_size]), jnp.asarray(y[:batch_size])
    settings = svi.compiled_settings(model, guide, n, num_particles, estimator, mesh)
    traces_before = svi.compiled_updates()
    state = start_state(settings, optimizer, init_key, xb, yb, start)
    run = FitRun(model=model, guide=guide, x=x, y=y, steps=steps, config=config, t0=t0, initial=state, state=state,
                 order=MinibatchOrder(n, batch_size, seed), rng_key=run_key, fingerprint=data_fingerprint(x, y))
    builtin: list = []
    if checkpoint_dir is not None:
        identity = run_identity(model, guide, optimizer, state.opt_state, x, y, feature_shape=feature_shape,
                                steps=steps, batch_size=batch_size, seed=seed, kl_warmup=kl_warmup,
                                temperature=temperature,
                                estimator=estimator, num_particles=num_particles,
                                chunk_size=chunk_size, init_params=start,
                                kl_schedule=None if kl_schedule is None else kl_schedules.betas_digest(betas))
        saver = Checkpoints(checkpoint_dir, identity, checkpoint_every, run_key)
        resumed = saver.restore(state, resume)
        if resumed is not None:
            run.resume_from(resumed, MinibatchOrder(n, batch_size, state=resumed.order))
            saver.rng_key = run.rng_key
        builtin.append(saver)
    if progress:
        builtin.append(ProgressBar(getattr(model, "name", "model")))
    builtin += [ConvergenceCheck(), NonFiniteStop(), CollapseCheck(held_out)]
    if progress:
        builtin.append(SummaryLine(getattr(model, "name", "model")))
    hooks = builtin + callbacks
    temp = np.float32(temperature)  # a host scalar: no eager conversion compiled
    # with a mesh every argument is replicated on it (the initial or resumed state once, through the host)
    place = (lambda tree: tree) if mesh is None else (lambda tree: put_replicated(tree, mesh))

    def run_chunk(state, idx, step_ids):  # the betas: host data of the chunk's steps (padding: 0)
        kl = np.where(step_ids >= 0, betas[np.clip(step_ids, 0, max(steps - 1, 0))], 0).astype(np.float32)
        return svi.run_chunk(*place((state, run.rng_key)), x_dev, y_dev, *place((idx, step_ids, kl, temp, optimizer)),
                             **settings)

    _call(hooks, "on_start", run)
    error = None
    try:
        run_steps(run, run_chunk, run.order.blocks(steps - run.done, chunk_size), chunk_size, hooks)
    except BaseException as err:
        error = err
        raise
    finally:
        _call(hooks, "on_close", run, error)
    info = FitInfo(first_step_s=run.first_step_s, fit_s=time.perf_counter() - t0,
                   traces=svi.compiled_updates() - traces_before, temperature=temperature,
                   final_kl_weight=float(betas[-1]) if steps else None)
    params = (svi.constrained(run.state.params, xb, yb, guide=settings["guide"], n_data=n) if run.params is None
              else run.params)  # no chunk ran
    post = svi_posterior(model, guide, run.state, params, run.losses(), feature_shape=feature_shape, config=config,
                         info=info, training_data=run.fingerprint)
    for hook in hooks:
        if hasattr(hook, "on_end"):
            post = hook.on_end(run, post)
    return post


def _call(hooks: list, method: str, *args) -> None:
    """Call ``hook.method(*args)`` for every hook that has the method, in order."""
    for hook in hooks:
        fn = getattr(hook, method, None)
        if fn is not None:
            fn(*args)


def check_callbacks(callbacks) -> list:
    """`fit`'s ``callbacks`` as a list: a sequence of objects with at least one of the `Callback` methods;
    InputError naming the first that has none."""
    if isinstance(callbacks, (str, bytes)) or not isinstance(callbacks, (list, tuple)):
        raise InputError("callbacks", callbacks, "a list of callback objects (methods on_start, on_chunk, on_close, "
                         "on_end)")
    for i, hook in enumerate(callbacks):
        if not any(callable(getattr(hook, m, None)) for m in CALLBACK_METHODS):
            raise InputError(f"callbacks[{i}]", hook, f"an object with a method among {CALLBACK_METHODS}")
    return list(callbacks)


CALLBACK_METHODS = ("on_start", "on_chunk", "on_close", "on_end")


class Callback(Protocol):
    """What `fit` calls on a callback (any subset of the four methods; see `fit`'s docstring, "Callbacks")."""

    def on_start(self, run: "FitRun") -> None:
        """Before the first chunk (after a resumed state was read)."""

    def on_chunk(self, run: "FitRun") -> None:
        """After every finished chunk: ``run.state``, ``run.params``, ``run.done``, ``run.last_count`` are that
        chunk's; the next minibatch rows are not drawn yet."""

    def on_close(self, run: "FitRun", error: BaseException | None) -> None:
        """When the steps end: normally, at a non-finite step (``run.bad_step`` set) or by `error`."""

    def on_end(self, run: "FitRun", posterior: Posterior) -> Posterior:
        """Once the result is built: return it (changed or not) or raise."""
        return posterior


@dataclass(eq=False)
class FitRun:
    """What `fit` runs and what callbacks read: the model, guide, training data x (N, ...), y (N,), `steps`,
    `config`, t0 (``time.perf_counter()`` at the start), `initial` (the SVIState at step 0, or the resumed one),
    `state` (the current one; the last finite one after a stop), `params` (its constrained parameters, None
    before the first chunk), `done` (steps done), `last_count` (steps of the last chunk), the `MinibatchOrder`
    `order`, the run's `rng_key`, the data's `fingerprint`, `first_step_s` (seconds to the end of the first
    chunk), `bad_step` / `bad_what` (the first non-finite step and "loss" or "gradient"; None while every step
    was finite), the losses and gradient norms of a resumed fit's earlier steps (`losses_before`,
    `norms_before`) and of every chunk (`loss_chunks`, `norm_chunks`)."""

    model: object
    guide: object
    x: np.ndarray
    y: np.ndarray
    steps: int
    config: dict
    t0: float
    initial: svi.SVIState
    state: svi.SVIState
    order: MinibatchOrder
    rng_key: object
    fingerprint: dict
    params: dict | None = None
    done: int = 0
    last_count: int = 0
    first_step_s: float | None = None
    bad_step: int | None = None
    bad_what: str | None = None
    losses_before: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    norms_before: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    loss_chunks: list = field(default_factory=list)
    norm_chunks: list = field(default_factory=list)

    def resume_from(self, resumed, order: MinibatchOrder) -> None:
        """Continue from a saved `inference.fit_state.FitState` and its minibatch `order`."""
        # device arrays (``jax.device_put``: a copy, nothing compiled), as a fresh run's state and key are: host
        # arrays would be another entry of the jitted update's cache (`inference.svi.compiled_updates`)
        # `initial` stays the state at step 0: whether the parameters moved is judged on it
        self.state = jax.device_put(resumed.state)
        self.done, self.losses_before, self.norms_before = resumed.step, resumed.losses, resumed.grad_norms
        self.rng_key, self.order = jax.device_put(np.asarray(resumed.rng_key)), order

    def losses(self) -> np.ndarray:
        """(done,) float32 the loss of every step that updated the state, a resumed fit's earlier ones included."""
        return np.concatenate([self.losses_before, *self.loss_chunks])

    def grad_norms(self) -> np.ndarray:
        """(done,) float32 the gradient norm of those steps."""
        return np.concatenate([self.norms_before, *self.norm_chunks])

    def posterior(self, info: FitInfo | None = None) -> SVIPosterior:
        """The SVIPosterior of the current state (after a chunk), `info` None while training."""
        return svi_posterior(self.model, self.guide, self.state, self.params, self.losses(),
                             feature_shape=tuple(np.shape(self.x)[1:]), config=self.config, info=info,
                             training_data=self.fingerprint)


@contextlib.contextmanager
def checkpoint_folder(path):
    """The block runs with the fit-state folder `path` checked and locked (nothing to do for None): raises
    `FolderNotOwnedError` unless it is absent, empty or a fit state (`base.atomic_dir.check_folder`),
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

    def restore(self, template: svi.SVIState, resume: bool):
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
        optimizer = self.identity.get("optimizer") or {}
        if optimizer.get("config") is None and not optimizer.get("hyperparams"):
            warnings.warn(CheckpointWarning(
                "checkpoint_dir: the optimiser is the user's own optax object, whose learning rate this library "
                "does not read, so resuming cannot tell whether it is the one the state was saved with; only its "
                "state's structure is compared (an optimiser record, inference.optimizers.adam(learning_rate=...), is "
                "compared by its numbers)"), stacklevel=4)
        resumed = load_fit_state(self.path, self.identity, template)
        if resumed is None:
            warnings.warn(f"checkpoint_dir: no saved fit state at {str(self.path)!r}; the fit starts at step 0",
                          stacklevel=4)
            return None
        self.saved_step = resumed.step
        return resumed

    def on_chunk(self, run: FitRun) -> None:
        """`chunk_done` with the run's state after the chunk."""
        self.chunk_done(run.state, run.done, (run.losses_before, run.norms_before), (run.loss_chunks, run.norm_chunks),
                        run.order.state())

    def on_close(self, run: FitRun, error) -> None:
        """The last save: at the end of a run every step of which was finite, or at an interruption
        (KeyboardInterrupt: the state at the last finished chunk)."""
        if (error is None and run.bad_step is None) or isinstance(error, KeyboardInterrupt):
            self.save_last(final=error is None)

    def chunk_done(self, state: svi.SVIState, step: int, before: tuple, chunks: tuple, order: tuple):
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


def start_state(settings: dict, optimizer, rng_key, xb, yb, init_params: Mapping | None = None) -> svi.SVIState:
    """The SVIState at step 0 (`inference.svi.initial_state`, compiled once per `settings`,
    `inference.svi.compiled_settings`) for the minibatch xb (B, ...), yb (B,) and the optimiser pytree
    `optimizer` (`inference.optimizers.as_optimizer`).

    `init_params`: unconstrained guide parameters {name: array} to start from instead of the guide's
    initialisers; it must hold every guide parameter with its shape (extra entries are ignored). Raises
    InputError naming the missing parameters or the first one of another shape (checked against
    `inference.svi.param_shapes`, an abstract trace, before anything is compiled).
    """
    if init_params is not None:
        shapes = svi.param_shapes(settings["guide"], (xb, yb), settings["n_data"])
        init_params = svi.check_init_params(init_params, shapes)
    return svi.initial_state(rng_key, xb, yb, init_params, optimizer, **settings)


def run_steps(run: FitRun, run_chunk, blocks, chunk_len: int, hooks: list) -> None:
    """Run the steps of `blocks` a chunk at a time into `run`, stopping at the first non-finite one.

    run_chunk(state, idx (chunk_len, B), step_ids (chunk_len,)) -> (state, (losses, updated, grad_norms),
    params) is the jitted chunk (`inference.svi.run_chunk`) with the key, data and KL weights bound; blocks: an
    iterable of (count, B) minibatch index arrays, count <= chunk_len, in step order
    (`inference.batches.minibatch_blocks`); each is padded to `chunk_len` (step id -1), so every chunk has one
    compiled shape. After every chunk that finished without a non-finite step, ``hook.on_chunk(run)`` for every
    hook that has it, before the next block is asked for. A stopped chunk records its losses up to the bad
    step and ``run.bad_step`` (global) and ``run.bad_what``, and ends the run.
    """
    for block in blocks:
        count = len(block)
        idx = np.zeros((chunk_len,) + block.shape[1:], np.int32)
        idx[:count] = block
        step_ids = np.full(chunk_len, -1, np.int32)
        step_ids[:count] = np.arange(run.done, run.done + count)
        state, (chunk_losses, updated, chunk_norms), params = run_chunk(run.state, idx, step_ids)
        chunk_losses, chunk_norms = np.asarray(chunk_losses)[:count], np.asarray(chunk_norms)[:count]
        if run.first_step_s is None:
            run.first_step_s = time.perf_counter() - run.t0
        run.state, run.params = state, params
        if bool(state.stopped):
            bad = int(np.flatnonzero(~np.asarray(updated)[:count])[0])
            run.bad_what = "loss" if not np.isfinite(chunk_losses[bad]) else "gradient"
            run.loss_chunks.append(chunk_losses[:bad])
            run.norm_chunks.append(chunk_norms[:bad])
            run.bad_step = run.done + bad
            return
        run.loss_chunks.append(chunk_losses)
        run.norm_chunks.append(chunk_norms)
        run.done += count
        run.last_count = count
        _call(hooks, "on_chunk", run)


def non_finite_error(run: FitRun, posterior: Posterior, x=None) -> NonFiniteLossError:
    """The NonFiniteLossError of a run stopped at ``run.bad_step``, carrying `posterior` (the last finite state).

    x (N, ...): training inputs; when given, `posterior` is checked on up to `PREDICTION_CHECK_ROWS` of them
    (`prediction_check`): parameters driven to extreme values before the stop predict NaN/inf for some inputs,
    and the message says so (``err.nonfinite_rows``: (bad rows, rows checked), None when not checked)."""
    step = run.bad_step
    assert step is not None  # only called for a stopped run
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


# ----- the built-in callbacks (`Callback`) -----------------------------------------------------------------------
class ProgressBar:
    """A tqdm bar over the steps, advanced after every chunk with that chunk's mean loss; closed when the steps
    end."""

    def __init__(self, desc: str):
        self.desc: str = desc
        self.bar: Any = None  # the tqdm bar, from on_start

    def on_start(self, run: FitRun) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=run.steps, desc=f"SVI {self.desc}", leave=False, mininterval=0.5)
        self.bar.update(run.done)

    def on_chunk(self, run: FitRun) -> None:
        self.bar.update(run.last_count)
        self.bar.set_postfix(loss=f"{float(np.mean(run.loss_chunks[-1])):.4g}")

    def on_close(self, run: FitRun, error) -> None:
        self.bar.close()


class ChunkHook:
    """A callback calling ``fn(steps done, posterior so far)`` after every finished chunk: ``fit(...,
    callbacks=[ChunkHook(fn)])`` (the one hook path; `fit` has no ``on_chunk`` argument)."""

    def __init__(self, fn):
        self.fn = fn

    def on_chunk(self, run: FitRun) -> None:
        self.fn(run.done, run.posterior())


class ConvergenceCheck:
    """`inference.convergence.judge` of the losses and gradient norms: sets ``info.converged`` and
    ``info.convergence``; a `ConvergenceWarning` when the ELBO has not converged (none for a run a non-finite
    step stopped: `NonFiniteStop` raises)."""

    def on_end(self, run: FitRun, posterior: Posterior) -> Posterior:
        losses = run.losses()
        moved = None if not len(losses) else not _same_values(run.initial.params, run.state.params)
        convergence = judge(losses, run.grad_norms(), moved=moved)
        posterior.info = fit_info(posterior)._replace(converged=convergence["converged"], convergence=convergence)
        if not convergence["converged"] and run.bad_step is None:
            warnings.warn(ConvergenceWarning(f"fit: the ELBO has not converged ({convergence['reason']}). "
                                             "Run more steps (or raise the learning rate); "
                                             "posterior.info.convergence has the numbers", convergence),
                          stacklevel=4)
        return posterior


class NonFiniteStop:
    """Raise the `NonFiniteLossError` (`non_finite_error`) of a run a non-finite loss or gradient stopped."""

    def on_end(self, run: FitRun, posterior: Posterior) -> Posterior:
        if run.bad_step is not None:
            raise non_finite_error(run, posterior, run.x)
        return posterior


def check_validation_data(model, validation_data, feature_shape: tuple):
    """`fit`'s ``validation_data``: None, or (x_val float32 (M, *feature_shape), y_val (M,)) of a `Dataset` or an (x, y)
    pair, checked against `model` and the training data's feature shape (InputError naming ``validation_data``)."""
    if validation_data is None:
        return None
    x, y, num_classes, _ = data_args.as_arrays(validation_data, arg="validation_data")
    if y is None:
        raise InputError("validation_data", "<(x, None)>", "held-out data with labels y")
    return data_args.check_model_data(model, x, y, num_classes, arg="validation_data", feature_shape=feature_shape)


class CollapseCheck:
    """`inference.collapse.check_collapse` on the training data and, when given, the held-out rows (x_val, y_val):
    sets ``info.collapsed`` and ``info.collapse``; a `PosteriorCollapseWarning` when the posterior ignores the
    data."""

    def __init__(self, held_out=None):
        self.held_out = held_out

    def on_end(self, run: FitRun, posterior: Posterior) -> Posterior:
        collapse = check_collapse(posterior, run.x, run.y, held_out=self.held_out)
        if collapse is not None:
            posterior.info = fit_info(posterior)._replace(collapsed=collapse["collapsed"], collapse=collapse)
            if collapse["collapsed"]:
                what = ("it predicts held-out rows no better than a predictor that never saw the data (memorised "
                        "training rows?)" if "held-out examples" in collapse["reason"] else "it predicts like the prior")
                warnings.warn(PosteriorCollapseWarning(
                    f"fit: the posterior ignores the data ({collapse['reason']}); {what}. "
                    "posterior.info.collapse has the numbers", collapse), stacklevel=4)
        return posterior


class SummaryLine:
    """The closing line on stderr: steps, final loss (mean of the last 5 %) and ``info.summary()``."""

    def __init__(self, desc: str):
        self.desc = desc

    def on_end(self, run: FitRun, posterior: Posterior) -> Posterior:
        losses = run.losses()
        print(f"SVI {self.desc}: {len(losses)} steps, final loss "
              f"{float(np.mean(losses[-max(1, len(losses) // 20):])):.6g}; {fit_info(posterior).summary()}",
              file=sys.stderr)
        return posterior


PREDICTION_CHECK_ROWS = 256  # training inputs a NaN-stopped fit's posterior is checked on
PREDICTION_CHECK_DRAWS = 10  # its draws per input


def fit_info(posterior: Posterior) -> FitInfo:
    """The `FitInfo` of a posterior `fit` built (its callbacks read and replace it)."""
    info = posterior.info
    assert isinstance(info, FitInfo), "a posterior fit built carries a FitInfo"
    return info


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


def svi_posterior(model, guide, state: svi.SVIState, params, losses: np.ndarray, *, feature_shape: tuple,
                  config: dict | None, info: FitInfo | None, training_data: dict | None = None) -> SVIPosterior:
    """SVIPosterior of `state`: its constrained guide params `params` (a chunk's third output, or
    `inference.svi.constrained` of ``state.params``), the unconstrained ones and the network state on the host,
    losses (steps,), feature_shape (x.shape[1:]), training_data: the fingerprint of the data fitted
    (`inference.model_identity.data_fingerprint`), which `to_arviz` checks before a log_likelihood group."""
    network_state = state.mutable.get(STATE_SITE, {}).get("state") if state.mutable else None
    return SVIPosterior(
        model=model, guide=guide, params=jax.device_get(params),
        state=jax.device_get(network_state), losses=losses,
        feature_shape=feature_shape, config=dict(config or {}), info=info,
        unconstrained=jax.device_get(state.params), training_data=training_data,
    )
