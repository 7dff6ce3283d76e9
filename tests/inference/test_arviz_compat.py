"""`inference.arviz_compat`: the same numbers under ArviZ 0.x and 1.x where the maths is the same (one set of
expected values, measured under both), on fixed draws and log-likelihoods (nothing compiled)."""

import numpy as np
import pytest

from inference import arviz_compat as compat
from inference.diagnostics import ess_rhat

pytestmark = pytest.mark.smoke  # the subset .ci/run runs on the newest stack


def _data(shift: float, seed: int):
    rng = np.random.default_rng(seed)
    ll = rng.normal(size=(2, 200, 30)) * 0.1 - 1.0 + shift * rng.normal(size=(1, 1, 30))
    return compat.from_groups({"posterior": {"a": rng.normal(size=(2, 200, 3))}, "log_likelihood": {"y": ll}},
                              dims={"a": ["a_dim_0"]})


@pytest.fixture(scope="module")
def pair():
    return _data(0.0, 0), _data(0.3, 1)


def test_from_groups_builds_the_installed_arvizs_object(pair):
    data = pair[0]
    assert set(compat.group_names(data)) == {"posterior", "log_likelihood"}
    assert data.posterior["a"].dims == ("chain", "draw", "a_dim_0")
    assert type(data).__name__ == ("DataTree" if compat.ARVIZ_1 else "InferenceData")


def test_loo_is_psis_loo_with_the_same_fields_under_both_apis(pair):
    est = compat.loo(pair[0], pointwise=True)
    # PSIS fits the tails a little differently in 1.x: elpd agrees to 3e-6 relative (-30.136287 under 0.23.4,
    # -30.136221 under 1.3), p_loo to 3e-4
    assert est.elpd == pytest.approx(-30.13625, rel=1e-5)
    assert est.p == pytest.approx(0.30105, rel=1e-3)
    assert est.elpd == pytest.approx(est.elpd_i.sum(), rel=1e-12) and est.elpd_i.shape == (30,)
    # se: sqrt(N var(elpd_i)), with ddof 0 under 0.x and ddof 1 under 1.x
    ddof = 1 if compat.ARVIZ_1 else 0
    assert est.se == pytest.approx(np.sqrt(30 * np.var(est.elpd_i, ddof=ddof)), rel=1e-9)
    assert est.pareto_k.shape == (30,) and 0.18 < est.pareto_k.max() < 0.2 and not est.warning
    assert compat.loo(pair[0]).elpd_i is None


def test_compare_has_arviz_0_columns_under_both_apis(pair):
    table = compat.compare({"x": pair[0], "y": pair[1]})
    assert list(table.columns) == compat.COMPARE_COLUMNS and list(table.index) == ["x", "y"]
    assert list(table["rank"]) == [0, 1]
    np.testing.assert_allclose(table["elpd_loo"], [-30.13625, -32.35101], rtol=1e-5)
    np.testing.assert_allclose(table["elpd_diff"], [0.0, 2.21476], atol=1e-4)  # best minus this, >= 0
    np.testing.assert_allclose(table["weight"], [1.0, 0.0], atol=1e-6)  # stacking puts all weight on x
    np.testing.assert_allclose(table["dse"], [0.0, 1.30640], rtol=1e-4)
    assert table["elpd_loo"]["x"] == pytest.approx(compat.loo(pair[0]).elpd, rel=1e-12)
    assert not table["warning"].any()


def test_summary_and_diagnostics_are_the_same_numbers_under_both_apis(pair):
    table = compat.summary(pair[0])
    assert list(table.columns) == ["mean", "sd", "hdi_3%", "hdi_97%", "mcse_mean", "mcse_sd", "ess_bulk",
                                   "ess_tail", "r_hat"]
    assert list(table.index) == ["a[0]", "a[1]", "a[2]"]
    np.testing.assert_allclose(table["mean"], [0.018360, 0.048196, -0.089968], atol=1e-6)
    np.testing.assert_allclose(table["sd"], [0.955767, 0.958073, 0.986039], atol=1e-6)
    np.testing.assert_allclose(table["hdi_3%"], [-1.580805, -1.905614, -1.947476], atol=1e-6)
    np.testing.assert_allclose(table["hdi_97%"], [1.898394, 1.611139, 1.621543], atol=1e-6)
    np.testing.assert_allclose(table["mcse_mean"], [0.058027, 0.043294, 0.044108], atol=1e-6)
    np.testing.assert_allclose(table["ess_bulk"], [273.142406, 490.106843, 504.810040], rtol=1e-8)
    np.testing.assert_allclose(table["r_hat"], [1.005587, 0.999573, 1.001493], atol=1e-6)
    draws = pair[0].posterior["a"].values
    assert ess_rhat(draws) == pytest.approx({"ess_bulk_min": 273.142406, "rhat_max": 1.005587}, rel=1e-6)
    assert list(compat.summary(pair[0], var_names=["a"], round_to=2)["mean"]) == [0.02, 0.05, -0.09]
