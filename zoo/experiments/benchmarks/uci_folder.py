"""The run folder of `zoo benchmark uci` (``--out``): whose it is, and what an earlier run in it finished.

Ownership (the rule of ``zoo run`` and ``inference.fit``: the library never writes into a folder it did not
create): ``--out`` may be absent, an empty folder, or a folder this benchmark wrote, recognised by its
``run.json`` (``{"writer": "bnn-zoo", "kind": "zoo benchmark uci", ...}``) and by holding nothing but the
benchmark's own files (`OUTPUTS`). A file, a folder of the user's files, a saved posterior or a fit state (their
``MANIFEST.json``, ``posterior.json``, ... are not the benchmark's) is refused before any work, naming ``--out``.

An earlier run's folder is continued only with ``--resume`` (without it the folder is refused: its rows may be
hours of NUTS), and only with the same settings and methods (`check_resumable`): its finished (depth, data set,
split) rows are kept whole (`finished_rows`; the CSVs are rewritten after every split, so a killed run loses at
most the split it was fitting) and the run goes on with the others. Every fit is seeded, so the resumed CSV rows
equal an uninterrupted run's (the ``seconds`` column aside).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from base.errors import FolderNotOwnedError, InputError

KIND = "zoo benchmark uci"
WRITER = "bnn-zoo"
OUTPUTS = ("uci.csv", "weights.csv", "chains.csv", "summary.md", "uci.png", "run.json", "report.html")
"""Every file the benchmark writes into its run folder."""
KEY = ["hidden_layers", "dataset", "split"]
"""The columns naming one unit of work (one split of one set at one depth: every method fitted on it)."""


def marker(settings: dict, methods, seconds: float | None, pieces: int = 1) -> dict:
    """The content of ``run.json``: the writer and kind (ownership), the settings and methods (resumability),
    the seconds the run has taken over its `pieces` up to its last finished split."""
    return {"writer": WRITER, "kind": KIND, "settings": settings, "methods": list(methods), "seconds": seconds,
            "pieces": pieces}


def read_marker(out) -> dict | None:
    """``run.json`` of the folder `out` when it is this benchmark's (writer and kind match), else None."""
    try:
        found = json.loads((Path(out) / "run.json").read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("writer") == WRITER and found.get("kind") == KIND else None


def check_out(out, argument: str = "--out") -> dict | None:
    """Before any work: None when `out` is absent or an empty folder (a new run), the earlier run's ``run.json``
    when it is this benchmark's folder; raises InputError (a file) or `FolderNotOwnedError` (anything else),
    naming `argument`."""
    from base.atomic_dir import KINDS, folder_kind

    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InputError(argument, str(out), "a folder for the benchmark's results", "it is an existing file")
    if not path.exists():
        parent = path.absolute().parent
        while not parent.exists():
            parent = parent.parent
        inside = folder_kind(parent) if folder_kind(parent) in KINDS else (
            "zoo benchmark uci run" if read_marker(parent) is not None else None)
        if inside:
            raise FolderNotOwnedError(argument, str(out), "a folder outside bnn-zoo's own folders",
                                      f"it would be made inside {parent}, a {inside} folder bnn-zoo wrote, which "
                                      "then no longer loads or resumes: choose another folder")
        return None
    names = sorted(p.name for p in path.iterdir())
    if not names:
        return None
    found = read_marker(path)
    foreign = names if found is None else [n for n in names if n not in OUTPUTS]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise FolderNotOwnedError(argument, str(out), "a new or empty folder, or the run folder of an earlier "
                                  "zoo benchmark uci", f"it holds files the benchmark did not write ({shown}); it "
                                  "writes uci.csv, summary.md, run.json, ... there and would replace yours: choose "
                                  "another folder")
    return found


def check_resumable(found: dict | None, resume: bool, settings: dict, methods, out, argument: str = "--out"):
    """Refuse to continue the earlier run `found` (``run.json``) in `out` unless `resume`, and with `resume`
    unless it ran the same `settings` (the number of splits aside) and `methods`: its rows would not be
    comparable. InputError naming `argument` or ``--resume``."""
    if found is None:
        return
    if not resume:
        raise InputError(argument, str(out), "a new or empty folder",
                         "it holds an earlier run of zoo benchmark uci: pass --resume to keep its finished rows and "
                         "go on, or choose another folder")
    before = {k: v for k, v in dict(found.get("settings") or {}).items() if k != "splits"}
    now = {k: v for k, v in settings.items() if k != "splits"}
    if before != now or list(found.get("methods") or []) != list(methods):
        changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        if list(found.get("methods") or []) != list(methods):
            changed.append(f"methods {','.join(found.get('methods') or [])} -> {','.join(methods)}")
        raise InputError("--resume", str(out), "a run folder made with the same settings and methods",
                         f"the earlier run differs in {', '.join(map(str, changed))}: resume it with its own "
                         "settings, or choose another --out")


def read_csv(path) -> pd.DataFrame:
    """A CSV the benchmark wrote (an empty DataFrame for a missing or empty file)."""
    try:
        frame = pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()
    if "dataset" in frame:
        frame["dataset"] = frame["dataset"].astype(str)  # a set named "1030" stays a name
    return frame


def finished_rows(out, methods) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, set]:
    """(rows, weight rows, agreement rows, done) of the earlier run in `out`: the rows of every (depth, data set,
    split) whose every method in `methods` has its row (a split is written whole; anything else is dropped and
    fitted again), and `done`, the set of those (depth, data set, split) keys."""
    rows, weights, agreement = (read_csv(Path(out) / name) for name in ("uci.csv", "weights.csv", "chains.csv"))
    if rows.empty:
        return rows, weights, agreement, set()
    complete = rows.groupby(KEY)["method"].agg(lambda m: set(methods) <= set(m))
    done = {tuple(k) for k, ok in complete.items() if ok}

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty:
            return frame
        mask = [tuple(k) in done for k in frame[KEY].itertuples(index=False)]
        return frame[mask].reset_index(drop=True)

    return keep(rows), keep(weights), keep(agreement), done
