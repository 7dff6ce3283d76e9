"""The package's version, for ``zoo --version``."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

DISTRIBUTION = "bnn-zoo"


def package_version() -> str:
    """The installed distribution's version (importlib.metadata "bnn-zoo"); when it is not installed, the
    ``[project] version`` of the source tree's pyproject.toml; "unknown" when neither can be read."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return source_tree_version(Path(__file__).resolve().parent.parent / "pyproject.toml")


def source_tree_version(pyproject: Path) -> str:
    """``[project] version`` of the pyproject.toml at `pyproject`, "unknown" if it is missing or has none."""
    try:
        with open(pyproject, "rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
