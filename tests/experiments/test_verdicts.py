"""zoo.experiments.analysis.verdicts: the 95 % intervals and the one verdict rule, on hand-computed numbers (t quantiles from tables:
t_{0.975, 2} = 4.302653, t_{0.975, 4} = 2.776445, z_{0.975} = 1.959964)."""
import math

import pytest

from zoo.experiments.analysis.verdicts import (Interval, Precondition, at_least, at_most, combine, gate, judge,
                                              paired_interval, region_text, se_interval, t_interval, word)
from base.errors import InputError


def test_t_interval_uses_the_t_quantile_for_n_minus_one_degrees_of_freedom():
    i = t_interval([1.0, 2.0, 3.0])  # mean 2, sd 1, SE 1/sqrt(3)
    assert (i.mean, i.n) == (2.0, 3)
    assert i.lo == pytest.approx(2 - 4.302653 / math.sqrt(3), abs=1e-6)
    assert i.hi == pytest.approx(2 + 4.302653 / math.sqrt(3), abs=1e-6)  # 4.48414: mean +- 4.30 SE at n = 3
    five = t_interval([0.1, 0.2, 0.3, 0.4, 0.5])  # sd 0.158114, SE 0.0707107
    assert (five.lo, five.hi) == (pytest.approx(0.103676, abs=1e-6), pytest.approx(0.496324, abs=1e-6))
    one = t_interval([0.7])
    assert one.mean == 0.7 and one.lo == -math.inf and one.hi == math.inf and one.n == 1


def test_paired_interval_is_the_t_interval_of_the_per_seed_differences():
    i = paired_interval([1.0, 2.0, 4.0], [0.5, 1.0, 2.5])  # differences 0.5, 1, 1.5: SE 0.288675
    assert i.mean == pytest.approx(1.0) and i.lo == pytest.approx(1 - 1.242069, abs=1e-6) and i.kind.startswith("paired")
    by_seed = paired_interval({0: 1.0, 1: 2.0, 2: 4.0, 7: 9.0}, {2: 2.5, 1: 1.0, 0: 0.5})  # only shared seeds
    assert (by_seed.mean, by_seed.lo, by_seed.n) == (pytest.approx(1.0), pytest.approx(i.lo), 3)
    with pytest.raises(InputError, match="b"):
        paired_interval([1.0, 2.0], [1.0])


def test_se_interval_normal_or_t_quantile():
    z = se_interval(0.5, 0.1, 100)
    assert (z.lo, z.hi) == (pytest.approx(0.5 - 0.1959964, abs=1e-6), pytest.approx(0.5 + 0.1959964, abs=1e-6))
    t = se_interval(0.5, 0.1, 5, df=4)
    assert t.hi == pytest.approx(0.5 + 0.2776445, abs=1e-6)
    assert se_interval(0.5, float("nan"), 1).hi == math.inf


def test_judge_consistent_inside_contradicts_outside_inconclusive_across():
    five = t_interval([0.1, 0.2, 0.3, 0.4, 0.5])  # [0.1037, 0.4963]
    assert judge(five, low=0.0) == "consistent"  # the paper: > 0
    assert judge(five, high=0.0) == "contradicts"  # the paper: < 0; our interval excludes it on the other side
    assert judge(five, low=0.2) == "inconclusive"  # straddles the paper's boundary
    assert judge(five, -0.5, 0.5) == "consistent" and judge(five, 0.6, 0.9) == "contradicts"
    assert judge(t_interval([1.0, 2.0, 3.0]), low=0.0) == "inconclusive"  # [-0.48, 4.48]: 3 seeds cannot tell
    assert judge(t_interval([5.0]), low=0.0) == "inconclusive"  # one run: no interval
    assert judge(Interval(2.0, 2.0, 2.0, 1, "exact"), low=1.0) == "consistent"
    with pytest.raises(InputError, match="high"):
        judge(five, 1.0, 0.0)


def test_combine_and_region_text():
    assert combine(["consistent", "consistent"]) == "consistent"
    assert combine(["consistent", "inconclusive"]) == "inconclusive"
    assert combine(["consistent", "contradicts", "inconclusive"]) == "contradicts"
    assert combine(["not run", "consistent"]) == "consistent" and combine(["not run"]) == "not run"
    with pytest.raises(InputError, match="verdicts"):
        combine(["reproduces"])
    assert region_text(low=0.0) == ">= 0" and region_text(-0.01, 0.01) == "in [-0.01, 0.01]"
    assert Interval(0.5, 0.25, 0.75, 5, "t").text(2, scale=100) == "50 [25, 75] (n = 5, t)"


def test_gate_keeps_a_verdict_only_where_every_precondition_holds():
    transition = at_least("dense1 log alpha >= 6.3", 5.27, 6.3, "log alpha 5.27, still rising")
    mixed = at_most("split R-hat <= 1.05", 1.03, 1.05)
    assert (transition.met, mixed.met, mixed.measured) == (False, True, "1.03")
    assert not at_least("x", float("nan"), 0.0).met and not at_most("x", float("nan"), 0.0).met  # NaN: not met
    assert at_least("x", 6.3, 6.3).met  # the bound itself counts
    assert gate("contradicts", [mixed]) == "contradicts" and gate("consistent", [mixed]) == "consistent"
    gated = gate("contradicts", [mixed, transition])
    assert gated == "inconclusive (precondition not met: dense1 log alpha >= 6.3 (log alpha 5.27, still rising))"
    assert gate("consistent", [transition]).startswith("inconclusive (precondition not met")  # vacuous too
    assert gate("not run", []) == "not run"
    assert word(gated) == "inconclusive" and combine([gated, "consistent"]) == "inconclusive"
    assert combine([gated, "contradicts"]) == "contradicts"
    assert transition.text() == "NO: dense1 log alpha >= 6.3 (log alpha 5.27, still rising)"
    assert Precondition("converged", True, "slope 0.001").text() == "yes: converged (slope 0.001)"
    with pytest.raises(InputError, match="preconditions"):
        gate("consistent", [])  # every finding that ran states its regime
    with pytest.raises(InputError, match="verdict"):
        word("reproduces (mostly)")


def test_fits_converged_reads_the_converged_column_of_the_compared_rows():
    import pandas as pd

    from zoo.experiments.analysis.verdicts import fits_converged

    runs = pd.DataFrame({"method": ["a", "a", "b", "ensemble"], "converged": [True, True, False, None]})
    assert fits_converged(runs, "x", "method", ["a"]).met
    both = fits_converged(runs, "Table 2", "method", ["a", "b", "ensemble"])  # None (an ensemble) is not judged
    assert not both.met and both.measured == "Table 2: 2 of 3 fits converged"
    assert fits_converged(runs.drop(columns="converged"), "x").measured == "x: not recorded"
    assert not fits_converged(runs, "x", "method", ["ensemble"]).met  # nothing judged: not met
