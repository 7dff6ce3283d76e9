"""OOD scoring: per-set metrics, aggregates (cNLL / cA / cECE, mCE, uCE), diversity, tables."""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from evals import metrics, ood


def test_pairwise_disagreement_and_diversity_by_hand():
    votes = np.array([[0, 1, 1], [0, 0, 1], [1, 0, 1]])  # members x points
    member = np.eye(2)[votes] * 0.8 + 0.1  # (3, 3, 2); argmax = votes
    # pairs (0,1): 1 of 3 points differ, (0,2): 2, (1,2): 1 -> 4 / 9.
    assert ood.pairwise_disagreement(member) == pytest.approx(4 / 9)
    y = np.array([0, 0, 0])  # averaged prediction: [0, 0, 1] -> accuracy 2/3
    assert ood.diversity(member, y) == pytest.approx((4 / 9) / (1 / 3))
    assert np.isnan(ood.diversity(member[:1], y))


def _row(method, kind, severity, acc, nll=1.0, ece=0.1):
    return {"method": method, "type": kind, "severity": severity, "n": 10, "accuracy": acc, "nll": nll,
            "ece": ece, "brier": 0.0, "entropy": 0.0, "mutual_info": 0.0, "diversity": np.nan}


def hand_table():
    """Reference errors: a (.1, .3), b (.2, .2), c (.4, .4); model: a (.3, .5), b (.1, .1), c (.2, .6)."""
    errors = {"ref": {"a": (0.1, 0.3), "b": (0.2, 0.2), "c": (0.4, 0.4)},
              "model": {"a": (0.3, 0.5), "b": (0.1, 0.1), "c": (0.2, 0.6)}}
    rows = [_row("ref", "clean", 0, 0.95, 0.2, 0.01), _row("model", "clean", 0, 0.9, 0.3, 0.02)]
    for method, by_type in errors.items():
        for kind, errs in by_type.items():
            for severity, err in zip((1, 2), errs):
                rows.append(_row(method, kind, severity, 1 - err, nll=10 * err, ece=err / 10))
    return pd.DataFrame(rows)


def test_aggregate_by_hand():
    agg = ood.aggregate(hand_table(), reference="ref")
    model = agg.loc["model"]
    # severity 1 accuracies (.7, .9, .8): mean .8, median .8; severity 2 (.5, .9, .4): mean .6, median .5.
    assert model["caccuracy"] == pytest.approx(0.7)
    assert model["caccuracy_median"] == pytest.approx(0.65)
    assert model["cnll"] == pytest.approx(3.0)
    assert model["cece"] == pytest.approx(0.03)
    # CE: a .4 / .2 = 2, b .1 / .2 = .5, c .4 / .4 = 1 -> mCE = 100 * 3.5 / 3.
    assert model["mce"] == pytest.approx(350 / 3)
    assert agg.loc["ref", "mce"] == pytest.approx(100)
    assert model["uce"] == pytest.approx(30)
    assert model["accuracy"] == 0.9 and model["nll"] == 0.3 and model["ece"] == 0.02
    assert agg.attrs["reference"] == "ref"
    ce = ood.corruption_errors(hand_table(), "ref")
    assert ce.loc["model"].to_dict() == pytest.approx({"a": 200, "b": 50, "c": 100})


def test_summary_layout_and_missing_reference():
    results = ood.OODResults(table=hand_table(), num_params={"model": 1234})
    summary = ood.summary_table(results, reference="ref")
    assert list(summary.columns) == ["NLL", "Acc", "ECE", "cNLL", "cA", "cECE", "mCE", "#params"]
    assert summary.loc["model", "cA"] == pytest.approx(70)
    assert summary.loc["model", "Acc"] == pytest.approx(90)
    text = ood.format_table(summary)
    assert "0.30 / 70.0 / 0.030" not in text  # cNLL is 3.0 here
    assert "3.00 / 70.0 / 0.030" in text and "mCE reference: ref" in text and "1,234" in text
    no_ref = ood.summary_table(results, reference="point_estimate")
    assert "mCE" not in no_ref and no_ref.attrs["reference"] is None
    with pytest.raises(ValueError, match="reference"):
        ood.corruption_errors(hand_table(), "point_estimate")


class _Posterior:
    """A posterior-like object: S members that scale the logits by 1, 2, ..., recording its calls."""

    def __init__(self, weights):
        self.weights, self.calls = weights, []

    def predict(self, x, num_samples=100, seed=0):
        self.calls.append((num_samples, seed))
        logits = x @ self.weights
        out = np.stack([np.exp(t * logits) for t in range(1, num_samples + 1)])
        return out / out.sum(-1, keepdims=True)


