"""`inference.laplace` against known answers: Bayesian linear regression (a network linear in its weights, Normal
likelihood with known noise, Normal prior), where the Laplace posterior, its GLM predictive and the evidence are
exact; a small MLP against a brute-force dense GGN built from ``jax.jacfwd`` (the independent implementation:
J^T (diag(p) - p p^T) J written out, no factorisation); KFAC exact for one example (dense and convolution);
the same CNN in Haiku, Flax NNX and Equinox giving the same Laplace posterior."""

import equinox as eqx
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy import linalg, optimize

import inference
import models
from inference.laplace_kfac import kfac_blocks
from models import bnn, likelihoods, priors
from models.networks.mlp import mlp
from inference.laplace_posterior import LaplacePosterior
from inference.site_names import arviz_name

PRIOR_SD, NOISE = 1.0, 0.5
W, B = "mlp/~/linear_0/w", "mlp/~/linear_0/b"


def point_posterior(model, feature_shape, values):
    """A point-estimate Posterior at `values` {site: array} (the exact MAP, set by hand)."""
    guide = inference.point_estimate.point_estimate(model)
    return inference.SVIPosterior(model=model, guide=guide, feature_shape=feature_shape,
                                  params={f"{k}_auto_loc": np.asarray(v, np.float32) for k, v in values.items()})


def dense_covariance(post):
    """The posterior covariance of dense and diag blocks, block-diagonal: (GGN_b + delta_b I)^-1 per block."""
    parts = []
    for block, delta in zip(post.blocks, post.prior_precision):
        lam = block.arrays["eigvals"]
        v = block.arrays["eigvecs"] if block.kind == "dense" else np.eye(len(lam))
        parts.append(v @ np.diag(1 / (lam + delta)) @ v.T)
    return linalg.block_diag(*parts)


def exact_log_evidence(delta, phi, y):
    """log N(y; 0, sigma^2 I + Phi Phi^T / delta): the exact evidence of Bayesian linear regression."""
    cov = NOISE**2 * np.eye(len(y)) + phi @ phi.T / delta
    _, logdet = np.linalg.slogdet(cov)
    return -0.5 * (y @ np.linalg.solve(cov, y) + logdet + len(y) * np.log(2 * np.pi))


@pytest.fixture(scope="module")
def blr():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5]) + 0.3 + NOISE * rng.normal(size=40)).astype(np.float32)
    phi = np.c_[np.ones(40), x].astype(np.float64)  # the model's site order: b, then w
    model = bnn(mlp((), 1), priors.normal(PRIOR_SD), likelihoods.normal(NOISE), name="blr", feature_shape=(3,))
    return x, y, phi, model


def test_blr_laplace_posterior_predictive_and_evidence_are_exact(blr):
    x, y, phi, model = blr
    assert list(model.site_shapes((3,))) == [B, W]
    # the evidence optimum delta0 (scipy on the exact evidence), and the MAP under that prior
    res = optimize.minimize_scalar(lambda t: -exact_log_evidence(np.exp(t), phi, y.astype(np.float64)),
                                   bounds=(-8, 8), method="bounded", options={"xatol": 1e-10})
    delta0 = float(np.exp(res.x))
    precision = delta0 * np.eye(4) + phi.T @ phi / NOISE**2
    cov = np.linalg.inv(precision)
    mean = cov @ phi.T @ y / NOISE**2
    point = point_posterior(model, (3,), {B: mean[:1], W: mean[1:, None]})
    for structure in ("last_layer", "full", "diag"):
        post = inference.laplace(model, point, (x, y), structure=structure, prior_precision=delta0)
        assert post.covered_sites == [B, W] and len(post.blocks) == (2 if structure == "diag" else 1)
        want = np.diag(np.diag(precision)) if structure == "diag" else precision
        np.testing.assert_allclose(dense_covariance(post), np.linalg.inv(want), rtol=2e-5, atol=1e-9)
    # the Laplace evidence's optimum (prior precision by marginal likelihood) is the exact evidence's: at the
    # MAP of delta0 both evidences have the same derivative in delta, zero at delta0
    opt = inference.laplace(model, point, (x, y), structure="last_layer")
    assert opt.config["laplace"]["prior_precision_source"] == "marginal likelihood, one per block"
    np.testing.assert_allclose(opt.prior_precision, [delta0], rtol=1e-3)
    # ... and its value equals the exact log evidence there (Laplace is exact for a Gaussian posterior)
    np.testing.assert_allclose(opt.config["laplace"]["log_evidence"], exact_log_evidence(delta0, phi, y), rtol=1e-4)
    # the weight-scale rule: P / ||theta*||^2
    scaled = inference.laplace(model, point, (x, y), structure="last_layer", prior_precision="weight_scale")
    np.testing.assert_allclose(scaled.prior_precision, [4 / np.sum(mean**2)], rtol=1e-5)
    # GLM predictive: the linearised network is the network (linear in its weights) at any weights ...
    draws = opt.draws(4000, seed=1)
    theta = np.c_[draws[B], draws[W][..., 0]]
    np.testing.assert_allclose(opt.predict(x[:5], draws=draws), theta @ phi[:5].T, rtol=1e-4, atol=1e-4)
    # ... and the draws have the exact posterior mean and covariance (to Monte-Carlo error, S = 4000)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(theta.mean(0) - mean) < 4 * sd / np.sqrt(4000))
    np.testing.assert_allclose(np.cov(theta.T), cov, atol=4 * np.sqrt(2 / 4000) * sd.max() ** 2)
    # so the predictive variance is phi Sigma phi^T (to the same error)
    var = np.einsum("ni,ij,nj->n", phi[:5], cov, phi[:5])
    np.testing.assert_allclose(opt.predict(x[:5], num_samples=4000, seed=2).var(0), var, rtol=0.15)


