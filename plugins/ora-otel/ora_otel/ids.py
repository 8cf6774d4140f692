"""Trace and span ids derived from the turn id (no OpenTelemetry import: the sink, off, stays light).

A span's id comes from its turn's id and its place in the turn (``turn``, ``step:3``, ``call:17``),
so a turn replayed from disk has the trace id and span ids its live export had.
"""

from __future__ import annotations

import hashlib


def digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).digest()


def trace_id_for(turn_id: str) -> int:
    """The trace id of a turn: the same live and replayed (``ora.turn.id`` finds it too)."""
    return int.from_bytes(digest("ora-trace", turn_id)[:16], "big") or 1


def span_id_for(turn_id: str, key: str) -> int:
    return int.from_bytes(digest("ora-span", turn_id, key)[:8], "big") or 1
