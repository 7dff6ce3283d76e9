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
    params = svi.constrain(state.params, svi.param_constraints(guide, (x, y), len(entry.train.x)))

Both functions are pure: ``init(key, batch) -> SVIState`` and ``step(state, batch, key, beta=, temperature=) ->
(SVIState, StepInfo)``, NamedTuples of arrays; ``build`` only binds the model, guide, optimiser and settings
(``functools.partial`` of the module-level `init` / `step`, which take them as keyword arguments).

Compile once (how `inference.fit` reuses compiled code): the scanned update `run_chunk`, `initial_state` and
`constrained` are module-level ``jax.jit`` functions whose first argument is a `Program`, a static argument:
jit's own cache is the only cache. A `Program` compares and hashes by the *value keys* of its model, guide and
optimiser (`base.value_key`), taken when it is made: an object that declares its whole configuration (a
`models.BNN` built by ``zoo.get``, a `SiteGuide` or `JointGaussian`, a frozen dataclass, an optax transformation
by optax's code and its arguments) is equal to another with the same configuration, so another ``zoo.get`` of
the same entry, another guide instance of the same kind, another ``optax.adam(1e-3)`` or another seed compiles
nothing; anything else (a network closure built by hand, a schedule function written by the user) is keyed by
identity: the same object reuses the code, another object compiles its own. A key never misses what the
computation depends on: it is the full configuration or the object itself. The learning rate is part of the
optimiser's key (another rate compiles another update). The minibatch shapes and dtypes and the chunk length
are part of jit's key as usual; the data, the step numbers, the KL weights and the temperature are arguments.
Nothing is filled while tracing: the parameters' constraints and shapes are computed by an abstract trace of
the guide's initialisation (`param_constraints`, `param_shapes`) wherever they are needed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh
from numpyro import handlers
from numpyro.distributions import biject_to

from inference.guide_params import guide_params, param_constraints
from inference.per_example import ESTIMATORS, check_estimator, estimator_loss
from models.bridge import BNN, STATE_SITE
from base.errors import InputError
from base.prng import flat_key
from base.value_key import value_key
from inference.mesh import replicate, shard_rows

__all__ = ["SVIState", "StepInfo", "SVI", "build", "init", "step", "param_constraints", "param_shapes", "constrain",
           "initial_params", "initial_mutable", "guide_param_init", "Program", "ESTIMATORS"]


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
    """The (init, step) pair `build` returns: ``init(key, batch, init_params=None) -> SVIState`` and
    ``step(state, batch, key, beta=1.0, temperature=1.0) -> (SVIState, StepInfo)``."""

    init: Callable
    step: Callable


def build(model, guide, optimizer, *, n_data: int, num_particles: int = 1, estimator: str = "standard") -> SVI:
    """The `SVI` pair of `init` and `step` with the model, guide (an `inference` guide), optimiser (an optax
    GradientTransformation, or an object with its own ``build_svi(model, guide, n_data=, num_particles=,
    estimator=)`` returning the pair, as `inference.ivon`'s), n_data (N, the data set's size), num_particles and estimator (one of `ESTIMATORS`,
    InputError otherwise) bound; pure functions, jit them (the module docstring's example)."""
    check_estimator(estimator)
    if callable(getattr(optimizer, "build_svi", None)):  # an algorithm of its own over the guide (`inference.ivon`)
        return optimizer.build_svi(model, guide, n_data=n_data, num_particles=num_particles, estimator=estimator)
    fixed = dict(model=model, guide=guide, optimizer=optimizer, n_data=n_data)
    return SVI(functools.partial(init, **fixed),
               functools.partial(step, **fixed, num_particles=num_particles, estimator=estimator))


def initial_params(guide, key, batch, n_data) -> dict:
    """{name: array} the guide's own initial unconstrained parameters for a minibatch batch = (x (B, ...),
    y (B,)); every leaf strongly typed (an initialiser's constants are weakly typed), so that a state read back
    from a checkpoint (NumPy arrays, never weak) has the very types of this one. Traceable."""
    x, y = batch
    guide.setup(x)
    params_u, _ = guide_params(guide, key, x, y, n_data)
    return {k: jnp.asarray(v, dtype=jnp.result_type(v)) for k, v in params_u.items()}


def param_shapes(guide, batch, n_data) -> dict:
    """{param name: jax.ShapeDtypeStruct} of `guide`'s unconstrained parameters for minibatches shaped like
    batch = (x, y), by an abstract trace (nothing computed)."""
    return jax.eval_shape(lambda key: initial_params(guide, key, batch, n_data), jax.random.PRNGKey(0))


def constrain(params_u: dict, constraints: dict) -> dict:
    """{name: array} the unconstrained guide parameters mapped to their constraint sets (`param_constraints`)."""
    return {k: biject_to(constraints[k])(v) if constraints.get(k) is not None else v for k, v in params_u.items()}


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
    first one of another shape. Extra entries are ignored."""
    missing = sorted(set(shapes) - set(init_params))
    if missing:
        raise InputError.worded("init_params", f"init_params: missing guide parameters {missing[:5]}"
                                + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    for name, want in shapes.items():
        if tuple(np.shape(init_params[name])) != tuple(want.shape):
            raise InputError.worded(f"init_params[{name!r}]",
                                    f"init_params[{name!r}]: expected shape {tuple(want.shape)}, got "
                                    f"{tuple(np.shape(init_params[name]))}")
    return {k: init_params[k] for k in shapes}


def init(key, batch, *, model, guide, optimizer, n_data, init_params=None) -> SVIState:
    """The SVIState at step 0 for minibatches like batch = (x (B, ...), y (B,)); pure and jit-able.

    key: a PRNG key (the guide's random initialisers); init_params: None (the guide's initialisers) or
    unconstrained guide parameters {name: array} to start from, every parameter of the guide with its shape
    (InputError naming the first that is missing or of another shape; extra entries are ignored).
    """
    params_u = initial_params(guide, key, batch, n_data)
    if init_params is not None:
        start = check_init_params(init_params, {k: jax.ShapeDtypeStruct(jnp.shape(v), v.dtype)
                                                for k, v in params_u.items()})
        params_u = {k: jnp.asarray(start[k], dtype=v.dtype) for k, v in params_u.items()}
    mutable = initial_mutable(model, guide, key, batch, n_data)
    return SVIState(params_u, optimizer.init(params_u), mutable, jnp.array(False))


def step(state: SVIState, batch, key, *, model, guide, optimizer, n_data, beta=1.0, temperature=1.0,
         num_particles: int = 1, estimator: str = "standard") -> tuple[SVIState, StepInfo]:
    """One SVI update on batch = (x (B, ...), y (B,)) with PRNG key `key`: (the new SVIState, its `StepInfo`).

    beta: the KL weight (scalar, traced: a schedule passes beta_t); temperature: T > 0, the log-likelihood is
    divided by it (scalar, traced); n_data: N, the minibatch's log-likelihood is scaled by N / B; estimator:
    one of `ESTIMATORS` (InputError otherwise); num_particles: independent estimates averaged.
    A step whose loss or gradient is not finite leaves the parameters, the optimiser state and the mutable
    state unchanged and sets ``stopped``; `step` does not read ``stopped`` (a runner decides what to do next:
    `inference.fit` stops).
    """
    loss_of = estimator_loss(estimator)
    constraints = param_constraints(guide, batch, n_data)
    x, y = batch

    def loss_fn(params_u, mutable):
        return loss_of(key, constrain(params_u, constraints), model, guide, beta, num_particles, x, y, n_data,
                       temperature=temperature, mutable=mutable)

    (loss, mutable), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, state.mutable)
    grad_norm = optax.tree.norm(grads)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)

    def update(_):
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        return SVIState(optax.apply_updates(state.params, updates), opt_state, mutable, state.stopped)

    def stop(_):
        return state._replace(stopped=jnp.array(True))

    new_state = jax.lax.cond(finite, update, stop, None)
    return new_state, StepInfo(loss.astype(jnp.float32), grad_norm.astype(jnp.float32), finite)


# ----- the compiled programs `inference.fit` runs (compile once: the module docstring) --------------------------
@dataclass(frozen=True, eq=False)
class Program:
    """What a compiled fit program computes, as a static argument of ``jax.jit``: model, guide (set up for the
    minibatch shape), optimiser, n_data, num_particles, estimator and mesh (None: one device; a
    ``jax.sharding.Mesh`` with a "data" axis: each minibatch split over it, the state replicated,
    `inference.mesh`). Equal (and equally hashed) exactly when every part's value key
    (`base.value_key.value_key`) is equal and the meshes are equal (the same devices in the same layout, the
    same axis names); the objects themselves are held."""

    model: object
    guide: object
    optimizer: object
    n_data: int
    num_particles: int = 1
    estimator: str = "standard"
    mesh: Mesh | None = None

    def __post_init__(self):
        # computed once: hash and equality stay consistent even if a part changes afterwards (optax's cosine
        # schedule turns an int decay_steps into a float on its first call; a later Program keys the new value)
        object.__setattr__(self, "_key", (value_key(self.model), value_key(self.guide), value_key(self.optimizer),
                                          int(self.n_data), int(self.num_particles), check_estimator(self.estimator),
                                          self.mesh))

    def key(self) -> tuple:
        """(value keys of model, guide (set up) and optimiser, n_data, num_particles, estimator, mesh), taken
        when the Program was made."""
        return self._key  # type: ignore[attr-defined]

    def __eq__(self, other) -> bool:
        return isinstance(other, Program) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def svi(self) -> SVI:
        """The program's `build` pair."""
        return build(self.model, self.guide, self.optimizer, n_data=self.n_data, num_particles=self.num_particles,
                     estimator=self.estimator)


TRACES = {"chunk": 0}
"""How often `run_chunk` has been traced in this process (a count for ``FitInfo.traces``; nothing reads it in a
computation)."""


@functools.partial(jax.jit, static_argnums=0)
def initial_state(program: Program, key, xb, yb, start) -> SVIState:
    """`init` of `program` for the minibatch (xb (B, ...), yb (B,)), starting from `start` (unconstrained
    parameters {name: array}, already checked by `check_init_params`) or the guide's initialisers (None)."""
    return program.svi().init(key, (xb, yb), init_params=start)


@functools.partial(jax.jit, static_argnums=0)
def constrained(program: Program, params_u: dict, xb, yb) -> dict:
    """`constrain` of the unconstrained `params_u` with `program`'s guide's constraints (minibatch xb, yb)."""
    return constrain(params_u, param_constraints(program.guide, (xb, yb), program.n_data))


@functools.partial(jax.jit, static_argnums=0)
def run_chunk(program: Program, state: SVIState, key, x, y, idx, steps, kl, temperature):
    """``lax.scan`` of `step` over a chunk: (state, (losses, updated, grad_norms), constrained params).

    x (N, ...), y (N,): the training data; idx: (C, B) int32 minibatch rows; steps: (C,) int32 global step
    numbers (-1 = padding, no update); kl: (C,) float32 beta of each step, or a scalar kl_warmup (beta_t =
    min(1, (t + 1) / kl_warmup), 1 when kl_warmup <= 0); temperature: scalar T. Step t uses the key
    ``fold_in(flat_key(key), t)``. losses (C,) float32 (NaN for padding and after a stop), updated (C,) bool,
    grad_norms (C,) float32 (NaN for padding); params: the last state's parameters constrained, in the same
    program. A padding step, or any step once ``stopped`` is set, skips the computation (``lax.cond``), so one
    chunk length serves any number of steps.

    With ``program.mesh`` (data parallel, `inference.mesh`): pass every argument replicated on the mesh
    (`inference.mesh.put_replicated`); each step's minibatch ``x[rows]``, ``y[rows]`` is constrained to be split
    over the "data" axis and the outputs to be replicated, so XLA partitions the step and reduces the gradient
    across devices itself. The arithmetic is the one-device step's, its sums split over devices (float rounding).
    """
    TRACES["chunk"] += 1
    svi = program.svi()
    mesh = program.mesh
    key = flat_key(key)  # the same draws, compiled faster (`base.prng`)
    betas = kl if jnp.ndim(kl) == 1 else jnp.where(
        kl > 0, jnp.minimum(1.0, (steps + 1.0) / jnp.maximum(kl, 1.0)), 1.0)

    def one_step(state, inputs):
        rows, t, beta = inputs

        def active(state):
            batch = (x[rows], y[rows]) if mesh is None else shard_rows((x[rows], y[rows]), mesh)
            new, info = svi.step(state, batch, jax.random.fold_in(key, t), beta=beta, temperature=temperature)
            return new, info.loss, info.finite, info.grad_norm

        def skip(state):
            return state, jnp.array(jnp.nan, jnp.float32), jnp.array(False), jnp.array(jnp.nan, jnp.float32)

        new_state, loss, ok, grad_norm = jax.lax.cond((t >= 0) & ~state.stopped, active, skip, state)
        return new_state, (loss, ok, grad_norm)

    state, outputs = jax.lax.scan(one_step, state, (idx, steps, betas))
    rows = jnp.shape(idx)[1]
    batch = (jax.ShapeDtypeStruct((rows,) + jnp.shape(x)[1:], x.dtype), jax.ShapeDtypeStruct((rows,), y.dtype))
    constraints = param_constraints(program.guide, batch, program.n_data)
    result = state, outputs, constrain(state.params, constraints)
    return result if mesh is None else replicate(result, mesh)


def guide_param_init(guide, key, x, y, n_data) -> tuple[dict, dict, dict]:
    """(unconstrained params {name: array}, constraints {name: constraint or None}, mutable {site: value}) of
    `guide` at the start of a fit on minibatches like (x (B, ...), y (B,)): `initial_params` (jitted),
    `param_constraints` and `initial_mutable`."""
    guide.setup(x)
    params = jax.jit(lambda k, xb, yb: initial_params(guide, k, (xb, yb), n_data))(key, x, y)
    return params, param_constraints(guide, (x, y), n_data), initial_mutable(guide.model, guide, key, (x, y), n_data)
