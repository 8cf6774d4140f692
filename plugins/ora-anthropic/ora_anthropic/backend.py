"""The ``anthropic`` backend: ``POST {base_url}/v1/messages``, plain and streamed.

A server's error body reaches an error's message and detail only through ``redact_text`` (a key the
server echoes back is replaced), and the endpoint is named with ``mask_url`` (no password)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
from pydantic import ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from ora_core.api import (
    BackendAuthError,
    BackendBadResponse,
    BackendError,
    BackendRateLimited,
    BackendTimeout,
    BackendUnavailable,
    Completion,
    CompletionParams,
    ConfigError,
    Message,
    mask_url,
    redact_text,
)
from ora_core.api.http import READ_BODY, make_client, parse_retry_after, retry_after_note

from .options import API_VERSION as API_VERSION  # re-exported: it lived here
from .options import AnthropicOptions

BACKEND_TYPE = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"


class _Transient(Exception):
    def __init__(self, error: BackendError) -> None:
        self.error = error
        super().__init__(str(error))


def to_wire(messages: Sequence[Message]) -> tuple[str, list[dict[str, str]]]:
    """Ora messages -> (system, alternating user/assistant turns starting with the user)."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, str]] = []
    for m in messages:
        if m.role == "system":
            continue
        if turns and turns[-1]["role"] == m.role:
            turns[-1]["content"] += "\n\n" + m.content
        else:
            turns.append({"role": m.role, "content": m.content})
    return system, turns


