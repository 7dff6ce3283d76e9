"""`inference.local_reparam` and `models.local_reparam`: the local reparameterisation trick estimates the same ELBO
as a weight draw per example (`inference.per_example`), with a gradient variance no higher."""

from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest

import inference
import zoo
from inference.dropout import binary_dropout
from inference.elbo import annealed_elbo_loss
from inference.families import ParamSpec, gaussian_local_rule
from inference.joint_gaussian import block_diagonal
from inference.site_guide import SiteGuide
from inference.svi import constrain as constrain_params, guide_param_init
from inference.local_reparam import local_reparam_elbo_loss, local_rules
from inference.estimators import Local, PerExample, Standard, as_estimator
from inference.per_example import per_example_elbo_loss
from base.errors import InputError
from base.prng import paired_normals
from models.local_reparam import (FlipoutRule, GaussianRule, KTiedRule, dropout_preactivation, flipout_output,
                                  gaussian_preactivation, k_tied_preactivation, local_noise)

SITE = "mlp/~/linear_0/w"
KEYS = 3000


def test_gaussian_preactivation_is_mean_plus_scaled_noise():
    z = jnp.array([[1.0, 2.0], [0.0, -3.0]])
    mean = jnp.array([[1.0, 0.0, 2.0], [0.5, 1.0, -1.0]])
    var = jnp.array([[4.0, 1.0, 0.0], [1.0, 0.25, 9.0]])
    bias = jnp.array([0.1, 0.2, 0.3])
    at_mean = gaussian_preactivation(z, mean, var, bias, jnp.zeros((2, 3)))
    np.testing.assert_allclose(at_mean, [[2.1, 2.2, 0.3], [-1.4, -2.8, 3.3]], rtol=1e-6)
    one_sd = gaussian_preactivation(z, mean, var, None, jnp.ones((2, 3)))
    # sqrt(sum_i z_i² v_ij): row 0 sqrt(4 + 4), sqrt(1 + 1), sqrt(0 + 36); row 1 sqrt(9), sqrt(2.25), sqrt(81)
    np.testing.assert_allclose(one_sd - (at_mean - bias), [[np.sqrt(8), np.sqrt(2), 6.0], [3.0, 1.5, 9.0]],
                               rtol=1e-5)


def test_k_tied_preactivation_has_the_weight_draws_mean_and_variance():
    """sum_kl (z² @ (U_k o U_l)) V_jk V_jl is the variance of z W for W ~ N(m, (U Vᵀ)²): equal to
    `gaussian_preactivation`'s with that variance matrix, and to a Monte Carlo of weight draws."""
    rng = np.random.default_rng(0)
    z, mean = jnp.asarray(rng.normal(size=(3, 5)), jnp.float32), jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)
    u, v = (jnp.asarray(rng.uniform(0.2, 1.0, size=(n, 2)), jnp.float32) for n in (5, 4))
    bias, eps = jnp.array([0.1, 0.2, 0.3, 0.4]), jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)
    np.testing.assert_allclose(k_tied_preactivation(z, mean, u, v, bias, eps),
                               gaussian_preactivation(z, mean, (u @ v.T) ** 2, bias, eps), rtol=1e-5, atol=1e-5)
    draws = 40_000
    weights = mean + (u @ v.T) * jax.random.normal(jax.random.PRNGKey(0), (draws, 5, 4))
    h = np.asarray(jnp.einsum("ni,dij->dnj", z, weights) + bias, np.float64)  # a weight draw per example
    at_mean = np.asarray(k_tied_preactivation(z, mean, u, v, bias, jnp.zeros((3, 4))))
    sd = np.asarray(k_tied_preactivation(z, mean, u, v, bias, jnp.ones((3, 4)))) - at_mean
    np.testing.assert_allclose(h.mean(0), at_mean, atol=4 * sd.max() / np.sqrt(draws))
    np.testing.assert_allclose(h.var(0), sd ** 2, rtol=0.03)  # a variance from 40,000 draws: ~0.7 % error


