"""structure_key: equal keys exactly when two objects compute the same thing."""

import functools

import jax.numpy as jnp
import numpy as np
import optax

import zoo
from base.structure import cached, structure_key


def _mlp(**kw):
    return zoo.get("mlp", data="two_moons", data_kwargs={"n": 40}, **{"hidden": (4,), **kw}).model


def test_models_are_keyed_by_network_prior_and_likelihood():
    base = structure_key(_mlp())
    assert structure_key(_mlp()) == base
    for other in ({"hidden": (5,)}, {"activation": "tanh"}, {"prior_scale": 0.5}, {"prior": "he_normal"}):
        assert structure_key(_mlp(**other)) != base, other


def test_optimisers_are_keyed_by_code_and_hyperparameters():
    assert structure_key(optax.adam(1e-3)) == structure_key(optax.adam(1e-3))
    assert structure_key(optax.adam(1e-3)) != structure_key(optax.adam(2e-3))
    assert structure_key(optax.adam(1e-3)) != structure_key(optax.sgd(1e-3))
    cosine = [optax.adam(optax.cosine_decay_schedule(1e-2, steps)) for steps in (100, 100, 200)]
    assert structure_key(cosine[0]) == structure_key(cosine[1]) != structure_key(cosine[2])


def test_closures_arrays_partials_and_opaque_objects():
    def make(scale):
        return lambda x: x * scale

    assert structure_key(make(2.0)) == structure_key(make(2.0)) != structure_key(make(3.0))
    a = np.arange(6.0, dtype=np.float32)
    assert structure_key(jnp.asarray(a)) == structure_key(a.copy()) != structure_key(a + 1)
    assert structure_key(functools.partial(max, 1)) == structure_key(functools.partial(max, 1))

    class Opaque:
        __slots__ = ()

    one, two = Opaque(), Opaque()
    assert structure_key(one) == structure_key(one) != structure_key(two)  # unknown objects: identity
    cycle = []
    cycle.append(cycle)
    assert structure_key(cycle) == structure_key(cycle)


def test_cached_builds_once_per_structure():
    built = []
    first = cached("test", (optax.adam(1e-3), (3,)), lambda: built.append(1) or object())
    again = cached("test", (optax.adam(1e-3), (3,)), lambda: built.append(1) or object())
    other = cached("test", (optax.adam(1e-3), (4,)), lambda: built.append(1) or object())
    assert first is again and other is not first and len(built) == 2
