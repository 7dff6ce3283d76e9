"""What identifies the model a checkpoint was saved from, and the first difference between two identities.

A model's identity (`models.BNN.identity`) is {"network": name, "arguments": {...}, "prior": spec,
"likelihood": spec, "data": ...}: the network's name and every argument that built it (activation, widths,
prior scale, ...), the prior and likelihood specs (their scales included), and the training data: a named
data set with its arguments, or a fingerprint of the user's own arrays (`data_fingerprint`). `inference.save`
stores it; `inference.load` compares it with the model it is given (`first_difference`) and refuses another.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from base.value_key import array_digest
from base.errors import ArgumentTypeError

FIELDS = ("network", "arguments", "prior", "likelihood", "data")


def data_fingerprint(x, y) -> dict:
    """A fingerprint of training data: {"sha256": hex digest, "x": {"shape", "dtype"}, "y": {"shape", "dtype"}}.

    x: (N, *feature_shape) inputs, y: (N,) or (N, D) labels/targets (any array-likes). The digest covers each
    array's dtype, shape and bytes (C order), so the same values in another dtype or shape differ.
    """
    digest = hashlib.sha256()
    described = {}
    for name, value in (("x", x), ("y", y)):
        a = np.ascontiguousarray(value)
        digest.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        digest.update(_bytes(a))
        described[name] = {"shape": list(a.shape), "dtype": str(a.dtype)}
    return {"sha256": digest.hexdigest(), **described}


def array_fingerprint(a) -> str:
    """'shape dtype blake2b-hex' of the array `a`'s bytes: equal for equal arrays, in every process."""
    a = np.asarray(a)
    return f"{list(a.shape)} {a.dtype} {array_digest(a)}"


def model_identity(model) -> dict | None:
    """`model.identity` as a JSON round trip (tuples as lists), or None for a model without one."""
    identity = getattr(model, "identity", None)
    if not isinstance(identity, dict):
        return None
    return json.loads(json.dumps(identity, default=_json_default))


def first_difference(saved: dict, current: dict) -> str | None:
    """The first difference between a stored identity and a model's, in words, or None when they agree.

    Parts that are None on either side (unknown) are skipped. Arguments are named bare ("activation: saved
    relu, model tanh"); nested specs by their path ("prior.scale: saved 1.0, model 0.5"); data by what they
    are ("data: saved the user's own arrays (...), model the data set 'digits' ...").
    """
    for field in FIELDS:
        a, b = saved.get(field), current.get(field)
        if a is None or b is None or a == b:
            continue
        if field == "data":
            return f"data: saved {describe_data(a)}, model {describe_data(b)}"
        if field == "arguments" and isinstance(a, dict) and isinstance(b, dict):
            return _dict_difference(a, b, prefix="")
        if isinstance(a, dict) and isinstance(b, dict):
            return _dict_difference(a, b, prefix=f"{field}.")
        return f"{field}: saved {_shown(a)}, model {_shown(b)}"
    return None


def describe_data(data: dict) -> str:
    """A data identity in words: "the data set 'two_moons' with {'n': 100}" or "the user's own arrays (x
    (100, 2) float32, y (100,) int32, SHA-256 1a2b3c4d...)"."""
    if "fingerprint" in data:
        f = data["fingerprint"]
        return (f"the user's own arrays (x {tuple(f['x']['shape'])} {f['x']['dtype']}, y {tuple(f['y']['shape'])} "
                f"{f['y']['dtype']}, SHA-256 {f['sha256'][:12]}...)")
    kwargs = data.get("kwargs") or {}
    return f"the data set {data.get('name')!r}" + (f" with {kwargs}" if kwargs else "")


def _dict_difference(a: dict, b: dict, prefix: str) -> str | None:
    for key in list(a) + [k for k in b if k not in a]:
        if key not in a:
            return f"{prefix}{key}: saved (not set), model {_shown(b[key])}"
        if key not in b:
            return f"{prefix}{key}: saved {_shown(a[key])}, model (not set)"
        if a[key] != b[key]:
            if isinstance(a[key], dict) and isinstance(b[key], dict):
                return _dict_difference(a[key], b[key], f"{prefix}{key}.")
            return f"{prefix}{key}: saved {_shown(a[key])}, model {_shown(b[key])}"
    return None


def _bytes(a: np.ndarray):
    """The array's bytes in C order, without a copy where the buffer allows it."""
    try:
        return a.data.cast("B")
    except (TypeError, ValueError):  # e.g. 0-d or object arrays
        return a.tobytes()


def _shown(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, (tuple, set)):
        return list(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if callable(o):
        return f"{getattr(o, '__module__', '?')}.{getattr(o, '__qualname__', type(o).__name__)}"
    raise ArgumentTypeError.worded("config", f"config: expected JSON-able values, got a {type(o).__name__}")