def test_dropout_preactivation_drops_and_rescales_inputs():
    z = jnp.array([[1.0, 2.0]])
    loc = jnp.array([[1.0, 10.0], [100.0, 1000.0]])
    h = dropout_preactivation(z, loc, jnp.array([0.5, 0.5]), jnp.array([[1.0, 0.0]]), 0.5)
    np.testing.assert_allclose(h, [[2.5, 20.5]])  # only input 0, doubled


@pytest.fixture(scope="module")
def setup():
    e = zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100}, log_uniform_sites=[SITE])
    x, y = np.asarray(e.train.x[:16], np.float32), np.asarray(e.train.y[:16])
    return e, x, y


def _values_and_grads(setup, guide, loss, param):
    """KEYS independent estimates of the loss and of its gradient in the guide parameter ``param``."""
    e, x, y = setup
    params_u, constraints, _ = guide_param_init(guide, jax.random.PRNGKey(0), x, y, len(e.train.y))

    def one(key, pu):
        return loss(key, constrain_params(constraints, pu), e.model, guide, 1.0, 1, x, y, len(e.train.y))[0]

    keys = jax.random.split(jax.random.PRNGKey(1), KEYS)
    values, grads = jax.jit(jax.vmap(jax.value_and_grad(one, argnums=1), in_axes=(0, None)))(keys, params_u)
    return np.asarray(values, np.float64), np.asarray(grads[param], np.float64).reshape(KEYS, -1)


OUT = "mlp/~/linear_1/w"  # Normal prior (a dropped weight has log-uniform density +inf)
# (guide, parameter, bound on its gradient variance relative to a draw per example). Measured with 20,000 keys, 32
# examples, 8 hidden units: zero-mean sigma 0.60 vs 0.77; layer-wise log alpha 6.48 vs 6.41 (equal within the 1 %
# error of a variance estimate). Here, 3,000 keys (a variance good to ~3 %): dropout loc 2.01 vs 1.34, its prior
# term -log p(W) being evaluated at one mask per minibatch instead of one per example (one mask for everything:
# 5.46).
GUIDES = {
    "zero-mean sigma": (lambda m: inference.zero_mean.zero_mean(m, variance_sites=SITE), f"{SITE}_auto_sigma", 1.1),
    "layer-wise log alpha": (lambda m: inference.by_site.by_site(m, {SITE: ("variance_layers", {"init_log_alpha": 0.0})}),
                             f"{SITE}_auto_log_alpha", 1.1),
    "binary dropout loc": (lambda m: binary_dropout(m, dropout_sites=[OUT]), f"{OUT}_auto_loc", 1.7),
}


@pytest.mark.parametrize("label", list(GUIDES))
def test_same_expected_loss_and_gradient_no_higher_variance(setup, label):
    make, param, bound = GUIDES[label]
    guide = make(setup[0].model)
    example_loss, example_grad = _values_and_grads(setup, guide, per_example_elbo_loss, param)
    local_loss, local_grad = _values_and_grads(setup, guide, local_reparam_elbo_loss, param)
    se = np.hypot(example_loss.std(), local_loss.std()) / np.sqrt(KEYS)
    assert abs(example_loss.mean() - local_loss.mean()) < 4 * se  # the same expected negative ELBO
    grad_se = np.sqrt((example_grad.var(0) + local_grad.var(0)) / KEYS)
    # the same expected gradient: under it each z = difference / se is about N(0, 1), so the mean of the d values
    # |z| has mean sqrt(2/pi) and sd sqrt((1 - 2/pi) / d); 4 sd above (a scalar parameter: |z| < 3.2)
    z = np.abs(example_grad.mean(0) - local_grad.mean(0)) / grad_se
    assert np.mean(z) < np.sqrt(2 / np.pi) + 4 * np.sqrt((1 - 2 / np.pi) / z.size)
    assert local_grad.var(0).mean() < bound * example_grad.var(0).mean()


