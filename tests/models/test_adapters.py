"""The bridge on Flax NNX and Equinox modules (`models.adapters`): for the same weights, an MLP and a small CNN
written in Haiku, NNX and Equinox give the same sites (Equinox's weights in the zoo's layout), fan-in priors,
log-density and predictions, and with the same seed and guide the same ELBO curve; NNX ``BatchStat`` and Equinox
``State`` ride in the "network_state" site and checkpoints (a batched Equinox module's too); rank-1 NNX and Equinox
layers compute what the Haiku ones do."""

import pathlib
import subprocess
import sys
from typing import ClassVar

import equinox as eqx
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax import monitoring
from numpyro.infer.util import log_density

import evals
import inference
import inference.svi
from inference.guide_params import param_constraints
import models
from base.errors import ArgumentTypeError, InputError, MissingDependencyError
from models.adapters import require
from models import eqx_rank1
from models.nnx_rank1 import Rank1Conv, Rank1Linear
from models.rank1 import Rank1Conv2D, Rank1Dense, rank1_likelihood, rank1_prior, tile_components
from models.variance import log_uniform_prior
from inference.site_names import arviz_name

RNG = np.random.default_rng(0)
X = RNG.normal(size=(32, 4)).astype(np.float32)
Y = (X[:, 0] + X[:, 1] > 0).astype(np.int32)
IMAGES = RNG.normal(size=(8, 36)).astype(np.float32)  # 6 x 6 grey images as flat rows
LABELS = (IMAGES[:, 0] > 0).astype(np.int32)
PRIOR = models.priors.per_site({"*/b": "normal", "*/bias": "normal", "*": "fan_in"}, 1.0)
NAMES = {"nnx": {"w": "kernel", "b": "bias"}, "eqx": {"w": "weight", "b": "bias"}}


def _renamed(params: dict, library: str) -> dict:
    """Haiku's {"lin0/w": ...} as `library` names the same sites ({"lin0/kernel": ...} in NNX)."""
    if library == "haiku":
        return dict(params)
    return {f"{k.rpartition('/')[0]}/{NAMES[library][k.rpartition('/')[2]]}": v for k, v in params.items()}


def _haiku_mlp(x):
    return hk.Linear(2, name="lin1")(jnp.tanh(hk.Linear(3, name="lin0")(x)))


class NnxMLP(nnx.Module):
    def __init__(self, p):
        self.lin0 = nnx.Linear(4, 3, kernel_init=lambda *_: p["lin0"]["w"], bias_init=lambda *_: p["lin0"]["b"],
                               rngs=nnx.Rngs(0))
        self.lin1 = nnx.Linear(3, 2, kernel_init=lambda *_: p["lin1"]["w"], bias_init=lambda *_: p["lin1"]["b"],
                               rngs=nnx.Rngs(0))

    def __call__(self, x):
        return self.lin1(jnp.tanh(self.lin0(x)))


class EqxMLP(eqx.Module):
    lin0: eqx.nn.Linear
    lin1: eqx.nn.Linear

    def __init__(self, p):
        k0, k1 = jax.random.split(jax.random.PRNGKey(1))
        self.lin0 = eqx.tree_at(lambda m: (m.weight, m.bias), eqx.nn.Linear(4, 3, key=k0),
                                (p["lin0"]["w"].T, p["lin0"]["b"]))  # Equinox: (out, in)
        self.lin1 = eqx.tree_at(lambda m: (m.weight, m.bias), eqx.nn.Linear(3, 2, key=k1),
                                (p["lin1"]["w"].T, p["lin1"]["b"]))

    def __call__(self, x):
        return self.lin1(jnp.tanh(self.lin0(x)))


def _haiku_cnn(x):
    h = jax.nn.relu(hk.Conv2D(2, 3, padding="VALID", name="conv")(x.reshape(-1, 6, 6, 1)))  # NHWC, HWIO
    return hk.Linear(2, name="out")(h.reshape(h.shape[0], -1))


