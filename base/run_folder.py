"""May the library write a job's results folder here? One rule for every command that writes files into a folder
(`zoo run`, `zoo reproduce PAPER`, `zoo benchmark SUITE`): nothing of the user's is replaced or written into.

A job's results folder is claimed with a marker file, ``bnn-zoo-run.json`` ({"writer": "bnn-zoo", "job": ...,
"created": ...}), written when the job first makes (or takes) the folder. `claim_run_folder(path, job)` lets the
job write there when `path` is:

- absent, or an empty folder (it is made, and marked as `job`'s);
- a folder marked as the same `job`'s (a re-run replaces the job's own files there);
- a folder holding only results folders bnn-zoo marked (e.g. ``zoo-results`` after ``zoo reproduce k-tied`` made
  ``zoo-results/k-tied``): nothing there is the user's, and the job's files take names beside them.

Anything else raises `FolderNotOwnedError` naming the argument, before anything is written: an existing file, a
folder of the user's own files, a saved posterior or fit state (`base.atomic_dir`'s kinds: they are replaced whole
by their own writers only), a folder marked as another job's (the two jobs' files would mix, and each would
overwrite the other's ``summary.md`` or ``run.json``), or a marker that cannot be read. A folder written by an
earlier version (no marker) is refused the same way: delete it or choose another. A place where no file can be
created raises `UnwritableError` (`base.atomic_dir.check_writable`).

`check_run_folder` is the same check without writing anything (for a command line's checks before any work).
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from base.atomic_dir import check_writable, folder_kind
from base.errors import FolderNotOwnedError, InputError, UnwritableError

RUN_MARKER = "bnn-zoo-run.json"
WRITER = "bnn-zoo"


def run_folder_job(path) -> str | None:
    """The job whose results folder `path` is (its ``bnn-zoo-run.json`` names it), or None when it has no
    marker. Raises `FolderNotOwnedError` naming "path" when the marker exists but cannot be read."""
    marker = os.path.join(os.fspath(path), RUN_MARKER)
    try:
        with open(marker) as f:
            record = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise FolderNotOwnedError("path", os.fspath(path), "a results folder bnn-zoo marked",
                                  f"its {RUN_MARKER} is unreadable ({err})") from None
    if not isinstance(record, dict) or record.get("writer") != WRITER or not isinstance(record.get("job"), str):
        raise FolderNotOwnedError("path", os.fspath(path), "a results folder bnn-zoo marked",
                                  f"its {RUN_MARKER} was not written by bnn-zoo")
    return record["job"]


def check_run_folder(path, job: str, argument: str = "out") -> None:
    """Raise unless `job` may write its results into the folder `path` (module docstring), writing nothing.

    path: a folder path (str or PathLike); job: the job's name as a user would type it (e.g. "zoo run",
    "zoo reproduce k-tied", "zoo benchmark uci"); argument: the caller's name for `path` in errors ("--out").
    Raises InputError (an empty path), `FolderNotOwnedError` (the folder holds something of another's) or
    `UnwritableError` (no file can be created there), each naming `argument` and the path."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise InputError(argument, path, "a folder path (not empty)")
    if not isinstance(job, str) or not job:
        raise InputError("job", job, "the job's name, e.g. 'zoo run'")
    path = os.fspath(path)
    expected = f"a new or empty folder, or one holding the results of {job}"
    if os.path.exists(path) and not os.path.isdir(path):
        raise FolderNotOwnedError(argument, path, "a folder for the results", "it is an existing file")
    if os.path.isdir(path) and os.listdir(path):
        _check_owned(path, job, argument, expected)
    check_writable(path, argument, inside=True)


def _check_owned(path: str, job: str, argument: str, expected: str) -> None:
    try:
        owner = run_folder_job(path)
    except FolderNotOwnedError as err:
        raise FolderNotOwnedError(argument, path, expected, str(err).split("; ", 1)[-1]) from None
    if owner == job:
        return
    if owner is not None:
        raise FolderNotOwnedError(argument, path, expected,
                                  f"it holds the results of {owner} ({RUN_MARKER} says so), which {job}'s files "
                                  "would mix with and overwrite: choose another folder")
    kind = folder_kind(path)
    if kind in ("posterior", "fit state"):
        raise FolderNotOwnedError(argument, path, expected,
                                  f"it holds a {kind} saved by bnn-zoo, which {job} would write into: choose "
                                  "another folder")
    names = sorted(os.listdir(path))
    foreign = [n for n in names if not (os.path.isdir(os.path.join(path, n)) and _marked(os.path.join(path, n)))]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise FolderNotOwnedError(argument, path, expected,
                                  f"it holds files bnn-zoo did not mark as its own ({shown}; no {RUN_MARKER}), "
                                  f"which {job} could overwrite: choose another folder, or delete it if an "
                                  "earlier version of bnn-zoo wrote it")


def _marked(folder: str) -> bool:
    try:
        return run_folder_job(folder) is not None
    except FolderNotOwnedError:
        return False


def claim_run_folder(path, job: str, argument: str = "out") -> str:
    """Make `path` `job`'s results folder, or raise (`check_run_folder`) before anything is written: creates the
    folder when absent and writes its ``bnn-zoo-run.json`` marker when it has none. Returns `path` (str).

    Call it once, before a job's work, wherever the job writes a folder of files (`zoo run`, every
    `zoo reproduce` job, `zoo benchmark`). A disk error while making the folder or the marker raises
    `UnwritableError` naming `argument`."""
    check_run_folder(path, job, argument)
    path = os.fspath(path)
    if run_folder_job(path) == job:
        return path
    record = {"writer": WRITER, "job": job, "created": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    staging = None
    try:
        os.makedirs(path, exist_ok=True)
        fd, staging = tempfile.mkstemp(prefix=f".{RUN_MARKER}.", dir=path)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1)
        os.replace(staging, os.path.join(path, RUN_MARKER))
    except OSError as err:
        if staging is not None and os.path.exists(staging):
            os.remove(staging)
        raise UnwritableError(argument, path, "a folder where the results can be written",
                              f"writing its {RUN_MARKER} failed ({err.strerror or err})") from None
    return path
