"""The Liberty-or-Depth runs that train: one tiny end-to-end run of the depth sweep."""

import numpy as np

from models.networks.budget_mlp import mlp_param_count, widest_mlp_under_budget
from zoo.experiments.reproduce.liberty_or_depth import QUICK, run_one


def test_one_tiny_run_goes_through_svi_nuts_and_the_gaussian_fit():
    from dataclasses import replace

    tiny = replace(QUICK, n_data=100, weight_budget=40, svi_epochs=2, batch_size=32, num_warmup=20,
                   draws_per_chain=40, max_tree_depth=3)
    assert tiny.num_chains == 2  # QUICK's parallel chains (tests/conftest.py sets 2 host devices)
    row = run_one(tiny, depth=2, activation="relu", seed=0)
    assert row["width"] == widest_mlp_under_budget(2, budget=40) == 3
    assert row["num_weights"] == mlp_param_count(2, 3) == 29  # every NUTS site is in the Gaussian fit
    assert row["num_draws"] == 2 * 40  # both chains pooled
    assert np.isfinite(row["kl_diag_full"]) and row["kl_diag_full"] > 0
    assert np.isfinite(row["rhat_max"]) and row["rhat_max"] >= 1.0
    assert 0.0 < row["svi_mean_sd"] < row["nuts_mean_sd"]  # init_scale 1e-3 barely grows in 2 epochs
    assert 0.0 <= row["nuts_accuracy"] <= 1.0


def test_cli_reproduce_runs_the_zoo_job_with_the_quick_setting_and_overrides(monkeypatch, tmp_path):
    import zoo.experiments.reproduce.liberty_or_depth as lod
    from zoo.cli import main

    calls = []
    monkeypatch.setattr(lod, "reproduce_liberty_or_depth", lambda *args, **kwargs: calls.append((args, kwargs)))
    assert main(["reproduce", "liberty-or-depth", "--out", str(tmp_path), "--seeds", "0,1"]) == 0
    assert calls == [((str(tmp_path), "quick"), {"seeds": (0, 1)})]


def test_cli_reproduce_refuses_an_option_the_paper_does_not_take(capsys):
    from zoo.cli import main

    assert main(["reproduce", "liberty-or-depth", "--data-dir", "/nowhere", "--out", "/tmp/unused"]) == 2
    err = capsys.readouterr().err
    assert "--data-dir" in err and "/nowhere" in err and "--seeds, --depths, --resume" in err