class NnxCNN(nnx.Module):
    def __init__(self, p):
        self.conv = nnx.Conv(1, 2, (3, 3), padding="VALID", kernel_init=lambda *_: p["conv"]["w"],
                             bias_init=lambda *_: p["conv"]["b"], rngs=nnx.Rngs(0))
        self.out = nnx.Linear(32, 2, kernel_init=lambda *_: p["out"]["w"], bias_init=lambda *_: p["out"]["b"],
                              rngs=nnx.Rngs(0))

    def __call__(self, x):
        h = jax.nn.relu(self.conv(x.reshape(-1, 6, 6, 1)))
        return self.out(h.reshape(h.shape[0], -1))


class EqxCNN(eqx.Module):
    conv: eqx.nn.Conv2d
    out: eqx.nn.Linear

    def __init__(self, p):
        k0, k1 = jax.random.split(jax.random.PRNGKey(1))
        # Equinox: OIHW kernel, (out, 1, 1) bias, CHW images (one example), Linear (out, in)
        self.conv = eqx.tree_at(lambda m: (m.weight, m.bias), eqx.nn.Conv2d(1, 2, 3, key=k0),
                                (jnp.transpose(p["conv"]["w"], (3, 2, 0, 1)), p["conv"]["b"].reshape(2, 1, 1)))
        self.out = eqx.tree_at(lambda m: (m.weight, m.bias), eqx.nn.Linear(32, 2, key=k1),
                               (p["out"]["w"].T, p["out"]["b"]))

    def __call__(self, x):
        h = jax.nn.relu(self.conv(x.reshape(1, 6, 6)))
        return self.out(jnp.transpose(h, (1, 2, 0)).reshape(-1))  # HWC order, as Haiku flattens


def _three(haiku_fn, nnx_cls, eqx_cls, x):
    """{library: BNN} of one network written three times, NNX and Equinox given the Haiku model's initial values
    (those of the key guides start from), so that all three start at the same weights."""
    haiku = models.bnn(haiku_fn, PRIOR, feature_shape=x.shape[1:])
    p = models.unflatten_params(haiku.init_values(jax.random.PRNGKey(0), x))
    return {"haiku": haiku, "nnx": models.bnn(nnx_cls(p), PRIOR, feature_shape=x.shape[1:]),
            "eqx": models.bnn(eqx_cls(p), PRIOR, feature_shape=x.shape[1:])}


@pytest.fixture(scope="module")
def mlps():
    return _three(_haiku_mlp, NnxMLP, EqxMLP, X)


@pytest.mark.parametrize("net", ["mlp", "cnn"])
def test_the_same_weights_give_the_same_sites_log_density_and_predictions(net, mlps):
    three, x, y = (mlps, X, Y) if net == "mlp" else (_three(_haiku_cnn, NnxCNN, EqxCNN, IMAGES), IMAGES, LABELS)
    init = three["haiku"].init_values(jax.random.PRNGKey(0), x)
    want = {"shapes": three["haiku"].site_shapes(x), "out": three["haiku"].apply(init, x)}
    want["lp"] = log_density(three["haiku"], (x, y), {}, init)[0]
    scales = {k: np.sqrt(d.variance) for k, d in three["haiku"].site_priors(x).items()}
    assert scales["lin0/w" if net == "mlp" else "conv/w"].max() == pytest.approx(
        1 / np.sqrt(4 if net == "mlp" else 9))  # fan_in: 4 inputs, 3 x 3 x 1
    for library in ("nnx", "eqx"):
        model = three[library]
        params = _renamed(init, library)
        assert list(model.site_shapes(x).items()) == list(_renamed(want["shapes"], library).items())
        for name, value in model.init_values(jax.random.PRNGKey(0), x).items():  # the module's own weights
            np.testing.assert_array_equal(value, params[name])
        for name, d in model.site_priors(x).items():
            np.testing.assert_array_equal(np.sqrt(d.variance), _renamed(scales, library)[name])
        np.testing.assert_allclose(log_density(model, (x, y), {}, params)[0], want["lp"], rtol=1e-6)
        np.testing.assert_allclose(model.apply(params, x), want["out"], rtol=1e-5, atol=1e-6)


