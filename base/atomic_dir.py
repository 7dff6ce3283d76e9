"""Directories written all at once or not at all, with a checksum of every file, only where the package owns
the folder, one writer at a time.

`atomic_directory(path, kind)` hands out a fresh staging folder beside `path`; when the ``with`` block ends
without an exception it writes ``MANIFEST.json`` (the marker of the package and of the folder's `kind`, and the
size and SHA-256 of every file), flushes everything to disk and moves the folder into place:

1. ``path`` (the previous version, if any) is renamed to ``.<name>.previous``   (one atomic rename)
2. the staging folder is renamed to ``path``                                     (one atomic rename)
3. ``.<name>.previous`` is deleted.

A process killed at any point leaves either the previous version at ``path``, or (between 1 and 2) the
previous version at ``.<name>.previous``, or the new version at ``path``: `readable_path` finds whichever
complete version exists, so the previous checkpoint always loads. An exception inside the block removes the
staging folder and leaves ``path`` untouched. Leftover staging folders of killed writers
(``.<name>.staging-*``) are ignored and cleaned up by the next successful write.

Ownership: a folder is replaced only when it is absent, empty, or this package's own of the same kind
(`folder_kind`: its manifest names the kind and lists every file in it; a folder whose manifest is missing or
damaged counts when it holds only that kind's files, so that saving again replaces a damaged checkpoint). A folder holding anything else (the
user's files, a posterior where a fit state would go or the reverse) raises `FolderNotOwnedError` and is left
as it is. `remove_folder` deletes only a folder of the kind named.

One writer at a time: a write holds an exclusive lock (``flock``) on ``.<name>.lock`` beside the folder, which
names the holder (pid, purpose, start time); `inference.fit` holds it for a whole fit (`folder_lock`). A
second writer waits while the holder is another save (a few seconds at most), and is refused
(`FolderLockedError`, naming the pid) while it is a fit. The operating system drops the lock of a process that
dies, so a lock file left by a killed process is taken over. The lock file is removed when released, and when
writing the holder's record fails (a full disk: `UnwritableError`, the lock released).

Writability: `check_writable` creates a probe file where the folder will be written and reads the disk's free
space, before any work; an `OSError` of a full or read-only disk met while writing raises `UnwritableError`.

`verify_directory` checks the manifest: a missing, truncated or edited file raises `CheckpointError` naming
the file and what is wrong, and so does a folder without a manifest (its files cannot be verified).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time

from base.errors import (CheckpointError, FolderLockedError, FolderNotOwnedError, InputError,
                           PathNotFoundError, UnwritableError)

MANIFEST = "MANIFEST.json"
WRITER = "bnn-zoo"
# the files of each kind of folder the package writes (`inference.checkpoint`, `inference.fit_state`): the first
# one marks a folder of that kind whose manifest is missing or damaged
KINDS = {"posterior": ("posterior.json", "arrays.npz"), "fit state": ("fit_state.json", "fit_state.npz")}
SAVE_WAIT_S = 60.0  # how long a save waits for another process's save into the same folder
# errors of a disk that cannot take the folder: full, read-only, not permitted, over quota
DISK_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT}


def previous_path(path: str) -> str:
    """Where the previous version of `path` waits while a new one is moved into place."""
    head, name = os.path.split(os.path.abspath(path))
    return os.path.join(head, f".{name}.previous")


@contextlib.contextmanager
def atomic_directory(path: str, kind: str, argument: str = "path"):
    """Context manager: yields a staging folder (str); on a clean exit its files replace `path` atomically.

    kind: "posterior" or "fit state" (`KINDS`), recorded in the manifest; argument: the caller's name for
    `path` in error messages. The caller writes plain files into the yielded folder (no sub-folders). Holds the
    folder's lock (`folder_lock`, waiting up to `SAVE_WAIT_S` for another save) from before the staging
    folder is made until the old version is deleted. Raises `FolderNotOwnedError` (before anything is written)
    when `path` is a file or a folder that is not this package's own of this `kind`, `FolderLockedError` when a
    fit of another process holds it, and `UnwritableError` for a full or read-only disk (nothing replaced).
    """
    path = os.path.abspath(path)
    head, name = os.path.split(path)
    with folder_lock(path, "save", argument, wait_s=SAVE_WAIT_S):
        check_folder(path, kind, argument)
        try:
            os.makedirs(head, exist_ok=True)
            staging = tempfile.mkdtemp(prefix=f".{name}.staging-", dir=head)
        except OSError as err:
            raise _disk_error(err, argument, path) from err
        try:
            yield staging
            _write_manifest(staging, kind)
            _fsync_dir(staging)
            _swap_into_place(staging, path)
        except BaseException as err:
            shutil.rmtree(staging, ignore_errors=True)
            if isinstance(err, OSError) and err.errno in DISK_ERRNOS:
                raise _disk_error(err, argument, path) from err
            raise
        # under the lock no other writer is at work: the staging folders left are those of killed writers
        for stale in glob.glob(os.path.join(head, glob.escape(f".{name}.staging-") + "*")):
            shutil.rmtree(stale, ignore_errors=True)


def _disk_error(err: OSError, argument: str, path: str) -> UnwritableError:
    return UnwritableError(argument, path, "a folder on a disk that can take the checkpoint",
                           f"writing it failed ({err.strerror or err}); nothing was replaced: free space or "
                           "choose another folder")


def folder_kind(path) -> str | None:
    """What the folder `path` holds: None (nothing: absent, or an empty folder), a kind of `KINDS` (a folder
    this package wrote: its manifest names the kind and lists every file there, or, its manifest missing or
    damaged, it holds only that kind's files), "file" (a file, not a folder) or "other" (anything else).

    After a writer was killed between its two renames, `path` is absent and its previous version is read."""
    path = os.path.abspath(os.fspath(path))
    for _ in range(3):  # a writer may move the folder between the look and the listing: look again
        try:
            return _kind(path)
        except FileNotFoundError:
            continue
    return None


def _kind(path: str) -> str | None:
    if os.path.exists(path) and not os.path.isdir(path):
        return "file"
    try:
        path = readable_path(path)
    except FileNotFoundError:
        return None
    names = set(os.listdir(path))
    if not names:
        return None
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            manifest = json.load(f)
        listed = set(manifest["files"])
        if manifest.get("writer") == WRITER and manifest.get("kind") in KINDS:
            return manifest["kind"] if names <= listed | {MANIFEST} else "other"
    except FileNotFoundError:
        if not os.path.isdir(path):
            raise  # moved away meanwhile
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # a damaged manifest: judged by the names
    # no manifest (deleted), or a damaged one: judged by the names
    for kind, files in KINDS.items():
        if files[0] in names and names <= set(files) | {MANIFEST}:
            return kind
    return "other"


def check_folder(path, kind: str, argument: str) -> None:
    """Raise `FolderNotOwnedError` naming `argument` unless `path` is absent, an empty folder or this package's
    folder of `kind` (see `folder_kind`): writing replaces the folder whole."""
    found = folder_kind(path)
    if found is None or found == kind:
        return
    expected = f"a new or empty folder, or one holding a {kind} saved by bnn-zoo"
    if found == "file":
        raise FolderNotOwnedError(argument, str(path), expected, "it is an existing file")
    if found == "other":
        names = _foreign_files(readable_path(path))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise FolderNotOwnedError(argument, str(path), expected,
                                  f"it holds files bnn-zoo did not write ({shown}); saving replaces the whole "
                                  "folder, so they would be deleted: choose another folder")
    raise FolderNotOwnedError(argument, str(path), expected,
                              f"it holds a {found} saved by bnn-zoo, which a {kind} would replace: choose another "
                              "folder")


def _foreign_files(folder: str) -> list:
    """The files of `folder` that its manifest does not list (all of them when it has no manifest of its own)."""
    names = set(os.listdir(folder))
    try:
        with open(os.path.join(folder, MANIFEST)) as f:
            listed = set(json.load(f)["files"]) | {MANIFEST}
    except (OSError, ValueError, KeyError, TypeError):
        listed = set()
    return sorted(names - listed or names)


def remove_folder(path, kind: str) -> bool:
    """Delete the folder `path` (and a previous version left by a killed writer) when it is this package's
    folder of `kind`, under its lock; anything else is left alone. Returns whether it was deleted."""
    path = os.path.abspath(os.fspath(path))
    with folder_lock(path, "save", "path", wait_s=SAVE_WAIT_S):
        if folder_kind(path) != kind:
            return False
        shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(previous_path(path), ignore_errors=True)
        return True


def check_writable(path, argument: str, needed_bytes: int = 0, inside: bool = False) -> None:
    """Raise `UnwritableError` naming `argument` unless a file can be created where the folder `path` will be
    written (its parent, or the nearest existing ancestor when the parent is still to be made: folders are
    written beside their place and renamed into it; with `inside`, in `path` itself, for a folder that files
    are written into) and that disk has `needed_bytes` free. A probe file is created and removed there;
    nothing else is written."""
    path = os.path.abspath(os.fspath(path))
    place = path if inside else os.path.dirname(path)
    while not os.path.exists(place):
        place = os.path.dirname(place)
    if not os.path.isdir(place):
        raise UnwritableError(argument, str(path), "a path inside a folder", f"{place!r} is a file")
    try:
        fd, probe = tempfile.mkstemp(prefix=".bnn-zoo-probe-", dir=place)
    except OSError as err:
        raise UnwritableError(argument, str(path), "a place where a folder can be written",
                              f"cannot write in {place!r} ({err.strerror or err})") from None
    os.close(fd)
    os.remove(probe)
    free = free_bytes(place)
    if free is not None and free < needed_bytes:
        raise UnwritableError(argument, str(path), "a folder on a disk with room for the checkpoint",
                              f"{free:,} bytes are free in {place!r}, it needs about {needed_bytes:,}")


def check_output_file(path, argument: str) -> None:
    """Refuse an output file path (a PNG, a table) that could not be written, before any work: empty, an
    existing folder, or in a place where no file can be created (`check_writable`; its missing folders are made
    when it is written). Raises InputError / `UnwritableError` naming `argument`."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise InputError(argument, path, "a file path (not empty)")
    if os.path.isdir(path):
        raise InputError(argument, str(path), "a file path", "it is an existing folder")
    check_writable(path, argument)


def check_output_folder(path, argument: str) -> None:
    """Refuse an output folder that files could not be written into, before any work: empty, an existing file,
    or read-only (a probe file in it, or in its nearest existing ancestor when it is still to be made). Raises
    InputError / `UnwritableError` naming `argument`."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise InputError(argument, path, "a folder path (not empty)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(argument, str(path), "a folder for the results", "it is an existing file")
    check_writable(path, argument, inside=True)


def free_bytes(folder: str) -> int | None:
    """Bytes free for this user on the disk holding `folder` (None where the platform cannot say)."""
    try:
        stats = os.statvfs(folder)
    except (OSError, AttributeError):
        return None
    return stats.f_bavail * stats.f_frsize


def lock_path(path) -> str:
    """The lock file of the folder `path`: ``.<name>.lock`` beside it."""
    head, name = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(head, f".{name}.lock")


_HELD: dict = {}  # lock file -> [fd, depth, thread id] of the locks this process holds
_HELD_GUARD = threading.Lock()
# a forked child does not hold its parent's locks (it would re-enter them): it locks afresh, and waits for the parent
os.register_at_fork(after_in_child=_HELD.clear)


@contextlib.contextmanager
def folder_lock(path, purpose: str, argument: str, wait_s: float = 0.0):
    """Hold the exclusive lock of the folder `path` for the block (re-entrant in one thread).

    purpose: "fit" or "save", written into the lock file with the pid and the start time. Another process's
    lock: when it is a save, wait up to `wait_s` seconds for it; otherwise (a fit, or the wait is over) raise
    `FolderLockedError` naming `argument`, the folder and the holder's pid. A lock file whose process died is
    free (the operating system dropped its lock) and taken over."""
    file = lock_path(path)
    me = threading.get_ident()
    with _HELD_GUARD:
        held = _HELD.get(file)
        if held is not None and held[2] == me:
            held[1] += 1
        else:
            held = None
    if held is None:
        fd = _acquire(file, purpose, argument, os.path.abspath(os.fspath(path)), wait_s)
        with _HELD_GUARD:
            _HELD[file] = held = [fd, 1, me]
    try:
        yield
    finally:
        with _HELD_GUARD:
            held[1] -= 1
            last = held[1] == 0
            if last:
                del _HELD[file]
        if last:
            with contextlib.suppress(OSError):
                os.unlink(file)  # while still locked: a process that opened it sees another file and retries
            os.close(held[0])


def _acquire(file: str, purpose: str, argument: str, path: str, wait_s: float) -> int:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.makedirs(os.path.dirname(file), exist_ok=True)
            fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise UnwritableError(argument, path, "a place where a folder can be written",
                                  f"cannot create its lock file {file!r} ({err.strerror or err})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
            holder = _holder(fd)
            os.close(fd)
            if holder.get("purpose") != "fit" and time.monotonic() < deadline:
                time.sleep(0.01)
                continue
            pid = holder.get("pid")
            what = {"fit": "a fit", "save": "a save"}.get(holder.get("purpose", ""), "a writer")
            since = f", since {holder['started']}" if holder.get("started") else ""
            raise FolderLockedError(argument, path, "a folder no other process is writing",
                                    f"process {pid} ({what}{since}) holds its lock {file!r}; wait for it to end "
                                    "or choose another folder", pid=pid, lock=file) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(file).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # released and removed by its holder after we opened it: lock the file there now
            os.close(fd)
            continue
        record = json.dumps({"pid": os.getpid(), "purpose": purpose,
                             "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}).encode()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, record, 0)
        except OSError as err:  # a full disk, a quota: the lock is released and its file removed
            with contextlib.suppress(OSError):
                os.unlink(file)  # while still locked, as `folder_lock` releases it
            os.close(fd)
            raise UnwritableError(argument, path, "a place where a folder can be written",
                                  f"writing its lock file {file!r} failed ({err.strerror or err}); nothing was "
                                  "written: free space or choose another folder") from None
        return fd


def _holder(fd: int) -> dict:
    """The record {pid, purpose, started} in an open lock file ({} while it is being written)."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return record if isinstance(record, dict) else {}


def _swap_into_place(staging: str, path: str) -> None:
    previous = previous_path(path)
    if os.path.isdir(path):
        if os.path.isdir(previous):  # a completed earlier swap left it behind: `path` is complete
            shutil.rmtree(previous)
        os.rename(path, previous)
    os.rename(staging, path)
    _fsync_dir(os.path.dirname(path))
    shutil.rmtree(previous, ignore_errors=True)


def readable_path(path: str) -> str:
    """The folder holding the newest complete version of the directory `path`: `path` itself, or its previous
    version when a writer was killed between moving the old version aside and the new one in. Raises
    FileNotFoundError when neither exists."""
    if os.path.isdir(path):
        return path
    previous = previous_path(path)
    if os.path.isdir(previous):
        return previous
    raise PathNotFoundError.worded("path", f"path: no checkpoint at {str(path)!r}")


def verify_directory(path: str, required: tuple[str, ...] = ()) -> dict:
    """Check every file of the directory `path` against its ``MANIFEST.json``; returns the manifest
    {file: {"bytes": int, "sha256": str}}.

    Raises `CheckpointError` naming the file when one is missing, truncated, edited, or the manifest is missing
    (a folder of a pre-release version, or its manifest deleted: its files cannot be verified) or unreadable.
    """
    for name in required:
        if not os.path.isfile(os.path.join(path, name)):
            raise CheckpointError(path, "file is missing", name)
    manifest_file = os.path.join(path, MANIFEST)
    if not os.path.exists(manifest_file):
        raise CheckpointError(path, f"file is missing: this version reads folders whose {MANIFEST} lists every "
                                    f"file with its size and SHA-256, so that damage and edits are caught; without "
                                    f"it the files ({', '.join(required)}) cannot be verified (a folder of a "
                                    f"pre-release version, or its manifest was deleted). Fit and save it again",
                              MANIFEST)
    try:
        with open(manifest_file) as f:
            manifest = json.load(f)["files"]
    except (ValueError, KeyError, TypeError) as err:
        raise CheckpointError(path, f"the manifest is unreadable ({err})", MANIFEST) from None
    for name, expected in manifest.items():
        file = os.path.join(path, name)
        if not os.path.isfile(file):
            raise CheckpointError(path, "file is missing", name)
        size = os.path.getsize(file)
        if size != expected["bytes"]:
            raise CheckpointError(path, f"has {size} bytes, the manifest says {expected['bytes']} (truncated or "
                                        "replaced)", name)
        if _sha256(file) != expected["sha256"]:
            raise CheckpointError(path, "its SHA-256 differs from the manifest's (the file was edited or damaged)",
                                  name)
    return manifest


def _write_manifest(folder: str, kind: str) -> None:
    files = {}
    for name in sorted(os.listdir(folder)):
        file = os.path.join(folder, name)
        if not os.path.isfile(file):
            raise CheckpointError(folder, "atomic_directory holds plain files only", name)
        _fsync_file(file)
        files[name] = {"bytes": os.path.getsize(file), "sha256": _sha256(file)}
    with open(os.path.join(folder, MANIFEST), "w") as f:
        json.dump({"writer": WRITER, "kind": kind, "files": files}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())


def _sha256(file: str) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_file(file: str) -> None:
    with open(file, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
