"""The ``openai`` backend: chat completions and streaming against any OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from ora_core.api import (
    BackendAuthError,
    BackendBadResponse,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    Completion,
    CompletionParams,
    ConfigError,
    Message,
    assembled,
    mask_url,
    redact_text,
)
from ora_core.api.http import deadline

from .breaker import breaker_for
from .cache import ResponseCache, default_cache_dir, request_key
from .http import Transient, status_error
from .options import OpenAIOptions, parse_options
from .transport import READ_BODY, AiohttpTransport, make_client, wire_headers

BACKEND_TYPE = "openai"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
T = TypeVar("T")
#: The request body's JSON as httpx's ``json=`` writes it; one encoder, not one per call.
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_NO_AUTH: list[tuple[bytes, bytes]] = []


def _built_completion(fields: dict[str, Any]) -> Completion:
    """A ``Completion`` from parts already typed (``_parse`` checked or converted each one),
    every field given in field order: what validating them would build, without that cost on
    every call. ``plugins/ora-openai/tests/test_call_path.py`` pins it equal to the validated one."""
    return assembled(Completion, fields)


class OpenAIBackend:
    provider = BACKEND_TYPE

    def __init__(self, settings: Any, options: OpenAIOptions) -> None:
        self.settings = settings
        self.options = options
        self.model: str = settings.model
        self.family: str = settings.family
        self.base_url = (settings.base_url or DEFAULT_BASE_URL).rstrip("/")
        #: The endpoint as messages name it: a password or credential parameter in it masked.
        self.endpoint = mask_url(self.base_url)
        self.max_retries: int = settings.max_retries
        self.breaker = breaker_for(self.base_url, failures=options.breaker_failures, reset_s=options.breaker_reset_s)
        try:
            base = httpx.URL(self.base_url)
        except httpx.InvalidURL as exc:
            raise ConfigError(f"base_url {self.endpoint!r} of an 'openai' backend is not a URL: {exc}",
                              field="base_url") from None
        #: A user:password in base_url is sent as a Basic Authorization header (when no API key
        #: is configured) and never in the request URL: aiohttp refuses a URL carrying userinfo
        #: beside an Authorization header, and a URL is what error messages quote.
        self._basic_auth: str | None = None
        if base.username or base.password:
            import base64

            pair = f"{base.username}:{base.password}".encode()
            self._basic_auth = "Basic " + base64.b64encode(pair).decode("ascii")
            base = base.copy_with(username=None, password=None)
        self._base = base
        self._chat_url = self.url_for("chat/completions")  # parsed once, not per call; the query string kept
        self._chat_url_text = str(self._chat_url)
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._transport: httpx.AsyncBaseTransport | None = None
        self._base_headers: list[tuple[bytes, bytes]] = []
        self._auth_cache: tuple[str | None, list[tuple[bytes, bytes]]] = (None, [])
        self._wire_cache: tuple[tuple[list[Any], list[Any]] | None, list[tuple[str, str]]] = (None, [])
        self._timeouts: dict[float, dict[str, float | None]] = {}
        self._cache: ResponseCache | None = None
        self._backoff = wait_exponential_jitter(multiplier=options.backoff_initial_s, max=options.backoff_max_s,
                                                jitter=options.backoff_initial_s)

    # --- plumbing -------------------------------------------------------------------------------

    def _error(self, cls: type[BackendError], message: str, detail: str = "") -> BackendError:
        return cls(message, provider=self.provider, model=self.model, detail=detail)

    def _http(self) -> httpx.AsyncClient:
        """One pooled client (and transport) per backend and event loop: connections are reused
        across calls."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._client_loop is not loop:
            o = self.options
            self._client, self._transport = make_client(
                o.transport, str(self._chat_url), headers=dict(o.headers),
                timeout=httpx.Timeout(self.settings.timeout_s, connect=o.connect_timeout_s),
                max_connections=o.max_connections, max_keepalive=o.max_keepalive, shard_size=o.pool_shard_size,
                keepalive_expiry_s=o.keepalive_expiry_s)
            self._client_loop = loop
            # What the client would send with every request (Host, its defaults, then
            # options.headers), built once: per call only the key and the length are added.
            merged = httpx.Headers({"Host": self._chat_url.netloc.decode("ascii"), "Content-Type": "application/json"})
            merged.update(self._client.headers)
            self._base_headers = [(k, v) for k, v in merged.raw if k.lower() != b"content-length"]
        return self._client

    def url_for(self, path: str) -> httpx.URL:
        """``base_url`` with ``path`` appended to its path, its query string (``?api-version=...``)
        kept, its userinfo removed (sent as a header instead)."""
        return self._base.copy_with(path=self._base.path.rstrip("/") + "/" + path.lstrip("/"))

    def _auth_headers(self) -> dict[str, str]:
        key = self.settings.resolved_api_key()
        if key:
            return {"Authorization": f"Bearer {key}"}
        if self.settings.api_key_env:
            raise self._error(BackendAuthError, f"environment variable {self.settings.api_key_env} (api_key_env) "
                                                "is not set; no API key to send")
        return {"Authorization": self._basic_auth} if self._basic_auth else {}

    def _auth_raw(self) -> list[tuple[bytes, bytes]]:
        """The auth header as raw pairs, rebuilt only when the resolved key changes (the same
        list object while it does not: ``_wire_headers`` caches on it)."""
        key = self.settings.resolved_api_key()
        if key and key == self._auth_cache[0]:
            return self._auth_cache[1]
        if not key and not self.settings.api_key_env and not self._basic_auth:
            return _NO_AUTH  # no key configured: nothing to send
        if not key and self._basic_auth and self._auth_cache[0] == self._basic_auth:
            return self._auth_cache[1]
        pairs = [(k.encode(), v.encode()) for k, v in self._auth_headers().items()]
        self._auth_cache = (key or self._basic_auth, pairs)
        return self._auth_cache[1]

    def _wire_headers(self) -> list[tuple[str, str]]:
        """Every header of a chat completion but ``Content-Length``, as text pairs for
        ``AiohttpTransport.send_whole``; rebuilt only when the client or the key changes."""
        base, auth = self._base_headers, self._auth_raw()
        built_from, wire = self._wire_cache
        if built_from is None or built_from[0] is not base or built_from[1] is not auth:
            wire = wire_headers([*base, *auth])
            self._wire_cache = ((base, auth), wire)
        return wire

    def _timeout(self, timeout_s: float) -> httpx.Timeout:
        return httpx.Timeout(timeout_s, connect=min(self.options.connect_timeout_s, timeout_s))

    def _timeout_extension(self, timeout_s: float) -> dict[str, float | None]:
        ext = self._timeouts.get(timeout_s)
        if ext is None:
            ext = self._timeout(timeout_s).as_dict()
            if len(self._timeouts) < 32:
                self._timeouts[timeout_s] = ext
        return ext

    @staticmethod
    def _encode(body: dict[str, Any]) -> bytes:
        """The JSON body as httpx's ``json=`` would encode it."""
        return _JSON.encode(body).encode("utf-8")

    def _request(self, body: dict[str, Any], timeout_s: float, *, whole: bool = False) -> httpx.Request:
        """``POST {base_url}/chat/completions`` with the JSON body: the request httpx's client would
        build (same headers, JSON encoding and timeouts), from parts prepared once per backend.
        ``whole``: the body will be read at once (not a stream), so the transport may read it."""
        self._http()
        content = self._encode(body)
        headers = [*self._base_headers, *self._auth_raw(), (b"Content-Length", b"%d" % len(content))]
        extensions: dict[str, Any] = {"timeout": self._timeout_extension(timeout_s)}
        if whole:
            extensions[READ_BODY] = True
        request = httpx.Request("POST", self._chat_url, headers=headers, stream=httpx.ByteStream(content),
                                extensions=extensions)
        request.read()  # a byte body, read like httpx reads one (``request.content`` is set)
        return request

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """The response with its body unread (``aread``/``aiter_lines`` it, then ``aclose``).

        Straight to the transport: httpx's client layer (URL merging, cookies, auth and redirect
        machinery, none of which this backend uses) costs more CPU per call than the transport
        does. Through the client only where an environment proxy applies (see ``make_client``)."""
        client = self._http()
        if self._transport is not None:
            return await self._transport.handle_async_request(request)
        return await client.send(request, stream=True)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = getattr(getattr(exc, "error", None), "retry_after", None)
        return float(retry_after) if retry_after is not None else float(self._backoff(state))

    def _retrying(self) -> AsyncRetrying:
        return AsyncRetrying(stop=stop_after_attempt(self.max_retries + 1), wait=self._wait,
                             retry=retry_if_exception_type(Transient), reraise=True)

    async def _with_retries(self, once: Callable[[], Awaitable[T]]) -> tuple[T, int]:
        """``once()`` and the number of attempts it took; a typed error carries ``attempts``.

        The first attempt runs bare (tenacity's machinery costs CPU on every call); a transient
        failure enters tenacity, which replays it as attempt 1, so the waits (``Retry-After``
        included), the stop condition and the attempt count are exactly tenacity's."""
        try:
            return await once(), 1
        except Transient as exc:
            first: Transient | None = exc
        except BackendError as exc:
            exc.attempts = 1  # type: ignore[attr-defined]
            raise
        attempts = 0
        try:
            async for attempt in self._retrying():
                with attempt:
                    attempts += 1
                    if first is not None:
                        replay, first = first, None
                        raise replay
                    result = await once()
        except Transient as exc:
            exc.error.attempts = attempts  # type: ignore[attr-defined]
            raise exc.error from None
        except BackendError as exc:
            exc.attempts = attempts  # type: ignore[attr-defined]
            raise
        return result, attempts

    def _body(self, messages: Sequence[Message], params: CompletionParams, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": params.model or self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "stream": stream,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if stream and self.options.stream_usage:
            body["stream_options"] = {"include_usage": True}
        body.update(params.extra)
        return body

    def _transport_error(self, exc: BaseException, what: str, timeout_s: float) -> Transient | BackendError:
        """A failure below HTTP: count it against the endpoint and say whether to retry."""
        if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
            self.breaker.failure(f"timeout: {what}")
            error = self._error(BackendTimeout, f"{self.endpoint} gave no answer within {timeout_s:g}s ({what})",
                                detail=f"{type(exc).__name__}: {exc}")
            return Transient(error) if self.options.retry_on_timeout else error
        if isinstance(exc, httpx.ConnectError):
            self.breaker.failure(f"connect: {exc}")
            return Transient(self._error(BackendUnavailable, f"cannot connect to {self.endpoint}: {exc}",
                                         detail=f"{type(exc).__name__}: {exc}"))
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.NetworkError)):
            self.breaker.failure(f"dropped: {exc}")
            return Transient(self._error(BackendUnavailable, f"{self.endpoint} dropped the connection ({what}): "
                                         f"{exc or type(exc).__name__}", detail=f"{type(exc).__name__}: {exc}"))
        self.breaker.release()
        return self._error(BackendUnavailable, f"request to {self.endpoint} failed: {type(exc).__name__}: {exc}",
                           detail=repr(exc))

    def _admit(self) -> None:
        if not self.breaker.allow():
            raise self._error(BackendUnavailable,
                              f"circuit open for {self.endpoint} after repeated failures; not calling it for "
                              f"another {self.breaker.retry_in():.1f}s", detail="circuit breaker: open")

    def _on_status(self, response: Any, body: bytes) -> None:
        error, transient, verdict = status_error(response.status_code, body, response.headers,
                                                 provider=self.provider, model=self.model, endpoint=self.endpoint,
                                                 retry_after_max_s=self.options.retry_after_max_s)
        if verdict == "failure":
            self.breaker.failure(f"HTTP {response.status_code}")
        else:
            self.breaker.release()
        raise Transient(error) if transient else error

    def _effective_model(self, served: Any) -> str:
        """What ran: the requested model, unless the server names another one (a snapshot suffix
        such as ``gpt-4o-2024-08-06`` or an Ollama tag ``llama3:latest`` is the same model)."""
        if not isinstance(served, str) or not served or served == self.model:
            return self.model
        if served.startswith((self.model + "-", self.model + ":")):
            return self.model
        return served

    # --- one attempt ----------------------------------------------------------------------------

    async def _post_once(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self._admit()
        self._http()
        transport = self._transport
        if not isinstance(transport, AiohttpTransport):
            return await self._post_once_httpx(body, timeout_s)
        # The default transport: straight to aiohttp with the request's parts, no httpx objects
        # (``send_whole``: same bytes on the wire, same httpx errors for the same failures).
        content = self._encode(body)
        try:
            async with deadline(timeout_s):
                response = await transport.send_whole("POST", self._chat_url_text, self._wire_headers(), content,
                                                      self._timeout_extension(timeout_s), read_bounded=True)
        except (TimeoutError, httpx.HTTPError) as exc:
            raise self._transport_error(exc, "chat completion", timeout_s) from exc
        return self._answer(response, response.content)

    async def _post_once_httpx(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """One attempt through httpx's request and response types: the ``httpcore`` transport,
        and the client when an environment proxy applies."""
        request = self._request(body, timeout_s, whole=True)
        try:
            async with deadline(timeout_s):
                response = await self._send(request)
                try:
                    raw = await response.aread()
                finally:
                    await response.aclose()
        except (TimeoutError, httpx.HTTPError) as exc:
            problem = self._transport_error(exc, "chat completion", timeout_s)
            raise problem from exc
        return self._answer(response, raw)

    def _answer(self, response: Any, raw: bytes) -> dict[str, Any]:
        """The decoded JSON of one attempt's response (``status_code``, ``headers``), or its error."""
        if response.status_code >= 300:
            self._on_status(response, raw)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            self.breaker.failure("malformed JSON")
            raise self._error(BackendBadResponse, f"{self.endpoint} answered HTTP {response.status_code} with "
                              f"malformed JSON ({exc})",
                              detail=redact_text(raw[:1500].decode("utf-8", "replace"))) from exc
        self.breaker.success()
        return data

    def _parse(self, data: Any) -> tuple[str, str, int, int, str]:
        if not isinstance(data, dict):
            raise self._error(BackendBadResponse, f"expected a JSON object, got {type(data).__name__}",
                              detail=json.dumps(data)[:1500])
        if data.get("error"):
            said = redact_text(str(data["error"]))
            raise self._error(BackendBadResponse, f"the server answered with an error object: {said}",
                              detail=redact_text(json.dumps(data)[:1500]))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._error(BackendBadResponse, "the reply has no choices", detail=json.dumps(data)[:1500])
        choice = choices[0]
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        text = message.get("content")
        finish = str(choice.get("finish_reason") or "")
        if not isinstance(text, str) or not text.strip():
            raise self._error(BackendBadResponse, f"the reply has no text (finish_reason={finish!r})",
                              detail=json.dumps(data)[:1500])
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return (text, finish, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                self._effective_model(data.get("model")))

    # --- the cache ------------------------------------------------------------------------------

    def _response_cache(self) -> ResponseCache | None:
        if not self.options.cache:
            return None
        if self._cache is None:
            directory = Path(self.options.cache_dir).expanduser() if self.options.cache_dir else default_cache_dir()
            self._cache = ResponseCache(directory, self.options.cache_ttl_s)
        return self._cache

    def _cache_failed(self, stage: str, exc: BaseException, warnings: list[str]) -> None:
        # The call itself goes on uncached. No turn here to record into: stderr names it now, and the
        # Completion carries it (``warnings``) for the kernel to name in the turn's trace.
        message = (f"openai response cache {stage} failed ({type(exc).__name__}: {exc}); "
                   "answering without the cache")
        print(f"ora: {message}", file=sys.stderr)
        warnings.append(message)

    # --- the backend protocol -------------------------------------------------------------------

    async def complete(self, messages: Sequence[Message], params: CompletionParams) -> Completion:
        start = time.perf_counter()
        body = self._body(messages, params, stream=False)
        cache, key = None, ""
        warnings: list[str] = []
        try:
            cache = self._response_cache()
            if cache is not None:
                key = request_key(f"{self.base_url}/chat/completions", body)
                hit = await cache.get(key)
                if hit is not None:
                    return Completion(**hit, provider=self.provider, family=self.family, cached=True,
                                      latency_s=time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - a broken cache must not stop the call; named on stderr
            self._cache_failed("read", exc, warnings)
            cache = None
        data, attempts = await self._with_retries(lambda: self._post_once(body, params.timeout_s))
        text, finish, prompt_tokens, completion_tokens, model = self._parse(data)
        if cache is not None:
            stored = {"text": text, "model": model, "prompt_tokens": prompt_tokens,
                      "completion_tokens": completion_tokens, "finish_reason": finish}
            try:
                await cache.put(key, stored)
            except Exception as exc:  # noqa: BLE001 - see _cache_failed
                self._cache_failed("write", exc, warnings)
        return _built_completion({
            "text": text, "provider": self.provider, "model": model, "family": self.family,
            "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "latency_s": time.perf_counter() - start, "finish_reason": finish, "cached": False, "attempts": attempts,
            "warnings": warnings})

    async def _open_stream(self, body: dict[str, Any], timeout_s: float) -> httpx.Response:
        self._admit()
        request = self._request(body, timeout_s)
        response: httpx.Response | None = None
        try:
            async with deadline(timeout_s):
                response = await self._send(request)
                if response.status_code >= 300:
                    raw = await response.aread()
                    await response.aclose()
                    self._on_status(response, raw)
        except (TimeoutError, httpx.HTTPError) as exc:
            if response is not None:  # the deadline fell between the headers and the return
                await response.aclose()
            raise self._transport_error(exc, "opening the stream", timeout_s) from exc
        return response

    async def stream(self, messages: Sequence[Message], params: CompletionParams) -> AsyncIterator[str]:
        """Text deltas from a server-sent-event stream. Retries happen only before the first byte;
        a stream that breaks, stalls past ``timeout_s`` or ends without ``[DONE]`` raises."""
        body = self._body(messages, params, stream=True)
        response, _ = await self._with_retries(lambda: self._open_stream(body, params.timeout_s))
        deadline = time.monotonic() + params.timeout_s
        emitted = 0
        done = False
        try:
            async for line in response.aiter_lines():
                if time.monotonic() > deadline:
                    raise self._error(BackendTimeout, f"stream from {self.endpoint} passed timeout_s="
                                      f"{params.timeout_s:g}s after {emitted} characters")
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    break
                try:
                    chunk = json.loads(payload)
                except ValueError as exc:
                    raise self._error(BackendBadResponse, f"malformed stream chunk from {self.endpoint}",
                                      detail=redact_text(payload[:1500])) from exc
                if not isinstance(chunk, dict) or chunk.get("error"):
                    raise self._error(BackendBadResponse, redact_text(f"the stream carried an error: {payload[:300]}"),
                                      detail=redact_text(payload[:1500]))
                for choice in chunk.get("choices") or []:
                    delta = (choice.get("delta") or {}).get("content") if isinstance(choice, dict) else None
                    if delta:
                        emitted += len(delta)
                        yield delta
        except httpx.HTTPError as exc:
            problem = self._transport_error(exc, f"stream broke after {emitted} characters", params.timeout_s)
            raise (problem.error if isinstance(problem, Transient) else problem) from exc
        finally:
            await response.aclose()
        if not done:
            self.breaker.failure("stream ended early")
            raise self._error(BackendUnavailable, f"the stream from {self.endpoint} ended without [DONE] "
                              f"after {emitted} characters")
        self.breaker.success()
        if not emitted:
            raise self._error(BackendBadResponse, "the stream carried no text")

    async def check(self) -> dict[str, Any]:
        """``GET {base_url}/models``: reachable, credentials accepted, and is the model listed?"""
        start = time.perf_counter()
        timeout_s = min(self.settings.timeout_s, 10.0)
        try:
            response = await self._http().get(self.url_for("models"), headers=self._auth_headers(),
                                               timeout=self._timeout(timeout_s))
        except httpx.HTTPError as exc:
            problem = self._transport_error(exc, "listing models", timeout_s)
            raise (problem.error if isinstance(problem, Transient) else problem) from exc
        info: dict[str, Any] = {"endpoint": self.endpoint, "breaker": self.breaker.state,
                                "latency_s": round(time.perf_counter() - start, 3)}
        if response.status_code in (404, 405):
            return {**info, "note": f"the server does not list models (HTTP {response.status_code})"}
        if response.status_code >= 300:
            error, _, _ = status_error(response.status_code, response.content, response.headers,
                                       provider=self.provider, model=self.model, endpoint=self.endpoint,
                                       retry_after_max_s=self.options.retry_after_max_s)
            raise error
        try:
            listed = [str(m.get("id")) for m in response.json().get("data", []) if isinstance(m, dict)]
        except (ValueError, AttributeError) as exc:
            raise self._error(BackendBadResponse, f"{self.endpoint}/models answered malformed JSON",
                              detail=redact_text(response.text[:1500])) from exc
        return {**info, "models": listed[:20], "model_listed": self.model in listed}

    async def aclose(self) -> None:
        client, self._client = self._client, None
        loop, self._client_loop = self._client_loop, None
        if client is not None and not client.is_closed and loop is asyncio.get_running_loop():
            await client.aclose()
        if self._cache is not None:
            self._cache.close()
            self._cache = None


class OpenAIFactory:
    name = BACKEND_TYPE

    def create(self, settings: Any) -> OpenAIBackend:
        return OpenAIBackend(settings, parse_options(dict(settings.options), BACKEND_TYPE))
