"""HTTP outcomes -> typed ``BackendError``s, and what may be retried.

A server's error body becomes the message and the detail only through ``redact_text``: a key it
echoes back ("Invalid credentials: Bearer sk-…") is replaced before the error exists.

Transient (retried with backoff, counted by the circuit breaker): 5xx, dropped or refused
connections, and 429 (retried after its ``Retry-After``, but not counted against the
endpoint's health). Timeouts are transient only when ``retry_on_timeout`` is set. Everything
else (401/403, other 4xx, malformed bodies, an open circuit) fails at once.

A prompt over the model's context window is ``BackendContextExceeded``, never retried (the same
request cannot fit the next time), whatever the status the server chose for it. The shapes known
(``context_overflow``): llama-cpp-python's server (400, OpenAI's wording and code), OpenAI (400,
``code: context_length_exceeded``), vLLM (400, "maximum context length is N tokens", or "longer
than the maximum model length of N"), llama.cpp's server (400, ``type: exceed_context_size_error``
with ``n_ctx`` and ``n_prompt_tokens``), and Anthropic's wording behind an OpenAI-compatible proxy.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ora_core.api import (
    BackendAuthError,
    BackendBadResponse,
    BackendContextExceeded,
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


#: What servers say when a prompt does not fit: the window (``window``) and the prompt's size
#: (``prompt``) where the wording gives them. Matched case-insensitively against the error message.
_WINDOW_PATTERNS = (
    # OpenAI, vLLM, llama-cpp-python's server: "This model's maximum context length is 2048 tokens"
    re.compile(r"maximum context length is (?P<window>\d+)"),
    # llama-cpp-python's own ValueError: "Requested tokens (3000) exceed context window of 2048"
    re.compile(r"requested tokens \((?P<prompt>\d+)\) exceed context window of (?P<window>\d+)"),
    # llama.cpp's server: "request (4476 tokens) exceeds the available context size (4096 tokens)"
    re.compile(r"request \((?P<prompt>\d+) tokens\) exceeds the available context size \((?P<window>\d+) tokens\)"),
    # vLLM: "The decoder prompt (length 3000) is longer than the maximum model length of 2048"
    re.compile(r"prompt \(length (?P<prompt>\d+)\) is longer than the maximum model length of (?P<window>\d+)"),
    # Anthropic (through an OpenAI-compatible proxy): "prompt is too long: 210000 tokens > 200000 maximum"
    re.compile(r"prompt is too long: (?P<prompt>\d+) tokens > (?P<window>\d+) maximum"),
    re.compile(r"context (?:length|window) (?:exceeded|of (?P<window>\d+) tokens exceeded)"),
)
#: Where a message that names the window gives the prompt's size too.
_PROMPT_PATTERNS = (
    re.compile(r"\((?P<prompt>\d+) in the messages"),  # vLLM, llama-cpp-python's server
    re.compile(r"your messages resulted in (?P<prompt>\d+) tokens"),  # OpenAI
    re.compile(r"your request has (?P<prompt>\d+) input tokens"),  # vLLM >= 0.10
    re.compile(r"you requested (?P<prompt>\d+) tokens"),  # prompt + completion, when nothing finer is said
)
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"})


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def context_overflow(status: int, body: bytes | str | dict[str, Any]) -> tuple[int | None, int | None] | None:
    """``(context_window, prompt_tokens)`` if this error says the prompt does not fit the model's
    context window (each ``None`` when the server did not say it), else ``None``.

    ``body`` is the response body, or an ``error`` object a stream carried. Auth and rate-limit
    statuses never are (a 429 for tokens per minute is not a window)."""
    if status in (401, 403, 429):
        return None
    data: Any = body
    if isinstance(body, (bytes, str)):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            data = json.loads(text)
        except ValueError:
            data = {"message": text}
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, str):
        error = {"message": error}
    fields: dict[str, Any] = error if isinstance(error, dict) else (data if isinstance(data, dict) else {})
    message = str(fields.get("message") or "")
    codes = {str(fields.get(k) or "").lower() for k in ("code", "type")}
    window, prompt = _int(fields.get("n_ctx")), _int(fields.get("n_prompt_tokens"))
    matched = bool(codes & _CONTEXT_CODES)
    lowered = message.lower()
    for pattern in _WINDOW_PATTERNS:
        found = pattern.search(lowered)
        if found is None:
            continue
        matched = True
        said = found.groupdict()
        if window is None and said.get("window"):
            window = int(said["window"])
        if prompt is None and said.get("prompt"):
            prompt = int(said["prompt"])
        break
    if not matched:
        return None
    if prompt is None:
        for pattern in _PROMPT_PATTERNS:
            found = pattern.search(lowered)
            if found is not None:
                prompt = int(found.group("prompt"))
                break
    return window, prompt


def context_error(window: int | None, prompt: int | None, said: str, *, status: int | None, provider: str,
                  model: str, endpoint: str, detail: str) -> BackendContextExceeded:
    """The typed error for a prompt over the window, its message naming both sizes when known."""
    size = f"its context window of {window} tokens" if window else "its context window (size not stated)"
    asked = f"a prompt of {prompt} tokens" if prompt else "the prompt"
    how = f" (HTTP {status})" if status is not None else " (an error in the stream)"
    return BackendContextExceeded(
        f"{endpoint} refused {asked} for {model or 'the model'}: it does not fit {size}{how}; "
        f"not retried (the same request cannot fit): {said}",
        context_window=window, prompt_tokens=prompt, provider=provider, model=model, detail=detail)


def status_error(status: int, body: bytes, headers: Any, *, provider: str, model: str, endpoint: str,
                 retry_after_max_s: float) -> tuple[BackendError, bool, str]:
    """(error, transient, breaker verdict) for a non-2xx response; verdict is failure|release."""
    message = server_message(body)
    detail = f"HTTP {status} from {endpoint}: {redact_text(body.decode('utf-8', 'replace')[:1500])}"
    kw = {"provider": provider, "model": model, "detail": detail}
    overflow = context_overflow(status, body) if status >= 400 else None
    if overflow is not None:  # the server is healthy: it read the request and said why it cannot run it
        return (context_error(*overflow, message, status=status, provider=provider, model=model, endpoint=endpoint,
                              detail=detail), False, "release")
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
