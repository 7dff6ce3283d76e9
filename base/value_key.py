"""Value keys: the explicit, conservative cache key of compiled code (`inference.svi`'s compile-once).

A compiled program can be reused for another object only when that object computes exactly the same thing.
This module says when that is known, and never guesses:

* a **value object** declares its whole configuration: a method ``__value_key__()`` returning a hashable
  value (or None: "not describable, treat me by identity"), or it is itself a frozen dataclass, a number, a
  string, a tuple of such... (``hash`` and ``==`` on its fields). A `models.BNN` built by ``zoo.get`` is one
  (the entry's build function, its arguments, the data it was built for, its prior and likelihood specs), and
  so is a `SiteGuide` or `JointGaussian` (its families or options, its model's key, its site shapes);
* an **optax transformation or schedule** is a closure: keyed by identity like any function (nothing reads its
  code or closure cells). The learning rate a user varies is data instead: `inference.optimizers`' records put it
  in the optimiser's state;
* a **bound method** (``model.log_likelihood``): its function, by identity, and its object's value key;
* **anything else** (a hand-made network closure, a function, an optax object, an object without a declared key)
  is keyed by identity: the very same object is the same key, another object is another key even if it happens
  to compute the same thing. Identity can cost a compile, never a stale hit.

`value_key(obj)` builds the key; `Static(obj)` wraps an object for ``jax.jit(static_argnums=...)``: its
``__hash__`` / ``__eq__`` are those of the value key, so jit's own cache is the cache and nothing else holds
compiled code. A key that holds an object by identity holds the object itself (`Identity`), so its ``id``
cannot be reused while the key lives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import types
from typing import Any

import numpy as np

_SCALARS = (type(None), bool, int, float, complex, str, bytes, np.generic)


class Identity:
    """A key part equal only to an `Identity` of the very same object (held, so its id is never reused)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other) -> bool:
        return isinstance(other, Identity) and other.obj is self.obj

    def __hash__(self) -> int:
        return hash(id(self.obj))

    def __repr__(self) -> str:
        return f"Identity(<{type(self.obj).__qualname__} at {id(self.obj):#x}>)"


def array_digest(value) -> str:
    """Hex BLAKE2b (16 bytes) of an array's C-order bytes: equal for equal arrays, in every process."""
    return hashlib.blake2b(np.ascontiguousarray(value).tobytes(), digest_size=16).hexdigest()


def frozen(value) -> Any:
    """A hashable value key of plain data: scalars as themselves; lists / tuples as tuples; dicts as sorted
    (key, value) tuples; sets as sorted tuples; NumPy / JAX arrays as (shape, dtype, BLAKE2b of the bytes);
    anything else by `value_key` (a value object's own key, else identity)."""
    if isinstance(value, _SCALARS):
        return (type(value).__name__, value)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return ("seq", tuple(frozen(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted(((repr(k), frozen(v)) for k, v in value.items()), key=lambda kv: kv[0])))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted((frozen(v) for v in value), key=repr)))
    if hasattr(value, "shape") and hasattr(value, "dtype") and not callable(value):
        array = np.asarray(value)
        return ("array", array.shape, str(array.dtype), array_digest(array))
    return value_key(value)


def value_key(obj) -> Any:
    """The value key of `obj` (see the module docstring): ``(type, obj.__value_key__())`` for an object that
    declares one (None from it: identity); the object itself for a hashable frozen dataclass or named tuple of
    hashable fields; `frozen` of plain data; ``Identity(obj)`` for everything else."""
    declared = getattr(type(obj), "__value_key__", None)
    if declared is not None and not isinstance(obj, type):
        key = obj.__value_key__()
        return Identity(obj) if key is None else ("value", Identity(type(obj)), key)
    if isinstance(obj, _SCALARS) or isinstance(obj, (list, dict, set, frozenset)) or (
            isinstance(obj, tuple) and not hasattr(obj, "_fields")):
        return frozen(obj)
    if isinstance(obj, types.MethodType):  # a bound method: its function (by identity) on its object's value
        return ("method", Identity(obj.__func__), value_key(obj.__self__))
    params = getattr(type(obj), "__dataclass_params__", None)
    if dataclasses.is_dataclass(obj) and params is not None and params.frozen:
        try:
            hash(obj)
        except TypeError:
            return Identity(obj)
        return ("dataclass", Identity(type(obj)), obj)
    return Identity(obj)


class Static:
    """`obj` as a static argument of ``jax.jit``: hashed and compared by `value_key(obj)`, computed once."""

    __slots__ = ("obj", "key", "_hash")

    def __init__(self, obj):
        self.obj = obj
        self.key = value_key(obj)
        self._hash = hash(self.key)

    def __eq__(self, other) -> bool:
        return isinstance(other, Static) and other._hash == self._hash and other.key == self.key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Static({type(self.obj).__qualname__})"
