"""Checks shared by every public entry point: counts, learning rates, NUTS settings, inputs, labels,
probabilities and the feature shape a model was built for.

Each check raises `base.errors.InputError` (a ValueError) naming the argument, the value received and
what was expected, before any computation starts; none of them casts first and checks afterwards
(labels 0.5 / 1.7 / 2.9 are refused, not truncated to 0 / 1 / 2; uint8 label 255 is compared as 255).
Free-form descriptions of a value are written ``<...>`` (`InputError` shows them as they are).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from base.errors import ArgumentTypeError, InputError

PROBABILITY_ATOL = 1e-3
"""How far a row of probabilities may sum from 1 (absolute): a float32 softmax over C classes is off by
about C * 6e-8, probabilities rounded to 3 decimals by up to C * 5e-4."""

MAX_LISTED = 5  # offending entries quoted in a message


# ----- counts and settings ----------------------------------------------------------------------
def is_int(value) -> bool:
    """Whether `value` is a Python or NumPy integer (bool excluded)."""
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_positive_ints(**values) -> None:
    """Raise InputError naming the first argument whose value is not an integer >= 1 (e.g. steps=0,
    num_samples=2.5, chunk_size=None)."""
    for arg, value in values.items():
        if not is_int(value) or value < 1:
            raise InputError(arg, value, "a positive integer")


def check_non_negative_ints(**values) -> None:
    """Raise InputError naming the first argument whose value is not an integer >= 0 (e.g. num_warmup=-1)."""
    for arg, value in values.items():
        if not is_int(value) or value < 0:
            raise InputError(arg, value, "a non-negative integer")


MAX_SEED = 2**32 - 1
"""The largest seed: a JAX key holds 32 bits of it (with 64-bit types off ``PRNGKey(2**32)`` is ``PRNGKey(0)``'s
key and ``PRNGKey(-1)`` is ``PRNGKey(2**32 - 1)``'s), so larger and negative seeds would repeat other seeds' draws."""


def check_seed(seed, arg: str = "seed") -> int:
    """A random seed: a Python or NumPy integer in [0, `MAX_SEED`] (not a float, a bool or None). Returns it as
    an int; raises ArgumentTypeError for a non-integer, InputError for one out of range."""
    expected = f"an integer seed in [0, {MAX_SEED}] (2**32 - 1)"
    if not is_int(seed):
        raise ArgumentTypeError(arg, seed, expected)
    if not 0 <= seed <= MAX_SEED:
        raise InputError(arg, seed, expected, "a JAX key keeps 32 bits of the seed: another seed's draws would repeat")
    return int(seed)


def check_callable(arg: str, value, expected: str) -> None:
    """Raise ArgumentTypeError naming `arg` unless `value` is None or callable (`expected` says what it is called
    with), so that a wrong value fails before any work, not when it is first called."""
    if value is not None and not callable(value):
        raise ArgumentTypeError(arg, value, f"None or a callable {expected}")


def site_mismatch(want: dict, got: dict, *, want_name: str = "this model", got_name: str = "it",
                  extra_ok: bool = False) -> str | None:
    """None when {site: shape} `got` equals `want` (with `extra_ok`: holds every site of `want` at its shape,
    other sites allowed), else a sentence naming what differs: sites missing, sites extra and the first sites
    of other shapes (at most `MAX_LISTED` of each)."""
    want = {k: tuple(v) for k, v in want.items()}
    got = {k: tuple(v) for k, v in got.items()}
    if extra_ok:
        got = {k: v for k, v in got.items() if k in want}
    if want == got:
        return None
    parts = []
    missing, extra = [k for k in want if k not in got], [k for k in got if k not in want]
    if missing:
        parts.append(f"sites {_listed(missing)} of {want_name} are missing")
    if extra:
        parts.append(f"sites {_listed(extra)} are not sites of {want_name}")
    other = [f"{k!r} is {got[k]} in {got_name}, {want[k]} in {want_name}" for k in want if k in got and got[k] != want[k]]
    if other:
        parts.append("; ".join(other[:MAX_LISTED]) + (f" and {len(other) - MAX_LISTED} more" if len(other) > MAX_LISTED
                                                      else ""))
    return "; ".join(parts)


def check_choice(arg: str, value, choices) -> None:
    """Raise InputError unless `value` is one of `choices` (listed in the message)."""
    if not any(value is c or (type(value) is type(c) and value == c) for c in choices):
        raise InputError(arg, value, f"one of {list(choices)}")


def check_real(arg: str, value, *, low=None, high=None, low_open=True, high_open=True) -> float:
    """`value` as a float, checked to be a finite real number in the interval (low, high) (bounds None:
    unbounded; `low_open` / `high_open`: whether the bound itself is excluded). Raises InputError
    (ArgumentTypeError for a non-number) naming `arg`."""
    interval = ("(" if low_open else "[") + ("-inf" if low is None else f"{low}") + ", " + \
               ("inf" if high is None else f"{high}") + (")" if high_open else "]")
    if not isinstance(value, (numbers.Real, np.floating, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(arg, value, f"a real number in {interval}")
    v = float(value)
    ok = math.isfinite(v)
    if ok and low is not None:
        ok = v > low if low_open else v >= low
    if ok and high is not None:
        ok = v < high if high_open else v <= high
    if not ok:
        raise InputError(arg, value, f"a finite number in {interval}")
    return v


def check_learning_rate(value, arg: str = "learning_rate") -> float:
    """A learning rate: a finite number > 0 (a negative one is gradient ascent, NaN poisons every parameter).
    Returns it as a float."""
    return check_real(arg, value, low=0.0)


def available_memory() -> int | None:
    """Bytes of memory free for a new allocation: the system's available physical memory (Linux), else its
    total physical memory, or None when the system does not say."""
    import os

    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        try:
            return int(os.sysconf(pages)) * int(os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            continue
    return None


def check_memory(arg: str, value, nbytes: float, what: str) -> None:
    """Refuse (InputError naming `arg` and `value`) a request whose arrays would need `nbytes` bytes, more than
    `available_memory` (`what`: which arrays, e.g. "the predictions (S, N, C) float32"), before it allocates
    anything: a MemoryError after minutes of work, or a machine swapping, says less."""
    free = available_memory()
    if free is not None and nbytes > free:
        raise InputError(arg, value, f"a value whose arrays fit in memory ({_gib(free)} available)",
                         f"{what} would need {_gib(nbytes)}")


def num_latent(model, feature_shape) -> int:
    """Scalars in one draw of `model`'s latent sites for inputs of `feature_shape` (0 when the model does not
    list its sites)."""
    if not hasattr(model, "site_shapes"):
        return 0
    return int(sum(math.prod(shape) for shape in model.site_shapes(tuple(feature_shape)).values()))


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:,.1f} GiB"


def check_nuts_settings(*, num_chains, num_warmup, draws_per_chain, target_accept_prob, max_tree_depth,
                        divergence_threshold) -> None:
    """NUTS's settings: num_chains, draws_per_chain >= 1; num_warmup >= 0 (integers); target_accept_prob in
    (0, 1); max_tree_depth an integer >= 1 or NumPyro's pair (warm-up depth, sampling depth) of them;
    divergence_threshold in [0, 1]. Raises InputError naming the first bad one."""
    check_positive_ints(num_chains=num_chains, draws_per_chain=draws_per_chain)
    check_non_negative_ints(num_warmup=num_warmup)
    check_real("target_accept_prob", target_accept_prob, low=0.0, high=1.0)
    depths = max_tree_depth if isinstance(max_tree_depth, tuple) else (max_tree_depth,)
    if len(depths) not in (1, 2) or not all(is_int(d) and d >= 1 for d in depths):
        raise InputError("max_tree_depth", max_tree_depth,
                         "an integer >= 1 (the tree has at most 2**max_tree_depth - 1 leapfrog steps) "
                         "or a pair of them (warm-up, sampling)")
    check_real("divergence_threshold", divergence_threshold, low=0.0, high=1.0, low_open=False, high_open=False)


# ----- inputs -------------------------------------------------------------------------------------
def as_array(value, arg: str) -> np.ndarray:
    """np.asarray(value), with ragged nested lists (which NumPy refuses) reported as an InputError naming `arg`."""
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as err:
        raise InputError(arg, f"<{type(value).__name__} that is no rectangular array>",
                         "an array (N, ...) of numbers", str(err)) from None


def check_inputs(x, *, arg: str = "x", feature_shape=None, allow_empty: bool = True) -> np.ndarray:
    """Inputs x (N, *features): numeric (bool, integer or real float), at least 2-D, finite, of
    `feature_shape` when given, with N >= 1 unless `allow_empty`. Checked before any cast (strings and
    complex numbers are refused, not converted). Returns x as a float32 array."""
    x = as_array(x, arg)
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_):
        raise ArgumentTypeError(arg, f"<array of dtype {x.dtype}>", "a real numeric array (float or integer)")
    if x.ndim < 2:
        raise InputError(arg, f"<array of shape {x.shape}>", "shape (N, features...)",
                         "one row per example; reshape a single example with x[None]" if x.ndim == 1 else "")
    if 0 in x.shape[1:]:
        raise InputError(arg, f"<array of shape {x.shape}>", "at least one feature (every feature axis of length "
                         ">= 1)", "a network on zero features would predict the same for every input")
    if feature_shape is not None and tuple(x.shape[1:]) != tuple(feature_shape):
        raise InputError(arg, f"<feature shape {tuple(x.shape[1:])}>",
                         f"feature shape {tuple(feature_shape)} (the shape the model was built for)")
    if not allow_empty and x.shape[0] == 0:
        raise InputError(arg, f"<array of shape {x.shape}>", "at least one row (N >= 1)")
    return _finite_float32(x, arg, "values")


def _finite_float32(a: np.ndarray, arg: str, what: str) -> np.ndarray:
    """`a` as float32, refused when an entry is NaN/inf, or becomes inf in float32 (|value| > 3.4e38)."""
    with np.errstate(over="ignore"):
        cast = a.astype(np.float32)
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(cast.dtype, np.floating):
        finite = np.isfinite(cast)
        if not finite.all():
            first = tuple(int(i) for i in np.argwhere(~finite)[0])
            overflow = bool(np.isfinite(a.astype(np.float64)[first]))
            raise InputError(arg, f"<{int(a.size - finite.sum())} NaN/inf entries, the first at index {first}"
                             + (f" ({a[first]!r}, beyond float32's range)" if overflow else "") + ">",
                             f"finite {what} (in float32's range)")
    return cast


def model_feature_shape(model) -> tuple | None:
    """The feature shape `model` was built for: its ``feature_shape`` attribute (``zoo.get`` sets it from the
    entry's training data), or None when the model does not say (a model built by hand)."""
    shape = getattr(model, "feature_shape", None)
    return None if shape is None else tuple(int(d) for d in shape)


def check_feature_shape(model, x, *, arg: str = "x") -> None:
    """Refuse inputs x (N, *features) whose feature shape differs from the one `model` was built for (a
    network's first layer adapts to any input width, so other data would silently train another network)."""
    want = model_feature_shape(model)
    got = tuple(np.shape(x)[1:])
    if want is not None and got != want:
        raise InputError(arg, f"<feature shape {got}>",
                         f"feature shape {want} (the shape the model was built for)",
                         "build the model for these data, e.g. zoo.get(name, data=...)")


# ----- labels -------------------------------------------------------------------------------------
def _listed(values) -> str:
    values = list(values)
    head = ", ".join(repr(v) for v in values[:MAX_LISTED])
    return head + (f" and {len(values) - MAX_LISTED} more" if len(values) > MAX_LISTED else "")


def check_num_classes(num_classes, arg: str = "num_classes") -> int:
    """An integer >= 2 (a classifier of fewer classes decides nothing). Returns it as an int."""
    if not is_int(num_classes) or num_classes < 2:
        raise InputError(arg, num_classes, "an integer number of classes >= 2")
    return int(num_classes)


def check_integer_labels(y, *, arg: str = "y", n: int | None = None, rows_of: str = "x") -> np.ndarray:
    """Class labels y (N,): bool, integer, or float holding integers only, never negative; N == `n` when
    given (`rows_of`: what the N rows are, for the message). Returns them as int64 (compared before any cast: 0.5 is refused, uint8 255 stays 255)."""
    y = as_array(y, arg)
    if not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating) or y.dtype == np.bool_):
        raise ArgumentTypeError(arg, f"<array of dtype {y.dtype}>", "integer class labels")
    if y.ndim != 1:
        raise InputError(arg, f"<array of shape {y.shape}>", "class labels of shape (N,)")
    if n is not None and y.shape[0] != n:
        raise InputError(arg, f"<{y.shape[0]} labels>", f"{n} labels (one per row of {rows_of})",
                         "a length-1 label vector is not broadcast")
    if np.issubdtype(y.dtype, np.floating):
        bad = ~np.isfinite(y) | (y != np.round(y))
        if bad.any():
            raise InputError(arg, f"<non-integer labels such as {_listed(y[bad].tolist())}>",
                             "integer class labels (labels are never rounded)")
    if y.size and y.min() < 0:
        raise InputError(arg, f"<negative labels such as {_listed(np.unique(y[y < 0]).tolist())}>",
                         "labels >= 0 (class indices)", "a label -1 is no class: it would read the last class")
    return y.astype(np.int64)


