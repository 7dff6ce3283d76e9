import math

import pytest

from base.errors import InputError
from zoo.experiments.reproduce.tuning import choose_on_validation, grid


def test_grid_is_the_cartesian_product_last_axis_fastest():
    assert grid(a=(1, 2), b=("x", "y")) == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"},
                                           {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(InputError, match="b"):
        grid(a=(1,), b=())


def test_choose_keeps_the_best_finite_score_and_every_row():
    scores = {1: 0.5, 2: math.nan, 3: 0.2, 4: 0.2}
    choice = choose_on_validation(grid(lr=(1, 2, 3, 4)), lambda s: scores[s["lr"]])
    assert choice.setting == {"lr": 3} and choice.score == 0.2       # ties: the earlier one
    assert len(choice.table) == 4 and math.isnan(choice.table.validation[1])
    best_acc = choose_on_validation(grid(lr=(1, 3)), lambda s: scores[s["lr"]], higher_is_better=True)
    assert best_acc.setting == {"lr": 1}
    with pytest.raises(InputError, match="finite"):
        choose_on_validation(grid(lr=(2,)), lambda s: scores[s["lr"]])
