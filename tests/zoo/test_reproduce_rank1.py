"""`zoo reproduce rank1` smoke test: a tiny job (one seed, a few steps, two corruption types) writes every table,
figure and a verdict row for each finding of the paper."""
import numpy as np
import pandas as pd
import pytest

from zoo.reproduce.rank1 import Rank1Job, reproduce_rank1
from zoo.reproduce.rank1_setup import QUICK_RECIPE, digits_split
from zoo.reproduce.report import VERDICTS

# Few structures: the K sweep's only K and the first dropout rate are the recipe's rank-1 Normal fit (trained once,
# `FitCache`); the objective and prior-placement ablations are left out (their findings: "not run").
TINY = Rank1Job(seeds=(0,), recipe=QUICK_RECIPE.replace(steps=20, hidden=(8,), eval_samples=2, chunk_size=5),
                types=("gaussian_noise", "contrast"), severities=(3,), eval_samples=(1, 2), diversity_from=0.5,
                methods=("deterministic", "batch_ensemble", "rank1_normal", "mc_dropout"), ablation_seeds=(0,),
                ablation_steps=20, ablation_types=("contrast",), ablation_severities=(3,), components=(4,),
                total_batch=512, dropout_rates=(1e-3, 0.3), ablations=("components", "dropout_init", "positive_priors"),
                mc_dropout_rates=(0.1,))


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("rank1")
    return out, reproduce_rank1(out, TINY, log=None)


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
    assert len(report.findings) == 8 and all(v in VERDICTS for _, v, _ in report.findings)
    verdicts = {claim: v for claim, v, _ in report.findings}
    assert [c for c, v in verdicts.items() if v == "not run"] == [
        "training with the average per-component likelihood generalises better than the log-mixture",
        "priors on both vectors generalise best on corruptions"]
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

    from zoo.reproduce.rank1 import stage

    lines = []
    with stage("s", lines.append) as times:
        jax.jit(lambda v: v * 3.0 + 1.0)(jnp.arange(3.0))  # a new program: compiled here
    first = times.compiles
    assert first >= 1 and times.seconds > 0 and lines == [times.line()] and lines[0].startswith("[rank1] s: ")
    with stage("s", None, into=times):
        pass  # nothing compiled: the counts stay, the seconds add up
    assert times.compiles == first and len(lines) == 1