def check_labels(y, num_classes: int, *, arg: str = "y", n: int | None = None, rows_of: str = "x") -> np.ndarray:
    """Class labels y (N,) in [0, num_classes): `check_integer_labels` and the range. Returns int32 (N,)."""
    labels = check_integer_labels(y, arg=arg, n=n, rows_of=rows_of)
    if labels.size and labels.max() >= num_classes:
        out = np.unique(labels[labels >= num_classes]).tolist()
        raise InputError(arg, f"<labels {_listed(out)} (values in [{labels.min()}, {labels.max()}])>",
                         f"labels in [0, {num_classes})")
    return labels.astype(np.int32)


def check_targets(y, *, arg: str = "y", n: int | None = None) -> np.ndarray:
    """Regression targets y (N,) or (N, D): real, finite, N == `n` when given. Returns float32."""
    y = as_array(y, arg)
    if not (np.issubdtype(y.dtype, np.floating) or np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_):
        raise ArgumentTypeError(arg, f"<array of dtype {y.dtype}>", "real regression targets")
    if y.ndim not in (1, 2):
        raise InputError(arg, f"<array of shape {y.shape}>", "regression targets of shape (N,) or (N, D)")
    if n is not None and y.shape[0] != n:
        raise InputError(arg, f"<{y.shape[0]} targets>", f"{n} targets (one per row of x)")
    return _finite_float32(y, arg, "regression targets")


