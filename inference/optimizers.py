"""Optimiser records: the library's own way to choose an optimiser, its scalar hyper-parameters data.

    inference.optimizers.adam(learning_rate=1e-3)                      # Adam at a constant rate
    inference.optimizers.sgd(learning_rate=0.1, momentum=0.9)          # SGD (with momentum)
    inference.optimizers.cosine_adam(1e-2, decay_steps=1000, alpha=0.01)   # `fit`'s default: Adam, rate cosine-decayed

A record is a frozen value (equal records are equal configurations) and a pytree: its numeric hyper-parameters
(learning rate, decay steps, ...) are its leaves and its kind (the optax factory) and structural settings (Adam's
b1, b2, eps; SGD's nesterov) its aux data. `transformation()` builds the optax transformation with
``optax.inject_hyperparams``, so the numbers live in the optimiser's *state* (``state.hyperparams``) and the
update reads them from there: a jitted step that takes the record (or the state) as an argument compiles once
per kind, and a second fit with another learning rate, another number of decay steps or another seed compiles
nothing. The moment decay rates (b1, b2, eps) stay structural: as constants they round exactly as optax's own
``optax.adam(lr)`` does (``1 - b1`` in double precision), so a record's updates are optax's bit for bit.

A user's own optax GradientTransformation is accepted too (`as_optimizer` wraps it in `OptaxObject`): it is keyed
by identity, one compile per object, and never run or read to decide what it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from base.errors import ArgumentTypeError, InputError
from base.value_key import Static

__all__ = ["Optimizer", "OptaxObject", "adam", "sgd", "cosine_adam", "as_optimizer", "optimizer_identity"]


def cosine_decay(count, init_value, decay_steps, angle_per_step, half_one_minus_alpha, alpha):
    """eta_t = init_value ((1 - alpha) (1 + cos(pi min(t, T) / T)) / 2 + alpha), T = decay_steps: optax's
    ``cosine_decay_schedule`` (exponent 1) with every number an argument (traced or not).

    Written as XLA compiles optax's schedule, whose numbers are constants it folds: pi / T and (1 - alpha) / 2
    are computed on the host in float32 as XLA folds them (pi (1 / T) and (1 - alpha) / 2: `cosine_adam`'s
    angle_per_step and half_one_minus_alpha) and the products taken in the folded order,
    ((cos(min(t, T) angle_per_step) + 1) half_one_minus_alpha + alpha) init_value, so that the float32 rates are
    optax's own bit for bit (measured at every step 0 .. T + 2 for T in 30, 40, 77, 500, 1000, 3000, 10000)."""
    count = jnp.minimum(count.astype(jnp.float32), decay_steps)
    return ((jnp.cos(count * angle_per_step) + 1) * half_one_minus_alpha + alpha) * init_value


def _cosine_adam(init_value, decay_steps, angle_per_step, half_one_minus_alpha, alpha, b1=0.9, b2=0.999, eps=1e-8):
    """optax.adam over the `cosine_decay` schedule of these (possibly traced) numbers."""
    return optax.adam(lambda t: cosine_decay(t, init_value, decay_steps, angle_per_step, half_one_minus_alpha, alpha),
                      b1=b1, b2=b2, eps=eps)


def _sgd(learning_rate, momentum=None, nesterov=False):
    """optax.sgd (a module-level factory of its own: ``momentum=None`` is structure, not data)."""
    return optax.sgd(learning_rate, momentum=momentum, nesterov=nesterov)


FACTORIES = {"adam": optax.adam, "sgd": _sgd, "cosine_adam": _cosine_adam}
"""{kind: optax factory} of the records; the factory's keyword arguments are the record's fields."""


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True)
class Optimizer:
    """An optimiser record (the module docstring): kind, one of `FACTORIES`; hyperparams ((name, number), ...),
    the data; static ((name, value), ...), the structure."""

    kind: str
    hyperparams: tuple
    static: tuple = ()

    def transformation(self) -> optax.GradientTransformation:
        """The optax transformation: ``optax.inject_hyperparams(factory, static_args=...)`` of the fields; its
        state holds the numbers (``state.hyperparams``), its update reads them from there."""
        static = dict(self.static)
        return optax.inject_hyperparams(FACTORIES[self.kind], static_args=tuple(static))(
            **dict(self.hyperparams), **static)

    def config(self) -> dict:
        """JSON-able {"kind": ..., **numbers, **static settings} (checkpoints and the resume identity)."""
        return {"kind": self.kind, **{k: _plain(v) for k, v in self.hyperparams}, **dict(self.static)}

    def tree_flatten(self):
        names = tuple(k for k, _ in self.hyperparams)
        return [v for _, v in self.hyperparams], (self.kind, names, self.static)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        kind, names, static = aux
        return cls(kind, tuple(zip(names, leaves)), static)


