"""Out-of-distribution detection (`evals.detection`): the four metrics on constructed cases against hand values
and an independent computation (the Mann-Whitney U statistic for AUROC, a precision-recall sum written out for
AUPR), the three uncertainty scores against their formulas, and the table of `evals.ood_detection`."""

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

import evals
from base.errors import InputError
from evals.detection import METRICS, SCORES, detection_metrics, ood_detection, uncertainty_scores


def _average_precision(positive_scores, negative_scores) -> float:
    """Average precision by hand: at each distinct threshold t (descending) the precision of {score >= t} times
    the recall it adds (ties enter together)."""
    scores = np.concatenate([positive_scores, negative_scores])
    is_pos = np.concatenate([np.ones(len(positive_scores)), np.zeros(len(negative_scores))])
    total, recall_before = 0.0, 0.0
    for t in np.unique(scores)[::-1]:
        taken = scores >= t
        recall = is_pos[taken].sum() / is_pos.sum()
        total += (recall - recall_before) * is_pos[taken].mean()
        recall_before = recall
    return total


CASES = {  # name: (in scores, out scores, auroc, aupr_in, aupr_out, fpr_at_95_tpr), larger = more likely out
    "perfect": ([0.1, 0.2, 0.3, 0.4], [0.6, 0.7], 1.0, 1.0, 1.0, 0.0),
    "reversed": ([0.6, 0.7], [0.1, 0.2], 0.0, 5 / 12, 5 / 12, 1.0),
    # interleaved: in 1, 3; out 2, 4: 3 of 4 (out, in) pairs ordered, AUROC 3/4; keeping both in inputs (u <= 3)
    # takes out input 2 for in: FPR 1/2; AUPR-out: u ranks out at 1, 3 -> (1 + 2/3) / 2; AUPR-in: -u ranks in at
    # 1, 3 as well -> 5/6
    "interleaved": ([1.0, 3.0], [2.0, 4.0], 0.75, 5 / 6, 5 / 6, 0.5),
    "all tied": ([0.5, 0.5, 0.5], [0.5], 0.5, 0.75, 0.25, 1.0),
    # a tie across the classes at the 95 % threshold: in 0, 1, 1; out 1, 2 -> keeping every in input (u <= 1)
    # keeps the out input at 1 too: FPR 1/2; AUROC = (1 + 1/2 + 1/2 + 1 + 1 + 1) / 6 = 5/6
    "tie at threshold": ([0.0, 1.0, 1.0], [1.0, 2.0], 5 / 6, None, None, 0.5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_metrics_on_constructed_cases(name):
    u_in, u_out, auroc, aupr_in, aupr_out, fpr = CASES[name]
    got = detection_metrics(u_in, u_out)
    assert list(got) == list(METRICS)
    u_stat = mannwhitneyu(u_out, u_in).statistic  # pairs with out > in, ties 1/2: an independent AUROC
    assert got["auroc"] == pytest.approx(u_stat / (len(u_in) * len(u_out)), abs=1e-12)
    assert got["auroc"] == pytest.approx(auroc, abs=1e-12)
    assert got["fpr_at_95_tpr"] == pytest.approx(fpr, abs=1e-12)
    assert got["aupr_in"] == pytest.approx(_average_precision(-np.asarray(u_in), -np.asarray(u_out)), abs=1e-12)
    assert got["aupr_out"] == pytest.approx(_average_precision(np.asarray(u_out), np.asarray(u_in)), abs=1e-12)
    if aupr_in is not None:
        assert (got["aupr_in"], got["aupr_out"]) == pytest.approx((aupr_in, aupr_out), abs=1e-12)


def test_random_scores_near_chance_and_fpr_by_threshold():
    rng = np.random.default_rng(0)
    u_in, u_out = rng.normal(size=4000), rng.normal(size=1000)  # one distribution: chance
    got = detection_metrics(u_in, u_out)
    assert got["auroc"] == pytest.approx(0.5, abs=0.03)
    assert got["aupr_out"] == pytest.approx(0.2, abs=0.03)  # the fraction of out inputs
    assert got["aupr_in"] == pytest.approx(0.8, abs=0.03)
    # FPR at 95 % TPR written out: the threshold keeps the 95 % smallest in scores; out inputs below it
    threshold = np.sort(u_in)[int(np.ceil(0.95 * len(u_in))) - 1]
    assert got["fpr_at_95_tpr"] == pytest.approx(np.mean(u_out <= threshold), abs=1e-12)
    assert got["fpr_at_95_tpr"] == pytest.approx(0.95, abs=0.03)


def test_scores_by_formula_and_table_of_a_predictor():
    # two draws, three inputs, three classes; the first input is certain in both draws, the third disagrees
    member = np.array([[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]],
                       [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 1.0, 0.0]]])
    u = uncertainty_scores(member)
    assert list(u) == list(SCORES)
    np.testing.assert_allclose(u["max_probability"], [0.0, 0.5, 0.5])
    np.testing.assert_allclose(u["entropy"], [0.0, np.log(2), np.log(2)])
    np.testing.assert_allclose(u["mutual_information"], [0.0, 0.0, np.log(2)], atol=1e-12)
    # identical draws (a point estimate's): the mutual information is exactly 0, not float64 rounding that would rank
    # inputs at random, so its AUROC is 0.5 (all ties)
    same = np.repeat(np.random.default_rng(1).dirichlet(np.ones(10), size=50)[None], 100, axis=0)
    flat = uncertainty_scores(same)["mutual_information"]
    assert (flat == 0.0).all() and detection_metrics(flat[:30], flat[30:])["auroc"] == 0.5

    def predictor(x):  # a callable x -> (S, N, C): in inputs (x = 0) certain, out inputs (x = 1) split by draws
        certain = np.array([0.98, 0.01, 0.01])
        split = np.array([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05]])
        rows = [np.stack([certain, certain]) if v == 0 else split for v in np.asarray(x)[:, 0]]
        return np.stack(rows, axis=1)

    table = evals.ood_detection(predictor, np.zeros((5, 2)), (np.ones((3, 2)), None), num_samples=2)
    assert list(table.index) == list(SCORES) and list(table.columns) == [*METRICS, "n_in", "n_out"]
    assert table[["auroc", "aupr_in", "aupr_out"]].to_numpy() == pytest.approx(np.ones((3, 3)))
    assert table["fpr_at_95_tpr"].tolist() == [0.0, 0.0, 0.0]
    assert (table["n_in"].tolist(), table["n_out"].tolist()) == ([5] * 3, [3] * 3)
    with pytest.raises(InputError, match="out_data"):
        ood_detection(predictor, np.zeros((5, 2)), np.zeros((0, 2)))
    with pytest.raises(InputError, match="score_out"):
        detection_metrics([0.1], [np.nan])