def infer_num_classes(y_train, y_test=None, *, arg: str = "y_train", test_arg: str = "y_test") -> tuple[int, str]:
    """The number of classes of integer labels y_train (N,) (and y_test (M,)): the largest label + 1, with a
    sentence saying how many and from what. Refused (InputError naming `arg` or `test_arg`, with the fix) when the count
    rests on labels that look wrong: fewer than 2 classes, more classes than training examples, or classes
    between 0 and the largest label that never occur in y_train (one stray label 999 would otherwise build
    a 1000-class network). Pass the number of classes explicitly to accept such labels.

    Returns:
      (num_classes, note), e.g. (3, "3 classes inferred from the labels (largest 2); every class 0..2 occurs
      in the 120 training labels").
    """
    train = check_integer_labels(y_train, arg=arg)
    test = np.zeros(0, np.int64) if y_test is None else check_integer_labels(y_test, arg=test_arg)
    if train.size == 0:
        raise InputError(arg, "<0 labels>", "at least one training label")
    largest = int(max(train.max(), test.max() if test.size else 0))  # Python ints: no uint8 wrap-around
    k = largest + 1
    fix = "pass the number of classes explicitly (zoo.get(..., data_kwargs={'num_classes': K}))"
    if k < 2:
        raise InputError(arg, f"<only label {largest}>", "labels of at least 2 classes")
    if k > train.size:
        raise InputError(arg, f"<largest label {largest}, so {k} classes, from {train.size} "
                         "training labels>", "no more classes than training labels", fix)
    counts = np.bincount(train, minlength=k)
    missing = np.flatnonzero(counts == 0).tolist()
    if missing:
        rare = np.unique(np.concatenate([train, test]))[-MAX_LISTED:].tolist()
        raise InputError(arg,
                         f"<{k} classes inferred from the largest label {largest}, but classes "
                         f"{_listed(missing)} never occur in the {train.size} training labels (largest labels "
                         f"{rare})>", "every class 0..largest label to occur in the training labels",
                         fix + ", or correct the stray labels")
    return k, (f"{k} classes inferred from the labels (largest {largest}); every class 0..{largest} occurs "
               f"in the {train.size} training labels")


