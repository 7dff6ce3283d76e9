import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro import handlers

from models import bnn, likelihoods, priors
from models.bridge import flatten_params, unflatten_params
from models.networks.mlp import deep_linear, mlp, product_matrix


@pytest.fixture(scope="module")
def small():
    return bnn(mlp((5,), 3), priors.normal(0.5), likelihoods.categorical())


def test_one_site_per_haiku_tensor_named_by_module_path(small):
    shapes = small.site_shapes((4,))
    assert dict(shapes) == {"mlp/~/linear_0/b": (5,), "mlp/~/linear_0/w": (4, 5),
                            "mlp/~/linear_1/b": (3,), "mlp/~/linear_1/w": (5, 3)}
    assert small.num_weights((4,)) == 5 + 20 + 3 + 15


def test_apply_matches_haiku_and_flatten_round_trips(small):
    x = jax.random.normal(jax.random.PRNGKey(1), (7, 4))
    tree = hk.transform(mlp((5,), 3)).init(jax.random.PRNGKey(0), x)
    flat = flatten_params(tree)
    assert jax.tree.all(jax.tree.map(jnp.array_equal, unflatten_params(flat), tree))
    want = hk.without_apply_rng(hk.transform(mlp((5,), 3))).apply(tree, x)
    np.testing.assert_allclose(small.apply(flat, x), want, rtol=1e-6)


def test_model_log_density_is_prior_plus_scaled_likelihood(small):
    x = jax.random.normal(jax.random.PRNGKey(1), (6, 4))
    y = jnp.array([0, 1, 2, 0, 1, 2])
    tr = handlers.trace(handlers.seed(small, 0)).get_trace(x, y, 60)
    params = {k: s["value"] for k, s in tr.items() if s["type"] == "sample" and not s["is_observed"]}
    prior_lp = sum(dist.Normal(0, 0.5).log_prob(v).sum() for v in params.values())
    lik = small.log_likelihood(params, x, y).sum() * 10.0  # n_data / batch = 60 / 6
    from numpyro.infer.util import log_density

    lp, _ = log_density(small, (x, y, 60), {}, params)
    np.testing.assert_allclose(lp, prior_lp + lik, rtol=1e-5)


def test_priors_by_pattern_and_he_scale():
    p = priors.by_pattern({"*/w": priors.he_normal(2.0), "*/b": priors.cauchy(0.3)})
    w = p("mlp/~/linear_0/w", (50, 4))
    assert isinstance(w.base_dist, dist.Normal) and w.batch_shape == (50, 4)
    np.testing.assert_allclose(w.base_dist.scale, np.sqrt(2.0 / 50))
    b = p("mlp/~/linear_0/b", (4,))
    assert isinstance(b.base_dist, dist.Cauchy)
    np.testing.assert_allclose(b.base_dist.scale, 0.3)
    with pytest.raises(ValueError, match="no pattern matches site 'other/x'"):
        p("other/x", (2,))
    with pytest.raises(ValueError, match="scale"):
        priors.normal(-1.0)


def test_prior_spec_round_trips():
    p = priors.by_pattern({"*/w": priors.he_normal(1.0)}, default=priors.normal(2.0))
    q = priors.from_spec(p.spec)
    assert float(q("a/w", (3, 2)).base_dist.scale) == pytest.approx(np.sqrt(1 / 3))
    assert float(q("a/b", (2,)).base_dist.scale) == pytest.approx(2.0)


def test_deep_linear_product_matrix():
    model = bnn(deep_linear(3, 4, 2), priors.normal(1.0))
    params = model.init_values(jax.random.PRNGKey(0), (5,))
    assert set(params) == {f"deep_linear/~/linear_{i}/w" for i in range(3)}
    x = jax.random.normal(jax.random.PRNGKey(2), (3, 5))
    np.testing.assert_allclose(model.apply(params, x), x @ product_matrix(params), rtol=1e-5, atol=1e-6)


def test_learned_noise_is_a_positive_latent_site():
    model = bnn(mlp((3,), 1), priors.normal(1.0), likelihoods.normal(noise=None))
    shapes = model.site_shapes((2,))
    assert shapes["likelihood/noise"] == ()
    assert model.site_priors((2,))["likelihood/noise"].support is dist.constraints.positive