def test_rules_cover_the_dense_gaussian_and_dropout_sites_only(setup):
    e, x, y = setup
    guide = inference.by_site.by_site(e.model, {SITE: ("variance_layers", {"init_log_alpha": 1.0})})
    params_u, constraints, _ = guide_param_init(guide, jax.random.PRNGKey(0), x, y, len(e.train.y))
    params = constrain_params(constraints, params_u)
    rules = local_rules(guide, params)
    assert list(rules) == ["mlp/linear_0"]  # the output layer is a point estimate: no noise to move
    mu = params[f"{SITE}_auto_loc"]
    np.testing.assert_allclose(rules["mlp/linear_0"].variance, np.e * mu ** 2, rtol=1e-5)  # alpha mu², eq. 17
    tied = {cap: inference.k_tied.k_tied(e.model, k=2, scale_cap=cap) for cap in (None, 1.5)}
    for cap, guide in tied.items():  # sd = U Vᵀ only without the cap (tanh): the O(k² (m + n)) rule needs it
        pu, pc, _ = guide_param_init(guide, jax.random.PRNGKey(0), x, y, len(e.train.y))
        kinds = {path: type(rule) for path, rule in local_rules(guide, constrain_params(pc, pu)).items()}
        assert kinds == dict.fromkeys(["mlp/linear_0", "mlp/linear_1"], KTiedRule if cap is None else GaussianRule)
    point = inference.point_estimate.point_estimate(e.model)
    pu, pc, _ = guide_param_init(point, jax.random.PRNGKey(0), x, y, len(e.train.y))
    with pytest.raises(InputError, match="estimator"):
        local_reparam_elbo_loss(jax.random.PRNGKey(0), constrain_params(pc, pu), e.model, point, 1.0, 1, x, y, 100)
    with pytest.raises(InputError, match="estimator"):
        as_estimator("weights please")
    assert [as_estimator(n) for n in ("standard", "per_example", "local")] == [Standard(), PerExample(), Local()]
    assert as_estimator(Local()) is not None and hash(Local()) == hash(as_estimator("local"))  # a value: jit's key
    joint = block_diagonal(e.model)  # one Gaussian per block, no per-site family: a named refusal
    with pytest.raises(InputError, match=r"estimator: .*variational families with a local rule.*block_diagonal"):
        local_reparam_elbo_loss(jax.random.PRNGKey(0), {}, e.model, joint, 1.0, 1, x, y, 100)


@dataclass(frozen=True)
class LogScaleNormal:
    """A Gaussian family written in this test file only: N(loc, exp(log_scale)²), its own local rule."""

    init_scale: float = 0.05
    name = "log_scale_normal"

    def params(self, site):
        return {"loc": ParamSpec(site.init_loc),
                "log_scale": ParamSpec(jnp.full(site.shape, np.log(self.init_scale), jnp.float32))}

    def distribution(self, site, values):
        return dist.Normal(values["loc"], jnp.exp(values["log_scale"])).to_event(len(site.shape))

    def moments(self, site, values):
        return values["loc"], jnp.exp(2 * values["log_scale"])

    def local_rule(self, site, values):
        return gaussian_local_rule(site, *self.moments(site, values))

    def num_params(self, site):
        return 2 * int(np.prod(site.shape))

    def config(self):
        return {"init_scale": self.init_scale}


def test_a_new_gaussian_family_works_with_the_local_estimator_by_its_own_rule(setup):
    """A family defined here, in no file of the library, gets the local estimator through its own `local_rule`:
    the same rules and the same loss as mean field at the same N(loc, sd²)."""
    e, x, y = setup
    ours = SiteGuide(e.model, {}, default=LogScaleNormal(), config={"name": "log_scale_normal"})
    mean_field = inference.mean_field(e.model, init_scale=0.05, scale_cap=None)
    params_u, constraints, _ = guide_param_init(ours, jax.random.PRNGKey(0), x, y, len(e.train.y))
    params = constrain_params(constraints, params_u)
    rng = np.random.default_rng(1)
    params = {k: v + np.float32(0.3) * rng.normal(size=np.shape(v)).astype(np.float32) for k, v in params.items()}
    as_mean_field = {k.replace("_log_scale", "_scale"): (np.exp(v) if k.endswith("_log_scale") else v)
                     for k, v in params.items()}
    rules = local_rules(ours, params)
    assert {p: type(r) for p, r in rules.items()} == dict.fromkeys(["mlp/linear_0", "mlp/linear_1"], GaussianRule)
    for path, rule in local_rules(mean_field, as_mean_field).items():
        np.testing.assert_allclose(rules[path].variance, rule.variance, rtol=1e-5)
    loss = jax.jit(lambda key, p, guide: Local().loss(key, p, e.model, guide, 1.0, 1, x, y, 100)[0],
                   static_argnums=2)
    key = jax.random.PRNGKey(3)
    np.testing.assert_allclose(loss(key, params, ours), loss(key, as_mean_field, mean_field), rtol=1e-5)