def test_the_same_seed_and_guide_give_the_same_elbo_curve_nuts_draws_and_scores(mlps, fitted):
    curves = {library: post.losses for library, post in fitted.items()}
    assert curves["haiku"][-5:].mean() < curves["haiku"][:5].mean()
    compiles = []
    listener = lambda event, seconds, **kw: compiles.append(event) if "backend_compile" in event or "cache_retrieval" in event else None  # noqa: E731
    monitoring.register_event_duration_secs_listener(listener)
    try:  # a second fit of the NNX model (another guide object, optimiser record and seed) compiles nothing
        again = inference.fit(mlps["nnx"], inference.mean_field(mlps["nnx"]), (X, Y), steps=25, batch_size=16,
                              optimizer=inference.optimizers.adam(learning_rate=1e-2), seed=5, progress=False)
    finally:
        monitoring.unregister_event_duration_listener(listener)
    assert compiles == [] and again.info.traces == 0 and not np.allclose(again.losses, curves["nnx"])
    runs = {library: inference.nuts(mlps[library], (X, Y), init=fitted[library], num_chains=1, num_warmup=4,
                                     draws_per_chain=4, max_tree_depth=2, seed=1, progress=False)
            for library in ("nnx", "eqx")}  # the same start (the same posterior draw), the same chain
    scores = {library: evals.score(post, (X, Y), num_samples=4, verbose=False).iloc[0]
              for library, post in fitted.items()}
    for library in ("nnx", "eqx"):
        np.testing.assert_allclose(curves[library], curves["haiku"], rtol=1e-5)
        assert set(runs[library].samples) == set(mlps[library].site_shapes(X))
        for name, value in runs[library].samples.items():
            assert value.shape[:2] == (1, 4) and np.all(np.isfinite(value))
            assert len(np.unique(value[0, :, ...].reshape(4, -1), axis=0)) > 1  # the chain moved
    for name, value in runs["nnx"].samples.items():
        eqx_name = name.replace("kernel", "weight")
        # the two libraries' ops round differently (float32) and NUTS's trajectories amplify it: 1.5e-5 seen at
        # this suite's XLA level 0 on a weight near zero
        np.testing.assert_allclose(value, runs["eqx"].samples[eqx_name], rtol=1e-4, atol=1e-4)
        assert scores[library]["nll"] == pytest.approx(scores["haiku"]["nll"], rel=1e-4)
        idata = inference.to_arviz(fitted[library], (X, Y), num_samples=3)
        assert set(idata.posterior.data_vars) == {arviz_name(s) for s in mlps[library].site_shapes(X)}


class NnxBN(nnx.Module):
    def __init__(self):
        self.lin0, self.bn = nnx.Linear(4, 3, rngs=nnx.Rngs(0)), nnx.BatchNorm(3, momentum=0.5, rngs=nnx.Rngs(0))
        self.lin1 = nnx.Linear(3, 2, rngs=nnx.Rngs(1))

    def __call__(self, x):
        return self.lin1(jax.nn.relu(self.bn(self.lin0(x))))


class EqxBN(eqx.Module):
    lin0: eqx.nn.Linear
    bn: eqx.nn.BatchNorm
    lin1: eqx.nn.Linear

    def __init__(self, key):
        k0, k1 = jax.random.split(key)
        self.lin0, self.lin1 = eqx.nn.Linear(4, 3, key=k0), eqx.nn.Linear(3, 2, key=k1)
        self.bn = eqx.nn.BatchNorm(3, "batch", mode="batch", momentum=0.5)

    def __call__(self, x, state):
        h, state = self.bn(self.lin0(x), state)
        return self.lin1(jax.nn.relu(h)), state


