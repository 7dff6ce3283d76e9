"""Deep ensembles (`inference.ensemble`): the vmapped fit equals the members' separate `fit` runs, the members are
the draws of an MCMC-kind Posterior that predicts, scores and saves / loads like NUTS's."""

import numpy as np
import optax
import pytest

import evals
import inference
from inference.ensemble import member_start
import zoo
from base.errors import InputError

ADAM = optax.adam(1e-2)
SETTINGS = dict(steps=60, batch_size=32, chunk_size=30, optimizer=ADAM, seed=5)
MEMBERS = 2


@pytest.fixture(scope="module")
def moons():
    return zoo.get("mlp", data="two_moons", hidden=(8,), data_kwargs={"n": 200})


@pytest.fixture(scope="module")
def together(moons):
    return inference.ensemble(moons.model, moons.train, members=MEMBERS, together=True, **SETTINGS)


def test_the_vmapped_ensemble_equals_separate_fits_with_the_same_seeds(moons, together):
    assert together.kind == "mcmc" and together.num_chains == 1 and together.num_draws == MEMBERS
    for m in range(MEMBERS):
        seed = SETTINGS["seed"] + m
        alone = inference.fit(moons.model, inference.point_estimate.point_estimate(moons.model), moons.train,
                              **{**SETTINGS, "seed": seed}, progress=False,
                              init_params=member_start(moons.model, moons.train.x[:1], seed))
        for site, value in alone.median().items():
            # the same arithmetic batched over members: equal to float32 rounding
            np.testing.assert_allclose(together.samples[site][0, m], value, rtol=1e-5, atol=1e-6)
    # the fallback when the members do not fit in memory together: the same fits one after another
    apart = inference.ensemble(moons.model, moons.train, members=MEMBERS, together=False, **SETTINGS)
    for site, value in apart.samples.items():
        np.testing.assert_allclose(together.samples[site], value, rtol=1e-5, atol=1e-6)
    # the members differ (their own initialisation and minibatches), so the ensemble is not one network twice
    w = together.samples["mlp/~/linear_0/w"][0]
    assert np.max(np.abs(w[0] - w[1])) > 0.1


def test_the_ensemble_predicts_the_members_average_scores_and_round_trips(moons, together, tmp_path):
    x = moons.test.x[:50]
    probs = together.predict(x)  # every member once, whatever num_samples asks beyond M
    assert probs.shape[0] == MEMBERS
    members = [moons.model.predictive({k: v[0, m] for k, v in together.samples.items()}, x) for m in range(MEMBERS)]
    np.testing.assert_allclose(probs, np.stack(members), rtol=1e-5, atol=1e-6)
    row = evals.score(together, moons.test, verbose=False)
    assert row.index[0] == "ensemble" and row["draws"].iloc[0] == MEMBERS
    inference.save(together, tmp_path / "ens")
    back = inference.load(tmp_path / "ens", model=moons.model)
    assert back.config["name"] == "ensemble"
    for site, value in together.samples.items():
        np.testing.assert_array_equal(back.samples[site], value)


def test_a_bad_member_count_is_refused_by_name(moons):
    with pytest.raises(InputError, match="^members:"):
        inference.ensemble(moons.model, moons.train, members=0)