class AnthropicBackend:
    provider = BACKEND_TYPE

    def __init__(self, settings: Any, options: AnthropicOptions) -> None:
        self.settings = settings
        self.options = options
        self.model: str = settings.model
        self.family: str = settings.family or "claude"
        root = (settings.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.api_root = root if root.endswith("/v1") else root + "/v1"
        self.endpoint = mask_url(self.api_root)  # as messages name it
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._backoff = wait_exponential_jitter(multiplier=options.backoff_initial_s, max=options.backoff_max_s,
                                                jitter=options.backoff_initial_s)

    def _error(self, cls: type[BackendError], message: str, detail: str = "", **kw: Any) -> BackendError:
        return cls(message, provider=self.provider, model=self.model, detail=detail, **kw)

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._client_loop is not loop:
            o = self.options
            self._client, _ = make_client(o.transport, self.api_root, headers=dict(o.headers),
                                          timeout=httpx.Timeout(self.settings.timeout_s, connect=o.connect_timeout_s),
                                          max_connections=o.max_connections, max_keepalive=o.max_keepalive,
                                          keepalive_expiry_s=o.keepalive_expiry_s)
            self._client_loop = loop
        return self._client

    def _headers(self) -> dict[str, str]:
        key = self.settings.resolved_api_key()
        if not key:
            where = f"environment variable {self.settings.api_key_env}" if self.settings.api_key_env else "api_key"
            raise self._error(BackendAuthError, f"no Anthropic API key: {where} is not set")
        return {"x-api-key": key, "anthropic-version": self.options.api_version, "content-type": "application/json"}

    def _body(self, messages: Sequence[Message], params: CompletionParams, *, stream: bool) -> dict[str, Any]:
        system, turns = to_wire(messages)
        if not turns or turns[0]["role"] != "user":
            raise self._error(BackendBadResponse, "the Messages API needs the first non-system message to be "
                              "the user's; nothing was sent")
        body: dict[str, Any] = {"model": params.model or self.model, "max_tokens": params.max_tokens,
                                "messages": turns, "temperature": min(params.temperature, 1.0), "stream": stream}
        if system:
            body["system"] = system
        if params.stop:
            body["stop_sequences"] = list(params.stop)
        body.update(params.extra)
        return body

    def _status_error(self, status: int, raw: bytes, headers: Any) -> BackendError | _Transient:
        try:
            err = json.loads(raw).get("error") or {}
        except (ValueError, AttributeError):
            err = {}
        kind = err.get("type", "") if isinstance(err, dict) else ""
        message = redact_text(str((err.get("message") if isinstance(err, dict) else None)
                                  or raw.decode("utf-8", "replace")[:300]))
        detail = f"HTTP {status} {kind}: {redact_text(raw.decode('utf-8', 'replace')[:1500])}"
        text = f"Anthropic API HTTP {status} ({kind or 'no error type'}): {message}"
        if status == 429:
            raw_wait = headers.get("retry-after")
            wait = parse_retry_after(raw_wait)
            error = self._error(BackendRateLimited, text + retry_after_note(raw_wait, wait), detail, retry_after=wait)
            return _Transient(error) if wait is None or wait <= self.options.retry_after_max_s else error
        if status in (401, 403):
            return self._error(BackendAuthError, text, detail)
        if status >= 500:  # 529 overloaded_error included
            return _Transient(self._error(BackendUnavailable, text, detail))
        if status == 404:
            return self._error(BackendUnavailable, text, detail)
        return self._error(BackendBadResponse, text, detail)

    def _transport_error(self, exc: BaseException, timeout_s: float) -> BackendError | _Transient:
        if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
            return self._error(BackendTimeout, f"Anthropic API gave no answer within {timeout_s:g}s",
                               f"{type(exc).__name__}: {exc}")
        if isinstance(exc, (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            return _Transient(self._error(BackendUnavailable, f"connection to {self.endpoint} failed: "
                                          f"{exc or type(exc).__name__}", f"{type(exc).__name__}: {exc}"))
        return self._error(BackendUnavailable, f"request to {self.endpoint} failed: {type(exc).__name__}: {exc}")

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = getattr(getattr(exc, "error", None), "retry_after", None)
        return float(retry_after) if retry_after is not None else float(self._backoff(state))

    async def _with_retries(self, attempt_once: Any) -> tuple[Any, int]:
        attempts = 0
        try:
            async for attempt in AsyncRetrying(stop=stop_after_attempt(self.settings.max_retries + 1), wait=self._wait,
                                               retry=retry_if_exception_type(_Transient), reraise=True):
                with attempt:
                    attempts += 1
                    result = await attempt_once()
        except _Transient as exc:
            exc.error.attempts = attempts  # type: ignore[attr-defined]
            raise exc.error from None
        return result, attempts

    async def complete(self, messages: Sequence[Message], params: CompletionParams) -> Completion:
        start = time.perf_counter()
        body = self._body(messages, params, stream=False)

        async def once() -> Any:
            headers = self._headers()
            try:
                async with asyncio.timeout(params.timeout_s):
                    response = await self._http().post(f"{self.api_root}/messages", json=body, headers=headers,
                                                       timeout=params.timeout_s, extensions={READ_BODY: True})
            except (TimeoutError, httpx.HTTPError) as exc:
                raise self._transport_error(exc, params.timeout_s) from exc
            if response.status_code >= 300:
                raise self._status_error(response.status_code, response.content, response.headers)
            try:
                return response.json()
            except ValueError as exc:
                raise self._error(BackendBadResponse, "the Anthropic API answered malformed JSON",
                                  redact_text(response.text[:1500])) from exc

        data, attempts = await self._with_retries(once)
        if not isinstance(data, dict) or data.get("type") == "error" or not isinstance(data.get("content"), list):
            raise self._error(BackendBadResponse, "the reply is not a message object", json.dumps(data)[:1500])
        text = "".join(b.get("text", "") for b in data["content"] if isinstance(b, dict) and b.get("type") == "text")
        stop = str(data.get("stop_reason") or "")
        if not text.strip():
            raise self._error(BackendBadResponse, f"the reply has no text (stop_reason={stop!r})",
                              json.dumps(data)[:1500])
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        served = data.get("model")
        model = self.model if not served or str(served).startswith(self.model) else str(served)
        return Completion(text=text, provider=self.provider, model=model, family=self.family,
                          prompt_tokens=int(usage.get("input_tokens") or 0),
                          completion_tokens=int(usage.get("output_tokens") or 0), finish_reason=stop,
                          attempts=attempts, latency_s=time.perf_counter() - start)

    async def stream(self, messages: Sequence[Message], params: CompletionParams) -> AsyncIterator[str]:
        """Text deltas from the event stream; an ``error`` event, a broken connection or a stream
        without ``message_stop`` raises a typed error."""
        body = self._body(messages, params, stream=True)
        client = self._http()

        async def once() -> httpx.Response:
            request = client.build_request("POST", f"{self.api_root}/messages", json=body, headers=self._headers(),
                                           timeout=params.timeout_s)
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, params.timeout_s) from exc
            if response.status_code >= 300:
                raw = await response.aread()
                await response.aclose()
                raise self._status_error(response.status_code, raw, response.headers)
            return response

        response, _ = await self._with_retries(once)
        emitted, stopped, event = 0, False, ""
        deadline = time.monotonic() + params.timeout_s
        try:
            async for line in response.aiter_lines():
                if time.monotonic() > deadline:
                    raise self._error(BackendTimeout, f"stream passed timeout_s={params.timeout_s:g}s")
                if line.startswith("event:"):
                    event = line[6:].strip()
                    continue
                if not line.startswith("data:"):
                    continue
                try:
                    data = json.loads(line[5:].strip())
                except ValueError as exc:
                    raise self._error(BackendBadResponse, "malformed event in the stream", line[:1500]) from exc
                kind = data.get("type", event) if isinstance(data, dict) else event
                if kind == "error":
                    err = data.get("error") or {}
                    cls = BackendUnavailable if err.get("type") in ("overloaded_error", "api_error") else \
                        BackendBadResponse
                    raise self._error(cls, redact_text(f"the stream carried an error: {err.get('type')}: "
                                                       f"{err.get('message')}"), redact_text(json.dumps(data)[:1500]))
                if kind == "content_block_delta":
                    text = (data.get("delta") or {}).get("text")
                    if text:
                        emitted += len(text)
                        yield text
                elif kind == "message_stop":
                    stopped = True
                    break
        except httpx.HTTPError as exc:
            problem = self._transport_error(exc, params.timeout_s)
            raise (problem.error if isinstance(problem, _Transient) else problem) from exc
        finally:
            await response.aclose()
        if not stopped:
            raise self._error(BackendUnavailable, f"the stream ended without message_stop after {emitted} characters")
        if not emitted:
            raise self._error(BackendBadResponse, "the stream carried no text")

    async def check(self) -> dict[str, Any]:
        """``GET /v1/models``: reachable, key accepted, model listed?"""
        start = time.perf_counter()
        try:
            response = await self._http().get(f"{self.api_root}/models", headers=self._headers(),
                                               timeout=min(self.settings.timeout_s, 10.0))
        except httpx.HTTPError as exc:
            problem = self._transport_error(exc, 10.0)
            raise (problem.error if isinstance(problem, _Transient) else problem) from exc
        if response.status_code >= 300:
            problem = self._status_error(response.status_code, response.content, response.headers)
            raise problem.error if isinstance(problem, _Transient) else problem
        try:
            listed = [m.get("id") for m in response.json().get("data", [])]
        except (ValueError, AttributeError) as exc:
            raise self._error(BackendBadResponse, "malformed /v1/models answer",
                              redact_text(response.text[:1500])) from exc
        return {"endpoint": self.endpoint, "models": listed[:20], "model_listed": self.model in listed,
                "latency_s": round(time.perf_counter() - start, 3)}

    async def aclose(self) -> None:
        client, self._client = self._client, None
        loop, self._client_loop = self._client_loop, None
        if client is not None and not client.is_closed and loop is asyncio.get_running_loop():
            await client.aclose()


class AnthropicFactory:
    name = BACKEND_TYPE

    def create(self, settings: Any) -> AnthropicBackend:
        try:
            options = AnthropicOptions.model_validate(dict(settings.options))
        except ValidationError as exc:
            problems = "; ".join(f"options.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"invalid options for an 'anthropic' backend: {problems}", field="options") from None
        return AnthropicBackend(settings, options)
