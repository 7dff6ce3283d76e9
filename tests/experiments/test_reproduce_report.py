import pandas as pd
import pytest

from zoo.experiments.analysis.seed_summary import format_mean_se, mean_se
from base.errors import InputError
from zoo.experiments.analysis.verdicts import at_least
from zoo.experiments.reproduce.report import Report


def test_mean_se_over_seeds_uses_ddof_one():
    runs = pd.DataFrame({"k": [1, 1, 1, 2], "acc": [0.1, 0.2, 0.3, 0.5]})
    out = mean_se(runs, "k", ["acc"])
    row = out[out.k == 1].iloc[0]
    assert row.n == 3 and row.acc_mean == pytest.approx(0.2) and row.acc_se == pytest.approx(0.1 / 3 ** 0.5)
    assert out[out.k == 2].acc_se.isna().all()  # one run: no spread
    assert format_mean_se(0.2, 0.0577) == "0.200 +- 0.058" and format_mean_se(0.5, float("nan")) == "0.500"
    with pytest.raises(InputError, match="nll"):
        mean_se(runs, "k", ["nll"])


def test_report_writes_tables_findings_and_refuses_an_unknown_verdict(tmp_path):
    report = Report(tmp_path / "r", "A paper", setting="quick", log=None)
    report.table("t", pd.DataFrame({"k": [1, 2], "nll": [0.123456, 0.2]}), "Table 2")
    moved = at_least("sigma moved from its init", 2.0, 1.1, "max ratio 2")
    report.finding("rank 2 loses nothing", "consistent", "rule: in [-0.02, 0.02]", paper="+0.007 (Table 2)",
                   ours="0.001 [-0.004, 0.006] (n = 5, paired t over seeds)", preconditions=[moved])
    report.finding("rank 1 loses", "contradicts", "rule: >= 0.577", paper="+0.577 (Table 2)", ours="0.01",
                   preconditions=[moved, at_least("converged", 0.0, 1.0, "loss still falling")])
    with pytest.raises(InputError, match="preconditions"):  # a finding that ran must state its regime
        report.finding("x", "consistent", "")
    report.note("digits stand in for MNIST")
    for old in ("maybe", "reproduces", "partly", "does not reproduce"):  # the old words are refused
        with pytest.raises(InputError, match="verdict"):
            report.finding("x", old, "")
    text = report.write().read_text()
    assert ("| rank 2 loses nothing | +0.007 (Table 2) | 0.001 [-0.004, 0.006] (n = 5, paired t over seeds) | "
            "yes: sigma moved from its init (max ratio 2) | consistent | rule: in [-0.02, 0.02] |") in text
    assert "| 1 | 0.1235 |" in text
    # the gate: a contradiction on a run that never reached the claim's regime is not one
    assert report.findings[1].verdict == "inconclusive (precondition not met: converged (loss still falling))"
    assert "| finding | paper | ours (95 % interval) | precondition met? | verdict | evidence |" in text
    assert report.findings[0].verdict == "consistent" and report.findings[0].paper == "+0.007 (Table 2)"
    assert "digits stand in for MNIST" in text and "`t.csv`" in text
    assert pd.read_csv(tmp_path / "r" / "t.csv").nll[0] == 0.123456


def test_sem_is_sd_over_root_n_and_nan_for_one_value():
    from zoo.experiments.analysis.seed_summary import sem

    assert sem([0.1, 0.2, 0.3]) == pytest.approx(0.1 / 3 ** 0.5) and sem([[1.0, 3.0]]) == pytest.approx(1.0)
    assert sem([0.5]) != sem([0.5])  # NaN


def test_small_numbers_keep_their_significant_digits_in_the_report():
    from zoo.experiments.reproduce.report import shown_numbers

    table = pd.DataFrame({"kl_slope": [5e-5, 5e-6, 0.0], "accuracy": [0.97375, 0.5, 1.0], "k": [1, 2, 3]})
    shown = shown_numbers(table, 4)
    assert shown["kl_slope"].tolist() == [5e-5, 5e-6, 0.0]  # not 0.0001 / 0 as 4 decimals would give
    assert shown["accuracy"].tolist() == [round(0.97375, 4), 0.5, 1.0]
    assert shown["k"].tolist() == [1, 2, 3]
