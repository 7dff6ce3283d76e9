"""Bad Flax NNX / Equinox modules (issue 45): each is refused by name (InputError naming ``network`` or ``x``)
when the model is built or first meets its inputs, before anything is compiled; a layer shared by two attributes
stays one site in both libraries.

The modules are 2 -> 3 -> 2 MLPs (tiny); nothing here compiles a training step.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import inference
import models
from base.errors import InputError

X = np.random.default_rng(0).normal(size=(8, 2)).astype(np.float32)


def _refused(build, argument: str = "network", *, words: str) -> InputError:
    with pytest.raises(InputError) as caught:
        build()
    assert caught.value.argument == argument, str(caught.value)
    assert str(caught.value).startswith(argument) and words in str(caught.value), str(caught.value)
    return caught.value


class NnxNet(nnx.Module):
    """2 -> 3 -> 2, with optional dropout / batch norm / an integer Param / a shared layer / an extra argument."""

    def __init__(self, *, width=2, dropout=0.0, batch_norm=False, int_param=False, shared=False):
        rngs = nnx.Rngs(0)
        self.lin0 = nnx.Linear(width, 3, rngs=rngs)
        self.lin1 = self.lin0 if shared else nnx.Linear(3, 2, rngs=rngs)
        self.drop = nnx.Dropout(dropout, rngs=rngs) if dropout else None
        self.bn = nnx.BatchNorm(3, rngs=rngs) if batch_norm else None
        self.count = nnx.Param(jnp.zeros((), jnp.int32)) if int_param else None
        self.shared = shared

    def __call__(self, x):
        h = self.lin0(x)
        h = self.bn(h) if self.bn is not None else h
        h = self.drop(h) if self.drop is not None else h
        return h if self.shared else self.lin1(jnp.tanh(h))


class NnxEmpty(nnx.Module):
    def __call__(self, x):
        return jnp.stack([x[:, 0], -x[:, 0]], -1)


class NnxTwoArguments(NnxNet):
    def __call__(self, x, mask):
        return super().__call__(x) * mask


class EqxNet(eqx.Module):
    lin0: eqx.nn.Linear
    lin1: eqx.nn.Linear
    drop: eqx.nn.Dropout | None
    bn: eqx.nn.BatchNorm | None

    def __init__(self, *, width=2, dropout=0.0, batch_norm=False, shared=False, key=jax.random.PRNGKey(0)):
        k0, k1 = jax.random.split(key)
        self.lin0 = eqx.nn.Linear(width, 3, key=k0)
        self.lin1 = eqx.nn.Linear(3, 2, key=k1)
        if shared:  # one 3 -> 3 layer held by two attributes, and a 2 -> 3 input layer
            self.lin0 = eqx.nn.Linear(3, 3, key=k0)
            self.lin1 = self.lin0
        self.drop = eqx.nn.Dropout(dropout) if dropout else None
        self.bn = eqx.nn.BatchNorm(3, axis_name="batch", mode="batch") if batch_norm else None

    def __call__(self, x):
        h = self.lin0(jnp.concatenate([x, x[:1]]) if self.lin0.in_features == 3 else x)
        h = self.drop(h) if self.drop is not None else h
        return self.lin1(jnp.tanh(h))


class EqxEmpty(eqx.Module):
    def __call__(self, x):
        return jnp.stack([x[0], -x[0]])


class EqxTwoArguments(EqxNet):
    def __call__(self, x, mask):
        return super().__call__(x) * mask


REFUSED = {  # (library, case): (the module, words of the message)
    ("nnx", "dropout"): (lambda: NnxNet(dropout=0.5), "nnx.Dropout 'drop' of rate 0.5"),
    ("nnx", "dropout_with_batch_norm"): (lambda: NnxNet(dropout=0.5, batch_norm=True), "nnx.Dropout 'drop' of rate"),
    ("nnx", "int_param"): (lambda: NnxNet(int_param=True), "'count' is int32"),
    ("nnx", "no_parameters"): (NnxEmpty, "NnxEmpty with no nnx.Param"),
    ("nnx", "extra_argument"): (NnxTwoArguments, "required arguments ['mask']"),
    ("eqx", "dropout_without_key"): (lambda: EqxNet(dropout=0.5), "active eqx.nn.Dropout 'drop' (p=0.5)"),
    ("eqx", "batch_norm_without_state"): (lambda: EqxNet(batch_norm=True), "stateful layer at 'bn/"),
    ("eqx", "no_parameters"): (EqxEmpty, "EqxEmpty with no floating-point array"),
    ("eqx", "extra_argument"): (EqxTwoArguments, "required arguments ['mask']"),
}


@pytest.mark.parametrize("library, case", list(REFUSED))
def test_modules_the_bridge_cannot_run_as_they_are_meant_are_refused_at_construction(library, case):
    make, words = REFUSED[library, case]
    _refused(lambda: models.bnn(make()), words=words)


def test_equinox_dropout_switched_off_is_accepted():
    model = models.bnn(EqxNet(dropout=0.0))
    assert list(model.site_shapes(X)) == ["lin0/bias", "lin0/weight", "lin1/bias", "lin1/weight"]
    assert models.bnn(eqx.nn.inference_mode(EqxNet(dropout=0.5))).num_weights(X) == 3 * 2 + 3 + 2 * 3 + 2


@pytest.mark.parametrize("library", ["nnx", "eqx"])
def test_a_module_built_for_another_input_width_is_refused_by_name_before_any_compile(library):
    module = NnxNet(width=4) if library == "nnx" else EqxNet(width=4)
    model = models.bnn(module, feature_shape=X.shape[1:])
    err = _refused(lambda: inference.mean_field(model), "x", words="feature shape (2,)")
    assert "another input width" in str(err)


@pytest.mark.parametrize("library", ["nnx", "eqx"])
def test_a_layer_shared_by_two_attributes_is_one_site(library):
    """NNX's graph holds a shared submodule once; Equinox's pytree lists its arrays twice, and they are one site
    (they used to be two sites that drifted apart in training)."""
    module = NnxNet(shared=True) if library == "nnx" else EqxNet(shared=True)
    model = models.bnn(module)
    expected = {"lin0/bias": (3,), "lin0/kernel" if library == "nnx" else "lin0/weight": (3, 3) if library == "eqx"
                else (2, 3)}
    assert dict(model.site_shapes(X)) == expected
    # the one site's value is read at both places: doubling it changes the output as the module with both doubled
    values = model.init_values(jax.random.PRNGKey(0), X)
    doubled = {k: 2 * v for k, v in values.items()}
    direct = (eqx.tree_at(lambda m: (m.lin0.weight, m.lin0.bias, m.lin1.weight, m.lin1.bias), module,
                          (2 * module.lin0.weight, 2 * module.lin0.bias, 2 * module.lin0.weight, 2 * module.lin0.bias))
              if library == "eqx" else None)
    if library == "eqx":
        np.testing.assert_allclose(model.apply(doubled, X), jax.vmap(direct)(X), rtol=1e-6)
    else:
        twice = nnx.clone(module)
        twice.lin0.kernel = nnx.Param(2 * module.lin0.kernel[...])
        twice.lin0.bias = nnx.Param(2 * module.lin0.bias[...])
        np.testing.assert_allclose(model.apply(doubled, X), twice(X), rtol=1e-6)


def test_a_mesh_whose_two_devices_are_one_is_refused_by_name():
    from jax.sharding import Mesh

    device = jax.devices()[0]
    err = _refused(lambda: inference.mesh.check_mesh(Mesh(np.array([device, device]), ("data",)), 16), "mesh",
                   words="more than once")
    assert str(device) in str(err)
