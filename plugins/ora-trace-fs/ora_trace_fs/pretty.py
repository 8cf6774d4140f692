"""``json.dumps(obj, indent=2, ensure_ascii=False, default=str)``, byte for byte, faster.

The standard library encodes indented JSON with a pure-Python generator (its C encoder only
runs without ``indent``); the step markdown and ``turn.json`` are indented for people, and the
writer shares the GIL with the model-call path. This builds the same text with plain recursion,
strings escaped by the C escaper: ``encoding.pretty`` falls back on it for what ``orjson`` would
write differently. ``tests/test_batched_writes.py`` checks it against ``json.dumps`` on real
step documents and on awkward values.
"""

from __future__ import annotations

import json
from typing import Any

try:  # the C escaper; the pure-Python one where the accelerator is missing
    from _json import encode_basestring as escape_string  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    escape_string = json.encoder.py_encode_basestring  # type: ignore[attr-defined]

_float_repr = float.__repr__
_int_repr = int.__repr__
INF = float("inf")


def float_text(value: float) -> str:
    if value != value:
        return "NaN"
    if value == INF:
        return "Infinity"
    if value == -INF:
        return "-Infinity"
    return _float_repr(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return escape_string(key)
    if key is True:
        return '"true"'
    if key is False:
        return '"false"'
    if key is None:
        return '"null"'
    if isinstance(key, int):
        return '"' + _int_repr(key) + '"'
    if isinstance(key, float):
        return '"' + float_text(key) + '"'
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def dumps_pretty(obj: Any) -> str:
    """The text of ``json.dumps(obj, indent=2, ensure_ascii=False, default=str)``."""
    parts: list[str] = []
    _encode(obj, parts, 0, set())
    return "".join(parts)


def _encode(obj: Any, out: list[str], level: int, seen: set[int]) -> None:
    kind = type(obj)
    if kind is str:  # the common cases first, by exact type
        out.append(escape_string(obj))
        return
    if kind is dict and obj:
        marker = id(obj)
        if marker in seen:
            raise ValueError("Circular reference detected")
        seen.add(marker)
        inner = "\n" + "  " * (level + 1)
        sep = "," + inner
        out.append("{")
        first = True
        for key, value in obj.items():
            out.append(inner if first else sep)
            first = False
            out.append(escape_string(key) if type(key) is str else _key(key))
            out.append(": ")
            vt = type(value)
            if vt is str:
                out.append(escape_string(value))
            elif value is None:
                out.append("null")
            elif vt is int:
                out.append(_int_repr(value))
            else:
                _encode(value, out, level + 1, seen)
        out.append("\n" + "  " * level + "}")
        seen.discard(marker)
        return
    if isinstance(obj, str):
        out.append(escape_string(obj))
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(_int_repr(obj))
    elif isinstance(obj, float):
        out.append(float_text(obj))
    elif isinstance(obj, list | tuple):
        if not obj:
            out.append("[]")
            return
        marker = id(obj)
        if marker in seen:
            raise ValueError("Circular reference detected")
        seen.add(marker)
        inner = "\n" + "  " * (level + 1)
        out.append("[")
        first = True
        for item in obj:
            out.append(inner if first else "," + inner)
            first = False
            _encode(item, out, level + 1, seen)
        out.append("\n" + "  " * level + "]")
        seen.discard(marker)
    elif isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        marker = id(obj)
        if marker in seen:
            raise ValueError("Circular reference detected")
        seen.add(marker)
        inner = "\n" + "  " * (level + 1)
        out.append("{")
        first = True
        for key, value in obj.items():
            out.append(inner if first else "," + inner)
            first = False
            out.append(_key(key))
            out.append(": ")
            _encode(value, out, level + 1, seen)
        out.append("\n" + "  " * level + "}")
        seen.discard(marker)
    else:
        marker = id(obj)
        if marker in seen:
            raise ValueError("Circular reference detected")
        seen.add(marker)
        _encode(str(obj), out, level, seen)
        seen.discard(marker)
