"""`zoo run`'s digits table says why a row falls short (issue 47, item 6): a row more than 2 accuracy points below
the point estimate, or with more than twice its NLL, gets a note with its reason and where to read more; the others
none (no training here)."""

from __future__ import annotations

import pandas as pd
import pytest

from zoo.experiments.run import GUIDE_NOTES, ROW_NOTES, row_notes
from zoo.experiments.run_report import _DIGITS_CLEAN, markdown_table


def test_rows_more_than_two_points_below_the_point_estimate_say_why():
    rows = [("digits", "point_estimate", 0.9844, 0.0656), ("digits", "mean_field", 0.9645, 0.13),  # works: 1.99
            ("digits", "zero_mean", 0.5813, 1.1963), ("digits", "rank1_cauchy", 0.9866, 0.1630),
            ("digits", "my_guide", 0.90, 0.10), ("digits", "low_rank", 0.9755, 0.1400),  # NLL 2.13 x
            ("digits", "rank1_nuts", 0.9866, 0.0505), ("two_moons", "nuts", 0.50, 0.9)]  # another data set
    table = pd.DataFrame(rows, columns=["data", "posterior", "accuracy", "nll"]).set_index(["data", "posterior"])
    notes = row_notes(table)
    assert notes[("digits", "zero_mean")] == ("40.3 points below point_estimate, NLL 18.2 x point_estimate's: "
                                              + ROW_NOTES["zero_mean"])
    assert notes[("digits", "rank1_cauchy")] == "NLL 2.5 x point_estimate's: " + ROW_NOTES["rank1_cauchy"]
    assert notes[("digits", "my_guide")] == "8.4 points below point_estimate: not diagnosed; see docs/zoo-run.md"
    assert notes[("digits", "low_rank")] == "NLL 2.1 x point_estimate's: " + GUIDE_NOTES["low_rank"]
    assert [k[1] for k, v in notes.items() if v] == ["zero_mean", "rank1_cauchy", "my_guide", "low_rank"]
    assert "docs/variance-networks.md" in ROW_NOTES["zero_mean"] and "docs/rank1.md" in ROW_NOTES["rank1_cauchy"]
    assert not row_notes(table.drop(index=("digits", "point_estimate"))).any()  # nothing to compare with
    networks = table.assign(network=["MLP 16-16" if label == "low_rank" else "MLP 64-64" for _, label in table.index])
    assert row_notes(networks)[("digits", "low_rank")] == ("NLL 2.1 x point_estimate's: another network (MLP 16-16) "
                                                           "than point_estimate's (MLP 64-64)")
    shown = table.assign(note=notes, network="MLP 64-64", deterministic_acc=0.5, ece=0.01, brier=0.02)
    text = markdown_table(shown.reset_index(), _DIGITS_CLEAN)
    assert text.splitlines()[0].endswith("| note |")
    assert "| NLL 2.5 x point_estimate's: heavy-tailed Cauchy" in text


def test_a_shortened_run_takes_the_settings_chosen_for_its_length():
    """zero_mean: a weight draw per example at Adam 1e-2 below --full's 3,000 steps (validation 0.874 vs 0.600 at
    600 steps), the variance networks' settings at 3,000 (0.926 vs 0.881); benchmarks/tune_zoo_run_rows.py."""
    import jax.numpy as jnp

    from zoo.experiments.run import DIGITS_GUIDES, SIZES, VARIANCE_FIT

    settings = {row.label: row.settings for row in DIGITS_GUIDES}["zero_mean"]
    chosen = {size: settings.for_steps(SIZES[size].steps_of(settings)) for size in ("quick", "main", "full")}
    assert chosen["full"] is settings and settings.estimator == VARIANCE_FIT.estimator == "standard"
    assert chosen["main"] is chosen["quick"] is settings.shortened and chosen["main"].estimator == "per_example"
    assert SIZES["main"].steps_of(settings) == 600
    params, grads = {"w": jnp.ones(())}, {"w": jnp.ones(())}
    for fit, rate in ((chosen["main"], 1e-2), (chosen["full"], 3e-3)):  # Adam's first step: -rate * g / |g|
        opt = fit.optimizer(600).transformation()  # the record's optax transformation
        update, _ = opt.update(grads, opt.init(params), params)
        assert float(update["w"]) == pytest.approx(-rate, rel=1e-4)