@pytest.fixture(scope="module")
def small():
    """A 3-4-3 tanh MLP with a categorical likelihood, 20 examples, random weights as theta*."""
    rng = np.random.default_rng(1)
    model = bnn(mlp((4,), 3, activation="tanh"), priors.normal(1.0), likelihoods.categorical(), name="small",
                feature_shape=(3,))
    center = {k: np.asarray(v) * 2 for k, v in model.init_values(jax.random.PRNGKey(3), (3,)).items()}
    x = rng.normal(size=(20, 3)).astype(np.float32)
    y = rng.integers(0, 3, size=20).astype(np.int32)
    return model, center, x, y


def brute_force_ggn(model, center, names, x):
    """sum_n J_n^T (diag(p_n) - p_n p_n^T) J_n from ``jax.jacfwd`` of the flattened sites `names`, float64."""
    theta, unravel = jax.flatten_util.ravel_pytree({k: jnp.asarray(center[k]) for k in names})
    out = np.asarray(model.apply(center, x), np.float64)
    p = np.exp(out - out.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    jac = jax.vmap(jax.jacfwd(lambda t, xn: model.apply({**center, **unravel(t)}, xn[None])[0]), (None, 0))
    jacs = np.asarray(jax.jit(jac)(theta, x), np.float64)  # (N, K, P)
    return sum(j.T @ (np.diag(q) - np.outer(q, q)) @ j for j, q in zip(jacs, p))


def test_full_diag_and_kfac_match_a_brute_force_ggn(small):
    model, center, x, y = small
    names = list(model.site_shapes((3,)))  # model order: every site
    exact = brute_force_ggn(model, center, names, x)
    point = point_posterior(model, (3,), center)
    full = inference.laplace(model, point, (x, y), structure="full", prior_precision=2.0)
    diag = inference.laplace(model, point, (x, y), structure="diag", prior_precision=2.0)
    np.testing.assert_allclose(dense_covariance(full), np.linalg.inv(exact + 2 * np.eye(len(exact))),
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.concatenate([b.arrays["eigvals"] for b in diag.blocks]), np.diag(exact),
                               rtol=1e-4, atol=1e-7)
    # GLM predictive = f(x, theta*) + J (theta - theta*) with the explicit Jacobian, for the same draws
    draws = full.draws(3, seed=0)
    theta_star, unravel = jax.flatten_util.ravel_pytree({k: jnp.asarray(center[k]) for k in names})
    for s in range(3):
        theta = jax.flatten_util.ravel_pytree({k: jnp.asarray(draws[k][s]) for k in names})[0]
        jac = jax.jacfwd(lambda t: model.apply(unravel(t), x[:4]))(theta_star)  # (4, 3, P)
        logits = model.apply(center, x[:4]) + jnp.einsum("nkp,p->nk", jac, theta - theta_star)
        np.testing.assert_allclose(full.predict(x[:4], draws={k: v[s:s + 1] for k, v in draws.items()})[0],
                                   jax.nn.softmax(logits), rtol=1e-4, atol=1e-6)
    # the last layer (one dense layer: its GGN from the layer's own factors) is the brute-force block
    last = inference.laplace(model, point, (x, y), structure="last_layer", prior_precision=2.0)
    assert last.covered_sites == ["mlp/~/linear_1/b", "mlp/~/linear_1/w"]
    tail = exact[-15:, -15:]  # model order: linear_0/b, linear_0/w, linear_1/b (3), linear_1/w (4 x 3)
    np.testing.assert_allclose(dense_covariance(last), np.linalg.inv(tail + 2 * np.eye(15)), rtol=1e-4, atol=1e-6)
    # the "mc" predictive runs the network itself at each draw
    mc = inference.laplace(model, point, (x, y), structure="full", predictive="mc", prior_precision=2.0)
    one_draw = {k: v[:1] for k, v in draws.items()}
    np.testing.assert_allclose(mc.predict(x[:4], draws=one_draw)[0],
                               jax.nn.softmax(model.apply({k: v[0] for k, v in one_draw.items()}, x[:4])),
                               rtol=1e-5, atol=1e-7)
    # KFAC is exact for one example: A (x) G equals the brute-force weight blocks
    one = x[:1]
    exact_one = brute_force_ggn(model, center, names, one)
    sizes = {k: int(np.size(center[k])) for k in names}
    offsets = dict(zip(names, np.cumsum([0] + [sizes[k] for k in names])[:-1]))
    blocks = kfac_blocks(model, center, names, one, None)
    kfac = [b for b in blocks if b.kind == "kfac"]
    assert sorted(b.sites[0] for b in kfac) == sorted(k for k in names if k.endswith("/w"))
    for b in kfac:
        a = b.arrays["vec_a"] @ np.diag(b.arrays["eig_a"]) @ b.arrays["vec_a"].T
        g = b.arrays["vec_g"] @ np.diag(b.arrays["eig_g"]) @ b.arrays["vec_g"].T
        o, n = offsets[b.sites[0]], sizes[b.sites[0]]
        np.testing.assert_allclose(np.kron(a, g), exact_one[o:o + n, o:o + n], rtol=1e-4, atol=1e-7)


def test_save_load_round_trip_is_exact_and_arviz_and_score_take_it(small, tmp_path):
    import evals

    model, center, x, y = small
    point = point_posterior(model, (3,), center)
    post = inference.laplace(model, point, (x, y), structure="kfac")
    assert [b.kind for b in post.blocks] == ["kfac", "kfac", "diag", "diag"]
    inference.save(post, tmp_path / "lap")
    back = inference.load(tmp_path / "lap", model)
    assert isinstance(back, LaplacePosterior) and back.kind == "laplace"
    assert (back.structure, back.predictive, back.prior_precision) == (post.structure, post.predictive,
                                                                         post.prior_precision)
    assert back.config == post.config and back.training_data == post.training_data
    for k in post.mean:
        np.testing.assert_array_equal(back.mean[k], post.mean[k])
    for a, b in zip(post.blocks, back.blocks):
        assert (a.kind, a.sites, a.perm, a.split) == (b.kind, b.sites, b.perm, b.split)
        for name in a.arrays:
            np.testing.assert_array_equal(a.arrays[name], b.arrays[name])
    np.testing.assert_array_equal(back.predict(x, num_samples=20, seed=3), post.predict(x, num_samples=20, seed=3))
    # to_arviz: one variable per weight site, draws around theta*
    idata = inference.to_arviz(post, (x, y), num_samples=20)
    assert sorted(idata.posterior[arviz_name(k)].attrs["site"] for k in center) == sorted(center)
    assert idata.posterior[arviz_name(W)].shape == (1, 20, 3, 4)
    # evals.score: its NLL is -mean log (mean over draws of p(y | x, theta_s)) of the GLM predictive's draws
    table = evals.score(post, (x, y), num_samples=20, verbose=False)
    probs = post.predict(x, num_samples=20, seed=0)
    nll = -np.mean(np.log(probs.mean(0)[np.arange(len(y)), y]))
    np.testing.assert_allclose(table["nll"].iloc[0], nll, rtol=1e-4)


def _haiku_cnn(x):
    h = jax.nn.relu(hk.Conv2D(2, 3, padding="VALID", name="conv")(x))  # NHWC images (3, 3, 2), HWIO kernel
    return hk.Linear(3, name="out")(h.reshape(h.shape[0], -1))


def _nnx_cnn(p):
    """The same CNN as an ``nnx.Sequential`` (sites layers/0/..., layers/3/...) with the weights of `p`."""
    conv = nnx.Conv(2, 2, (3, 3), padding="VALID", kernel_init=lambda *_: p["conv"]["w"],
                    bias_init=lambda *_: p["conv"]["b"], rngs=nnx.Rngs(0))
    out = nnx.Linear(2, 3, kernel_init=lambda *_: p["out"]["w"], bias_init=lambda *_: p["out"]["b"], rngs=nnx.Rngs(0))
    return nnx.Sequential(conv, jax.nn.relu, lambda h: h.reshape(h.shape[0], -1), out)


def _eqx_cnn(p):
    """The same CNN as an ``eqx.nn.Sequential`` of one example (sites layers/1/..., layers/4/...): Equinox holds an
    OIHW kernel, an (out, 1, 1) bias, CHW images and (out, in) Linear weights."""
    k0, k1 = jax.random.split(jax.random.PRNGKey(1))
    conv = eqx.tree_at(lambda m: (m.weight, m.bias), eqx.nn.Conv2d(2, 2, 3, key=k0),
                       (jnp.transpose(p["conv"]["w"], (3, 2, 0, 1)), p["conv"]["b"].reshape(2, 1, 1)))
    out = eqx.tree_at(lambda m: (m.weight, m.bias), eqx.nn.Linear(2, 3, key=k1), (p["out"]["w"].T, p["out"]["b"]))
    return eqx.nn.Sequential([eqx.nn.Lambda(lambda x: jnp.transpose(x, (2, 0, 1))), conv,
                              eqx.nn.Lambda(jax.nn.relu), eqx.nn.Lambda(jnp.ravel), out])


def test_haiku_nnx_and_equinox_give_the_same_laplace_and_kfac_is_exact_for_a_convolution_at_one_position():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 3, 3, 2)).astype(np.float32)
    y = rng.integers(0, 3, size=6).astype(np.int32)
    haiku = bnn(_haiku_cnn, priors.normal(1.0), likelihoods.categorical(), name="cnn", feature_shape=(3, 3, 2))
    values = {k: np.asarray(v) * 3 for k, v in haiku.init_values(jax.random.PRNGKey(0), x).items()}
    p = models.unflatten_params(values)
    nets = {"haiku": haiku, "nnx": bnn(_nnx_cnn(p), priors.normal(1.0), likelihoods.categorical(), name="cnn",
                          feature_shape=(3, 3, 2)),
            "eqx": bnn(_eqx_cnn(p), priors.normal(1.0), likelihoods.categorical(), name="cnn",
                          feature_shape=(3, 3, 2))}
    names = {"haiku": {"w": "w", "b": "b", "conv": "conv", "out": "out"},
             "nnx": {"w": "kernel", "b": "bias", "conv": "layers/0", "out": "layers/3"},
             "eqx": {"w": "weight", "b": "bias", "conv": "layers/1", "out": "layers/4"}}
    noise = {k: 0.1 * rng.normal(size=(2,) + v.shape).astype(np.float32) for k, v in values.items()}
    results = {}
    for lib, model in nets.items():
        site = {k: f"{names[lib][k.rpartition('/')[0]]}/{names[lib][k.rpartition('/')[2]]}" for k in values}
        center = {site[k]: v for k, v in values.items()}  # the zoo's layout in every library
        assert sorted(model.site_shapes((3, 3, 2))) == sorted(center)
        point = point_posterior(model, (3, 3, 2), center)
        kfac = inference.laplace(model, point, (x, y), structure="kfac")
        last = inference.laplace(model, point, (x, y), structure="last_layer", prior_precision=1.0)
        assert sorted(last.covered_sites) == sorted(site[k] for k in ("out/w", "out/b"))
        draws = {site[k]: values[k][None] + noise[k] for k in values}
        results[lib] = (kfac, [b.eigvals() for b in kfac.blocks], kfac.predict(x, draws=draws),
                        last.blocks[0].eigvals())
        # one example at one position: KFAC's A (x) G is the brute-force GGN block of the convolution kernel
        order = list(model.site_shapes((3, 3, 2)))
        exact = brute_force_ggn(model, center, order, x[:1])
        (conv,) = [b for b in kfac_blocks(model, center, order, x[:1], None) if b.sites == (site["conv/w"],)]
        a = conv.arrays["vec_a"] @ np.diag(conv.arrays["eig_a"]) @ conv.arrays["vec_a"].T
        g = conv.arrays["vec_g"] @ np.diag(conv.arrays["eig_g"]) @ conv.arrays["vec_g"].T
        o = sum(int(np.size(center[k])) for k in order[:order.index(site["conv/w"])])
        n = int(np.size(center[site["conv/w"]]))
        # the block is over the kernel's entries in (inputs..., outputs...) order: the site's axes permuted by perm
        idx = np.arange(n).reshape(np.shape(center[site["conv/w"]])).transpose(conv.perm).ravel() + o
        np.testing.assert_allclose(np.kron(a, g), exact[np.ix_(idx, idx)], rtol=1e-4, atol=1e-6)
    ref = results["haiku"]
    assert [b.kind for b in ref[0].blocks] == ["kfac", "kfac", "diag", "diag"]
    for lib in ("nnx", "eqx"):
        post, eig, probs, last_eig = results[lib]
        np.testing.assert_allclose(post.prior_precision, ref[0].prior_precision, rtol=1e-4)
        for e, r in zip(eig, ref[1]):
            np.testing.assert_allclose(np.sort(e), np.sort(r), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(probs, ref[2], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(np.sort(last_eig), np.sort(ref[3]), rtol=1e-4, atol=1e-6)


def test_bad_arguments_are_refused_naming_them(small):
    model, center, x, y = small
    point = point_posterior(model, (3,), center)
    cases = [({"structure": "kfc"}, "structure"), ({"predictive": "probit"}, "predictive"),
             ({"prior_precision": -1.0}, "prior_precision"), ({"prior_structure": "site"}, "prior_structure"),
             ({"sites": ["nope/w"]}, "sites")]
    for kwargs, argument in cases:
        with pytest.raises(inference.InputError) as err:
            inference.laplace(model, point, (x, y), **kwargs)
        assert err.value.argument == argument
    other = bnn(mlp((4,), 3, activation="tanh"), priors.normal(1.0), likelihoods.categorical(), name="other")
    with pytest.raises(inference.InputError, match="point_posterior"):
        inference.laplace(other, point, (x, y))
    wide = bnn(mlp((200,), 3), priors.normal(1.0), likelihoods.categorical(), name="wide", feature_shape=(50,))
    values = wide.init_values(jax.random.PRNGKey(0), (50,))
    with pytest.raises(inference.InputError, match="at most 10000 parameters .these sites hold 10803"):
        inference.laplace(wide, point_posterior(wide, (50,), values), (np.zeros((2, 50), np.float32), y[:2]),
                          structure="full")


def test_prior_precision_by_validation_maximises_the_validation_density(blr):
    import dataclasses

    x, y, phi, model = blr
    precision = np.eye(4) + phi[:3].T @ phi[:3] / NOISE**2  # the MAP of 3 points (4 weights) under the prior
    mean = np.linalg.solve(precision, phi[:3].T @ y[:3] / NOISE**2)
    point = point_posterior(model, (3,), {B: mean[:1], W: mean[1:, None]})
    post = inference.laplace(model, point, (x[:3], y[:3]), structure="full", validation=(x[30:], y[30:]))
    delta = post.prior_precision[0]
    assert post.prior_precision == [delta] * len(post.blocks) and 1e-4 < delta < 1e6
    assert post.config["laplace"]["prior_precision_source"].startswith("validation")

    def density(d):
        candidate = dataclasses.replace(post, prior_precision=[d] * len(post.blocks))
        return np.mean(candidate.log_likelihood(x[30:], y[30:], num_samples=30, seed=0, reduce="log_mean_exp"))

    best = density(delta)
    for other in (delta * 10**0.25, delta / 10**0.25, *(10.0**t for t in range(-4, 7))):
        assert best >= density(other) - 1e-6
