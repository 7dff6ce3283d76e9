"""The convergence judgement of `fit` (`inference.convergence.judge`): synthetic loss curves, a 50-step fit
flagged (warning, info, progress line), a long fit of a tiny model converged, and the judgement kept by
checkpoints and by a resumed fit state."""

import warnings

import numpy as np
import optax
import pytest

import inference
import zoo
from inference.convergence import judge, window_trend
from inference.run_info import FitInfo, info_from_record
from base.errors import InputError


def _entry():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})


def _fit(entry, **kw):
    kw = {"steps": 50, "batch_size": 100, "optimizer": optax.adam(1e-2), "progress": False, "chunk_size": 500, **kw}
    return inference.fit(entry.model, inference.mean_field(entry.model), entry.train, **kw)


@pytest.fixture(scope="module")
def entry():
    return _entry()


@pytest.fixture(scope="module")
def short(entry):
    """A 50-step fit, its ConvergenceWarnings recorded."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        post = _fit(entry, steps=50)
    return post, [w for w in record if issubclass(w.category, inference.ConvergenceWarning)]


# ----- the statistic on synthetic curves ------------------------------------------------------------------
def test_a_flat_noisy_curve_is_converged():
    rng = np.random.default_rng(0)
    flat = 100.0 + rng.normal(0.0, 5.0, size=2000)
    out = judge(flat)
    assert out["converged"] and abs(out["slope_t"]) < 3 and out["tail_steps"] == 400
    assert out["loss_sd"] == pytest.approx(5.0, rel=0.1)


def test_a_falling_or_rising_curve_is_not_converged():
    rng = np.random.default_rng(1)
    steps = np.arange(2000)
    falling = judge(200.0 - 0.05 * steps + rng.normal(0.0, 5.0, size=2000))
    assert not falling["converged"] and falling["slope_t"] < -3
    # the fitted change over the last 400 steps is 400 * -0.05 = -20 of a loss near 110
    assert falling["change"] == pytest.approx(-20.0, rel=0.15)
    assert falling["rel_change"] == pytest.approx(-20.0 / 110.0, rel=0.15)
    assert "still falling" in falling["reason"]
    rising = judge(100.0 + 0.05 * steps + rng.normal(0.0, 5.0, size=2000))
    assert not rising["converged"] and "still rising" in rising["reason"]


def test_a_clear_but_negligible_drift_counts_as_converged():
    # noiseless: t is huge (infinite up to rounding), but the loss moves 0.04 % of its size over the tail
    out = judge(1000.0 - 0.001 * np.arange(2000))
    assert out["slope_t"] < -1e6 and abs(out["rel_change"]) < 0.01 and out["converged"]
    assert judge(np.full(500, 3.0))["converged"] and judge(np.full(500, 3.0))["slope_t"] == 0.0


def test_fewer_than_100_steps_are_not_judged():
    out = judge(np.full(99, 1.0))
    assert not out["converged"] and out["slope_t"] is None and "only 99 steps" in out["reason"]


def test_window_trend_is_the_least_squares_line_of_window_means():
    values = np.repeat([5.0, 4.0, 3.5, 2.0], 3)  # window means 5, 4, 3.5, 2: slope -0.95 per window
    t, change = window_trend(values, 3)
    slope = np.polyfit(np.arange(4) * 3.0, [5.0, 4.0, 3.5, 2.0], 1)[0]
    assert change == pytest.approx(slope * 12)
    resid = np.array([5.0, 4.0, 3.5, 2.0]) - np.polyval(np.polyfit(np.arange(4) * 3.0, [5, 4, 3.5, 2], 1),
                                                         np.arange(4) * 3.0)
    se = np.sqrt(np.sum(resid ** 2) / 2 / np.sum((np.arange(4) * 3.0 - 4.5) ** 2))
    assert t == pytest.approx(slope / se)


def test_gradient_norms_are_reported_not_judged():
    out = judge(np.full(1000, 2.0), grad_norms=np.r_[np.full(100, 10.0), np.full(900, 1.0)])
    assert out["grad_norm_start"] == pytest.approx(10.0) and out["grad_norm_tail"] == pytest.approx(1.0)
    assert judge(np.full(1000, 2.0), grad_norms=np.full(1000, np.nan))["grad_norm_tail"] is None


# ----- fits --------------------------------------------------------------------------------------------
def test_a_50_step_fit_is_flagged_not_converged(short):
    post, record = short
    assert post.info.converged is False and post.info.convergence["steps"] == 50
    assert len(record) == 1 and "has not converged (only 50 steps, too few to judge" in str(record[0].message)
    assert record[0].message.convergence == post.info.convergence
    assert record[0].filename == __file__  # points at the caller of fit
    assert "NOT converged" in post.info.summary()


def test_a_long_fit_of_a_tiny_model_is_converged(entry):
    with warnings.catch_warnings():
        warnings.simplefilter("error", inference.ConvergenceWarning)
        post = _fit(entry, steps=3000)
    c = post.info.convergence
    assert post.info.converged is True and c["tail_steps"] == 600 and abs(c["slope_t"]) < 3
    assert np.isfinite(c["grad_norm_tail"]) and c["grad_norm_tail"] > 0  # computed inside the scan
    assert post.info.summary().startswith("converged (the loss is flat over the last 600 steps")


def test_the_progress_bar_closes_with_the_judgement(entry, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.ConvergenceWarning)
        _fit(entry, steps=50, progress=True)
    err = capsys.readouterr().err
    assert "SVI mlp: 50 steps, final loss" in err and "NOT converged (only 50 steps" in err


def test_checkpoints_keep_the_judgement(short, tmp_path):
    post, _ = short
    inference.save(post, tmp_path / "ck")
    back = inference.load(tmp_path / "ck", post.model)
    assert back.info == post.info and back.info.converged is False
    # a record without the judgement (a pre-release checkpoint's) is refused, naming the fields it lacks
    with pytest.raises(InputError, match=r"info: expected the fields of FitInfo .* lacking \[.*'converged'"):
        info_from_record("FitInfo", {"first_step_s": 1.0, "fit_s": 2.0, "traces": 1})
    assert FitInfo(1.0, 2.0, 1, converged=None, convergence=None).summary() == "convergence not judged"


def test_a_resumed_finished_fit_state_gives_the_same_judgement(entry, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.ConvergenceWarning)
        first = _fit(entry, steps=200, checkpoint_dir=str(tmp_path / "state"))
        again = _fit(entry, steps=200, checkpoint_dir=str(tmp_path / "state"), resume=True)
    assert again.info.first_step_s is None  # nothing ran: losses and gradient norms came from the fit state
    assert again.info.convergence == first.info.convergence and first.info.convergence["grad_norm_tail"] > 0
