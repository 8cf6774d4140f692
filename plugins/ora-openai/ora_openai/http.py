"""HTTP outcomes -> typed ``BackendError``s, and what may be retried.

A server's error body becomes the message and the detail only through ``redact_text``: a key it
echoes back ("Invalid credentials: Bearer sk-…") is replaced before the error exists.

Transient (retried with backoff, counted by the circuit breaker): 5xx, dropped or refused
connections, and 429 (retried after its ``Retry-After``, but not counted against the
endpoint's health). Timeouts are transient only when ``retry_on_timeout`` is set. Everything
else (401/403, other 4xx, malformed bodies, an open circuit) fails at once.
"""

from __future__ import annotations

import json
from typing import Any

from ora_core.api import (
    BackendAuthError,
    BackendBadResponse,
    BackendError,
    BackendRateLimited,
    BackendTimeout,
    BackendUnavailable,
    redact_text,
)
from ora_core.api.http import parse_retry_after, retry_after_note


class Transient(Exception):
    """Carries a retryable BackendError through tenacity; unwrapped when retries run out."""

    def __init__(self, error: BackendError) -> None:
        self.error = error
        super().__init__(str(error))


def server_message(body: bytes) -> str:
    """The error message an OpenAI-style (or Anthropic-style) error body carries, else its text;
    credential shapes replaced (``redact_text``)."""
    return redact_text(_server_message(body))


def _server_message(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
        if data.get("message"):
            return str(data["message"])[:300]
    return text[:300]


def status_error(status: int, body: bytes, headers: Any, *, provider: str, model: str, endpoint: str,
                 retry_after_max_s: float) -> tuple[BackendError, bool, str]:
    """(error, transient, breaker verdict) for a non-2xx response; verdict is failure|release."""
    message = server_message(body)
    detail = f"HTTP {status} from {endpoint}: {redact_text(body.decode('utf-8', 'replace')[:1500])}"
    kw = {"provider": provider, "model": model, "detail": detail}
    if status == 429:
        raw_retry_after = headers.get("retry-after")
        retry_after = parse_retry_after(raw_retry_after)
        error = BackendRateLimited(f"rate limited by {endpoint} (HTTP 429"
                                   + retry_after_note(raw_retry_after, retry_after)
                                   + f"): {message}", retry_after=retry_after, **kw)
        transient = retry_after is None or retry_after <= retry_after_max_s
        return error, transient, "release"
    if status in (401, 403):
        error = BackendAuthError(f"{endpoint} refused the credentials (HTTP {status}): {message}", **kw)
        return error, False, "release"
    if status == 408:
        return BackendTimeout(f"{endpoint} timed out the request (HTTP 408): {message}", **kw), True, "failure"
    if status >= 500:
        return BackendUnavailable(f"{endpoint} failed (HTTP {status}): {message}", **kw), True, "failure"
    if status == 404:
        error = BackendUnavailable(f"{endpoint} has no such route or model (HTTP 404): {message}", **kw)
        return error, False, "release"
    return BackendBadResponse(f"{endpoint} rejected the request (HTTP {status}): {message}", **kw), False, "release"