def test_fit_passes_local_through(setup):
    e, *_ = setup
    guide = inference.zero_mean.zero_mean(e.model, variance_sites=SITE)
    post = inference.fit(e.model, guide, e.train, steps=10, batch_size=16, progress=False, chunk_size=10,
                         estimator="local")
    assert np.all(np.isfinite(post.losses)) and len(post.losses) == 10
    assert post.info.traces == 1


def _conv(z, w, b=None):
    """A SAME, stride-1 NHWC convolution (what ``hk.Conv2D(cout, kernel)`` computes) plus its bias."""
    h = jax.lax.conv_general_dilated(z, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return h if b is None else h + b


def test_flipout_gives_each_example_its_sign_flipped_weight():
    """Flipout's output for example n is the convolution with M + (sd o eps) o (s_n r_nᵀ) (Wen et al., 2018, eq. 2)."""
    rng = np.random.default_rng(0)
    z = jnp.asarray(rng.normal(size=(3, 5, 5, 2)), jnp.float32)
    mean, sd, eps = (jnp.asarray(rng.normal(size=(3, 3, 2, 4)), jnp.float32) for _ in range(3))
    bias = jnp.asarray(rng.normal(size=(4,)), jnp.float32)
    s_in, s_out = (jnp.asarray(rng.choice([-1.0, 1.0], size=(3, c)), jnp.float32) for c in (2, 4))

    def apply(inputs, w, zero_bias):
        return _conv(inputs, w, None if zero_bias else bias)

    h = flipout_output(apply, z, mean, jnp.abs(sd), eps, s_in, s_out)
    for n in range(3):
        w_n = mean + jnp.abs(sd) * eps * (s_in[n][:, None] * s_out[n][None, :])
        np.testing.assert_allclose(h[n], _conv(z[n:n + 1], w_n, bias)[0], rtol=1e-5, atol=1e-5)


def test_local_noise_runs_a_conv_module_with_flipout():
    """Under `local_noise`, an ``hk.Conv2D`` with a `FlipoutRule` computes `flipout_output` through its own
    convolution: its bias kept on the mean path, its weight parameter unused."""
    rng = np.random.default_rng(1)
    z = jnp.asarray(rng.normal(size=(2, 4, 4, 3)), jnp.float32)
    mean = jnp.asarray(rng.normal(size=(3, 3, 3, 5)), jnp.float32)
    variance = jnp.asarray(rng.uniform(0.1, 1.0, size=(3, 3, 3, 5)), jnp.float32)
    net = hk.transform(lambda inputs: hk.Conv2D(5, 3, name="c")(inputs))
    params = net.init(jax.random.PRNGKey(0), z)
    params = {"c": {"w": jnp.full_like(params["c"]["w"], 100.0), "b": jnp.arange(5.0)}}
    key = jax.random.PRNGKey(7)
    with local_noise({"c": FlipoutRule(mean, variance)}, key=key) as seen:
        h = net.apply(params, None, z)
    assert seen == {"c"}
    k_eps, k_in, k_out = jax.random.split(jax.random.fold_in(key, 0), 3)
    eps = paired_normals(k_eps, mean.shape)  # the stream base.prng defines (tested against a NumPy threefry)
    s_in, s_out = (jax.random.rademacher(k, (2, c), jnp.float32) for k, c in ((k_in, 3), (k_out, 5)))
    for n in range(2):
        w_n = mean + jnp.sqrt(variance + 1e-12) * eps * (s_in[n][:, None] * s_out[n][None, :])
        np.testing.assert_allclose(h[n], _conv(z[n:n + 1], w_n, jnp.arange(5.0))[0], rtol=1e-4, atol=1e-4)


def test_conv_kernels_of_gaussian_families_get_flipout():
    """`local_rules`: a convolution kernel (4-D) of a Gaussian family gets `FlipoutRule` with its family's
    moments, a dense weight the local reparameterisation (`GaussianRule`); biases no rule."""
    from models.networks.lenet5 import lenet5

    import models

    model = models.bnn(lenet5(3, channels=(2, 3), hidden=6, padding="SAME"), models.priors.normal(1.0),
                       feature_shape=(8, 8, 1))
    x = np.zeros((2, 8, 8, 1), np.float32)
    guide = inference.mean_field(model, init_scale=0.05, scale_cap=None)
    pu, pc, _ = guide_param_init(guide, jax.random.PRNGKey(0), x, np.zeros(2, np.int32), 10)
    params = constrain_params(pc, pu)
    rules = local_rules(guide, params)
    assert {path: type(rule) for path, rule in rules.items()} == {
        "lenet5/conv1": FlipoutRule, "lenet5/conv2": FlipoutRule, "lenet5/dense1": GaussianRule,
        "lenet5/dense2": GaussianRule}
    np.testing.assert_allclose(rules["lenet5/conv2"].variance, 0.05 ** 2, rtol=1e-5)
    assert rules["lenet5/conv2"].mean.shape == params["lenet5/conv2/w_auto_loc"].shape
    # inside the model: with sd ~ 0 the local likelihood term (beta = 0: no KL; Flipout through the network's own
    # convolutions) is the one at the means, as the weight draw's is; it raises if a rule's module were never called
    tiny = inference.mean_field(model, init_scale=1e-6, scale_cap=None)
    pu, pc, _ = guide_param_init(tiny, jax.random.PRNGKey(0), x, np.zeros(2, np.int32), 10)
    xs = jnp.asarray(np.random.default_rng(0).normal(size=(4, 8, 8, 1)), jnp.float32)
    ys = jnp.array([0, 1, 2, 0])
    params = constrain_params(pc, pu)
    losses = [jax.jit(lambda p, loss=loss: loss(jax.random.PRNGKey(3), p, model, tiny, 0.0, 1, xs, ys, 10)[0])(params)
              for loss in (local_reparam_elbo_loss, annealed_elbo_loss)]  # jitted: one compile, not one per op
    assert 5.0 < float(losses[1]) < 50.0  # 10 x the mean cross-entropy of 4 examples over 3 classes (~1.1)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)


def test_local_noise_refuses_inputs_it_cannot_reparameterise():
    """A dense rule's module called on a (B, T, F) input, and a convolution with its channels first: InputError
    naming the module."""
    dense = hk.transform(lambda inputs: hk.Linear(2, name="d")(inputs))
    z3 = jnp.ones((2, 3, 4))
    rule = GaussianRule(jnp.zeros((4, 2)), jnp.ones((4, 2)))
    with pytest.raises(InputError, match="'d' got an input of shape"):
        with local_noise({"d": rule}, key=jax.random.PRNGKey(0)):
            dense.apply(dense.init(jax.random.PRNGKey(0), z3), None, z3)
    conv = hk.transform(lambda inputs: hk.Conv2D(2, 3, data_format="NCHW", name="c")(inputs))
    z4 = jnp.ones((2, 3, 5, 5))
    with pytest.raises(InputError, match="'c' has its channels on axis 1"):
        with local_noise({"c": FlipoutRule(jnp.zeros((3, 3, 3, 2)), jnp.ones((3, 3, 3, 2)))}, key=jax.random.PRNGKey(0)):
            conv.apply(conv.init(jax.random.PRNGKey(0), z4), None, z4)