@jax.tree_util.register_pytree_node_class
class OptaxObject:
    """A user's own optax GradientTransformation (or an optimiser with its own ``build_svi``, `inference.ivon`) as
    a pytree without leaves; its aux data is ``base.value_key.Static(tx)``: an object that declares its
    configuration (a frozen `inference.ivon.IVON`) by that, anything else (an optax object) by identity, one compile
    per object. Nothing about it is read or run."""

    __slots__ = ("tx",)

    def __init__(self, tx):
        self.tx = tx

    def transformation(self):
        """The transformation itself."""
        return self.tx

    def config(self) -> dict | None:
        """The object's own JSON-able ``config()`` if it declares one (`inference.ivon.IVON`), else None: a user's optax
        object has no configuration this library can name."""
        own = getattr(self.tx, "config", None)
        return own() if callable(own) else None

    def tree_flatten(self):
        return [], Static(self.tx)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        return cls(aux.obj)

    def __eq__(self, other) -> bool:
        return isinstance(other, OptaxObject) and Static(other.tx) == Static(self.tx)

    def __hash__(self) -> int:
        return hash(Static(self.tx))


def _plain(value):
    return float(value) if not hasattr(value, "shape") or not value.shape else value


def _rate(arg: str, value, *, positive: bool = False) -> float:
    """`value` as a finite float >= 0 (> 0 with `positive`); InputError naming `arg` otherwise (a negative rate
    climbs the loss, a NaN one poisons it)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise InputError(arg, value, "a finite number > 0" if positive else "a finite number >= 0",
                         "a negative learning rate climbs the loss" if number < 0 else "")
    return number


def _fraction(arg: str, value) -> float:
    number = _rate(arg, value)
    if number >= 1:
        raise InputError(arg, value, "a number in [0, 1)")
    return number


def adam(learning_rate: float = 1e-3, *, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Optimizer:
    """Adam (Kingma & Ba, 2015, Algorithm 1) at a constant `learning_rate` (data); b1, b2, eps structural.
    The updates of ``optax.adam(learning_rate, b1, b2, eps)`` bit for bit."""
    return Optimizer("adam", (("learning_rate", _rate("learning_rate", learning_rate)),),
                     (("b1", _fraction("b1", b1)), ("b2", _fraction("b2", b2)), ("eps", _rate("eps", eps))))


def sgd(learning_rate: float = 1e-2, *, momentum: float | None = None, nesterov: bool = False) -> Optimizer:
    """Stochastic gradient descent w <- w - learning_rate g (with heavy-ball or Nesterov `momentum`, a fraction in
    [0, 1), when given); the rate and the momentum are data."""
    numbers: tuple = (("learning_rate", _rate("learning_rate", learning_rate)),)
    if momentum is not None:
        numbers += (("momentum", _fraction("momentum", momentum)),)
    return Optimizer("sgd", numbers, (("nesterov", bool(nesterov)),))


def cosine_adam(init_value: float = 1e-2, *, decay_steps: int | float = 1000, alpha: float = 0.01,
                b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Optimizer:
    """Adam with its rate cosine-decayed from `init_value` to ``alpha * init_value`` over `decay_steps` updates
    (Loshchilov & Hutter, 2017, eq. 5 without restarts; optax's ``cosine_decay_schedule``), constant after: the
    updates of ``optax.adam(optax.cosine_decay_schedule(init_value, float(decay_steps), alpha))`` bit for bit.
    init_value, decay_steps and alpha are data (another number of steps compiles nothing)."""
    init_value = _rate("init_value", init_value)
    decay_steps = _rate("decay_steps", decay_steps, positive=True)
    alpha = _rate("alpha", alpha)
    angle = float(np.float32(np.pi) * (np.float32(1) / np.float32(decay_steps)))
    half = float(np.float32(0.5) * np.float32(1 - alpha))
    return Optimizer("cosine_adam", (("init_value", init_value), ("decay_steps", decay_steps),
                                     ("angle_per_step", angle), ("half_one_minus_alpha", half), ("alpha", alpha)),
                     (("b1", _fraction("b1", b1)), ("b2", _fraction("b2", b2)), ("eps", _rate("eps", eps))))


def as_optimizer(optimizer, arg: str = "optimizer"):
    """`optimizer` as a pytree the compiled step takes: an `Optimizer` record as itself, an optax
    GradientTransformation (anything with ``init`` and ``update``) wrapped in `OptaxObject` (keyed by identity);
    ArgumentTypeError naming `arg` otherwise (e.g. a string "adam")."""
    if isinstance(optimizer, (Optimizer, OptaxObject)):
        return optimizer
    if callable(getattr(optimizer, "init", None)) and callable(getattr(optimizer, "update", None)):
        return OptaxObject(optimizer)
    raise ArgumentTypeError(arg, optimizer, "an optimiser record (inference.optimizers.adam(learning_rate=1e-3)) or "
                            "an optax GradientTransformation (e.g. optax.adam(1e-3))")


def optimizer_identity(optimizer, opt_state) -> dict:
    """JSON-able identity of an optimiser for resuming: the record's `config` (None for a user's optax object)
    and the structure of its state `opt_state` (the optax transformations it chains) with the hyper-parameters
    an ``inject_hyperparams`` state holds. Nothing is run."""
    hyper = {}
    for node in jax.tree.leaves(opt_state, is_leaf=lambda n: hasattr(n, "hyperparams")):
        if hasattr(node, "hyperparams"):
            hyper.update({k: float(v) for k, v in node.hyperparams.items() if jnp.ndim(v) == 0})
    return {"config": as_optimizer(optimizer).config(), "state": str(jax.tree_util.tree_structure(opt_state)),
            "hyperparams": hyper}


def describe(optimizer) -> Any:
    """A short text of an optimiser for messages: a record's config, else its type."""
    config = as_optimizer(optimizer).config()
    return config if config is not None else type(optimizer).__name__
