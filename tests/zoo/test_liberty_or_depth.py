"""The Liberty-or-Depth runs that train: one tiny end-to-end run of the depth sweep."""

import numpy as np

from models.networks.budget_mlp import mlp_param_count, widest_mlp_under_budget
from zoo.reproduce.liberty_or_depth import QUICK, run_one


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
    import zoo.reproduce.liberty_or_depth as lod
    from zoo.cli import main

    calls = []
    monkeypatch.setattr(lod, "reproduce_liberty_or_depth", lambda *args, **kwargs: calls.append((args, kwargs)))
    assert main(["reproduce", "liberty-or-depth", "--out", str(tmp_path), "--seeds", "0,1"]) == 0
    assert calls == [((str(tmp_path), "quick"), {"seeds": (0, 1)})]


def test_cli_reproduce_refuses_an_option_the_paper_does_not_take(capsys):
    from zoo.cli import main

    assert main(["reproduce", "liberty-or-depth", "--data-dir", "/nowhere", "--out", "/tmp/unused"]) == 2
    err = capsys.readouterr().err
    assert "--data-dir" in err and "/nowhere" in err and "--seeds, --depths" in err
