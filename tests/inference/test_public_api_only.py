"""Guides use NumPyro's public AutoGuide interface only, and the fast site table agrees with NumPyro's own trace."""
import pathlib
import re

import jax
import numpy as np
import numpyro
import pytest
from numpyro import handlers
from numpyro.infer import autoguide

import inference
import models
from inference.sites import site_table
from models.networks.mlp import mlp
from models.rank1 import rank1_likelihood, rank1_mlp, rank1_prior
from models.variance import log_uniform_prior

INFERENCE = pathlib.Path(inference.__file__).parent


def _numpyro_private_attributes() -> set:
    """Every ``self._name`` NumPyro's autoguide module reads or writes (its private state)."""
    source = pathlib.Path(autoguide.__file__).read_text()
    return set(re.findall(r"self\.(_[a-z]\w*)", source)) - {"__init__"}


def test_inference_touches_no_private_attribute_of_numpyro():
    private = _numpyro_private_attributes()
    assert {"_init_locs", "_postprocess_fn", "_prototype_frames", "_unpack_latent", "_init_scale"} <= private
    hits = []
    for path in sorted(INFERENCE.rglob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for name in re.findall(r"\.(_[a-z]\w*)\b", line):
                if name in private:
                    hits.append(f"{path.name}:{lineno}: {name}")
            if re.search(r"\bprototype_trace\s*=", line) or re.search(r"numpyro\.\w+(\.\w+)*\._", line):
                hits.append(f"{path.name}:{lineno}: {line.strip()}")
    assert hits == []


def test_numpyro_pin_admits_the_next_minor_release():
    text = (INFERENCE.parent / "pyproject.toml").read_text()
    pin = re.search(r'"numpyro>=([\d.]+),<([\d.]+)"', text)
    assert pin, "numpyro must be pinned as >=X,<Y"
    installed = tuple(int(p) for p in numpyro.__version__.split(".")[:2])
    upper = tuple(int(p) for p in pin.group(2).split(".")[:2])
    assert upper >= (installed[0], installed[1] + 2)


MODELS = {
    "mlp": lambda: models.bnn(mlp([4, 3], 2), models.priors.normal(0.5), feature_shape=(3,)),
    "log_uniform": lambda: models.bnn(mlp([4], 2), models.priors.by_pattern(
        {"mlp/~/linear_0/w": log_uniform_prior()}, default=models.priors.normal(1.0)), feature_shape=(3,)),
    "learned_noise": lambda: models.bnn(mlp([3], 1), models.priors.normal(1.0), models.likelihoods.normal(None),
                                        feature_shape=(3,)),
    "rank1": lambda: models.bnn(rank1_mlp([4], 2, 2), rank1_prior("cauchy"),
                                rank1_likelihood(models.likelihoods.categorical(), 2), feature_shape=(3,)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_site_table_matches_numpyros_own_trace_of_the_model(name):
    model = MODELS[name]()
    x = np.zeros((5, 3), np.float32)
    y = np.zeros(5, np.float32 if name == "learned_noise" else np.int32)
    # values substituted (0.3 everywhere): an improper log-uniform prior cannot be sampled
    fill = handlers.substitute(handlers.seed(model, jax.random.PRNGKey(0)),
                               substitute_fn=lambda msg: None if msg["type"] != "sample" or msg["is_observed"] else np.full(msg["fn"].shape(), 0.3))
    trace = handlers.trace(fill).get_trace(x, y)
    latent = {k: s for k, s in trace.items() if s["type"] == "sample" and not s["is_observed"]}
    table = site_table(model, x)
    assert list(table) == list(latent)  # the same sites, in model order
    for k, site in table.items():
        fn = latent[k]["fn"]
        assert site.shape == np.shape(latent[k]["value"]) == tuple(fn.batch_shape) + tuple(fn.event_shape), k
        assert type(site.support) is type(fn.support) and site.prior.event_dim == fn.event_dim, k
        assert type(site.prior) is type(fn), k
        value = np.asarray(latent[k]["value"])
        np.testing.assert_allclose(site.prior.log_prob(value), fn.log_prob(value), rtol=1e-6, err_msg=k)
        assert site.init_loc.shape == site.shape and np.isfinite(site.init_loc).all(), k


def test_every_guide_satisfies_the_guide_protocol():
    model = MODELS["mlp"]()
    x = np.zeros((2, 3), np.float32)
    for name, factory in inference.GUIDES.items():
        kwargs = None if name == "rank1_mixture" else inference.registry.example_options(name)  # rank-1: no rank-1 sites here
        if kwargs is None:
            continue
        guide = factory(model, **kwargs)
        assert isinstance(guide, inference.guide_protocol.Guide), name
        assert isinstance(guide, inference.guide_protocol.HasSiteMoments) == (name in ("full_covariance", "low_rank", "block_diagonal")), name
        # the parameters' shapes from an abstract trace of the initialiser (nothing compiled or computed)
        params = jax.eval_shape(lambda key: guide.init_params(key, x), jax.random.PRNGKey(0))
        assert guide.num_params_formula() == guide.num_free_params(params), name
        config = guide.config
        assert inference.make_guide(config.pop("name"), model, **config).config == guide.config
