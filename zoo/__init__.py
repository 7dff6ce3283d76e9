"""The catalogue of ready-made Bayesian neural networks: ``zoo.get(name, data=...)``, ``zoo.list()``,
``zoo.load(path)`` (a saved posterior of an entry)."""

from zoo import entries as _entries  # noqa: F401  (registers the catalogue)
from zoo.checkpoints import load
from zoo.registry import Entry, get, names, register, register_data
from zoo.registry import list_entries as list  # noqa: A001

__all__ = ["Entry", "get", "list", "load", "names", "register", "register_data"]
