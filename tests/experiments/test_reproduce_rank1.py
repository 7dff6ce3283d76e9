"""`zoo reproduce rank1` smoke test: a tiny job (one seed, a few steps, two corruption types, its parts run as
`zoo.experiments.parallel` tasks here, one after the other) writes every table, figure and a verdict row for each finding of the
paper; Table 2 scored one method at a time (as the tasks do) equals scoring them together; K = 1 BatchEnsemble is the
plain network with W o (s r^T)."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from zoo.experiments.reproduce.rank1 import Rank1Job, reproduce_rank1
from zoo.experiments.reproduce.rank1_setup import QUICK_RECIPE, digits_split, score_rows, score_table, summary_of_rows
from zoo.experiments.reproduce.rank1_tasks import rank1_tasks
from zoo.experiments.reproduce.rank1_wrn import WRN_CLAIM, WRN_RECIPE, DigitsWrn
from zoo.experiments.reproduce.rank1_verdicts import CAUCHY_CLAIM
from zoo.experiments.analysis.verdicts import word
from zoo.experiments.reproduce.report import VERDICTS

# Few structures: the K sweep's only K and the first dropout rate are the recipe's rank-1 Normal fit (trained once,
# `FitCache`); the objective and prior-placement ablations are left out (their findings: "not run").
TINY = Rank1Job(seeds=(0,), recipe=QUICK_RECIPE.replace(steps=20, hidden=(8,), eval_samples=2, chunk_size=5),
                types=("gaussian_noise", "contrast"), severities=(3,), eval_samples=(1, 2), diversity_from=0.5,
                methods=("deterministic", "batch_ensemble", "rank1_normal", "mc_dropout"), ablation_seeds=(0,),
                ablation_steps=20, ablation_types=("contrast",), ablation_severities=(3,), components=(4,),
                total_batch=512, dropout_rates=(1e-3, 0.3), ablations=("components", "dropout_init", "positive_priors"),
                mc_dropout_rates=(0.1,),
                wrn=DigitsWrn(recipe=WRN_RECIPE.replace(steps=4, batch_size=8, chunk_size=2),
                              methods=("deterministic",)))
# The WRN part with its cheapest structure only (the rank-1 WRN's entry and guide are run by
# tests/zoo/test_reproduce_rank1_cifar.py); its finding needs rank-1 Normal too: "not run".


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("rank1")
    return out, reproduce_rank1(out, TINY, log=None, workers=1)


def test_job_writes_tables_figures_and_a_verdict_per_finding(tiny_report):
    out, report = tiny_report
    for name in ("table2", "table8", "fig6_diversity", "fig3_components", "fig5_dropout_init", "fig9_positive_priors",
                 "mc_dropout_rate"):
        assert (out / f"{name}.csv").exists(), name
    for name in ("fig6_diversity", "fig3_components", "fig5_dropout_init", "fig9_positive_priors"):
        assert (out / f"{name}.png").exists(), name
    diversity = pd.read_csv(out / "fig6_diversity.csv")
    assert set(diversity["method"]) == {"rank1_normal", "batch_ensemble"} and set(diversity["step"]) == {15, 20}
    assert "mCE" not in pd.read_csv(out / "table8.csv").columns  # no reference scored there
    table2 = pd.read_csv(out / "table2.csv")
    assert list(table2["method"]) == list(TINY.methods)
    assert {"NLL", "Acc", "ECE", "cNLL", "cA", "cECE", "mCE", "#params"} <= set(table2.columns)
    runs = pd.read_csv(out / "table2_runs.csv").set_index("method")
    assert runs.loc["deterministic", "mCE"] == pytest.approx(100.0)
    assert runs.loc["rank1_normal", "#params"] > runs.loc["batch_ensemble", "#params"] > runs.loc["deterministic", "#params"]
    assert len(report.findings) == 10 and all(word(f.verdict) in VERDICTS for f in report.findings)
    verdicts = {f.claim: word(f.verdict) for f in report.findings}
    assert [c for c, v in verdicts.items() if v == "not run"] == [
        CAUCHY_CLAIM, "training with the average per-component likelihood generalises better than the log-mixture",
        "priors on both vectors generalise best on corruptions", WRN_CLAIM]
    # one seed: every paired interval is infinite, so no verdict can be more than inconclusive
    assert set(verdicts.values()) == {"inconclusive", "not run"}
    wrn = pd.read_csv(out / "table2_wrn_runs.csv")
    assert list(wrn["method"]) == ["deterministic"] and wrn["mCE"].iloc[0] == pytest.approx(100.0)
    assert wrn["#params"].iloc[0] > runs.loc["deterministic", "#params"]  # WRN-10-1 is bigger than the 8-unit MLP
    assert "mc_dropout" in set(table2["method"]) and runs.loc["mc_dropout", "#params"] == runs.loc["deterministic", "#params"]
    fig3 = pd.read_csv(out / "fig3_components.csv")
    fig5 = pd.read_csv(out / "fig5_dropout_init.csv").set_index("dropout_rate")
    fig9 = pd.read_csv(out / "fig9_positive_priors.csv")
    assert list(fig9["factors"]) == ["real (Normal)", "positive (log-normal)"]
    # the recipe's own arm of each ablation is one fit (FitCache): the same scores in every table
    assert fig5.loc[1e-3, "NLL"] == fig3["NLL"].iloc[0] == fig9["NLL"].iloc[0]  # mean +- SE strings
    assert fig5.loc[0.3, "NLL"] != fig3["NLL"].iloc[0]


def test_digits_split_holds_out_validation_from_training():
    from zoo.data import digits

    train, test = digits()
    split = digits_split(val_fraction=0.2, seed=0)
    assert len(split.train) + len(split.val_raw) == len(train) and len(split.val_raw) == round(0.2 * len(train))
    np.testing.assert_array_equal(split.test_raw.y, test.y)  # the library's own test set, untouched
    assert split.val_raw.x.min() >= 0 and split.val_raw.x.max() <= 1  # raw pixels for the corruption suite
    assert abs(float(split.train.x.mean())) < 1e-4  # standardised by the training part's own pixels


def test_stage_times_the_block_counts_its_compiles_and_accumulates():
    import jax
    import jax.numpy as jnp

    from zoo.experiments.reproduce.rank1 import stage

    lines = []
    with stage("s", lines.append) as times:
        jax.jit(lambda v: v * 3.0 + 1.0)(jnp.arange(3.0))  # a new program: compiled here
    first = times.compiles
    assert first >= 1 and times.seconds > 0 and lines == [times.line()] and lines[0].startswith("[rank1] s: ")
    with stage("s", None, into=times):
        pass  # nothing compiled: the counts stay, the seconds add up
    assert times.compiles == first and len(lines) == 1


def test_the_tasks_are_the_parts_longest_first():
    names = [t.name for t in rank1_tasks(TINY)]
    assert names == ["mlp table 2", "ablations components", "ablations dropout_init, positive_priors",
                     "wrn deterministic"]
    job = dataclasses.replace(TINY, ablations=("objectives",), wrn=DigitsWrn(methods=("deterministic", "rank1_normal")))
    assert [t.name for t in rank1_tasks(job)] == ["mlp table 2", "wrn rank1_normal", "ablations objectives",
                                                 "wrn deterministic"]


class _Constant:
    """A predictor with fixed class probabilities: ``predict(x, num_samples, seed)`` -> (S, N, C)."""

    def __init__(self, probs):
        self.probs = np.asarray(probs, np.float32)

    def predict(self, x, num_samples=1, seed=0):
        return np.broadcast_to(self.probs, (num_samples, len(x), len(self.probs))).copy()


def test_table2_scored_one_method_at_a_time_equals_scoring_them_together():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 40)
    clean = (rng.normal(size=(40, 2)).astype(np.float32), y)
    sets = [("noise", 1, clean[0] + 1, y), ("noise", 2, clean[0] + 2, y)]
    predictors = {"deterministic": _Constant([0.5, 0.3, 0.2]), "rank1_normal": _Constant([0.2, 0.3, 0.5])}
    draws = {m: 1 for m in predictors}
    together = score_table(predictors, sets, clean, draws=draws, num_params={"deterministic": 3, "rank1_normal": 5})
    rows = pd.concat([score_rows({m: p}, sets, clean, draws=draws) for m, p in reversed(predictors.items())])
    apart = summary_of_rows(rows, list(predictors), num_params={"deterministic": 3, "rank1_normal": 5})
    pd.testing.assert_frame_equal(apart, together)
    # constant predictors: the same scores clean and corrupted; class 0 is right for the deterministic one
    det = together.set_index("method").loc["deterministic"]
    assert det["Acc"] == pytest.approx(100 * np.mean(y == 0)) and det["NLL"] == pytest.approx(
        -np.mean(np.log(np.array([0.5, 0.3, 0.2])[y])), rel=1e-5)
    assert together.set_index("method").loc["rank1_normal", "mCE"] == pytest.approx(
        100 * np.mean(y != 2) / np.mean(y != 0))


def test_k1_batch_ensemble_is_the_deterministic_network_with_w_times_s_r_transposed():
    import inference
    import zoo

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(6, 5)).astype(np.float32), rng.integers(0, 3, 6).astype(np.int32)
    data, kw = (x, y, x, y), {"data_kwargs": {"num_classes": 3}, "hidden": (4,)}
    r1 = zoo.get("rank1_mlp", data=data, num_components=1, **kw)
    plain = zoo.get("mlp", data=data, **kw)
    be = inference.fit(r1.model, inference.make_guide("rank1_mixture", r1.model, family="delta"), (x, y), steps=1,
                       progress=False)
    pe = inference.fit(plain.model, inference.make_guide("point_estimate", plain.model), (x, y), steps=1,
                       progress=False)
    rank1_params, plain_params = {}, {}
    for layer, (m, n) in enumerate(((5, 4), (4, 3))):
        w, s, r, b = (rng.normal(size=shape).astype(np.float32) for shape in ((m, n), (1, m), (1, n), (1, n)))
        for name, value in (("w", w), ("alpha", s), ("gamma", r), ("b", b)):
            rank1_params[f"rank1_mlp/rank1_dense_{layer}/{name}_auto_loc"] = value
        plain_params[f"mlp/~/linear_{layer}/w_auto_loc"] = w * np.outer(s[0], r[0])  # W o (s r^T)
        plain_params[f"mlp/~/linear_{layer}/b_auto_loc"] = b[0]
    assert set(rank1_params) == set(be.params) and set(plain_params) == set(pe.params)
    be = dataclasses.replace(be, params={k: np.asarray(v) for k, v in rank1_params.items()})
    pe = dataclasses.replace(pe, params={k: np.asarray(v) for k, v in plain_params.items()})
    np.testing.assert_allclose(np.asarray(be.predict(x, num_samples=1)), np.asarray(pe.predict(x, num_samples=1)),
                               rtol=1e-5, atol=1e-6)


def test_unregularised_batch_ensemble_has_a_flat_factor_prior_and_keeps_the_weight_prior():
    """Wen et al.'s BatchEnsemble: no prior on the factors r, s (log density 0 everywhere), the library's Normal(0, 1)
    on W; the library's batch_ensemble keeps Normal(1, 0.1) on the factors."""
    from zoo.experiments.reproduce.rank1_setup import entry_for

    split = digits_split(seed=0)
    recipe = QUICK_RECIPE.replace(hidden=(4,))
    plain = entry_for("batch_ensemble_unregularised", split, recipe).model.site_priors(split.train.feature_shape)
    lib = entry_for("batch_ensemble", split, recipe).model.site_priors(split.train.feature_shape)
    alpha, w = "rank1_mlp/rank1_dense_0/alpha", "rank1_mlp/rank1_dense_0/w"
    far = np.full(plain[alpha].event_shape, 40.0, np.float32)  # 390 sds from the library's prior mean 1
    assert float(plain[alpha].log_prob(far)) == 0.0 and float(lib[alpha].log_prob(far)) < -1e5
    x = np.full(plain[w].event_shape, 0.5, np.float32)
    assert float(plain[w].log_prob(x)) == pytest.approx(float(lib[w].log_prob(x)))
    assert float(plain[w].log_prob(x)) == pytest.approx(x.size * (-0.125 - 0.5 * np.log(2 * np.pi)), rel=1e-5)


