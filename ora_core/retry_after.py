"""``Retry-After`` for HTTP backend plugins: one reading of the header for every provider.

A server that rate-limits says how long to wait either as delta-seconds (``"30"``) or as an HTTP
date; both become seconds from now. An absent or unreadable header is ``None`` — the caller then
falls back to its own backoff, and the typed error it raises carries ``retry_after=None`` so the
trace shows the server gave no figure.
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
