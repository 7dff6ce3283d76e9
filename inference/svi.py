"""The SVI core: pure ``init`` and ``step`` functions (blackjax style); the user jits them, `inference.fit` runs them.

    loss(params) = -( E_q[log p(y | x, w)] * N/B / T  -  beta * KL(q || p) )            (`inference.elbo`)

One step draws one guide sample per particle (``estimator="standard"``), one per example ("per_example",
`inference.per_example`) or uses the local reparameterisation trick ("local", `inference.local_reparam`),
scales the minibatch's log-likelihood by ``n_data / B``, takes the gradient with respect to the unconstrained
guide parameters and applies one optax update. ``beta`` (the KL weight) and ``temperature`` (T) are arguments,
data rather than constants: a KL schedule or another temperature never recompiles a jitted step.

Example (runs as written; `inference.fit` does the same with minibatches, checkpoints and progress)::

    import jax
    import optax
    import inference
    import zoo
    from inference import svi

    entry = zoo.get("mlp", data="two_moons", hidden=(8,), data_kwargs={"n": 64})
    model, guide = entry.model, inference.mean_field(entry.model)
    x, y = entry.train.x[:32], entry.train.y[:32]
    algorithm = svi.build(model, guide, optax.adam(1e-2), n_data=len(entry.train.x))
    state = jax.jit(algorithm.init)(jax.random.PRNGKey(0), (x, y))
    step = jax.jit(algorithm.step)
    for t in range(20):
        state, info = step(state, (x, y), jax.random.PRNGKey(t + 1), beta=min(1.0, (t + 1) / 10))
    params = svi.constrain(svi.param_constraints(guide, (x, y), len(entry.train.x)), state.params)

Both functions are pure: ``init(key, batch) -> SVIState`` and ``step(state, batch, key, beta=, temperature=) ->
(SVIState, StepInfo)``, NamedTuples of arrays; ``build`` only binds the model, guide, optimiser and settings
(``functools.partial`` of the module-level `init` / `step`, which take them as keyword arguments).

Compile once (how `inference.fit` reuses compiled code): the scanned update `run_chunk`, `initial_state` and
`constrained` are module-level ``jax.jit`` functions; jit's own cache is the only cache. Their static keyword
arguments (`COMPILED_SETTINGS`) are the model (compared by its declared configuration, `base.value_key.Static`:
a `models.BNN` built by ``zoo.get``; anything else by identity), the guide (a value whose equality is its
configuration: a `SiteGuide` or `JointGaussian` built for an equal model; any other guide by identity), n_data,
num_particles, the estimator (`inference.estimators`: a frozen object) and the mesh. The optimiser is an ordinary
(pytree) argument: an `inference.optimizers` record's numbers (learning rate, decay steps) are traced leaves and
live in the optimiser's state, so another learning rate or another number of steps compiles nothing; a user's own
optax object is a pytree without leaves keyed by identity (one compile per object; nothing reads its code). The
minibatch shapes and dtypes and the chunk length are part of jit's key as usual; the data, the step numbers,
the KL weights and the temperature are arguments. Nothing is filled while tracing: the parameters' constraints
and shapes are computed by an abstract trace of the guide's initialisation (`param_constraints`, `param_shapes`)
wherever they are needed.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh
from numpyro import handlers

from inference.guide_params import guide_params, param_constraints, param_structure
from inference.svi_checks import (check_batch, check_finite_params, check_key, check_n_data, check_num_particles,
                                  check_scalar, check_state)
from base.registry import ESTIMATORS
from inference.estimators import as_estimator
from models.bridge import BNN, STATE_SITE, constrain
from base.errors import InputError
from base.prng import flat_key
from base.value_key import Static
from inference.optimizers import as_optimizer
from inference.mesh import replicate, shard_rows

__all__ = ["SVIState", "StepInfo", "SVI", "build", "init", "step", "run", "param_constraints", "param_shapes",
           "constrain", "initial_params", "initial_mutable", "guide_param_init", "ESTIMATORS"]


class SVIState(NamedTuple):
    """params: {name: array} unconstrained guide parameters; opt_state: the optimiser's state; mutable: {site:
    value} the model's mutable sites (batch-norm state; {} for most models); stopped: bool scalar, a step whose
    loss or gradient was not finite was seen (its update was not applied)."""

    params: dict
    opt_state: object
    mutable: dict
    stopped: jnp.ndarray


class StepInfo(NamedTuple):
    """loss: float32 scalar, the step's loss (the module docstring's, at the parameters before the update);
    grad_norm: float32 scalar, the global norm of its gradient; finite: bool scalar, whether both were finite
    (and so the update applied)."""

    loss: jnp.ndarray
    grad_norm: jnp.ndarray
    finite: jnp.ndarray


class SVI(NamedTuple):
    """What `build` returns: ``init(key, batch, init_params=None) -> SVIState``, ``step(state, batch, key,
    beta=1.0, temperature=1.0) -> (SVIState, StepInfo)`` and ``run(state, data, key, num_steps, batch_size=None,
    beta=1.0, temperature=1.0) -> (SVIState, StepInfo of (num_steps,))`` (`run` with this `step`)."""

    init: Callable
    step: Callable
    run: Callable | None = None


def build(model, guide, optimizer, *, n_data: int, num_particles: int = 1, estimator: str = "standard") -> SVI:
    """The `SVI` pair of `init` and `step` with the model, guide (an `inference` guide), optimiser (an optax
    GradientTransformation, or an object with its own ``build_svi(model, guide, n_data=, num_particles=,
    estimator=)`` returning the pair, as `inference.ivon`'s), n_data (N, the data set's size), num_particles and
    estimator (one of `ESTIMATORS`, InputError otherwise) bound; pure functions, jit them (the module docstring's
    example). n_data (an integer >= 1), num_particles (an integer >= 1) and the optimiser's type are checked here
    (InputError / ArgumentTypeError naming them); `init` and `step` check the rest (`inference.svi_checks`)."""
    estimator = as_estimator(estimator)
    check_n_data(n_data)
    check_num_particles(num_particles)
    optimizer = as_optimizer(optimizer)
    own: Any = getattr(optimizer, "tx", None)
    if callable(getattr(own, "build_svi", None)):  # an algorithm of its own over the guide (`inference.ivon`)
        pair = own.build_svi(model, guide, n_data=n_data, num_particles=num_particles, estimator=estimator)
        return pair if pair.run is not None else pair._replace(run=functools.partial(run, step=pair.step))
    fixed = dict(model=model, guide=guide, optimizer=optimizer, n_data=n_data)
    step_fn = functools.partial(step, **fixed, num_particles=num_particles, estimator=estimator)
    return SVI(functools.partial(init, **fixed), step_fn, functools.partial(run, step=step_fn))


def initial_params(guide, key, batch, n_data) -> dict:
    """{name: array} the guide's own initial unconstrained parameters for a minibatch batch = (x (B, ...),
    y (B,)); every leaf strongly typed (an initialiser's constants are weakly typed), so that a state read back
    from a checkpoint (NumPy arrays, never weak) has the very types of this one. Traceable."""
    x, y = batch
    params_u, _ = guide_params(guide, key, x, y, n_data)
    return {k: jnp.asarray(v, dtype=jnp.result_type(v)) for k, v in params_u.items()}


def param_shapes(guide, batch, n_data) -> dict:
    """{param name: jax.ShapeDtypeStruct} of `guide`'s unconstrained parameters for minibatches shaped like
    batch = (x, y), by an abstract trace (nothing computed)."""
    return jax.eval_shape(lambda key: initial_params(guide, key, batch, n_data), jax.random.PRNGKey(0))


def initial_mutable(model, guide, key, batch, n_data) -> dict:
    """{site: value} the model's mutable sites before training: a `BNN`'s network state from the bridge ({} for a
    network without state); other models are traced once (replayed against the guide)."""
    x, y = batch
    if isinstance(model, BNN):
        return {STATE_SITE: {"state": model.initial_state(x)}} if model.is_stateful(x) else {}
    guide_trace = handlers.trace(handlers.seed(guide, key)).get_trace(x, y, n_data)
    model_trace = handlers.trace(handlers.replay(handlers.seed(model, key), guide_trace)).get_trace(x, y, n_data)
    return {k: s["value"] for k, s in model_trace.items() if s["type"] == "mutable"}


def check_init_params(init_params, shapes: dict) -> dict:
    """{name: array} the entries of `init_params` (unconstrained guide parameters) that the guide has, checked
    against `shapes` ({name: ShapeDtypeStruct}, `param_shapes`): InputError naming the missing parameters or the
    first one of another shape, or one with NaN / inf entries (when concrete). Extra entries are ignored."""
    missing = sorted(set(shapes) - set(init_params))
    if missing:
        raise InputError.worded("init_params", f"init_params: missing guide parameters {missing[:5]}"
                                + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    for name, want in shapes.items():
        if tuple(np.shape(init_params[name])) != tuple(want.shape):
            raise InputError.worded(f"init_params[{name!r}]",
                                    f"init_params[{name!r}]: expected shape {tuple(want.shape)}, got "
                                    f"{tuple(np.shape(init_params[name]))}")
    start = {k: init_params[k] for k in shapes}
    check_finite_params(start)
    return start


def init(key, batch, *, model, guide, optimizer, n_data, init_params=None) -> SVIState:
    """The SVIState at step 0 for minibatches like batch = (x (B, ...), y (B,)); pure and jit-able.

    key: a PRNG key (the guide's random initialisers); init_params: None (the guide's initialisers) or
    unconstrained guide parameters {name: array} to start from, every parameter of the guide with its shape
    (InputError naming the first that is missing or of another shape, or concrete with NaN / inf entries; extra
    entries are ignored).

    Checked (InputError / ArgumentTypeError naming the argument, before anything is computed; `inference.svi_checks`
    says what is not checked inside jit): the optimiser's type, the key (a PRNG key), the batch's shapes and dtypes
    against the model (x of the model's feature shape, B >= 1 rows in x and y, labels of the likelihood's shape and
    dtype; concrete labels within the network's classes) and n_data (an integer >= B).
    """
    tx = as_optimizer(optimizer).transformation()
    check_key(key)
    x, _ = check_batch(model, batch)
    check_n_data(n_data, x.shape[0])
    if isinstance(init_params, dict):
        check_finite_params(init_params)  # before anything is computed
    params_u = initial_params(guide, key, batch, n_data)
    if init_params is not None:
        start = check_init_params(init_params, {k: jax.ShapeDtypeStruct(jnp.shape(v), v.dtype)
                                                for k, v in params_u.items()})
        params_u = {k: jnp.asarray(start[k], dtype=v.dtype) for k, v in params_u.items()}
    mutable = initial_mutable(model, guide, key, batch, n_data)
    return SVIState(params_u, tx.init(params_u), mutable, jnp.array(False))


def step(state: SVIState, batch, key, *, model, guide, optimizer, n_data, beta=1.0, temperature=1.0,
         num_particles: int = 1, estimator: str = "standard") -> tuple[SVIState, StepInfo]:
    """One SVI update on batch = (x (B, ...), y (B,)) with PRNG key `key`: (the new SVIState, its `StepInfo`).

    beta: the KL weight (scalar, traced: a schedule passes beta_t); temperature: T > 0, the log-likelihood is
    divided by it (scalar, traced); n_data: N, the minibatch's log-likelihood is scaled by N / B; estimator:
    one of `ESTIMATORS` (InputError otherwise); num_particles: independent estimates averaged.
    A step whose loss or gradient is not finite leaves the parameters, the optimiser state and the mutable
    state unchanged and sets ``stopped``; `step` does not read ``stopped`` (a runner decides what to do next:
    `inference.fit` stops).

    Checked at trace time or on the host, costing nothing per compiled step (InputError / ArgumentTypeError naming
    the argument): what `init` checks, num_particles (an integer >= 1), a Python / concrete beta >= 0 and
    temperature > 0, and the state (an SVIState whose parameters are this guide's, by name and shape: a state made
    by another guide is refused). Not checked inside jit (values of the trace, `inference.svi_checks`): a traced
    beta < 0 or temperature <= 0 marks the step not finite (no update, ``stopped`` set); out-of-range traced labels
    give an infinite loss (not finite, no update); NaN / inf in x or y.
    """
    tx = as_optimizer(optimizer).transformation()
    check_num_particles(num_particles)
    check_key(key)
    x, y = check_batch(model, batch)
    check_n_data(n_data, x.shape[0])
    valid = check_scalar("temperature", temperature, positive=True)
    valid = valid & check_scalar("beta", beta, positive=False)
    loss_of = as_estimator(estimator).loss
    shapes, constraints = param_structure(guide, batch, n_data)
    check_state(state, shapes, SVIState)

    def loss_fn(params_u, mutable):
        return loss_of(key, constrain(constraints, params_u), model, guide, beta, num_particles, x, y, n_data,
                       temperature=temperature, mutable=mutable)

    (loss, mutable), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, state.mutable)
    grad_norm = optax.tree.norm(grads)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
    if valid is not True:  # a traced beta or temperature: one that is out of range stops, as a non-finite step
        finite = finite & valid

    def update(_):
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        return SVIState(optax.apply_updates(state.params, updates), opt_state, mutable, state.stopped)

    def stop(_):
        return state._replace(stopped=jnp.array(True))

    new_state = jax.lax.cond(finite, update, stop, None)
    return new_state, StepInfo(loss.astype(jnp.float32), grad_norm.astype(jnp.float32), finite)


# ----- many steps in one scan: `run` (the user's), `run_chunk` (fit's) -------------------------------------------
def scan_steps(step_fn, state: SVIState, key, x, y, idx, steps, betas, temperature, mesh: Mesh | None = None):
    """(state, (losses, updated, grad_norms)): ``lax.scan`` of ``step_fn(state, batch, key, beta=, temperature=)``
    (a bound `step`) over the minibatch rows idx (C, B) int32 of the data x (N, ...), y (N,), the step numbers
    steps (C,) int32 (-1: padding, skipped) and the KL weights betas (C,) float32. Step t's key is
    ``fold_in(flat_key(key), t)``; a padding step, or any step once ``stopped`` is set, skips the computation
    (``lax.cond``): loss and gradient norm NaN, updated False. With `mesh` each minibatch is constrained to be
    split over its "data" axis (`inference.mesh.shard_rows`)."""
    key = flat_key(key)  # the same draws, compiled faster (`base.prng`)

    def one_step(state, inputs):
        rows, t, beta = inputs

        def active(state):
            batch = (x[rows], y[rows]) if mesh is None else shard_rows((x[rows], y[rows]), mesh)
            new, info = step_fn(state, batch, jax.random.fold_in(key, t), beta=beta, temperature=temperature)
            return new, info.loss, info.finite, info.grad_norm

        def skip(state):
            return state, jnp.array(jnp.nan, jnp.float32), jnp.array(False), jnp.array(jnp.nan, jnp.float32)

        new_state, loss, ok, grad_norm = jax.lax.cond((t >= 0) & ~state.stopped, active, skip, state)
        return new_state, (loss, ok, grad_norm)

    return jax.lax.scan(one_step, state, (idx, steps, betas))


def run(state: SVIState, data, key, num_steps: int, *, step, batch_size: int | None = None, beta=1.0,
        temperature=1.0) -> tuple[SVIState, StepInfo]:
    """`num_steps` SVI updates from `state` in one ``lax.scan``: (the last SVIState, StepInfo of (num_steps,)
    arrays). Pure: jit it with `num_steps` (and `batch_size`) static, e.g. ``jax.jit(algorithm.run,
    static_argnums=3)`` for the `build` pair's own ``run``.

    data: (x (N, ...), y (N,)); step: a bound `step` (``build(...).step``); batch_size: B rows per minibatch,
    drawn without replacement for step t from ``fold_in(rows_key, t)`` (None: the full batch, every step); beta:
    the KL weight, a scalar or (num_steps,) (a schedule, data: no recompile); temperature: T > 0. Step t's key is
    ``fold_in(flat_key(step_key), t)`` with (step_key, rows_key) = split(key). Once a step is not finite
    (``state.stopped``), the later ones are skipped: their loss and gradient norm are NaN, ``finite`` False."""
    x, y = data
    n = jnp.shape(x)[0]
    step_key, rows_key = jax.random.split(key)
    ts = jnp.arange(num_steps, dtype=jnp.int32)
    if batch_size is None or batch_size >= n:
        idx = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (num_steps, n))
    else:
        idx = jax.vmap(lambda t: jax.random.permutation(jax.random.fold_in(rows_key, t), n)[:batch_size])(ts)
    betas = jnp.broadcast_to(jnp.asarray(beta, jnp.float32), (num_steps,))
    state, (losses, finite, norms) = scan_steps(step, state, step_key, x, y, idx, ts, betas, temperature)
    return state, StepInfo(losses, norms, finite)


# ----- the compiled programs `inference.fit` runs (compile once: the module docstring) --------------------------
COMPILED_SETTINGS = ("model", "guide", "n_data", "num_particles", "estimator", "mesh")
"""The static keyword arguments of `initial_state` and `run_chunk` (jit's own cache keys the compiled code by
them): model (a `base.value_key.Static`: compared by its declared configuration, or by identity), the guide (a
value: equal guides are equal configurations, `inference.guide_base.BNNGuide`),
n_data, num_particles, estimator, mesh (None or a ``jax.sharding.Mesh`` with a "data" axis)."""


def compiled_settings(model, guide, n_data: int, num_particles: int = 1, estimator: str = "standard",
                      mesh: Mesh | None = None) -> dict:
    """{name: static value} of `COMPILED_SETTINGS` for `initial_state` / `run_chunk` (``**`` them in)."""
    return dict(model=Static(model), guide=guide, n_data=int(n_data), num_particles=int(num_particles),
                estimator=as_estimator(estimator), mesh=mesh)


def _bound(model, guide, n_data, num_particles, estimator, optimizer) -> SVI:
    return build(model.obj, guide, optimizer, n_data=n_data, num_particles=num_particles, estimator=estimator)


@functools.partial(jax.jit, static_argnames=COMPILED_SETTINGS)
def initial_state(key, xb, yb, start, optimizer, *, model, guide, n_data, num_particles=1, estimator="standard",
                  mesh=None) -> SVIState:
    """`init` for the minibatch (xb (B, ...), yb (B,)), starting from `start` (unconstrained parameters {name:
    array}, already checked by `check_init_params`) or the guide's initialisers (None); `optimizer` an
    `inference.optimizers` record or wrapped optax object (a pytree: a record's numbers are traced, so another
    learning rate compiles nothing)."""
    del mesh
    return _bound(model, guide, n_data, num_particles, estimator, optimizer).init(key, (xb, yb), init_params=start)


@functools.partial(jax.jit, static_argnames=("guide", "n_data"))
def constrained(params_u: dict, xb, yb, *, guide, n_data) -> dict:
    """`constrain` of the unconstrained `params_u` with the guide's constraints (minibatch xb, yb)."""
    return constrain(param_constraints(guide, (xb, yb), n_data), params_u)


@functools.partial(jax.jit, static_argnames=COMPILED_SETTINGS)
def run_chunk(state: SVIState, key, x, y, idx, steps, kl, temperature, optimizer, *, model, guide, n_data,
              num_particles=1, estimator="standard", mesh=None):
    """``lax.scan`` of `step` over a chunk: (state, (losses, updated, grad_norms), constrained params).

    x (N, ...), y (N,): the training data; idx: (C, B) int32 minibatch rows; steps: (C,) int32 global step
    numbers (-1 = padding, no update); kl: (C,) float32 beta of each step, or a scalar kl_warmup (beta_t =
    min(1, (t + 1) / kl_warmup), 1 when kl_warmup <= 0); temperature: scalar T; optimizer: the optimiser pytree
    (`inference.optimizers`; its update reads a record's numbers from ``state.opt_state``). Step t uses the key
    ``fold_in(flat_key(key), t)``. losses (C,) float32 (NaN for padding and after a stop), updated (C,) bool,
    grad_norms (C,) float32 (NaN for padding); params: the last state's parameters constrained, in the same
    program. A padding step, or any step once ``stopped`` is set, skips the computation (``lax.cond``), so one
    chunk length serves any number of steps. The keyword arguments are static (`COMPILED_SETTINGS`).

    With `mesh` (data parallel, `inference.mesh`): pass every argument replicated on the mesh
    (`inference.mesh.put_replicated`); each step's minibatch ``x[rows]``, ``y[rows]`` is constrained to be split
    over the "data" axis and the outputs to be replicated, so XLA partitions the step and reduces the gradient
    across devices itself. The arithmetic is the one-device step's, its sums split over devices (float rounding).
    """
    svi = _bound(model, guide, n_data, num_particles, estimator, optimizer)
    betas = kl if jnp.ndim(kl) == 1 else jnp.where(
        kl > 0, jnp.minimum(1.0, (steps + 1.0) / jnp.maximum(kl, 1.0)), 1.0)
    state, outputs = scan_steps(svi.step, state, key, x, y, idx, steps, betas, temperature, mesh)
    rows = jnp.shape(idx)[1]
    batch = (jax.ShapeDtypeStruct((rows,) + jnp.shape(x)[1:], x.dtype), jax.ShapeDtypeStruct((rows,), y.dtype))
    constraints = param_constraints(guide, batch, n_data)
    result = state, outputs, constrain(constraints, state.params)
    return result if mesh is None else replicate(result, mesh)


def guide_param_init(guide, key, x, y, n_data) -> tuple[dict, dict, dict]:
    """(unconstrained params {name: array}, constraints {name: constraint or None}, mutable {site: value}) of
    `guide` at the start of a fit on minibatches like (x (B, ...), y (B,)): `initial_params` (jitted),
    `param_constraints` and `initial_mutable`."""
    params = jax.jit(lambda k, xb, yb: initial_params(guide, k, (xb, yb), n_data))(key, x, y)
    return params, param_constraints(guide, (x, y), n_data), initial_mutable(guide.model, guide, key, (x, y), n_data)


_RUN_CHUNK = run_chunk  # the jitted function itself, whatever a test puts in its place


def compiled_updates() -> int:
    """How many programs of `run_chunk` jit's cache holds in this process (``_cache_size()`` of the jitted
    function): `inference.fit` reads it before and after a run for ``FitInfo.traces``."""
    return _RUN_CHUNK._cache_size()  # type: ignore[attr-defined]  # jax's jitted functions have it
