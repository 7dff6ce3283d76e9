"""`structure_key`: a hashable description of what an object computes, for caching compiled code.

Two objects with equal keys compute the same thing, so a function compiled for one can be reused for
the other (another seed, another guide instance, another `zoo.get` of the same entry). The key is built
from values, not from object identity:

* numbers, strings, None, dtypes: themselves; tuples, lists, dicts, sets: their items' keys;
* arrays (NumPy or JAX): shape, dtype and a hash of the bytes (closures may bake them into the code);
* functions: the code object, the keys of the closure cells, defaults and keyword defaults (a factory
  such as ``optax.adam(1e-3)`` or ``models.networks.mlp.mlp((64, 64), 10, "relu")`` called twice gives
  equal keys); a function without a closure defined at module level is keyed by identity, like
  ``jax.jit`` keys it. As for ``jax.jit``, the module globals a function reads are not part of its key;
* an object with a ``__structure__()`` method: its type and the key of what that method returns (the
  parts that determine its computation, e.g. a `models.BNN`'s network function, prior and likelihood);
* dataclasses, named tuples, ``functools.partial`` and other objects with a ``__dict__``: type and fields;
* anything else (builtins, compiled JAX functions, C objects): identity. Identity is never wrong, only
  less shared; `structure_key_and_refs` also returns the objects keyed by identity so that a cache holding them keeps their
  ids from being reused.

`cached(kind, parts, build)` is the process-wide cache built on these keys: `inference.nuts`, a `BNN`'s
Haiku initialiser and a few analyses (`zoo.experiments.analysis.elbo_gradients`, `zoo.experiments.analysis.elbo_draws`,
`zoo.experiments.analysis.diversity`) keep
their jitted functions in it. `inference.fit`, `Posterior.predict` and the collapse check use explicit value
keys instead (`base.value_key`, `inference.svi`). An entry also holds the objects its key names by identity.
At most `MAX_ENTRIES` entries are kept (least recently used evicted).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import types
from collections import OrderedDict
from typing import Callable, TypeVar

import jax
import numpy as np

_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def structure_key(obj) -> tuple:
    """A hashable tuple describing what `obj` computes (see the module docstring)."""
    return StructureKey().key(obj)


class StructureKey:
    """Builds keys (`key`) and records the objects keyed by identity (`identity_objects`)."""

    def __init__(self):
        self.identity_objects: list = []
        self._path: dict = {}  # id -> depth, for cycles

    def key(self, obj) -> tuple:
        """The structure key of `obj`."""
        if isinstance(obj, _SCALARS):
            return (type(obj).__name__, obj)
        if isinstance(obj, (np.dtype, type)) or obj is Ellipsis:
            return self._identity(obj) if isinstance(obj, type) else ("dtype", str(obj))
        if isinstance(obj, (np.ndarray, jax.Array)):
            return _array_key(obj) if not isinstance(obj, jax.core.Tracer) else self._identity(obj)
        oid = id(obj)
        if oid in self._path:
            return ("cycle", self._path[oid])
        self._path[oid] = len(self._path)
        try:
            return self._compound(obj)
        finally:
            del self._path[oid]

    def _compound(self, obj) -> tuple:
        structure = getattr(type(obj), "__structure__", None)
        if structure is not None and not isinstance(obj, type):
            return ("structure", self._identity(type(obj)), self.key(obj.__structure__()))
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return ("namedtuple", self._identity(type(obj)), tuple(self.key(v) for v in obj))
        if isinstance(obj, (tuple, list)):
            return (type(obj).__name__, tuple(self.key(v) for v in obj))
        if isinstance(obj, dict):
            return ("dict", tuple((self.key(k), self.key(v)) for k, v in obj.items()))
        if isinstance(obj, (set, frozenset)):
            return ("set", tuple(sorted((self.key(v) for v in obj), key=repr)))
        if isinstance(obj, types.FunctionType):
            return self._function(obj)
        if isinstance(obj, types.MethodType):
            return ("method", self.key(obj.__func__), self.key(obj.__self__))
        if isinstance(obj, functools.partial):
            return ("partial", self.key(obj.func), self.key(obj.args), self.key(obj.keywords))
        if dataclasses.is_dataclass(obj):
            return ("dataclass", self._identity(type(obj)),
                    tuple((f.name, self.key(getattr(obj, f.name))) for f in dataclasses.fields(obj)))
        fields = getattr(obj, "__dict__", None)
        if isinstance(fields, dict) and type(obj).__module__.split(".")[0] not in _OPAQUE_MODULES:
            return ("object", self._identity(type(obj)), self.key(fields))
        return self._identity(obj)

    def _function(self, fn) -> tuple:
        if fn.__closure__ is None and "<locals>" not in fn.__qualname__ and "<lambda>" not in fn.__qualname__:
            return self._identity(fn)
        cells = tuple(self.key(_cell_value(c)) for c in fn.__closure__ or ())
        return ("function", fn.__code__, cells, self.key(fn.__defaults__), self.key(fn.__kwdefaults__))

    def _identity(self, obj) -> tuple:
        self.identity_objects.append(obj)
        return ("id", id(obj))


# objects of these libraries are keyed by identity unless they are plain functions, dataclasses or
# named tuples (e.g. a jax.custom_jvp activation, a compiled function): their attributes are internals.
_OPAQUE_MODULES = {"jax", "jaxlib", "builtins"}


def structure_key_and_refs(obj) -> tuple[tuple, list]:
    """(structure_key(obj), the objects it keys by identity): a cache entry holds the latter so that their
    ids cannot be reused by other objects while the entry lives."""
    builder = StructureKey()
    return builder.key(obj), builder.identity_objects


def array_digest(value) -> str:
    """Hex BLAKE2b (16 bytes) of an array's C-order bytes: equal for equal arrays, in every process."""
    return hashlib.blake2b(np.ascontiguousarray(value).tobytes(), digest_size=16).hexdigest()


def _array_key(obj) -> tuple:
    value = np.asarray(obj)
    return ("array", value.shape, str(value.dtype), array_digest(value))


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a name assigned later in the enclosing function)
        return ("empty cell",)


T = TypeVar("T")
MAX_ENTRIES = 128
_ENTRIES: "OrderedDict[tuple, tuple]" = OrderedDict()


def cached(kind: str, parts, build: Callable[[], T]) -> T:
    """The entry of `kind` for `parts` (anything `structure_key` reads: models, guides, optimisers,
    shapes, settings), built by ``build()`` the first time and reused whenever the parts are structurally
    equal. `build` must close over `parts` only through what the key covers."""
    key, refs = structure_key_and_refs((kind, parts))
    found = _ENTRIES.get(key)
    if found is not None:
        _ENTRIES.move_to_end(key)
        return found[0]
    entry = build()
    _ENTRIES[key] = (entry, refs)
    # building may rewrite what a part closes over (optax's cosine_decay_schedule turns an int decay_steps into a
    # float on its first call): the entry is found under the key the parts have now as well
    after, after_refs = structure_key_and_refs((kind, parts))
    if after != key:
        _ENTRIES[after] = (entry, after_refs)
    while len(_ENTRIES) > MAX_ENTRIES:
        _ENTRIES.popitem(last=False)
    return entry


def clear_cache() -> None:
    """Drop every cached entry (their compiled code is freed when nothing else holds it)."""
    _ENTRIES.clear()


def num_cached() -> int:
    """How many entries the cache holds."""
    return len(_ENTRIES)
