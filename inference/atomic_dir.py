"""Directories written all at once or not at all, with a checksum of every file.

`atomic_directory(path)` hands out a fresh staging folder beside `path`; when the ``with`` block ends
without an exception it writes ``MANIFEST.json`` (size and SHA-256 of every file), flushes everything to
disk and moves the folder into place:

1. ``path`` (the previous version, if any) is renamed to ``.<name>.previous``   (one atomic rename)
2. the staging folder is renamed to ``path``                                     (one atomic rename)
3. ``.<name>.previous`` is deleted.

A process killed at any point leaves either the previous version at ``path``, or (between 1 and 2) the
previous version at ``.<name>.previous``, or the new version at ``path``: `readable_path` finds whichever
complete version exists, so the previous checkpoint always loads. An exception inside the block removes the
staging folder and leaves ``path`` untouched. Leftover staging folders of killed writers
(``.<name>.staging-*``) are ignored and cleaned up by the next successful write.

`verify_directory` checks the manifest: a missing, truncated or edited file raises `CheckpointError` naming
the file and what is wrong.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import tempfile

from models.errors import CheckpointError, PathNotFoundError

MANIFEST = "MANIFEST.json"


def previous_path(path: str) -> str:
    """Where the previous version of `path` waits while a new one is moved into place."""
    head, name = os.path.split(os.path.abspath(path))
    return os.path.join(head, f".{name}.previous")


@contextlib.contextmanager
def atomic_directory(path: str):
    """Context manager: yields a staging folder (str); on a clean exit its files replace `path` atomically.

    The caller writes plain files into the yielded folder (no sub-folders). Raises `CheckpointError` when
    `path` exists and is not a directory.
    """
    path = os.path.abspath(path)
    head, name = os.path.split(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise CheckpointError(path, "exists and is not a directory; choose another path")
    os.makedirs(head, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{name}.staging-", dir=head)
    try:
        yield staging
        _write_manifest(staging)
        _fsync_dir(staging)
        _swap_into_place(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for stale in glob.glob(os.path.join(head, glob.escape(f".{name}.staging-") + "*")):
        shutil.rmtree(stale, ignore_errors=True)


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

    A directory without a manifest (written before checksums existed) passes when the `required` files exist.
    Raises `CheckpointError` naming the file when one is missing, truncated, edited, or the manifest is unreadable.
    """
    for name in required:
        if not os.path.isfile(os.path.join(path, name)):
            raise CheckpointError(path, "file is missing", name)
    manifest_file = os.path.join(path, MANIFEST)
    if not os.path.exists(manifest_file):
        return {}
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


def _write_manifest(folder: str) -> None:
    files = {}
    for name in sorted(os.listdir(folder)):
        file = os.path.join(folder, name)
        if not os.path.isfile(file):
            raise CheckpointError(folder, "atomic_directory holds plain files only", name)
        _fsync_file(file)
        files[name] = {"bytes": os.path.getsize(file), "sha256": _sha256(file)}
    with open(os.path.join(folder, MANIFEST), "w") as f:
        json.dump({"files": files}, f, indent=1)
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
