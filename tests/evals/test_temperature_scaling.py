"""Temperature scaling (`evals.temperature_scale`, ``evals.score(..., validation=...)``): a known temperature is
recovered, the fitted T is scipy's minimiser of the validation NLL, it scales the log of the averaged predictive
(pool, then calibrate), and bad validation data are refused by name."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, logsumexp

import evals
import inference
import zoo
from base.errors import InputError
from evals.temperature import fit_temperature, pooled_log_probs

T_TRUE = 2.0


def _labels(rng, logits, temperature):
    """Labels drawn from softmax(logits / temperature), row by row (inverse CDF)."""
    p = np.exp(log_softmax(logits / temperature, axis=-1))
    return (rng.random((len(p), 1)) > np.cumsum(p, -1)).sum(-1)


def _scipy_temperature(log_probs, y):
    def nll(log_t):
        return -np.mean(np.take_along_axis(log_softmax(log_probs / np.exp(log_t), axis=-1), y[:, None], -1))
    return float(np.exp(minimize_scalar(nll, bounds=(-5, 5), method="bounded", options={"xatol": 1e-10}).x))


def test_a_known_temperature_is_recovered_and_matches_scipy():
    rng = np.random.default_rng(0)
    logits = 3.0 * rng.normal(size=(20000, 10))
    y = _labels(rng, logits, T_TRUE)  # the labels of a model whose logits are over-confident by a factor of 2
    log_probs = log_softmax(logits, axis=-1)
    t = fit_temperature(log_probs, y)
    # sampling error of a 1-parameter MLE on 20,000 labels: about 1 %; 4 % leaves room
    assert abs(t - T_TRUE) < 0.04 * T_TRUE, t
    np.testing.assert_allclose(t, _scipy_temperature(log_probs, y), rtol=1e-5)
    # a calibrated model (labels from softmax(logits)) gets T = 1
    assert abs(fit_temperature(log_probs, _labels(rng, logits, 1.0)) - 1.0) < 0.04


class _Members:
    """A classifier of S fixed members on inputs x = row indices: log_predict gives their (S, N, C) rows."""

    def __init__(self, log_probs):
        self.log_probs = log_probs

    def log_predict(self, x, num_samples=100, seed=0):
        return self.log_probs[:, np.asarray(x, int)]


def test_score_calibrates_the_log_of_the_averaged_predictive():
    rng = np.random.default_rng(1)
    logits = 2.0 * rng.normal(size=(3, 4000, 5)) + 3.0 * rng.normal(size=(1, 4000, 5))  # 3 members that agree a bit
    y = _labels(rng, logits.mean(0), 0.5)  # under-confident: T < 1
    members = _Members(log_softmax(logits, axis=-1))
    val, test = np.arange(2000), np.arange(2000, 4000)
    row = evals.score(members, (test, y[test]), validation=(val, y[val]), name="members", verbose=False).iloc[0]
    pooled = logsumexp(members.log_probs, axis=0) - np.log(3)  # log (1/S) sum_s p_s, not the members' logits
    t = _scipy_temperature(pooled[val], y[val])
    np.testing.assert_allclose(row["temperature"], t, rtol=1e-4)
    assert row["temperature"] < 1
    calibrated = log_softmax(pooled[test] / t, axis=-1)
    np.testing.assert_allclose(row["calibrated_nll"], -np.mean(calibrated[np.arange(2000), y[test]]), rtol=1e-5)
    assert row["calibrated_nll"] < row["nll"]  # T fitted on validation data of the same distribution helps here
    np.testing.assert_allclose(pooled_log_probs(members.log_probs), pooled)
    fitted = evals.temperature_scale(members, (val, y[val]))
    assert fitted.calibrated_nll <= fitted.nll and fitted.temperature == pytest.approx(row["temperature"])


def test_bad_validation_data_are_refused_by_name():
    entry = zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 40})
    init = entry.model.init_values(np.array([0, 0], np.uint32), entry.train.x[:1])
    post = inference.MCMCPosterior(model=entry.model, samples={k: np.asarray(v)[None, None] for k, v in init.items()},
                                   feature_shape=entry.train.x.shape[1:])
    x, y = entry.train.x, entry.train.y
    for bad, message in [((x, None), r"^validation: expected validation data with labels"),
                         ((x[:, :1], y), r"^validation\.x "), ((x, y + 7), r"^validation\.y "),
                         ("val.npz", r"^validation: ")]:
        with pytest.raises(InputError, match=message):
            evals.score(post, entry.test, validation=bad, verbose=False)
