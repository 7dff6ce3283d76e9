"""JAX's persistent compilation cache: on by default for the `zoo` command, one call for a library user.

Most of the time a first fit, NUTS run or prediction waits on XLA compiling. JAX can keep compiled code on
disk and load it in the next process instead of compiling again. ``import zoo`` changes no global JAX setting;
the cache is turned on, in a per-user folder unless the user chose otherwise, by

* the `zoo` command (``zoo --compilation-cache DIR`` / ``zoo --no-compilation-cache`` for one command);
* ``zoo.enable_compilation_cache(path=None)`` from Python, before the first compile (`enable`);

where ``BNN_ZOO_COMPILATION_CACHE=/some/folder`` chooses the folder and ``BNN_ZOO_COMPILATION_CACHE=off`` (or
``0``, ``false``, ``no``, empty) leaves the cache off, and a ``jax_compilation_cache_dir`` the user set in
JAX's own configuration is left as it is. ``configure(path)`` / ``configure(False)`` set it unconditionally.

The default folder is ``$XDG_CACHE_HOME/bnn-zoo/jax`` (``~/.cache/bnn-zoo/jax`` when XDG_CACHE_HOME is unset).
JAX keys every entry by the computation, the JAX/XLA versions and the device, so a stale entry is never
used. Entries whose compile took less than `MIN_COMPILE_SECONDS` are not written (reading a tiny file
costs about what compiling it does).
"""

from __future__ import annotations

import os
from base.errors import InputError

ENV_VAR = "BNN_ZOO_COMPILATION_CACHE"
OFF_VALUES = {"", "0", "off", "false", "no", "none"}
MIN_COMPILE_SECONDS = 0.2


def default_dir() -> str:
    """The per-user cache folder: ``$XDG_CACHE_HOME/bnn-zoo/jax`` or ``~/.cache/bnn-zoo/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bnn-zoo", "jax")


def configure(path: str | bool | None = None) -> str | None:
    """Turn the persistent compilation cache on in folder `path`, or off.

    Args:
      path: a folder (created if missing); None: the ``BNN_ZOO_COMPILATION_CACHE`` environment variable if
        set, else `default_dir()`; False or an "off" string ("off", "0", "false", "no", ""): off.
    Returns:
      The folder in use, or None when the cache is off.
    Raises:
      ValueError naming `path` when the folder cannot be created or written.

    JAX reads this setting when it compiles for the first time in a process; call it before any compile.
    `enable` (``zoo.enable_compilation_cache``) is the call for a library user.
    """
    import jax

    if path is None:
        path = os.environ.get(ENV_VAR, default_dir())
    if path is False or (isinstance(path, str) and path.strip().lower() in OFF_VALUES):
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    if not isinstance(path, (str, os.PathLike)):
        raise InputError.worded("path", f"path: expected a folder, False or None, got {path!r}")
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise InputError.worded("path", f"path: cannot create the compilation cache folder {path!r}: {err}") from err
    if not os.access(path, os.W_OK):
        raise InputError.worded("path", f"path: the compilation cache folder {path!r} is not writable")
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return path


def enable(path: str | bool | None = None) -> str | None:
    """Turn JAX's persistent compilation cache on for this process (``zoo.enable_compilation_cache``; ``import
    zoo`` does not: it changes no global JAX setting). Call it before anything compiles.

    Args:
      path: a folder (created if missing); None: ``$BNN_ZOO_COMPILATION_CACHE`` if set (a folder, or "off"),
        else `default_dir()` (``~/.cache/bnn-zoo/jax``); False or "off": off.
    Returns:
      The folder in use, or None when the cache is off.
    Raises:
      InputError naming `path` when the folder cannot be created or written.

    With ``path=None``, a ``jax_compilation_cache_dir`` already set in JAX's configuration is kept (and
    returned). Example::

        import zoo
        zoo.enable_compilation_cache()          # before the first fit: later processes load, not compile
    """
    import jax

    if path is None:
        current: str | None = jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]
        if current:
            return current
    return configure(path)


def configure_default() -> str | None:
    """What the `zoo` command does unless told otherwise: `enable()`; a folder that cannot be used leaves the
    cache off with a warning (the command still works)."""
    import warnings

    import jax

    # jax's Config holds its flags as dynamic attributes, which its type information does not declare:
    cache_dir: str | None = jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]
    if cache_dir:
        return cache_dir
    try:
        return configure()
    except ValueError as err:
        warnings.warn(f"bnn-zoo: compilation cache off ({err}); set {ENV_VAR} to a writable folder or 'off'",
                      stacklevel=2)
        return None
