"""The trace's JSON, encoded in C: ``orjson`` where it writes what ``json`` would have, ``json``
where it might not.

The writer thread shares the GIL with the model-call path, so every millisecond it spends
encoding is a millisecond the pipeline waits. ``orjson`` encodes a turn's documents ~15 times
faster than ``json``, but its text differs in three ways: NaN and infinities become ``null``,
types ``json`` would pass to ``default=str`` (datetime, enum, dataclass, tuple keys...) are
encoded natively or refused, and floats below 1e-4 are spelled differently (``0.000057``
where ``json`` writes ``5.7e-05``). So:

- every document is checked before its ``orjson`` text is used: the text read back must equal
  the document (``orjson.loads(text) == obj``, a comparison in C). Anything ``orjson`` would
  change in meaning (a NaN read back as None, a tuple as a list, a datetime as a string, an
  enum as its value) fails the check, or ``orjson`` refuses it, and that document is encoded by
  ``json`` itself, NaN, ``default=str`` and all;
- the compact text (step documents, JSONL lines) means what ``json``'s meant: it has no spaces
  after separators and spells small floats ``orjson``'s way (``0.000057``), the same numbers;
- the indented text (``turn.json``, ``step-health.json``, the JSON blocks of the step
  Markdown) is byte for byte ``json.dumps(obj, indent=2, ensure_ascii=False, default=str)``:
  ``orjson``'s layout, key order and string escapes are the same (checked by
  ``tests/test_encoding.py`` over every code point and random documents); its small floats are
  respelled with ``float.__repr__``, as ``json`` spells them.

Without ``orjson`` installed everything goes through ``json`` (and ``pretty.dumps_pretty``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .pretty import dumps_pretty, escape_string, float_text

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; the stdlib path still works
    _orjson = None

if _orjson is not None:
    _dumps = _orjson.dumps
    _loads = _orjson.loads
    _INDENT = _orjson.OPT_INDENT_2

# ``orjson`` spells a float below 1e-4 differently from ``float.__repr__``: positionally down to
# 1e-5 (``0.000057``, ``json``: ``5.7e-05``), then with a one-digit exponent (``1.5e-7``,
# ``json``: ``1.5e-07``). Such a token contains one of these; ``bytes.find`` looks for them at C
# speed (a regular expression over the text costs more than orjson's whole encoding).
_NUMBER_BYTES = frozenset(b"0123456789.-+e")
_SMALL_EXPONENT = frozenset(b"56789")
_DIGIT = frozenset(b"0123456789")
_SPACE, _NEWLINE, _COMMA = ord(" "), ord("\n"), ord(",")


def _marks(text: bytes) -> list[int]:
    """Where a small float may be: ``0.0000``, or ``e-N`` with one digit N from 5 to 9."""
    hits = []
    at = text.find(b"0.0000")
    while at >= 0:
        hits.append(at)
        at = text.find(b"0.0000", at + 6)
    at = text.find(b"e-")
    while at >= 0:
        if at + 2 < len(text) and text[at + 2] in _SMALL_EXPONENT and (
                at + 3 == len(text) or text[at + 3] not in _DIGIT):
            hits.append(at)
        at = text.find(b"e-", at + 2)
    return sorted(hits)


def respell_small_floats(text: bytes) -> bytes:
    """Indented ``orjson`` text with its small floats spelled as ``json`` spells them.

    A mark is respelled only where it lies in a whole number token that ends its line (before
    an optional comma) and follows a space or a line start: in indented JSON a raw newline is
    only ever layout (strings escape theirs), so such a token is a value, never part of a
    string. Works on the UTF-8 bytes, where ``find`` is fastest."""
    hits = _marks(text)
    if not hits:
        return text
    size = len(text)
    out: list[bytes] = []
    done = 0
    for at in hits:
        if at < done:
            continue  # a second mark in a token already respelled
        start = at
        while start > 0 and text[start - 1] in _NUMBER_BYTES:
            start -= 1
        end = at + 3
        while end < size and text[end] in _NUMBER_BYTES:
            end += 1
        if start > 0 and text[start - 1] not in (_SPACE, _NEWLINE):
            continue
        if end < size and text[end] != _NEWLINE and not (
                text[end] == _COMMA and (end + 1 == size or text[end + 1] == _NEWLINE)):
            continue
        out.append(text[done:start])
        out.append(float(text[start:end]).__repr__().encode("ascii"))
        done = end
    out.append(text[done:])
    return b"".join(out)


def checked(obj: Any, *, indent: bool = False) -> bytes | None:
    """``obj``'s ``orjson`` text (compact, or indented by 2) if it reads back equal to ``obj``,
    else None."""
    if _orjson is None:
        return None
    try:
        out = _dumps(obj, option=_INDENT) if indent else _dumps(obj)
        same = _loads(out) == obj
    except Exception:  # noqa: BLE001 - not orjson's to encode: the caller uses json, which encodes it or names why not
        return None
    return out if same else None


def compact(obj: Any) -> bytes:
    """Compact UTF-8 JSON with the meaning of ``json.dumps(obj, ensure_ascii=False,
    default=str)``. Raises what ``json`` raises on what it cannot encode."""
    out = checked(obj)
    if out is not None:
        accepted_here = getattr(_local, "accepted", None)
        if accepted_here is not None:
            accepted_here[id(obj)] = obj  # the reference keeps the id this object's
        return out
    return json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":")).encode("utf-8")


_local = threading.local()


@contextmanager
def remembering() -> Iterator[None]:
    """Within it, on this thread, the documents ``compact`` accepted are remembered
    (``accepted``): the step Markdown encodes the values of a document just encoded, and they
    need no second check."""
    _local.accepted = {}
    try:
        yield
    finally:
        _local.accepted = None


def accepted(obj: Any) -> bool:
    """``obj`` was accepted by ``compact`` within the current ``remembering``."""
    accepted_here = getattr(_local, "accepted", None)
    return accepted_here is not None and accepted_here.get(id(obj)) is obj


def _scalar(obj: Any) -> str | None:
    """The indented text of a value simple enough to spell here (None where there is more to
    it): a scalar, an empty container, a list of strings (escaped by ``json``'s C escaper)."""
    kind = type(obj)
    if obj is None:
        return "null"
    if kind is bool:
        return "true" if obj else "false"
    if kind is int:
        return obj.__repr__()
    if kind is float:
        return float_text(obj)
    if (kind is list or kind is dict or kind is tuple) and not obj:
        return "{}" if kind is dict else "[]"
    if kind is list and all(type(item) is str for item in obj):  # a list of names or lines
        return "[\n  " + ",\n  ".join(map(escape_string, obj)) + "\n]"
    return None


def pretty_bytes(obj: Any, *, safe: bool = False) -> bytes:
    """UTF-8 of ``json.dumps(obj, indent=2, ensure_ascii=False, default=str)``. ``safe``:
    ``obj`` is part of a document ``checked`` already accepted (no second check)."""
    out = _dumps(obj, option=_INDENT) if safe and _orjson is not None else checked(obj, indent=True)
    if out is None:
        return dumps_pretty(obj).encode("utf-8")
    return respell_small_floats(out)


def pretty(obj: Any, *, safe: bool = False) -> str:
    """The text of ``json.dumps(obj, indent=2, ensure_ascii=False, default=str)``. ``safe``:
    ``obj`` is part of a document ``checked`` already accepted (no second check)."""
    text = _scalar(obj)
    if text is not None:
        return text
    out = _dumps(obj, option=_INDENT) if safe and _orjson is not None else checked(obj, indent=True)
    if out is None:
        return dumps_pretty(obj)
    return respell_small_floats(out).decode("utf-8")
