"""One progress line for a long job (``zoo benchmark``, ``zoo reproduce``, ``zoo run``): what runs now and an
estimate of what is left, e.g. ``[3/12] mean_field on yacht split 4 · about 6 min left``.

On a terminal the line rewrites itself (carriage return, erase to the end of the line), and the job's other lines
(`ProgressLine.log`) print above it; anywhere else (a file, a pipe, CI's log, a caller's own ``log`` function) each
new state of the line is one plain line. The estimate comes from the finished parts' times alone
(`estimate_left`): the wall time per finished part (or per unit of weight, when parts are known to differ in
cost) times what is left, less the time the part now running has already had.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable, Sequence

from base.errors import InputError

__all__ = ["ProgressLine", "estimate_left", "format_left"]

SEPARATOR = " · "


def estimate_left(finished_s: float, done: float, total: float, running_s: float = 0.0,
                  running: float = 1.0) -> float | None:
    """Seconds left of a job of `total` parts (or units of weight) of which `done` finished in `finished_s`
    seconds of wall time, the part now running (of `running` parts' weight) having run `running_s` seconds since:
    with r = finished_s / done the wall time per part, ``max(r * (total - done) - running_s,
    r * (total - done - running))`` (the running part is taken to need r * running in all, and at least to end
    now when it is overdue), never below 0. None when no part has finished yet (nothing to estimate from); 0 when
    every part has."""
    if done <= 0:
        return None
    if done >= total:
        return 0.0
    rate = finished_s / done
    left = total - done
    return max(0.0, rate * left - running_s, rate * (left - running))


def format_left(seconds: float | None) -> str:
    """`seconds` left in words, rounded up: "about 40 s left" (under 2 min, up to 10 s), "about 6 min left",
    "about 1 h 20 min left"; None: "time left: estimated after the first part"."""
    if seconds is None:
        return "time left: estimated after the first part"
    tens = max(10, 10 * math.ceil(seconds / 10))
    if tens < 120:
        return f"about {tens} s left"
    minutes = math.ceil(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    return f"about {minutes // 60} h {minutes % 60} min left"


class ProgressLine:
    """The progress of a job of `total` parts.

    Args:
      total: the number of parts (>= 1).
      weights: the parts' relative costs in the order they run (default: equal); the estimate then counts weight,
        not parts.
      log: where plain lines go (default: print to `stream`). A caller's own function always gets plain lines.
      stream: the terminal (default sys.stdout); the line rewrites itself only when `log` is None and the stream
        is a tty.
      clock: seconds, monotonic (a test passes its own).
    """

    def __init__(self, total: int, *, weights: Sequence[float] | None = None,
                 log: Callable[[str], None] | None = None, stream=None, clock: Callable[[], float] = time.monotonic):
        if isinstance(total, bool) or not isinstance(total, int) or total < 1:
            raise InputError("total", total, "a positive number of parts")
        if weights is not None and (len(weights) != total or any(not w > 0 for w in weights)):
            raise InputError("weights", weights, f"{total} positive weights, one per part")
        self.total, self.weights = total, None if weights is None else [float(w) for w in weights]
        self.stream = sys.stdout if stream is None else stream
        self.rewrites = log is None and bool(getattr(self.stream, "isatty", lambda: False)())
        self._log = log if log is not None else (lambda text: print(text, file=self.stream, flush=True))
        self.clock = clock
        self.start = clock()
        self.done, self.now, self.shown = 0, "", ""
        self._logged_done = -1  # the `done` of the last plain line written
        self._finished_at = self.start  # when the last part finished (the running part's start)

    def _weight(self, first: int, last: int) -> float:
        """The weight of parts first..last-1 (their count without weights)."""
        return float(last - first) if self.weights is None else sum(self.weights[first:last])

    def seconds_left(self) -> float | None:
        """`estimate_left` of the parts finished so far, with the running part's time."""
        return estimate_left(self._finished_at - self.start, self._weight(0, self.done), self._weight(0, self.total),
                             self.clock() - self._finished_at, self._weight(self.done, self.done + 1))

    def text(self) -> str:
        """The line: ``[k/total] now · about N min left`` (k the running part), or ``[total/total] done in ...``."""
        if self.done >= self.total:
            return f"[{self.total}/{self.total}] done in {_duration(self._finished_at - self.start)}"
        return f"[{self.done + 1}/{self.total}] {self.now}{SEPARATOR}{format_left(self.seconds_left())}"

    def update(self, done: int, now: str) -> str:
        """`done` parts have finished, `now` runs (a few words: "mean_field on yacht split 4"); show the line and
        return it. On a terminal every update rewrites the line; elsewhere a plain line is written only for a new
        part (a change of `now` within a part waits for the next part's line)."""
        if isinstance(done, bool) or not isinstance(done, int) or not 0 <= done <= self.total:
            raise InputError("done", done, f"a number of finished parts in [0, {self.total}]")
        if done != self.done:
            self._finished_at = self.clock()
            self.done = done
        self.now = now
        self._show(self.text())
        return self.shown

    def log(self, text: str) -> None:
        """One of the job's own lines, printed above the progress line (which is redrawn under it)."""
        if not self.rewrites:
            self._log(text)
            return
        self.stream.write("\r\x1b[K" + text + "\n" + self._fitted(self.shown))
        self.stream.flush()

    def close(self, done: int | None = None) -> None:
        """Mark `done` parts finished (default: all); on a terminal show the last line ("[n/n] done in 6 min 20 s")
        and end it with a newline (plain lines add none: the job says itself that it is done)."""
        if not self.rewrites:
            return
        self.update(self.total if done is None else done, self.now)
        self.stream.write("\n")
        self.stream.flush()

    def _show(self, line: str) -> None:
        if self.rewrites:
            self.stream.write("\r\x1b[K" + self._fitted(line))
            self.stream.flush()
        elif self.done != self._logged_done:  # plain lines: one per part (what runs within it shows on a terminal)
            self._log(line)
            self._logged_done = self.done
        self.shown = line

    def _fitted(self, line: str) -> str:
        """`line` cut to the terminal's width (a wrapped line could not be rewritten in place)."""
        width = shutil.get_terminal_size((100, 24)).columns - 1
        return line if len(line) <= width else line[:max(1, width - 3)] + "..."


def _duration(seconds: float) -> str:
    """"45 s", "6 min 20 s", "1 h 20 min"."""
    whole = round(seconds)
    if whole < 120:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60} min"