class EqxBatchedBN(EqxBN):
    """`EqxBN` taking the whole batch (``batched``): it maps its layers, and its batch norm over axis "batch"."""

    batched: ClassVar[bool] = True

    def __call__(self, x, state):
        return jax.vmap(super().__call__, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


def _library_step(library, module, x):
    """(training output, state after it, evaluation output with that state) computed by the library itself."""
    if library == "nnx":
        module = nnx.clone(module)
        module.train()
        out = module(x)
        stats = {"/".join(map(str, k)): v[...] for k, v in nnx.to_flat_state(nnx.state(module, nnx.BatchStat))}
        module.eval()
        return out, stats, module(x)
    net, state = module
    out, state = jax.vmap(net, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)
    evaluation = jax.vmap(eqx.nn.inference_mode(net), axis_name="batch", in_axes=(0, None), out_axes=(0, None))
    return out, state, evaluation(x, state)[0]


@pytest.mark.parametrize("library", ["nnx", "eqx", "eqx-batched"])
def test_batch_statistics_ride_in_the_state_site_and_checkpoints(library, tmp_path):
    eqx_cls = EqxBatchedBN if library == "eqx-batched" else EqxBN
    module = NnxBN() if library == "nnx" else eqx.nn.make_with_state(eqx_cls)(jax.random.PRNGKey(0))
    model = models.bnn(module, models.priors.normal(1.0), feature_shape=X.shape[1:])
    assert model.is_stateful(X)
    params = model.init_values(None, X)
    state0 = model.initial_state(X)
    out, state1 = model.adapter.apply(params, state0, X, True)  # what the NumPyro model does in training
    reference = eqx.nn.make_with_state(EqxBN)(jax.random.PRNGKey(0)) if library == "eqx-batched" else module
    want_out, want_state, want_eval = _library_step(library, reference, X)  # batched: what the per-example one does
    np.testing.assert_allclose(out, want_out, rtol=1e-6)
    for got, expected in zip(jax.tree.leaves(state1), jax.tree.leaves(want_state)):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    np.testing.assert_allclose(model.apply(params, X, state1), want_eval, rtol=1e-5, atol=1e-6)  # evaluation mode

    post = inference.fit(model, inference.point_estimate.point_estimate(model), (X, Y), steps=6, batch_size=16, progress=False)
    moved = [name for name, value in model.flatten_state(post.state).items()
             if np.asarray(value).dtype.kind == "f" and not np.allclose(value, model.flatten_state(state0)[name])]
    assert moved  # the running statistics were carried from step to step
    loaded = inference.load(inference.save(post, str(tmp_path / library)), model)
    for name, value in model.flatten_state(post.state).items():
        np.testing.assert_array_equal(model.flatten_state(loaded.state)[name], value)
    np.testing.assert_array_equal(loaded.predict(X[:5], num_samples=1), post.predict(X[:5], num_samples=1))


def test_nnx_rank1_layers_compute_what_the_haiku_ones_do():
    k = 2
    x = RNG.normal(size=(2 * 3, 4)).astype(np.float32)  # 3 examples tiled over 2 components
    layer = Rank1Linear(4, 5, k, sign_init=-0.5, rngs=nnx.Rngs(0))
    params = {"w": layer.kernel[...], "alpha": layer.alpha[...], "gamma": layer.gamma[...], "b": layer.bias[...]}
    layer.bias[...] = RNG.normal(size=(k, 5)).astype(np.float32)
    params["b"] = layer.bias[...]
    haiku = hk.without_apply_rng(hk.transform(lambda z: Rank1Dense(5, k, name="r")(z)))
    np.testing.assert_allclose(layer(x), haiku.apply({"r": params}, x), rtol=1e-6)

    images = RNG.normal(size=(2 * 3, 5, 5, 2)).astype(np.float32)
    conv = Rank1Conv(2, 3, 3, k, strides=2, padding="VALID", sign_init=-0.5, rngs=nnx.Rngs(1))
    params = {"w": conv.kernel[...], "alpha": conv.alpha[...], "gamma": conv.gamma[...], "b": conv.bias[...]}
    haiku = hk.without_apply_rng(hk.transform(lambda z: Rank1Conv2D(3, 3, k, stride=2, padding="VALID", name="c")(z)))
    got = conv(images)
    assert got.shape == (6, 2, 2, 3)
    np.testing.assert_allclose(got, haiku.apply({"c": params}, images), rtol=1e-5, atol=1e-6)
    model = models.bnn(conv, models.rank1.rank1_prior())
    assert dict(model.site_shapes(images)) == {"alpha": (k, 2), "bias": (k, 3), "gamma": (k, 3),
                                               "kernel": (3, 3, 2, 3)}


def test_equinox_rank1_layers_compute_what_the_haiku_ones_do():
    """The batched Equinox rank-1 layers (`models.eqx_rank1`) against Haiku's with the same parameters, their
    sites in the zoo's layout (the adapter keeps them as stored) and the adapter calling them on the whole batch."""
    k = 2
    x = RNG.normal(size=(2 * 3, 4)).astype(np.float32)  # 3 examples tiled over 2 components
    layer = eqx_rank1.Rank1Linear(4, 5, k, sign_init=-0.5, key=jax.random.PRNGKey(0))
    layer = eqx.tree_at(lambda m: m.bias, layer, RNG.normal(size=(k, 5)).astype(np.float32))
    params = {"w": layer.weight, "alpha": layer.alpha, "gamma": layer.gamma, "b": layer.bias}
    haiku = hk.without_apply_rng(hk.transform(lambda z: Rank1Dense(5, k, name="r")(z)))
    np.testing.assert_allclose(layer(x), haiku.apply({"r": params}, x), rtol=1e-6)
    model = models.bnn(layer, rank1_prior())
    assert dict(model.site_shapes(x)) == {"alpha": (k, 4), "bias": (k, 5), "gamma": (k, 5), "weight": (4, 5)}
    np.testing.assert_allclose(model.apply(model.init_values(None, x), x), haiku.apply({"r": params}, x), rtol=1e-6)

    images = RNG.normal(size=(2 * 3, 5, 5, 2)).astype(np.float32)
    conv = eqx_rank1.Rank1Conv(2, 3, 3, k, strides=2, padding="VALID", sign_init=-0.5, key=jax.random.PRNGKey(1))
    params = {"w": conv.weight, "alpha": conv.alpha, "gamma": conv.gamma, "b": conv.bias}
    haiku = hk.without_apply_rng(hk.transform(lambda z: Rank1Conv2D(3, 3, k, stride=2, padding="VALID", name="c")(z)))
    got = conv(images)
    assert got.shape == (6, 2, 2, 3)
    np.testing.assert_allclose(got, haiku.apply({"c": params}, images), rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match="num_components"):
        eqx_rank1.Rank1Linear(4, 5, 0, key=jax.random.PRNGKey(0))

    class Unclear(eqx_rank1.Rank1Linear):
        batched = 1  # not a bool

    with pytest.raises(InputError, match=r"Unclear\.batched: expected a bool"):
        models.bnn(Unclear(4, 5, k, key=jax.random.PRNGKey(0)), rank1_prior())


def test_what_the_bridge_refuses(mlps, monkeypatch):
    with pytest.raises(ArgumentTypeError, match="network"):
        models.bnn(42)
    model = mlps["nnx"]
    with pytest.raises(InputError, match="flax.nnx module"):  # the local estimator intercepts Haiku modules only
        inference.fit(model, inference.mean_field(model), (X, Y), steps=2, batch_size=16, estimator="local",
                      progress=False)
    monkeypatch.setitem(sys.modules, "equinox", None)  # as if equinox were not installed
    with pytest.raises(MissingDependencyError, match=r"bnn-zoo\[equinox\]"):
        require("equinox")


@pytest.fixture(scope="module")
def fitted(mlps):
    """{library: mean-field Posterior} of the three MLPs, same seed (shared by the ELBO, NUTS and scoring tests)."""
    return {library: inference.fit(model, inference.mean_field(model), (X, Y), steps=25, batch_size=16,
                                   optimizer=inference.optimizers.adam(learning_rate=1e-2), seed=4, progress=False)
            for library, model in mlps.items()}


def _guides(library: str) -> dict:
    """{guide name: (model, guide)} for every guide of `inference.GUIDES`, built on a fresh `library` MLP (a
    rank-1 MLP of the library for the rank-1 mixture guide), with the options its site names need."""
    p = models.unflatten_params(models.bnn(_haiku_mlp).init_values(jax.random.PRNGKey(0), X))
    weight = NAMES[library]["w"]
    cls = NnxMLP if library == "nnx" else EqxMLP
    varnet = models.priors.by_pattern({f"lin0/{weight}": log_uniform_prior()}, default=models.priors.normal(1.0))
    options = {"by_site": {"families": {f"*/{weight}": "mean_field"}, "default": "point_estimate"},
               "zero_mean": {"variance_sites": [f"lin0/{weight}"]},
               "variance_layers": {"variance_sites": f"lin0/{weight}"},
               "binary_dropout": {"dropout_sites": [f"*/{weight}"]}, "k_tied": {"k": 2}}
    out = {}
    for name in inference.GUIDES:
        if name == "rank1_mixture":
            net = NnxRank1MLP() if library == "nnx" else EqxRank1MLP(jax.random.PRNGKey(0))
            model = models.bnn(net, rank1_prior(), rank1_likelihood(models.likelihoods.categorical(), 2),
                               feature_shape=X.shape[1:])
        else:
            model = models.bnn(cls(p), varnet if name in ("zero_mean", "variance_layers") else PRIOR,
                               feature_shape=X.shape[1:])
        out[name] = (model, inference.make_guide(name, model, **options.get(name, {})))
    return out


class NnxRank1MLP(nnx.Module):
    """4 -> 3 -> 2 of `Rank1Linear` layers over K = 2 components: (n, 4) -> (2 n, 2)."""

    def __init__(self):
        self.lin0 = Rank1Linear(4, 3, 2, rngs=nnx.Rngs(0))
        self.lin1 = Rank1Linear(3, 2, 2, rngs=nnx.Rngs(1))

    def __call__(self, x):
        return self.lin1(jnp.tanh(self.lin0(tile_components(x, 2))))


class EqxRank1MLP(eqx.Module):
    """4 -> 3 -> 2 of Equinox `Rank1Linear` layers over K = 2 components, batched: (n, 4) -> (2 n, 2)."""

    batched: ClassVar[bool] = True
    lin0: eqx_rank1.Rank1Linear
    lin1: eqx_rank1.Rank1Linear

    def __init__(self, key):
        k0, k1 = jax.random.split(key)
        self.lin0 = eqx_rank1.Rank1Linear(4, 3, 2, key=k0)
        self.lin1 = eqx_rank1.Rank1Linear(3, 2, 2, key=k1)

    def __call__(self, x):
        return self.lin1(jnp.tanh(self.lin0(tile_components(x, 2))))


@pytest.mark.parametrize("library", ["nnx", "eqx"])
def test_every_guide_trains_on_nnx_and_equinox_mlps(library):
    """Every guide of `inference.GUIDES`: SVI steps (`inference.svi`, as `fit` runs them; all guides in one
    compiled program) lower the ELBO from its start, and the guide's median has the model's site shapes."""
    cases = _guides(library)
    batch, steps = (X[:16], Y[:16]), 30

    @jax.jit
    def run(key):
        out = {}
        for name, (model, guide) in cases.items():
            svi = inference.svi.build(model, guide, optax.adam(2e-2), n_data=len(X))
            state = svi.init(key, batch)

            def one(state, k, svi=svi):
                state, info = svi.step(state, batch, k)
                return state, info.loss

            state, losses = jax.lax.scan(one, state, jax.random.split(key, steps))
            out[name] = (losses, state.params)
        return out

    results = run(jax.random.PRNGKey(0))
    assert set(results) == set(inference.GUIDES)
    for name, (losses, params) in results.items():
        model, guide = cases[name]
        assert np.all(np.isfinite(losses)), name
        assert losses[-8:].mean() < losses[:8].mean(), (name, losses)
        median = guide.median(inference.svi.constrain(param_constraints(guide, batch, len(X)), params))
        assert {k: tuple(np.shape(v)) for k, v in median.items()} == dict(model.site_shapes(X)), name


def test_flax_nnx_and_equinox_are_imported_only_for_their_modules():
    """Importing the packages and building a Haiku model imports neither NNX nor Equinox (Haiku itself may import
    flax's linen when flax is installed)."""
    code = ("import sys, models, inference, evals, zoo; models.bnn(lambda x: x).site_shapes((3,)); "
            "print(sorted(m for m in ('flax.nnx', 'equinox') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=pathlib.Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]", out.stderr