def test_floor_table_and_findings_on_constructed_runs(tmp_path):
    """The estimator's floor at the paper's D (widest ReLU MLP under 1,000 weights, biases counted in the budget or
    not; D every parameter) and S, as a caveat; the depth finding uses only seeds whose chains mixed (R-hat <= 1.05),
    names the unmixed depths, and is inconclusive (precondition not met) unless >= 2 depths mixed and the shallow
    depth's KL is above its floor."""
    import pandas as pd
    import pytest

    from zoo.experiments.analysis.depth_sweep import kl_floor, mixed_summary
    from zoo.experiments.reproduce.liberty_or_depth import DEPTH_CLAIM, depth_findings, floor_table
    from zoo.experiments.reproduce.report import Report

    floors = floor_table((1, 4, 7), 1000)
    assert list(floors["D"]) == [997, 898, 998] and list(floors["width"]) == [199, 16, 12]
    # weights only under 1,000: depth 1 width 249 (996 weights) has 1,247 parameters, more than S = 1,000 draws
    assert list(floors["D_weights_only"]) == [2 * 249 + 249 * 2 + 249 + 2, 1005, 998]
    assert floors["floor_weights_only_S1000"].iloc[0] == float("inf")  # a singular empirical covariance
    assert floors["floor_S1000"].iloc[0] == pytest.approx(kl_floor(997, 1000)) and floors["floor_S1000"].iloc[0] > 2000
    assert floors["floor_S10000"].iloc[1] == pytest.approx(kl_floor(898, 10_000))
    rows = []
    for depth, kl, rhat in ((1, 9.0, 1.01), (2, 6.0, 1.01), (3, 4.0, 1.01), (4, 2.0, 1.5)):
        for seed in range(3):
            rows.append({"activation": "relu", "depth": depth, "seed": seed, "num_weights": 50,
                         "kl_diag_full": kl + 0.1 * seed, "kl_null_shift": 1.0, "rhat_max": rhat})
    runs = pd.DataFrame(rows)

    def finding(table):
        report = Report(tmp_path, "t", "quick", log=None)
        depth_findings(report, floors, table, mixed_summary(table), QUICK, simulate_dim=20, repeats=3)
        assert len(report.findings) == 1 and "D = 898 -> 695 nats" in report.notes[0]
        return report.findings[0]

    depth = finding(runs)
    assert depth.claim == DEPTH_CLAIM and depth.verdict == "consistent"  # depth 3 - depth 1 = -5 in every seed
    assert "relu depth 4 (0/3 mixed)" in depth.evidence and "excess(depth 3) - excess(depth 1)" in depth.ours
    assert "paired" in depth.ours and "KL falls (section 4)" in depth.paper
    assert depth.precondition.startswith("yes: chains mixed") and "NO" not in depth.precondition
    noise = runs["seed"].map({0: 0.5, 1: -0.5, 2: 0.2})
    flat = runs.assign(kl_diag_full=runs["kl_diag_full"].where(runs["depth"] != 3, 9.0 + 0.1 * runs["seed"] + noise))
    assert finding(flat).verdict == "inconclusive"  # depth 3 - depth 1 = 0.5, -0.5, 0.2: the interval spans 0
    rising = runs.assign(kl_diag_full=runs["kl_diag_full"].where(runs["depth"] != 3, 12.0 + 0.1 * runs["seed"]))
    assert finding(rising).verdict == "contradicts"  # both preconditions hold: +3 nats in every seed
    unmixed = runs.assign(rhat_max=runs["rhat_max"].where(runs["depth"] == 1, 1.5))  # only depth 1 mixes
    assert finding(unmixed).verdict.startswith("inconclusive (precondition not met: chains mixed")
    at_floor = runs.assign(kl_null_shift=runs["kl_diag_full"] - 0.01 * (runs["seed"] - 1))  # excess ~0 at depth 1
    assert "the shallow depth's KL above its shift floor" in finding(at_floor).verdict


def test_a_sweep_cut_short_resumes_at_the_first_run_it_had_not_finished(monkeypatch, tmp_path):
    """`run_depth_sweep(runs_dir=...)` saves each run's row as it finishes; after a cut (here an error in the 4th
    run) the same call reads the 3 finished rows back and runs only the rest; another config runs afresh."""
    from dataclasses import replace

    import pytest

    import zoo.experiments.reproduce.liberty_or_depth as lod

    calls = []

    def fake_run(config, depth, activation, seed, progress=False):
        calls.append((depth, seed))
        if len(calls) == 4 and not getattr(fake_run, "resumed", False):
            raise KeyboardInterrupt("the GPU's time ran out")
        return {"activation": activation, "depth": depth, "seed": seed, "width": 3, "num_weights": 29,
                "kl_diag_full": 1.0 + depth + 0.1 * seed, "kl_null": 0.5, "kl_null_shift": 0.6,
                "w2_extra_error": 0.1, "ess_bulk_min": 100.0, "rhat_max": 1.01, "nuts_accuracy": 1.0,
                "divergences": 0, "svi_s": 1.0, "nuts_s": 2.0}

    monkeypatch.setattr(lod, "run_one", fake_run)
    config = replace(lod.QUICK, depths=(1, 2), seeds=(0, 1, 2))
    with pytest.raises(KeyboardInterrupt):
        lod.run_depth_sweep(config, log=None, runs_dir=tmp_path / "runs")
    assert calls == [(1, 0), (1, 1), (1, 2), (2, 0)] and len(list((tmp_path / "runs").glob("*.json"))) == 3
    fake_run.resumed = True
    table = lod.run_depth_sweep(config, log=None, runs_dir=tmp_path / "runs")
    assert calls[4:] == [(2, 0), (2, 1), (2, 2)]  # only the runs the cut left undone
    assert list(zip(table["depth"], table["seed"])) == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    assert table["kl_diag_full"].tolist() == pytest.approx([2.0, 2.1, 2.2, 3.0, 3.1, 3.2])
    lod.run_depth_sweep(replace(config, num_warmup=7), log=None, runs_dir=tmp_path / "runs")
    assert len(calls) == 7 + 6  # another config: nothing read back
