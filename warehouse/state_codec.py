"""A scheduler's ``state_dict`` as a JSON manifest plus typed arrays, so a step stores only what changed.

The state is a nested structure of dicts, lists, tuples, numpy arrays and scalars (whatever a scheduler
returns; nothing here knows its fields). ``encode_state`` walks it and returns

* a manifest: the same tree as JSON, each node tagged with what it was, so decoding rebuilds the same
  types (a tuple stays a tuple, an ``np.float64`` stays an ``np.float64``, a 128-bit RNG integer stays
  exact, NaN stays NaN);
* the arrays it references, keyed by a digest of dtype, shape and bytes. The warehouse stores each
  digest once, so arrays that do not change between steps (candidate lists, patterns) are written once
  per campaign instead of once per phase and step.

Node tags: ``v`` JSON scalar, ``a`` array, ``s`` numpy scalar, ``d`` dict with string keys, ``m`` any
other dict (key/value pairs), ``l`` list, ``t`` tuple, ``p`` anything else (pickled, also object arrays).
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

PICKLE_DTYPE = "pickle"


def array_digest(dtype: str, shape: tuple[int, ...], data: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{dtype}|{shape}|".encode())
    h.update(data)
    return h.hexdigest()


class EncodedState:
    """A manifest (JSON text) and the arrays it references: digest -> (dtype, shape, bytes)."""

    def __init__(self) -> None:
        self.arrays: dict[str, tuple[str, tuple[int, ...], bytes]] = {}

    def _add(self, dtype: str, shape: tuple[int, ...], data: bytes) -> str:
        digest = array_digest(dtype, shape, data)
        self.arrays.setdefault(digest, (dtype, shape, data))
        return digest

    def node(self, value: Any) -> dict:
        if value is None or isinstance(value, bool | str):
            return {"v": value}
        if isinstance(value, int) and type(value) is int:
            return {"v": value}
        if isinstance(value, float) and type(value) is float:
            # JSON has no NaN/inf: keep them as their repr, everything else as the exact float
            return {"v": value} if math.isfinite(value) else {"f": repr(value)}
        if isinstance(value, np.ndarray) and value.dtype != object:
            array = value if value.flags.c_contiguous else value.copy(order="C")
            return {"a": self._add(array.dtype.str, array.shape, array.tobytes())}
        if isinstance(value, np.generic) and not isinstance(value, np.object_):
            array = np.asarray(value)
            return {"s": self._add(array.dtype.str, (), array.tobytes())}
        if type(value) is dict:
            if all(type(k) is str for k in value):
                return {"d": {k: self.node(v) for k, v in value.items()}}
            return {"m": [[self.node(k), self.node(v)] for k, v in value.items()]}
        if type(value) is list:
            return {"l": [self.node(v) for v in value]}
        if type(value) is tuple:
            return {"t": [self.node(v) for v in value]}
        return {"p": self._add(PICKLE_DTYPE, (), pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))}


def encode_state(state: Any) -> tuple[str, dict[str, tuple[str, tuple[int, ...], bytes]]]:
    """(manifest JSON, arrays by digest) of a nested state."""
    encoded = EncodedState()
    manifest = json.dumps(encoded.node(state), separators=(",", ":"))
    return manifest, encoded.arrays


def manifest_digests(manifest: str) -> list[str]:
    """Every array digest a manifest references."""
    out: list[str] = []

    def walk(node: dict) -> None:
        (tag, body), *_ = node.items()
        if tag in ("a", "s", "p"):
            out.append(body)
        elif tag == "d":
            for child in body.values():
                walk(child)
        elif tag == "m":
            for key, value in body:
                walk(key)
                walk(value)
        elif tag in ("l", "t"):
            for child in body:
                walk(child)

    walk(json.loads(manifest))
    return out


def manifest_holds(manifest: str, key: str, value: Any) -> bool:
    """Whether the state's top-level ``key`` was saved as exactly ``value`` (arrays compared by digest),
    without decoding the state."""
    saved = json.loads(manifest).get("d", {}).get(key)
    return saved is not None and saved == json.loads(json.dumps(EncodedState().node(value)))


def decode_state(
    manifest: str, fetch: Callable[[Iterable[str]], dict[str, tuple[str, list[int], bytes]]]
) -> Any:
    """Rebuild the state a manifest describes; ``fetch(digests)`` returns digest -> (dtype, shape, bytes)."""
    wanted = sorted(set(manifest_digests(manifest)))
    arrays = fetch(wanted) if wanted else {}
    missing = [d for d in wanted if d not in arrays]
    if missing:
        raise ValueError(f"scheduler state references {len(missing)} missing array(s), e.g. {missing[0]}")

    def build(node: dict) -> Any:
        (tag, body), *_ = node.items()
        if tag == "v":
            return body
        if tag == "f":
            return float(body)
        if tag in ("a", "s"):
            dtype, shape, data = arrays[body]
            array = np.frombuffer(data, dtype=np.dtype(dtype)).reshape(tuple(shape)).copy()
            return array[()] if tag == "s" else array
        if tag == "p":
            return pickle.loads(arrays[body][2])
        if tag == "d":
            return {k: build(v) for k, v in body.items()}
        if tag == "m":
            return {build(k): build(v) for k, v in body}
        if tag == "l":
            return [build(v) for v in body]
        if tag == "t":
            return tuple(build(v) for v in body)
        raise ValueError(f"scheduler state manifest: unknown node tag {tag!r}")

    return build(json.loads(manifest))
