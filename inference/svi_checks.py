"""The checks of `inference.svi.init` / `step`'s inputs (issue 45): each refuses a bad input by name, where it costs
nothing at run time.

- On the host, at trace time (settings bound by ``svi.build``, Python scalars): the optimiser's type
  (`inference.optimizers.as_optimizer`), ``n_data`` (an integer >= the batch size), ``num_particles`` (an integer
  >= 1), a Python / NumPy / concrete ``beta`` >= 0 and ``temperature`` > 0, concrete labels within the network's
  classes, concrete ``init_params`` finite.
- At trace time (shapes and dtypes, known inside ``jax.jit``): the key is a PRNG key, the batch is (x (B, ...),
  y (B,)) with B >= 1 rows in both, x of the feature shape the model was built for, labels of the likelihood's
  shape and dtype (integer class labels of shape (B,) for a classifier; (B,) or (B, D) real targets, D the output
  width, for a regression), the state's parameters the guide's (names and shapes).

Not checked inside a jitted call (values of the trace, unknown until it runs; checking them would cost a device
sync per step): the labels' range (out-of-range labels give an infinite loss: ``StepInfo.finite`` is False and the
update is not applied), NaN or inf in x or y, and traced ``beta`` / ``temperature``: a traced ``beta`` < 0 or
``temperature`` <= 0 (or NaN) marks the step not finite (no update, ``stopped`` set) rather than training on it.
`inference.fit` checks all of these on the host before it compiles anything.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from base.errors import ArgumentTypeError, InputError
from base.validation import is_int, model_feature_shape

RAW_KEY_SHAPE = (2,)
"""The shape of a raw threefry key, ``jax.random.PRNGKey(seed)`` (uint32)."""


def is_traced(value) -> bool:
    """Whether `value` is a JAX tracer (a value known only when the compiled program runs)."""
    return isinstance(value, jax.core.Tracer)


def check_n_data(n_data, batch_size: int | None = None) -> None:
    """n_data (N, the data set's size): an integer >= 1 and >= `batch_size` (a minibatch is part of the data);
    a Python or NumPy integer or a concrete integer 0-d array. A traced n_data is not checked."""
    if is_traced(n_data):
        return
    value = n_data
    if isinstance(n_data, (np.ndarray, jax.Array)) and np.ndim(n_data) == 0 and \
            np.issubdtype(np.result_type(n_data), np.integer):
        value = int(n_data)
    if not is_int(value) or value < 1:
        raise InputError("n_data", n_data, "an integer >= 1 (the number of rows of the whole training set)")
    if batch_size is not None and value < batch_size:
        raise InputError("n_data", n_data, f"an integer >= the batch size {batch_size} (the minibatch is drawn from "
                         "the n_data rows of the training set)")


def check_num_particles(num_particles) -> None:
    """num_particles: an integer >= 1 (InputError naming it: 0, -1, 2.5, "2")."""
    if not is_int(num_particles) or num_particles < 1:
        raise InputError("num_particles", num_particles, "an integer >= 1 (guide draws averaged per step)")


def check_key(key, arg: str = "key") -> None:
    """A PRNG key, by its shape and dtype (traced or not): a typed key of shape () (``jax.random.key(seed)``) or
    a raw uint32 key of shape (2,) (``jax.random.PRNGKey(seed)``); InputError naming `arg` otherwise (an int
    seed, a float array, a batch of keys)."""
    dtype, shape = getattr(key, "dtype", None), tuple(getattr(key, "shape", (None,)))
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    if (typed and shape == ()) or (not typed and dtype == jnp.uint32 and shape == RAW_KEY_SHAPE):
        return
    raise InputError(arg, key if dtype is None else f"<array of shape {shape}, dtype {dtype}>",
                     "one PRNG key: jax.random.key(seed), or jax.random.PRNGKey(seed) (uint32 of shape (2,))")


def check_scalar(arg: str, value, *, positive: bool):
    """`beta` (positive=False: >= 0) or `temperature` (positive=True: > 0), a scalar. A Python / NumPy number or a
    concrete 0-d array is checked on the host (InputError naming `arg`) and True is returned; a traced one must be
    0-d (checked at trace time) and its validity is returned as a traced bool (the step folds it into ``finite``)."""
    expected = "a finite number " + ("> 0" if positive else ">= 0") + (" (the likelihood temperature T)" if positive
                                                                      else " (the KL weight)")
    if is_traced(value):
        if jnp.ndim(value) != 0:
            raise InputError(arg, f"<traced array of shape {jnp.shape(value)}>", "a scalar: " + expected)
        ok = value > 0 if positive else value >= 0
        return ok & jnp.isfinite(value)
    number = isinstance(value, (int, float, np.number, np.ndarray, jax.Array)) and np.ndim(value) == 0 \
        and np.issubdtype(np.result_type(value), np.number)
    if isinstance(value, (bool, np.bool_, str)) or not number:
        raise ArgumentTypeError(arg, value, "a real scalar: " + expected)
    v = float(value)
    if not (math.isfinite(v) and (v > 0 if positive else v >= 0)):
        raise InputError(arg, value, expected)
    return True


def check_batch(model, batch, *, arg: str = "batch") -> tuple:
    """(x, y) of batch = (x (B, *feature_shape), y (B,) or regression targets (B, D)), checked by shape and dtype
    against `model` (see the module docstring); concrete class labels are also checked to lie in [0, C), C the
    network's output width. Returns (x, y) unchanged."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise ArgumentTypeError(arg, batch, "a pair (x, y) of arrays")
    x, y = batch
    for name, a in (("x", x), ("y", y)):
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            raise ArgumentTypeError(f"{arg}[{0 if name == 'x' else 1}]", a, f"an array {name} (NumPy or JAX)")
    if x.ndim < 2 or not (jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer)):
        raise InputError(f"{arg}[0]", f"<x of shape {tuple(x.shape)}, dtype {x.dtype}>",
                         "inputs x of shape (B, features...) of a real dtype")
    rows = x.shape[0]
    if rows == 0:
        raise InputError(arg, f"<an empty batch, x of shape {tuple(x.shape)}>", "at least one row (B >= 1)")
    if y.ndim == 0 or y.shape[0] != rows:
        raise InputError(f"{arg}[1]", f"<y of shape {tuple(y.shape)}>", f"{rows} labels (one per row of x, "
                         f"x of shape {tuple(x.shape)})")
    want = model_feature_shape(model)
    if want is not None and tuple(x.shape[1:]) != want:
        raise InputError(f"{arg}[0]", f"<x of feature shape {tuple(x.shape[1:])}>",
                         f"feature shape {want} (the shape the model was built for)",
                         "a network's first layer adapts to any width: other columns would train another network")
    likelihood = getattr(model, "likelihood", None)
    classification = getattr(likelihood, "classification", None)
    def width():  # asked only where a check needs it (a concrete label range, (B, D) regression targets)
        return _output_width(model, tuple(x.shape[1:]))

    if classification:
        if y.ndim != 1 or not (jnp.issubdtype(y.dtype, jnp.integer) or y.dtype == jnp.bool_):
            raise InputError(f"{arg}[1]", f"<y of shape {tuple(y.shape)}, dtype {y.dtype}>",
                             f"integer class labels of shape ({rows},) (a categorical likelihood)",
                             "y of shape (B, 1) would broadcast against the (B,) model to B x B; float labels "
                             "are never rounded: cast with y.astype(jnp.int32)")
        classes = None if is_traced(y) else width()
        if classes is not None:
            labels = np.asarray(y)
            if labels.min() < 0 or labels.max() >= classes:
                raise InputError(f"{arg}[1]", f"<labels in [{labels.min()}, {labels.max()}]>",
                                 f"labels in [0, {classes}) (the network outputs {classes} logits)")
    elif classification is False:
        outputs = width() if y.ndim == 2 else None
        if not (jnp.issubdtype(y.dtype, jnp.floating) or jnp.issubdtype(y.dtype, jnp.integer)) or y.ndim not in (1, 2) \
                or (outputs is not None and y.shape[1] != outputs):
            raise InputError(f"{arg}[1]", f"<y of shape {tuple(y.shape)}, dtype {y.dtype}>",
                             f"real regression targets of shape ({rows},) or ({rows}, D), D the network's output "
                             "width" + ("" if outputs is None else f" {outputs}"))
    return x, y


