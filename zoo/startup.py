"""Ctrl-C while the `zoo` command starts: a quiet exit with status 130, never an import traceback.

Importing JAX, NumPyro and the rest takes seconds, and a KeyboardInterrupt raised inside those imports either
prints a long traceback or is swallowed by a library's bare ``except`` (and the command then runs on). While
the command starts, SIGINT therefore exits at once, quietly: nothing has been done that could be lost. Once
the command's work begins, `zoo.cli` restores Python's handler (a KeyboardInterrupt, which `zoo fit` turns into
a saved, resumable state). This module imports only the standard library, so that `zoo/__init__.py` can
install the handler before its first heavy import.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

COMMAND_NAMES = ("zoo", "zoo.exe", "zoo-script.py")


def is_zoo_command() -> bool:
    """Whether this process is the `zoo` console script (its argv[0] is named zoo)."""
    return bool(sys.argv) and os.path.basename(sys.argv[0] or "") in COMMAND_NAMES


def _exit_quietly(signum, frame):
    try:
        sys.stderr.write("zoo: interrupted\n")
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)


def quiet_interrupts():
    """Make SIGINT exit at once with status 130 and one line ``zoo: interrupted``; returns the previous handler
    (None when not in the main thread, where handlers cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, _exit_quietly)


def is_quiet(handler) -> bool:
    """Whether `handler` is this module's quiet exit (the console script installed it while importing `zoo`)."""
    return handler is _exit_quietly


def restore(handler) -> None:
    """Put back a handler `quiet_interrupts` returned (None: nothing to do)."""
    if handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)
