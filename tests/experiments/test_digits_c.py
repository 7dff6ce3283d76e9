"""Digits-C through the whole stack: a point-estimate MLP of the zoo, 19 corruption types x 5 severities."""

import numpy as np

import inference
import zoo
from evals import ood
from zoo.experiments.run import digits_c


def test_point_estimate_accuracy_falls_with_severity():
    entry = zoo.get("mlp", data="digits", hidden=(64, 64))
    post = inference.fit(entry.model, inference.point_estimate.point_estimate(entry.model), entry.train, steps=1500,
                         batch_size=128, progress=False)
    results, summary = digits_c({"point_estimate": post}, None, num_samples=1, verbose=False)
    acc = ood.by_severity(results.table).loc["point_estimate"]["accuracy"]
    assert list(acc.index) == [0, 1, 2, 3, 4, 5]
    assert acc.iloc[0] > 0.95
    assert np.all(np.diff(acc.values) < 0), acc.values  # clean, then severities 1..5
    assert summary.loc["point_estimate", "mCE"] == 100.0  # the reference against itself
    assert len(results.table) == 1 + 19 * 5
