import json

import arviz as az
import numpy as np
import pytest

import evals
import inference
import zoo
from inference import diagnostics
from inference.run_info import FitInfo, NutsInfo
from base.errors import CheckpointError
from inference.site_names import arviz_name, site_name


def test_nuts_on_the_same_model_object(moons_entry, moons_svi, moons_nuts):
    assert moons_nuts.model is moons_svi.model is moons_entry.model
    w = moons_nuts.samples["mlp/~/linear_0/w"]
    assert w.shape == (2, 200, 2, 16)
    assert moons_nuts.sample_stats["diverging"].shape == (2, 200)
    assert moons_nuts.info.divergences == int(moons_nuts.sample_stats["diverging"].sum())
    row = evals.score(moons_nuts, moons_entry.test, num_samples=400, verbose=False).iloc[0]
    assert row.accuracy >= 0.95
    assert diagnostics.max_rhat(moons_nuts, moons_entry.test.x[:20]) < 1.05


def test_arviz_groups_match_between_svi_and_nuts(moons_entry, moons_svi, moons_nuts):
    train = moons_entry.train  # log_likelihood of the training data: what az.loo / az.compare need
    a = inference.to_arviz(moons_svi, train, num_samples=400)
    b = inference.to_arviz(moons_nuts, train)
    sites = moons_entry.model.site_shapes((2,))
    assert set(a.posterior.data_vars) == set(b.posterior.data_vars) == {arviz_name(s) for s in sites}
    for var in a.posterior.data_vars:
        assert a.posterior[var].dims == b.posterior[var].dims
        assert a.posterior[var].attrs["site"] == b.posterior[var].attrs["site"] == site_name(var)
    assert a.log_likelihood["y"].shape == (1, 400, len(train))
    assert b.log_likelihood["y"].shape == (2, 200, len(train))
    assert "diverging" in b.sample_stats
    assert set(b.posterior_predictive["y"].values.ravel()) <= {0, 1}
    table = az.compare({"svi": a, "nuts": b})
    assert set(table.index) == {"svi", "nuts"}
    # log_likelihood is the model's pointwise log-density of the very draws in the posterior group
    for idata in (a, b):
        for c, d in ((0, 0), (0, 7)):
            draw = {v.attrs["site"]: v.values[c, d] for v in idata.posterior.data_vars.values()}
            want = moons_entry.model.log_likelihood(draw, train.x, train.y)
            np.testing.assert_allclose(idata.log_likelihood["y"].values[c, d], want, rtol=1e-5, atol=1e-5)


