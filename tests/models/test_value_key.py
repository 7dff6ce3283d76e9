"""base.value_key: equal keys only for equal configurations; identity for everything undeclared."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import optax

from base.value_key import Identity, Static, frozen, value_key


def test_plain_data_and_arrays_are_keyed_by_value_and_type():
    assert frozen({"a": [1, 2.0], "b": None}) == frozen({"b": None, "a": (1, 2.0)})
    assert frozen(1) != frozen(1.0) and frozen(True) != frozen(1)  # another type may compute otherwise
    a = np.arange(6, dtype=np.float32)
    assert frozen(jnp.asarray(a)) == frozen(a.copy()) != frozen(a + 1)
    assert frozen(a) != frozen(a.astype(np.float64)) and frozen(a) != frozen(a.reshape(2, 3))


def test_optax_objects_and_user_functions_by_identity_nothing_read():
    adam = optax.adam(1e-3)
    assert value_key(adam) == value_key(adam) != value_key(optax.adam(1e-3))  # another object: another key

    def schedule(t):
        return 1e-3

    assert value_key(schedule) == Identity(schedule) != Identity(lambda t: 1e-3)


def test_value_objects_declared_keys_and_frozen_dataclasses():
    @dataclasses.dataclass(frozen=True)
    class Family:
        scale: float

    @dataclasses.dataclass(frozen=True)
    class WithArray:
        values: np.ndarray

    class Declared:
        def __init__(self, width, key=True):
            self.width, self.key = width, key

        def __value_key__(self):
            return self.width if self.key else None

    assert value_key(Family(0.1)) == value_key(Family(0.1)) != value_key(Family(0.2))
    holder = WithArray(np.zeros(2))  # unhashable field: identity
    assert value_key(holder) == value_key(holder) != value_key(WithArray(np.zeros(2)))
    assert value_key(Declared(3)) == value_key(Declared(3)) != value_key(Declared(4))
    undeclared = Declared(3, key=False)  # None: not describable, identity
    assert value_key(undeclared) == value_key(undeclared) != value_key(Declared(3, key=False))
    # a bound method: its function on its object's value
    assert value_key(Declared(3).__value_key__) == value_key(Declared(3).__value_key__)
    assert value_key(Declared(3).__value_key__) != value_key(Declared(4).__value_key__)
    assert Static(Family(0.1)) == Static(Family(0.1)) and hash(Static(Family(0.1))) == hash(Static(Family(0.1)))
    assert Static(Family(0.1)) != Static(Family(0.2))
