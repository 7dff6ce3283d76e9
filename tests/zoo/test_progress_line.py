"""`zoo.progress_line` (issue 47, item 5): the estimate of what is left, worked by hand, and the line on a terminal
(rewritten in place) and elsewhere (plain lines)."""

from __future__ import annotations

import io

import pytest

from base.errors import InputError
from zoo.progress_line import ProgressLine, estimate_left, format_left


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_estimate_by_hand():
    # 2 of 12 parts in 120 s: 60 s a part; the running one has had 30 s, so 10 x 60 - 30 = 570 s left
    assert estimate_left(120, 2, 12, 30) == 570
    # the running part is overdue (100 s): it is taken to end now, 9 parts x 60 s remain
    assert estimate_left(120, 2, 12, 100) == 540
    # weights 1, 1, 2, 4: 2 units in 20 s (10 s a unit), 6 units left, the running part (weight 2) had 5 s
    assert estimate_left(20, 2, 8, 5, running=2) == 55
    assert estimate_left(0, 0, 5) is None and estimate_left(50, 5, 5) == 0
    assert [format_left(s) for s in (None, 3, 55, 119, 570, 4800)] == [
        "time left: estimated after the first part", "about 10 s left", "about 60 s left", "about 2 min left",
        "about 10 min left", "about 1 h 20 min left"]


def test_plain_lines_where_there_is_no_terminal():
    clock, lines = Clock(), []
    line = ProgressLine(3, weights=[1, 1, 2], log=lines.append, clock=clock)
    line.update(0, "map on yacht split 0")
    line.update(0, "map on yacht split 0")  # the same state: no second line
    clock.t += 40
    line.update(1, "mean_field on yacht split 0")
    clock.t += 10
    line.log("  yacht split 0 mean_field test LL -1.2")
    line.update(1, "mean_field on yacht split 0")  # the estimate moved, the part did not: no new line
    clock.t += 30
    line.update(2, "nuts on yacht split 0")  # 80 s for 2 units: 40 s a unit, 2 units left
    line.close()
    assert lines == ["[1/3] map on yacht split 0 · time left: estimated after the first part",
                     "[2/3] mean_field on yacht split 0 · about 2 min left",  # 40 s a unit x 3 units left
                     "  yacht split 0 mean_field test LL -1.2",
                     "[3/3] nuts on yacht split 0 · about 80 s left"]  # no line at the end: the job says it
    assert not line.rewrites
    with pytest.raises(InputError, match="done: expected a number of finished parts in \\[0, 3\\], got 4"):
        line.update(4, "x")
    with pytest.raises(InputError, match="weights: expected 2 positive weights"):
        ProgressLine(2, weights=[1, 0])


def test_one_line_rewritten_on_a_terminal():
    clock, term = Clock(), Terminal()
    line = ProgressLine(2, stream=term, clock=clock)
    assert line.rewrites
    line.update(0, "two moons")
    clock.t += 200
    line.update(1, "digits rank1_normal")
    line.log("[parallel] two moons: 200 s in a worker")
    assert "\n" not in term.getvalue().replace("in a worker\n", "")  # only the job's own line ends a line
    writes = term.getvalue().split("\r\x1b[K")  # each write erases the line first
    assert writes[1:] == ["[1/2] two moons · time left: estimated after the first part",
                          "[2/2] digits rank1_normal · about 4 min left",  # 200 s for the 1 part finished
                          "[parallel] two moons: 200 s in a worker\n[2/2] digits rank1_normal · about 4 min left"]
    line.close()
    assert term.getvalue().endswith("\r\x1b[K[2/2] done in 3 min 20 s\n")
    assert ProgressLine(2, stream=Terminal(), log=print).rewrites is False  # a caller's log gets plain lines