# ----- probabilities ----------------------------------------------------------------------------
def check_probabilities(probs, *, arg: str = "probs", ndim: int = 2, atol: float = PROBABILITY_ATOL) -> np.ndarray:
    """Probabilities (..., C) with `ndim` axes (2: (N, C); 3: (S, N, C)): finite, non-negative, every row
    summing to 1 within `atol` (the message names the worst row), N >= 1, C >= 2. Returns float64."""
    p = as_array(probs, arg)
    if not (np.issubdtype(p.dtype, np.floating) or np.issubdtype(p.dtype, np.integer) or p.dtype == np.bool_):
        raise ArgumentTypeError(arg, f"<array of dtype {p.dtype}>", "real probabilities")
    layout = {2: "(N, C)", 3: "(S, N, C)"}[ndim]
    if p.ndim != ndim or p.shape[-1] < 2 or 0 in p.shape:
        raise InputError(arg, f"<array of shape {p.shape}>", f"probabilities of shape {layout} with N, S >= 1, C >= 2")
    p = p.astype(np.float64)
    finite = np.isfinite(p)
    if not finite.all():
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise InputError(arg, f"<{int((~finite).sum())} NaN/inf entries, the first at index {first}>",
                         "finite probabilities")
    if (p < 0).any():
        first = tuple(int(i) for i in np.argwhere(p < 0)[0])
        raise InputError(arg, f"<{int((p < 0).sum())} negative entries, e.g. {p[first]:.4g} at index {first}>",
                         "non-negative probabilities")
    error = np.abs(p.sum(-1) - 1.0)
    worst = np.unravel_index(int(np.argmax(error)), error.shape)
    if error[worst] > atol:
        row = tuple(int(i) for i in worst)
        raise InputError(arg, f"<{int((error > atol).sum())} rows not summing to 1; the worst, row {row}, sums to "
                         f"{p[worst].sum():.6g}>", f"rows of probabilities summing to 1 (within {atol})",
                         "pass probabilities (a softmax), not logits or scores")
    return p