def _output_width(model, feature_shape: tuple) -> int | None:
    """The network's output width for inputs of `feature_shape` (`models.BNN.output_width`: one cached abstract
    trace), or None for a model that does not say."""
    width = getattr(model, "output_width", None)
    return None if width is None else int(width(feature_shape))


def check_state(state, shapes: dict, state_type) -> None:
    """Refuse (naming ``state``) a state that is no `state_type` (``svi.SVIState``) or whose parameters are not the
    guide's: other names (a state made by another guide: mean field stepped by a k-tied or point-estimate guide)
    or other shapes (inputs of another width). shapes: {name: ShapeDtypeStruct} the guide's parameters for the
    batch (`inference.guide_params.param_structure`). Trace time only."""
    if not isinstance(state, state_type) or not isinstance(state.params, dict):
        raise ArgumentTypeError("state", state, "an SVIState made by init with this guide")
    have, want = set(state.params), set(shapes)
    if have != want:
        missing, extra = sorted(want - have), sorted(have - want)
        raise InputError("state", f"<a state with parameters {sorted(have)[:3]}...>",
                         "a state made by init with this guide (the same parameters)",
                         (f"missing {missing[:3]}" if missing else "") + (", " if missing and extra else "")
                         + (f"not parameters of this guide {extra[:3]}" if extra else "")
                         + "; was the state built by another guide?")
    for name, want_shape in shapes.items():
        got = tuple(jnp.shape(state.params[name]))
        if got != tuple(want_shape.shape):
            raise InputError(f"state.params[{name!r}]", f"<array of shape {got}>",
                             f"shape {tuple(want_shape.shape)} (this guide's parameter for this batch)",
                             "was the state built for inputs of another width?")


def check_finite_params(init_params: dict) -> None:
    """Refuse (naming ``init_params[name]``) a concrete starting parameter with NaN or inf entries; traced ones are
    not checked."""
    for name, value in init_params.items():
        if not is_traced(value):
            a = np.asarray(value)
            if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
                raise InputError(f"init_params[{name!r}]", f"<{int(a.size - np.isfinite(a).sum())} NaN/inf entries "
                                 f"of {a.size}>", "finite starting values")
