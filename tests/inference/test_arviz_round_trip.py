"""`to_arviz` output survives netCDF (data.to_netcdf / az.from_netcdf) for SVI and NUTS; ArviZ names <-> site
names both ways; the log_likelihood group only from the training data (the old misuse, the test set, refused)."""

import warnings

import arviz as az
import numpy as np
import pytest
import xarray as xr

import inference
import zoo
from inference.arviz_compat import group_names, loo
from inference.site_names import arviz_names, resolve_sites
from base.errors import InputError
from inference.site_names import arviz_name, site_name

pytestmark = pytest.mark.smoke  # the subset .ci/run runs on the newest stack

SITE = "mlp/~/linear_0/w"


@pytest.fixture(scope="module")
def tiny():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})


@pytest.fixture(scope="module")
def tiny_svi(tiny):
    post = inference.fit(tiny.model, inference.mean_field(tiny.model), tiny.train, steps=200, progress=False)
    return post


@pytest.fixture(scope="module")
def tiny_nuts(tiny):
    return inference.nuts(tiny.model, tiny.train, num_chains=2, num_warmup=50, draws_per_chain=50, seed=0,
                          progress=False)


@pytest.mark.parametrize("which", ["svi", "nuts"])
def test_netcdf_round_trip_keeps_every_group_and_variable(which, tiny, tiny_svi, tiny_nuts, tmp_path):
    post = tiny_svi if which == "svi" else tiny_nuts
    idata = inference.to_arviz(post, tiny.train, num_samples=30)
    expected = {"posterior", "log_likelihood", "posterior_predictive", "observed_data"}
    assert set(group_names(idata)) == expected | ({"sample_stats"} if which == "nuts" else set())
    path = str(tmp_path / f"{which}.nc")
    idata.to_netcdf(path)
    back = az.from_netcdf(path)
    assert set(group_names(back)) == set(group_names(idata))
    for group in group_names(idata):
        assert set(back[group].data_vars) == set(idata[group].data_vars)
        xr.testing.assert_identical(back[group].load(), idata[group])  # values, dtypes, dims, coords, attrs
    for site in post.site_names:
        name = arviz_name(site)
        assert "/" not in name and all("/" not in d for d in back.posterior[name].dims)
        assert back.posterior[name].attrs["site"] == site
        np.testing.assert_array_equal(back.posterior[name].values, np.asarray(post.draws_by_chain(30)[site]))
    assert back.log_likelihood.attrs["data"] == "training"


def test_names_map_both_ways_and_never_collide():
    assert arviz_name(SITE) == "mlp.~.linear_0.w"
    assert site_name("mlp.~.linear_0.w") == SITE
    assert site_name(SITE) == SITE  # a site name passes through
    sites = ["a/b", "a_b", "a/b_c", "a_b/c", "r", "mlp/~/linear_0/w"]
    names = arviz_names(sites)
    assert len(set(names.values())) == len(sites)  # "/" vs "_" stay apart
    assert [site_name(n) for n in names.values()] == sites
    with pytest.raises(InputError, match=r"site: expected a site name without '\.'"):
        arviz_name("a.b")  # would collide with "a/b"'s name: refused
    assert resolve_sites(["mlp.~.linear_0.w", "mlp/~/linear_0/b"], [SITE, "mlp/~/linear_0/b"]) == \
        [SITE, "mlp/~/linear_0/b"]
    with pytest.raises(InputError, match="var_names: expected site names or their ArviZ names"):
        resolve_sites(["mlp.~.linear_9.w"], [SITE])


def test_var_names_take_either_name(tiny_nuts):
    by_site = inference.to_arviz(tiny_nuts, var_names=[SITE])
    by_name = inference.to_arviz(tiny_nuts, var_names="mlp.~.linear_0.w")
    assert list(by_site.posterior.data_vars) == list(by_name.posterior.data_vars) == ["mlp.~.linear_0.w"]
    np.testing.assert_array_equal(by_site.posterior["mlp.~.linear_0.w"], tiny_nuts.samples[SITE])
    summary = az.summary(by_name, var_names=[arviz_name(SITE)])
    assert len(summary) == 2 * 4


def test_log_likelihood_of_test_data_is_refused(tiny, tiny_svi, tiny_nuts):
    for post in (tiny_svi, tiny_nuts):
        with pytest.raises(InputError, match=r"^data: expected the data the posterior was fitted to.*"
                                             r"log_predictive_density"):
            inference.to_arviz(post, tiny.test, num_samples=10)
    held = inference.to_arviz(tiny_nuts, tiny.test, log_likelihood="held_out")
    assert held.log_likelihood.attrs["data"] == "held_out"
    assert held.log_likelihood["y"].shape == (2, 50, len(tiny.test))
    none = inference.to_arviz(tiny_nuts, tiny.test, log_likelihood=False)  # predictive groups on any data
    assert "log_likelihood" not in group_names(none) and none.posterior_predictive["y"].shape == (2, 50, len(tiny.test))
    with pytest.raises(InputError, match="log_likelihood: expected True"):
        inference.to_arviz(tiny_nuts, tiny.test, log_likelihood="test")


def test_fingerprint_survives_save_load_and_unknown_data_warn(tiny, tiny_nuts, tmp_path):
    back = zoo.load(inference.save(tiny_nuts, tmp_path / "nuts"))
    assert back.training_data == tiny_nuts.training_data
    with pytest.raises(InputError, match="^data:"):
        inference.to_arviz(back, tiny.test)
    anonymous = inference.MCMCPosterior(model=tiny.model, samples=tiny_nuts.samples, feature_shape=(2,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = inference.to_arviz(anonymous, tiny.train)
    assert idata.log_likelihood.attrs["data"] == "unchecked"
    assert any("does not record the data it was fitted to" in str(w.message) for w in caught)


def test_loo_of_confidently_classified_points_is_finite(tiny, tiny_nuts):
    """Draws scaled up 3-fold classify most training points with log p(y|x,w) within 1e-6 of 0: the
    log-likelihood group is float64 (and the model's log-softmax keeps those tiny values), so PSIS-LOO's Pareto
    fit gets distinct ratios and elpd_loo is finite (with the group in float32 ArviZ returns NaN here)."""
    samples = {k: 3.0 * np.asarray(v) for k, v in tiny_nuts.samples.items()}
    confident = inference.MCMCPosterior(model=tiny.model, samples=samples,
                                    feature_shape=tiny_nuts.feature_shape, training_data=tiny_nuts.training_data)
    idata = inference.to_arviz(confident, tiny.train)
    ll = idata.log_likelihood["y"].values
    assert ll.dtype == np.float64
    assert np.mean(ll > -1e-6) > 0.3  # many draws of many points are that confident
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ warns about Pareto k: fine, the value is what is tested
        assert np.isfinite(loo(idata).elpd)
