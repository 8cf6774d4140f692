"""``Retry-After`` for HTTP backend plugins: one reading of the header for every provider.

A server that rate-limits says how long to wait either as delta-seconds (``"30"``) or as an HTTP
date; both become seconds from now. An absent or unreadable header is ``None`` — the caller then
falls back to its own backoff, and the typed error it raises carries ``retry_after=None``; its
message says which of the two it was (``retry_after_note``), so an unreadable header is never
mistaken for an absent one.
"""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import parsedate_to_datetime


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds (never negative); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass  # not delta-seconds: read it as an HTTP date below
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def retry_after_note(raw: str | None, seconds: float | None) -> str:
    """The part of a rate-limit error message about ``Retry-After``: the wait, the unreadable raw
    value (the caller falls back to its own backoff), or nothing when the server sent none."""
    if seconds is not None:
        return f", Retry-After {seconds:g}s"
    if raw and raw.strip():
        return f", Retry-After unreadable: {raw.strip()[:80]!r}, backing off on our own schedule"
    return ""