def test_score_sets_matches_metrics():
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(4, 3))
    x, y = rng.normal(size=(20, 4)), rng.integers(0, 3, size=20)
    sets = [("fog", s, x * s, y) for s in (1, 2)]
    posterior = _Posterior(weights)
    point = lambda inputs: np.exp(inputs @ weights) / np.exp(inputs @ weights).sum(-1, keepdims=True)  # noqa: E731
    results = ood.score_sets({"bnn": posterior, "point_estimate": point}, sets, clean=(x, y), num_samples=3, seed=5,
                             preprocess=lambda v: v / 2)
    assert posterior.calls == [(3, 5)]  # the three sets predicted in one call
    again = ood.score_sets({"bnn": _Posterior(weights)}, sets, clean=(x, y), num_samples=3, preprocess=lambda v: v / 2,
                           max_rows=1)
    pd.testing.assert_frame_equal(again.table, results.table[results.table.method == "bnn"].reset_index(drop=True))
    table = results.table.set_index(["method", "type", "severity"])
    assert len(table) == 6
    member = _Posterior(weights).predict(x * 2 / 2, 3)  # severity 2 set, preprocessed
    row = table.loc[("bnn", "fog", 2)]
    assert row["nll"] == pytest.approx(metrics.nll(member, y))
    assert row["accuracy"] == pytest.approx(metrics.accuracy(member.mean(0), y))
    assert row["ece"] == pytest.approx(metrics.ece(member.mean(0), y))
    assert row["diversity"] == pytest.approx(ood.diversity(member, y))
    assert np.isnan(table.loc[("point_estimate", "fog", 2), "diversity"])
    assert table.loc[("point_estimate", "clean", 0), "mutual_info"] == pytest.approx(0)
    assert results.probs["bnn"]["corrupted"].shape == (40, 3) and results.labels["clean"].shape == (20,)


def test_merge_of_parts_scored_apart_equals_scoring_together():
    rng = np.random.default_rng(1)
    weights = rng.normal(size=(4, 3))
    x, y = rng.normal(size=(20, 4)), rng.integers(0, 3, size=20)
    sets = [("fog", s, x * s, y) for s in (1, 2)]
    point = lambda inputs: np.exp(inputs @ weights) / np.exp(inputs @ weights).sum(-1, keepdims=True)  # noqa: E731
    kw = dict(clean=(x, y), num_samples=3, seed=5)
    together = ood.score_sets({"bnn": _Posterior(weights), "point_estimate": point}, sets, num_params={"bnn": 7}, **kw)
    merged = ood.merge([ood.score_sets({"bnn": _Posterior(weights)}, sets, num_params={"bnn": 7}, **kw),
                        ood.score_sets({"point_estimate": point}, sets, **kw)])
    pd.testing.assert_frame_equal(merged.table, together.table)
    assert merged.num_params == {"bnn": 7}
    for name in ("bnn", "point_estimate"):
        for pool in ("clean", "corrupted"):
            np.testing.assert_array_equal(merged.probs[name][pool], together.probs[name][pool])
    pd.testing.assert_frame_equal(ood.summary_table(merged), ood.summary_table(together))
    with pytest.raises(ValueError, match=r"parts\[1\]: methods \['point_estimate'\] were scored in an earlier"):
        ood.merge([together, ood.score_sets({"point_estimate": point}, sets, **kw)])
    with pytest.raises(ValueError, match=r"parts\[1\]: scored on other sets"):
        ood.merge([ood.score_sets({"a": point}, sets, **kw), ood.score_sets({"b": point}, sets[:1], **kw)])
    with pytest.raises(ValueError, match="parts: expected at least one"):
        ood.merge([])


def test_ensemble_and_bad_predictors():
    one = lambda x: np.tile([0.9, 0.1], (len(x), 1))  # noqa: E731
    two = lambda x: np.tile([[0.2, 0.8]], (2, len(x), 1))  # noqa: E731
    x = np.zeros((5, 2))
    assert ood.ensemble([one, two])(x).shape == (3, 5, 2)
    with pytest.raises(ValueError, match="predictors"):
        ood.score_sets({"bad": lambda v: np.ones((len(v) + 1, 2)) / 2}, [("fog", 1, x, np.zeros(5, int))])
    with pytest.raises(ValueError, match="predictors"):
        ood.score_sets({}, [])


def test_save_and_plots(tmp_path):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(30, 2)), rng.integers(0, 2, size=30)
    predict = lambda v: np.stack([np.full((len(v), 2), 0.5), np.tile([0.7, 0.3], (len(v), 1))])  # noqa: E731
    results = ood.score_sets({"point_estimate": predict}, [("fog", s, x, y) for s in (1, 2)], clean=(x, y))
    paths = ood.save(results, tmp_path)
    assert pd.read_csv(paths["table_csv"]).shape == results.table.shape
    saved = json.load(open(paths["summary_json"]))
    assert saved["reference"] == "point_estimate" and saved["rows"]["point_estimate"]["mCE"] == pytest.approx(100)
    ood.plot_severity(results, tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 0
    assert len(ood.plot_reliability(results, tmp_path)) == 2


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_point_estimate_accuracy_falls_with_severity_on_digits_c():
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    from evals.corruptions import corrupted

    data = load_digits()
    x = (data.data / 16).astype(np.float32)
    mlp = MLPClassifier(hidden_layer_sizes=(32,), max_iter=300, random_state=0).fit(x[:1500], data.target[:1500])

    test = SimpleNamespace(x=x[1500:], y=data.target[1500:], image_shape=(8, 8, 1))
    results = ood.score_sets({"point_estimate": mlp.predict_proba}, corrupted(test), clean=test)
    by_severity = ood.by_severity(results.table)["accuracy"].loc["point_estimate"]
    assert np.all(np.diff(by_severity.to_numpy()) < 0), by_severity
