"""KL schedules (`inference.kl_schedules`, `fit(kl_schedule=...)`): the betas' values, the betas reaching each step's
loss exactly, the last beta recorded (info, checkpoints, run identity), no recompile for another schedule."""

import warnings

import numpy as np
import optax
import pytest

import inference
from inference.kl_schedules import linear, schedule_betas, stepwise_linear
from inference.run_info import info_from_record
from base.errors import CheckpointError, InputError


def test_the_schedules_values():
    np.testing.assert_array_equal(linear(4)(np.arange(6)), np.float32([0.25, 0.5, 0.75, 1, 1, 1]))
    np.testing.assert_allclose(stepwise_linear(0.1, every=2)(np.arange(8)), [0, 0, 0.2, 0.2, 0.4, 0.4, 0.6, 0.6],
                               rtol=1e-6)
    paper = stepwise_linear(5e-5)  # appendix D.4: +5e-5 per batch, raised every 100 batches
    np.testing.assert_allclose(paper(np.array([0, 99, 100, 17_699, 19_999, 20_000])),
                               [0, 0, 0.005, 0.88, 0.995, 1.0], rtol=1e-6)
    assert float(stepwise_linear(5e-6)(17_699)) == pytest.approx(0.088)  # 300 MNIST epochs at batch 1,024
    np.testing.assert_array_equal(schedule_betas(lambda t: 0.5, 3), np.float32([0.5, 0.5, 0.5]))  # scalar-only


@pytest.mark.parametrize("bad, named", [(lambda: stepwise_linear(-1e-5), "per_batch"),
                                        (lambda: stepwise_linear(5e-5, every=0), "every"),
                                        (lambda: linear(0), "warmup_steps"),
                                        (lambda: schedule_betas(lambda t: 1.0 - t, 3), "kl_schedule")])
def test_bad_schedules_are_refused(bad, named):
    with pytest.raises(InputError, match=named):
        bad()


SGD = optax.sgd(0.0)  # one object: fits with it share their compiled update (keyed by identity)


def _fit(entry, **kw):
    kw = {"steps": 6, "batch_size": 32, "chunk_size": 4, "seed": 2, "progress": False, "optimizer": SGD,
          **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fit that cannot move (rate 0) may read as collapsed
        return inference.fit(entry.model, inference.mean_field(entry.model), entry.train, **kw)


@pytest.fixture(scope="module")
def fits(moons_entry):
    """Fits at a learning rate of 0 (the parameters stay put, so each step's loss is -log_lik_t + beta_t KL at the
    same parameters): beta 1 (no schedule), beta 0, the paper's stepwise schedule, kl_warmup 4 and linear(4)."""
    return {"one": _fit(moons_entry), "zero": _fit(moons_entry, kl_schedule=lambda t: 0.0 * t),
            "stepwise": _fit(moons_entry, kl_schedule=stepwise_linear(0.15, every=2)),
            "warmup": _fit(moons_entry, kl_warmup=4), "linear": _fit(moons_entry, kl_schedule=linear(4))}


def test_each_steps_beta_reaches_its_loss_and_the_last_is_recorded(fits):
    one, zero = fits["one"].losses, fits["zero"].losses
    kl = one - zero  # KL(q || p) at the fixed parameters
    assert np.all(kl > 0)
    betas = np.array([0, 0, 0.3, 0.3, 0.6, 0.6])  # 6 steps in chunks of 4: the second chunk is padded
    np.testing.assert_allclose(fits["stepwise"].losses, zero + betas * kl, rtol=1e-5)
    np.testing.assert_allclose(fits["linear"].losses, zero + np.minimum(1, np.arange(1, 7) / 4) * kl, rtol=1e-5)
    np.testing.assert_array_equal(fits["warmup"].losses, fits["linear"].losses)  # kl_warmup is linear()
    finals = {k: p.info.final_kl_weight for k, p in fits.items()}
    assert finals == {"one": 1.0, "zero": 0.0, "stepwise": pytest.approx(0.6), "warmup": 1.0, "linear": 1.0}
    assert "KL weight at the last step 0.6" in fits["stepwise"].info.summary()


def test_another_schedule_compiles_nothing(fits, moons_entry):
    # every fit above shares one structure: only the first may trace the update, the schedules are data
    assert [p.info.traces for k, p in fits.items() if k != "one"] == [0, 0, 0, 0]
    again = _fit(moons_entry, kl_schedule=stepwise_linear(5e-5, every=3))
    assert again.info.traces == 0 and again.info.final_kl_weight == pytest.approx(5e-5 * 3)


def test_kl_warmup_and_a_schedule_together_are_refused(moons_entry):
    with pytest.raises(InputError, match="kl_schedule"):
        _fit(moons_entry, kl_warmup=10, kl_schedule=linear(10))


def test_the_final_beta_in_checkpoints_and_the_run_identity(fits, moons_entry, tmp_path):
    post = fits["stepwise"]
    inference.save(post, tmp_path / "post")
    assert inference.load(tmp_path / "post", model=moons_entry.model).info.final_kl_weight == pytest.approx(0.6)
    assert info_from_record("FitInfo", post.info._asdict()) == post.info
    record = {k: v for k, v in post.info._asdict().items() if k != "final_kl_weight"}  # a pre-release record
    with pytest.raises(InputError, match=r"lacking \['final_kl_weight'\]"):
        info_from_record("FitInfo", record)
    _fit(moons_entry, kl_schedule=stepwise_linear(0.15, every=2), checkpoint_dir=str(tmp_path / "state"))
    with pytest.raises(CheckpointError, match="kl_schedule differs"):
        _fit(moons_entry, kl_schedule=stepwise_linear(0.2, every=2), checkpoint_dir=str(tmp_path / "state"),
             resume=True)