def test_svi_posterior_supports_autoguide_api(moons_svi, moons_entry):
    g, p = moons_svi.guide, moons_svi.params
    med = g.median(p)
    q = g.quantiles(p, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(q["mlp/~/linear_0/w"][1], med["mlp/~/linear_0/w"], rtol=1e-6, atol=1e-6)
    assert np.all(q["mlp/~/linear_0/w"][0] < q["mlp/~/linear_0/w"][2])
    from numpyro.infer import Predictive
    import jax

    pred = Predictive(moons_entry.model, guide=g, params=p, num_samples=7)(jax.random.PRNGKey(0), moons_entry.test.x)
    assert pred["y"].shape == (7, len(moons_entry.test))


def test_predict_is_chunked_and_consistent(moons_svi, moons_entry):
    x = moons_entry.test.x[:10]
    a = moons_svi.predict(x, num_samples=120, seed=2, chunk_size=50)
    b = moons_svi.predict(x, num_samples=120, seed=2, chunk_size=50)
    assert a.shape == (120, 10, 2)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a.sum(-1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match=r"x.*feature shape \(2,\)"):
        moons_svi.predict(np.zeros((3, 5), np.float32))


@pytest.mark.parametrize("which", ["svi", "nuts"])
def test_checkpoints_round_trip_exactly(which, moons_svi, moons_nuts, moons_entry, tmp_path):
    post = moons_svi if which == "svi" else moons_nuts
    inference.save(post, tmp_path / which)
    back = zoo.load(tmp_path / which)  # rebuilds the model from the stored zoo entry
    stored = post.params if which == "svi" else post.samples
    loaded = back.params if which == "svi" else back.samples
    assert set(stored) == set(loaded)
    for k in stored:
        np.testing.assert_array_equal(np.asarray(stored[k]), loaded[k])
    x = moons_entry.test.x[:5]
    np.testing.assert_array_equal(post.predict(x, 30, seed=1), back.predict(x, 30, seed=1))
    if which == "svi":
        np.testing.assert_array_equal(post.losses, back.losses)
    assert type(back.info) is type(post.info) is (FitInfo if which == "svi" else NutsInfo)
    assert back.info == post.info
    other = zoo.get("mlp", data="two_moons", hidden=(8,), data_kwargs={"n": 100}).model
    with pytest.raises(ValueError, match="model: the checkpoint was saved from another model"):
        inference.load(tmp_path / which, model=other)
    with pytest.raises(FileNotFoundError, match="path: no checkpoint"):
        inference.load(tmp_path / "missing")


def test_a_checkpoint_with_a_plain_dict_info_is_refused(moons_nuts, tmp_path):
    """Pre-release checkpoints held the info as a plain dict without its type, or a record of other fields: refused,
    naming the checkpoint's metadata file and what this version reads."""
    import base.atomic_dir as atomic_dir

    inference.save(moons_nuts, tmp_path)
    meta_path = tmp_path / "posterior.json"
    meta = json.loads(meta_path.read_text())
    for info_type, info, says in ((None, {"nuts_s": 1.5, "divergences": 3}, "info_type: expected one of"),
                                  ("NutsInfo", {"nuts_s": 1.5, "divergences": 3, "retired_counter": 7},
                                   r"info: expected the fields of NutsInfo .* lacking \['mean_leapfrog_steps', "
                                   r"'chain_method'\] and with unknown fields \['retired_counter'\]")):
        meta_path.write_text(json.dumps({**meta, "info_type": info_type, "info": info}))
        (tmp_path / "MANIFEST.json").unlink()
        atomic_dir._write_manifest(str(tmp_path), "posterior")  # the edit signed, as a save would have
        with pytest.raises(CheckpointError, match=rf"posterior\.json'.*{says}.*Fit and save it again"):
            inference.load(tmp_path, model=moons_nuts.model)


def test_info_is_a_named_tuple_or_none(moons_nuts):
    assert isinstance(moons_nuts.info, NutsInfo) and moons_nuts.info.chain_method in ("parallel", "vectorized", "sequential")
    assert moons_nuts.info.mean_leapfrog_steps == float(moons_nuts.sample_stats["num_steps"].mean())
    with pytest.raises(TypeError, match="info: expected an inference.run_info.FitInfo, NutsInfo or None, got dict"):
        inference.MCMCPosterior(model=moons_nuts.model, samples=moons_nuts.samples, info={"nuts_s": 1.0})


def test_nuts_num_samples_was_renamed(moons_entry):
    with pytest.raises(TypeError, match=r"num_samples=200.*renamed to draws_per_chain.*TOTAL number"):
        inference.nuts(moons_entry.model, moons_entry.train, num_samples=200)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['num_sample'\]"):
        inference.nuts(moons_entry.model, moons_entry.train, num_sample=200)
    with pytest.raises(ValueError, match="draws_per_chain: expected a positive integer, got 0"):
        inference.nuts(moons_entry.model, moons_entry.train, draws_per_chain=0)


@pytest.mark.smoke
def test_ess_rhat_is_arviz_bulk_ess_and_rank_rhat():
    draws = np.random.default_rng(0).normal(size=(2, 300, 3, 2))
    data = az.convert_to_dataset({"w": draws})
    got = diagnostics.ess_rhat(draws)
    assert got == {"ess_bulk_min": float(np.min(az.ess(data, method="bulk")["w"].values)),
                   "rhat_max": float(np.max(az.rhat(data)["w"].values))}
    assert np.isnan(diagnostics.ess_rhat(draws[:1])["rhat_max"])  # one chain: ArviZ's R-hat needs two


def test_inference_load_needs_the_model(moons_svi, moons_entry, tmp_path):
    inference.save(moons_svi, tmp_path / "svi")
    with pytest.raises(ValueError, match=r"model: .*got None; pass model=\.\.\., or use zoo\.load\(path\)"):
        inference.load(tmp_path / "svi")
    back = inference.load(tmp_path / "svi", model=moons_entry.model)
    assert back.model is moons_entry.model
