"""The package's own errors: every error a user meets for bad input or a damaged file is one of these.

All derive from `ZooError`, and each also derives from the built-in exception a caller would expect
(`InputError` is a ValueError, `ArgumentTypeError` a TypeError as well, `CheckpointError` a ValueError), so
``except ValueError`` keeps working while ``except ZooError`` catches exactly the package's own failures.

The convention: a bad argument (a value, type, path or folder the caller chose) raises `InputError` or a
subclass, naming the argument, the value received and what was expected; a failure of something the caller did
not pass directly (a damaged checkpoint, an unprepared data set, a NaN loss) raises another `ZooError`. Each
class's ``exit_status`` is the status the `zoo` command exits with for it (it reads the type, nothing else):
2 for an `InputError`, 1 for another `ZooError` unless its class says otherwise (`inference.NonFiniteLossError`:
3). Anything that is not a ZooError is a bug: the command prints its traceback and exits with 70.

They live in `base`, the bottom of the package DAG (base <- models <- inference <- evals <- zoo), so every
package raises the same types.
"""
from __future__ import annotations

import os


class ZooError(Exception):
    """Base of every error bnn-zoo raises on purpose (bad input, damaged checkpoint, unstable training).

    Attributes:
      exit_status: the `zoo` command's exit status for this class (1: a run that could not complete);
        subclasses set their own.
    """

    exit_status: int = 1


class InputError(ZooError, ValueError):
    """A bad argument: names the argument, the value received and what was expected.

    Attributes:
      argument: the argument's name as the caller wrote it (e.g. "y", "num_samples", "--lr").
      value: a short description of the value received (its repr, shape or the offending entries).
      expected: what would have been accepted.
      exit_status: 2 (a usage error, as argparse's), for this class and its subclasses.
    """

    exit_status = 2
    expected: str | None  # None for an error made by `worded`

    def __init__(self, argument: str, value, expected: str, hint: str = ""):
        self.argument, self.value, self.expected = argument, value, expected
        shown = value if isinstance(value, str) and value.startswith("<") else described(value)
        message = f"{argument}: expected {expected}, got {shown}"
        super().__init__(message + (f"; {hint}" if hint else ""))

    @classmethod
    def worded(cls, argument: str, message: str, value=None):
        """This error with `message` as written, for a check whose message already names `argument`, the value
        and what was expected in its own words (``expected`` is then None)."""
        err = cls(argument, value, "")
        err.expected, err.args = None, (message,)
        return err


class ArgumentTypeError(InputError, TypeError):
    """An argument of the wrong type (also a TypeError)."""


class PathNotFoundError(InputError, FileNotFoundError):
    """A path argument naming nothing (also a FileNotFoundError), e.g. ``zoo.load`` of a missing folder."""


class CheckpointError(ZooError, ValueError):
    """A checkpoint that cannot be used: a missing, truncated or edited file, or one saved from another model.

    Attributes:
      path: the checkpoint directory.
      file: the file at fault (None when the checkpoint as a whole is at fault).
      problem: what is wrong, in words.
    """

    def __init__(self, path: str, problem: str, file: str | None = None):
        self.path, self.file, self.problem = str(path), file, problem
        where = f"{self.path}/{file}" if file else self.path
        super().__init__(f"checkpoint {where!r}: {problem}")


class FolderNotOwnedError(InputError):
    """A folder the package will not write into or delete: it holds files the package did not write (no
    ``MANIFEST.json`` of its own listing them), or a checkpoint of another kind (a saved posterior where a fit
    state would go, or the reverse). Saving replaces a folder whole, so writing there would delete them."""


class FolderLockedError(InputError):
    """A folder another process is writing (a fit running with it as its ``checkpoint_dir``, or a save). The
    lock file beside the folder names the holder.

    Attributes (besides InputError's): pid: the holding process's id (None when unreadable); lock: the lock file.
    """

    def __init__(self, argument: str, value, expected: str, hint: str = "", pid: int | None = None,
                 lock: str | None = None):
        self.pid, self.lock = pid, lock
        super().__init__(argument, value, expected, hint)


class UnwritableError(InputError):
    """A folder that cannot take a checkpoint: read-only, not permitted, or a disk without room for it (checked
    with a probe file and the free space before any work, or met while writing)."""


class MissingDependencyError(ZooError, ImportError):
    """An optional dependency that a feature needs is not installed; the message names the package and the
    command that installs it (``pip install 'bnn-zoo[tfds]'``). Exit status 1: nothing the caller passed was
    wrong, the environment lacks a package."""


class CheckpointWarning(UserWarning):
    """A checkpoint that could not be saved (the fit goes on and still returns its result) or that cannot be
    verified (no ``MANIFEST.json``: its files' checksums are unknown)."""


def described(value) -> str:
    """A short description of `value` for an error message: arrays by shape and dtype, strings and paths in
    full (a path cut short names no file), others by repr cut to 80 characters."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and len(shape) > 0:
        return f"<array of shape {tuple(shape)}, dtype {dtype}>"
    text = repr(os.fspath(value)) if isinstance(value, (str, os.PathLike)) else repr(value)
    return text if len(text) <= 80 or isinstance(value, (str, os.PathLike)) else text[:77] + "..."
