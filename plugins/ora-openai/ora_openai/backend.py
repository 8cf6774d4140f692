"""The ``openai`` backend: chat completions and streaming against any OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
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
from .http import Transient, context_error, context_overflow, server_message, status_error
from .options import OpenAIOptions, parse_options
from .transport import READ_BODY, AiohttpTransport, make_client, wire_headers

BACKEND_TYPE = "openai"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
T = TypeVar("T")
#: The request body's JSON as httpx's ``json=`` writes it; one encoder, not one per call.
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_NO_AUTH: list[tuple[bytes, bytes]] = []


#: ``finish_reason``s that say the generation failed, not that it ended: vLLM's engine abort
#: (HTTP 200, ``[DONE]``, ``finish_reason: "abort"``) and servers that report ``"error"``.
FAILED_FINISH = frozenset({"abort", "error"})


class StreamState:
    """What a server-sent-event stream has delivered so far: the text (kept whole, so a failure can
    carry it as ``partial_output``), the ``finish_reason``, the usage and the model it names."""

    __slots__ = ("parts", "chars", "finish_reason", "usage", "model", "done", "stopped", "events")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.chars = 0
        self.finish_reason = ""
        self.usage: dict[str, Any] | None = None
        self.model: Any = None
        self.done = False  # ``data: [DONE]`` arrived
        self.stopped = False  # the reader stopped it (``stop_unless``)
        self.events = 0  # ``data:`` payloads read

    @property
    def text(self) -> str:
        return "".join(self.parts)


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
        #: Sends a caller's JSON schema as ``response_format`` (``options.response_format``): shown by
        #: ``ora models list``; the reply to such a request is ``Completion.constrained``.
        self.structured_output: bool = options.response_format != "off"
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

    def _error(self, cls: type[BackendError], message: str, detail: str = "", partial_output: str = "") -> BackendError:
        return cls(message, provider=self.provider, model=self.model, detail=detail, partial_output=partial_output)

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
        if self._constrains(params):
            body["response_format"] = self._response_format(params)
        body.update(params.extra)
        return body

    def _constrains(self, params: CompletionParams) -> bool:
        """This call sends the caller's schema (its reply is ``Completion.constrained``)."""
        return params.response_schema is not None and self.options.response_format != "off"

    def _response_format(self, params: CompletionParams) -> dict[str, Any]:
        """``response_format`` in the form ``options.response_format`` names (see ``OpenAIOptions``)."""
        if self.options.response_format == "json_schema":
            return {"type": "json_schema", "json_schema": {
                "name": params.schema_name, "schema": params.response_schema,
                "strict": self.options.json_schema_strict}}
        return {"type": "json_object", "schema": params.response_schema}

    def _format_rejected(self, exc: BackendError, body: dict[str, Any]) -> None:
        """A request carrying ``response_format`` refused for it: HTTP 400/422, or any status whose error
        names the field (llama-cpp-python's server answers a ``type`` it does not know with HTTP 500 and
        its validation error). The error (the same object, its class kept) then names the option that
        decides the field, and how to turn it off."""
        if "response_format" not in body:
            return
        refused = type(exc) is BackendBadResponse and str(exc.detail).startswith(("HTTP 400", "HTTP 422"))
        if not refused and "response_format" not in f"{exc} {exc.detail}":
            return
        sent = body["response_format"]
        form = sent.get("type") if isinstance(sent, dict) else type(sent).__name__
        hint = (f"; the request carried response_format type {form!r} (options.response_format = "
                f"{self.options.response_format!r}): if this server does not accept it, set options.response_format "
                'to "json_schema", "json_object" or "off" (off: no schema is sent and replies are read as text)')
        exc.args = (f"{exc.args[0] if exc.args else 'rejected'}{hint}", *exc.args[1:])

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
        """One chat completion. Under ``options.stream`` (or ``params.stream``) the reply is read as a
        server-sent-event stream and assembled (see ``_stream_once``); otherwise one JSON answer."""
        start = time.perf_counter()
        streamed = self.options.stream or params.stream
        body = self._body(messages, params, stream=streamed)
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
        try:
            if streamed:
                state, attempts = await self._with_retries(lambda: self._stream_once(body, params))
                text, finish, prompt_tokens, completion_tokens, model = self._assembled(state, warnings)
            else:
                data, attempts = await self._with_retries(lambda: self._post_once(body, params.timeout_s))
                text, finish, prompt_tokens, completion_tokens, model = self._parse(data)
        except BackendError as exc:
            self._format_rejected(exc, body)
            raise
        constrained = self._constrains(params) and "response_format" not in params.extra
        if cache is not None:
            stored = {"text": text, "model": model, "prompt_tokens": prompt_tokens,
                      "completion_tokens": completion_tokens, "finish_reason": finish, "constrained": constrained}
            try:
                await cache.put(key, stored)
            except Exception as exc:  # noqa: BLE001 - see _cache_failed
                self._cache_failed("write", exc, warnings)
        return _built_completion({
            "text": text, "provider": self.provider, "model": model, "family": self.family,
            "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "latency_s": time.perf_counter() - start, "finish_reason": finish, "cached": False, "attempts": attempts,
            "warnings": warnings, "constrained": constrained})

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
        a stream that breaks, stalls past ``timeout_s``, ends without ``[DONE]``, carries an error
        or ends on a failed ``finish_reason`` raises a typed ``BackendError`` whose
        ``partial_output`` is the text delivered before it."""
        body = self._body(messages, params, stream=True)
        response, _ = await self._with_retries(lambda: self._open_stream(body, params.timeout_s))
        state = StreamState()
        async with aclosing(self._deltas(response, state, params.timeout_s,
                                         time.monotonic() + params.timeout_s)) as deltas:
            async for delta in deltas:
                yield delta
        self._ended(state)
        if not state.chars:
            raise self._error(BackendBadResponse, f"the stream from {self.endpoint} carried no text "
                              f"(finish_reason={state.finish_reason!r})")

    # --- streaming inside complete() ------------------------------------------------------------

    async def _stream_once(self, body: dict[str, Any], params: CompletionParams) -> StreamState:
        """One streamed attempt, from the request to ``[DONE]``, within ``timeout_s`` in all (as one
        non-streamed attempt). A failure before any text may be retried (``Transient``); once text
        has arrived it is not (the generation would be paid for again), and the typed error carries
        the text so far as ``partial_output``. ``params.stop_unless`` is watched as the text comes:
        a reply that does not start the way the caller needs is stopped (``finish_reason =
        "stop_unless"``)."""
        state = StreamState()
        timeout_s = params.timeout_s
        watch = params.stop_unless
        target = watch.text.lower() if watch is not None else ""
        try:
            async with deadline(timeout_s):
                response = await self._open_stream(body, timeout_s)
                # aclosing: a stop_unless break closes the response now, not when the generator is collected
                async with aclosing(self._deltas(response, state, timeout_s, None, retry_empty=True)) as deltas:
                    async for _ in deltas:
                        if watch is None:
                            continue
                        seen = state.text.lower()
                        if target in seen:
                            watch = None  # settled: the reply is what the caller can use
                        elif len(seen) >= watch.within_chars:
                            state.stopped = True
                            state.finish_reason = "stop_unless"
                            break
        except TimeoutError as exc:
            self.breaker.failure("timeout: stream")
            error = self._error(BackendTimeout, f"the stream from {self.endpoint} passed timeout_s={timeout_s:g}s "
                                f"after {state.chars} characters", detail=f"{type(exc).__name__}: {exc}",
                                partial_output=state.text)
            raise (Transient(error) if self.options.retry_on_timeout and not state.chars else error) from exc
        if state.stopped:
            self.breaker.success()
            return state
        self._ended(state)
        return state

    async def _deltas(self, response: httpx.Response, state: StreamState, timeout_s: float,
                      deadline_at: float | None, *, retry_empty: bool = False) -> AsyncIterator[str]:
        """The text deltas of an open stream, recorded in ``state`` (finish_reason, usage, model);
        the response is closed when the iteration ends, however it ends. Every failure is a typed
        ``BackendError`` carrying ``state``'s text as ``partial_output`` (``Transient`` when
        ``retry_empty`` and no text had arrived). ``deadline_at``: a ``time.monotonic()`` past
        which the next line is a timeout (``stream()``, which has no enclosing deadline)."""
        event = ""
        try:
            async for line in response.aiter_lines():
                if deadline_at is not None and time.monotonic() > deadline_at:
                    self.breaker.failure("timeout: stream")
                    raise self._error(BackendTimeout, f"the stream from {self.endpoint} passed timeout_s="
                                      f"{timeout_s:g}s after {state.chars} characters", partial_output=state.text)
                if not line:
                    event = ""  # a blank line ends an event
                    continue
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    event = value.strip()
                    continue
                if field == "error":  # llama.cpp's server (2025 builds): an ``error:`` line, then [DONE]
                    raise self._stream_error(value, state)
                if field != "data":
                    continue  # comments (``: ping``), ``id:``, ``retry:``
                payload = value.strip()
                if payload == "[DONE]":
                    state.done = True
                    break
                if not payload:
                    continue  # an empty ``data:`` line carries nothing
                state.events += 1
                try:
                    chunk = json.loads(payload)
                except ValueError as exc:
                    self.breaker.release()
                    raise self._error(BackendBadResponse, f"malformed stream chunk from {self.endpoint} after "
                                      f"{state.chars} characters", detail=redact_text(payload[:1500]),
                                      partial_output=state.text) from exc
                if event == "error" or not isinstance(chunk, dict) or chunk.get("error"):
                    raise self._stream_error(payload, state)
                if chunk.get("model"):
                    state.model = chunk["model"]
                usage = chunk.get("usage")
                if isinstance(usage, dict):
                    state.usage = usage
                for choice in chunk.get("choices") or ():
                    if not isinstance(choice, dict):
                        continue
                    delta = choice.get("delta")
                    content = delta.get("content") if isinstance(delta, dict) else None
                    if isinstance(content, str) and content:
                        state.parts.append(content)
                        state.chars += len(content)
                        yield content
                    if choice.get("finish_reason"):
                        state.finish_reason = str(choice["finish_reason"])
        except httpx.HTTPError as exc:
            problem = self._transport_error(exc, f"stream broke after {state.chars} characters", timeout_s)
            error = problem.error if isinstance(problem, Transient) else problem
            error.partial_output = state.text
            if isinstance(problem, Transient) and retry_empty and not state.chars:
                raise problem from exc
            raise error from exc
        finally:
            await response.aclose()

    def _stream_error(self, payload: str, state: StreamState) -> BackendError:
        """The typed error for an error a stream carried (a ``data:`` object with an ``error``, an
        ``event: error``, llama.cpp's ``error:`` line): a prompt over the context window is
        ``BackendContextExceeded``, anything else the server failing mid-generation."""
        detail = f"in the stream from {self.endpoint}: {redact_text(payload[:1500])}"
        said = server_message(payload.encode("utf-8", "replace"))
        overflow = context_overflow(0, payload)
        if overflow is not None:
            self.breaker.release()
            error: BackendError = context_error(*overflow, said, status=None, provider=self.provider,
                                                model=self.model, endpoint=self.endpoint, detail=detail)
            error.partial_output = state.text
            return error
        self.breaker.failure("error in stream")
        return self._error(BackendUnavailable, f"the stream from {self.endpoint} carried an error after "
                           f"{state.chars} characters: {said}", detail=detail, partial_output=state.text)

    def _ended(self, state: StreamState) -> None:
        """Judge a stream that stopped coming: it must have ended with ``[DONE]`` and not on a
        failed ``finish_reason``; the circuit breaker hears the verdict."""
        if not state.done:
            self.breaker.failure("stream ended early")
            why = ("the server closed it before the end" if state.events else
                   "the server sent no event at all: the request failed before its first token (llama-cpp-python's "
                   "server ends a stream this way, e.g. for a prompt over its context window; its log says why)")
            raise self._error(BackendUnavailable, f"the stream from {self.endpoint} ended without [DONE] after "
                              f"{state.chars} characters (finish_reason={state.finish_reason or 'none'!r}): {why}",
                              partial_output=state.text)
        if state.finish_reason in FAILED_FINISH:
            self.breaker.failure(f"finish_reason {state.finish_reason}")
            raise self._error(BackendUnavailable, f"the stream from {self.endpoint} ended with finish_reason="
                              f"{state.finish_reason!r} after {state.chars} characters: the server gave up on the "
                              "generation", partial_output=state.text)
        self.breaker.success()

    def _assembled(self, state: StreamState, warnings: list[str]) -> tuple[str, str, int, int, str]:
        """``(text, finish_reason, prompt_tokens, completion_tokens, model)`` of a finished stream, as
        ``_parse`` gives them for one JSON answer. A stream that reported no usage is named in
        ``warnings`` (the ledger would otherwise show 0 tokens as if that were measured)."""
        text = state.text
        if not text.strip():
            raise self._error(BackendBadResponse, f"the stream from {self.endpoint} carried no text "
                              f"(finish_reason={state.finish_reason!r})", partial_output=text)
        usage = state.usage or {}
        if state.usage is None and not state.stopped:
            why = ("options.stream_usage is off, so it was not asked for" if not self.options.stream_usage
                   else "it was asked for (stream_options.include_usage) but the server sent none")
            warnings.append(f"the stream from {self.endpoint} reported no token usage ({why}); "
                            "this call's token counts are 0, not measured")
        return (text, state.finish_reason, int(usage.get("prompt_tokens") or 0),
                int(usage.get("completion_tokens") or 0), self._effective_model(state.model))

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