def test_cauchy_verdict_from_paired_intervals_over_seeds(tmp_path):
    from zoo.experiments.reproduce.rank1_verdicts import cauchy_finding
    from zoo.experiments.reproduce.report import Report

    rows = []
    for seed in range(5):
        for method, nll in (("deterministic", 0.20), ("batch_ensemble", 0.19), ("rank1_normal", 0.17),
                            ("rank1_cauchy", 0.25)):  # the Cauchy row worst in every seed
            rows.append({"method": method, "seed": seed, "NLL": nll + 0.001 * seed * (method == "rank1_cauchy"),
                         "cNLL": 2 * nll + 0.002 * seed})
    runs = pd.DataFrame(rows).assign(converged=True)
    tuned = "factor prior scale 0.1 of {0.05, 0.1, 1} by validation NLL"

    def verdict(table, tuned=tuned):
        report = Report(tmp_path, "t", "quick", log=None)
        cauchy_finding(report, table, tuned)
        return report.findings[0]

    worst = verdict(runs)
    assert worst.verdict == "contradicts" and "0.120 (Table 2" in worst.paper and "0.74 (Table 2" in worst.paper
    better = runs.assign(NLL=np.where(runs.method == "rank1_cauchy", runs.NLL - 0.2, runs.NLL),
                         cNLL=np.where(runs.method == "rank1_cauchy", runs.cNLL - 0.5, runs.cNLL))
    assert verdict(better).verdict == "consistent"
    # the preconditions: the Cauchy arm tuned on validation like the Normal arm, and every fit converged
    assert verdict(runs, None).verdict == ("inconclusive (precondition not met: the Cauchy arm's recipe chosen on the "
                                           "validation split, as the Normal arm's was (not tuned: the Normal arm's "
                                           "recipe with the Cauchy sigma init))")
    unconverged = verdict(runs.assign(converged=runs.seed != 3))
    assert unconverged.verdict.startswith("inconclusive (precondition not met: the fits compared converged")
    assert "Table 2 rows: 16 of 20 fits converged" in unconverged.verdict
    assert "not recorded" in verdict(runs.drop(columns="converged")).verdict
