"""Defaults that the library and the `zoo` command share, readable without importing JAX (so that ``zoo --help``
states them without loading the library): one constant each, never a second copy.
"""

DEFAULT_STEPS = 1000
"""SVI steps of ``inference.fit`` (``inference.fit.default_steps``) and of ``zoo fit`` when none are given;
docs/defaults.md says how it was chosen (validation data of real 28 x 28 digits)."""
