"""The catalogue of ready-made Bayesian neural networks: ``zoo.get(name, data=...)``, ``zoo.list()``,
``zoo.load(path)`` (a saved posterior of an entry).

Importing `zoo` changes no global JAX setting. ``zoo.enable_compilation_cache()`` turns on JAX's persistent
compilation cache in a per-user folder (the `zoo` command does so itself; see `zoo.compilation_cache`)."""

from zoo import startup as _startup

if _startup.is_zoo_command():  # before the first heavy import: Ctrl-C while starting exits quietly
    _startup.quiet_interrupts()

from zoo import compilation_cache  # noqa: E402
from zoo.compilation_cache import enable as enable_compilation_cache  # noqa: E402

from zoo import entries as _entries  # noqa: F401  (registers the catalogue)
from base.errors import ArgumentTypeError, CheckpointError, InputError, ZooError
from zoo.checkpoints import load
from zoo.data.registry import register_data
from zoo.registry import Entry, get, names, register
from zoo.registry import list_entries as list  # noqa: A001

__all__ = ["compilation_cache", "enable_compilation_cache", "Entry", "get", "list", "load", "names", "register", "register_data", "ZooError",
           "InputError", "ArgumentTypeError", "CheckpointError"]
