"""httpx transports shared by the HTTP backends (``openai``, ``anthropic``).

Two choices, picked by a backend's ``transport`` option (``make_transport``):

``aiohttp`` (the default)
    ``AiohttpTransport``: httpx's request/response types over one ``aiohttp.ClientSession`` per
    transport. aiohttp's HTTP/1.1 client does the socket work in C (its parser, yarl, multidict),
    which costs a fraction of httpcore's pure-Python path per request; on a loaded event loop
    that is the difference between keeping up with the server and queueing behind the client.
    Its ``send_whole`` sends a byte body and reads the answer whole without httpx's request and
    response objects at all (the backends' non-streaming calls).
``httpcore``
    ``ShardedTransport``: httpx's own transport, its pool split into shards (see the class).

Failures come out as the httpx exception types a backend already classifies, never as
aiohttp's own: refused -> ``ConnectError``, connect timeout -> ``ConnectTimeout``, no bytes
within the read timeout -> ``ReadTimeout``, a connection closed before or during the response,
or a response that is not HTTP -> ``RemoteProtocolError``, a reset socket -> ``ReadError``.

This module imports httpx (every importer declares it); aiohttp is imported only inside the
functions that open a session, so importing this module stays cheap.
"""

from __future__ import annotations

import asyncio
import functools
import math
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import httpx

if TYPE_CHECKING:
    import aiohttp

TransportKind = Literal["aiohttp", "httpcore"]
#: A request extension: the caller will read the whole body, so a transport may read it
#: before returning (``AiohttpTransport`` does; others ignore it). Never set it on a stream.
READ_BODY = "ora.read_body"
TRANSPORT_KINDS: tuple[str, ...] = ("aiohttp", "httpcore")

#: Request headers the transport below manages itself (framing and connection handling).
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-connection"})
_FRAMED = _HOP_BY_HOP | {"content-length"}
_URL_CACHE_MAX = 256


@functools.cache
def _client_errors() -> tuple[type[BaseException], ...]:
    """What aiohttp and the socket raise (aiohttp is imported lazily)."""
    import aiohttp

    return (aiohttp.ClientError, OSError, TimeoutError)


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """Loading the CA bundle costs tens of milliseconds: once per process, not per transport."""
    return httpx.create_ssl_context()


# --- httpcore, sharded ----------------------------------------------------------------------


class ShardedTransport(httpx.AsyncBaseTransport):
    """A connection pool split into small shards.

    httpcore's pool re-scans every connection for every queued request (quadratic in the number
    of connections; encode/httpcore#1035, still open in httpcore 1.0.9): at 50 concurrent
    requests one pool spends more time assigning connections than the server spends answering.
    Several small pools, each request sent to the least busy one, keep every scan short while
    each shard still reuses its keep-alive connections.
    """

    def __init__(self, max_connections: int, max_keepalive: int, shard_size: int,
                 keepalive_expiry_s: float = 5.0) -> None:
        shards = max(1, math.ceil(max_connections / shard_size))
        per_shard = max(1, math.ceil(max_connections / shards))
        keepalive = max(0, math.ceil(max_keepalive / shards))
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=keepalive,
                              keepalive_expiry=keepalive_expiry_s)
        self.shards = [httpx.AsyncHTTPTransport(limits=limits, verify=shared_ssl_context()) for _ in range(shards)]
        self.in_flight = [0] * shards

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = min(range(len(self.shards)), key=self.in_flight.__getitem__)
        self.in_flight[index] += 1
        try:
            response = await self.shards[index].handle_async_request(request)
        finally:
            self.in_flight[index] -= 1
        response.request = request  # as httpx's client sets it (a caller may send without one)
        return response

    async def aclose(self) -> None:
        for shard in self.shards:
            await shard.aclose()


# --- aiohttp --------------------------------------------------------------------------------


def _as_httpx_error(exc: BaseException, request: httpx.Request, *, reading_body: bool = False) -> httpx.HTTPError:
    """The httpx exception that says what ``exc`` (raised by aiohttp or the socket) means."""
    import aiohttp

    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    # Order matters: the timeout classes are also ServerConnectionError/OSError subclasses.
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(text, request=request)
    if isinstance(exc, (aiohttp.ServerTimeoutError, TimeoutError)):
        return httpx.ReadTimeout(text, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):  # refused, DNS, TLS handshake, certificate
        return httpx.ConnectError(text, request=request)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        what = "peer closed connection without sending complete message body" if reading_body else \
            "Server disconnected without sending a response."
        return httpx.RemoteProtocolError(f"{what} ({text})", request=request)
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ClientResponseError)):
        return httpx.RemoteProtocolError(text, request=request)  # a cut or malformed response
    if isinstance(exc, (aiohttp.ClientOSError, OSError)):  # reset, broken pipe
        return httpx.ReadError(text, request=request) if reading_body else httpx.WriteError(text, request=request)
    if isinstance(exc, (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError)):
        return httpx.UnsupportedProtocol(text, request=request)
    return httpx.TransportError(f"aiohttp failed: {text}", request=request)


class _AiohttpResponseStream(httpx.AsyncByteStream):
    """A response body, chunk by chunk as it arrives (server-sent events stream through it)."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import aiohttp

        content = self._response.content
        try:
            while True:
                chunk = await content.readany()
                if not chunk:
                    break
                yield chunk
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _as_httpx_error(exc, self._request, reading_body=True) from exc
        self._done = True

    async def aclose(self) -> None:
        if self._done:
            self._response.release()  # read to the end: the connection goes back to the pool
        else:
            self._response.close()  # abandoned or broken mid-body: the connection cannot be reused


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx over aiohttp: one ``ClientSession`` (and connection pool) per transport, opened
    lazily inside the running event loop. Honours the request's httpx timeouts (``connect``,
    ``read``, ``pool``; aiohttp has no separate write timeout, so ``write`` is bounded by the
    caller's overall deadline). Redirects are not followed and no cookies are kept (an httpx
    client above does both when asked); bodies are passed through undecoded (httpx decodes)."""

    def __init__(self, *, max_connections: int = 100, max_keepalive: int = 50, keepalive_expiry_s: float = 5.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.max_connections = max_connections
        self.max_keepalive = max_keepalive
        self.keepalive_expiry_s = keepalive_expiry_s
        self._ssl_context = ssl_context
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timeouts: dict[tuple[float | None, ...], aiohttp.ClientTimeout] = {}
        self._urls: dict[str, Any] = {}

    # --- the session ------------------------------------------------------------------------

    def _open_session(self) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is not None and not self._session.closed:
            if self._loop is not loop:
                raise RuntimeError("AiohttpTransport is bound to the event loop that opened it; make one "
                                   "transport per loop (and aclose it there)")
            return self._session
        connector = aiohttp.TCPConnector(
            limit=self.max_connections, limit_per_host=self.max_connections,
            keepalive_timeout=self.keepalive_expiry_s if self.max_keepalive > 0 else None,
            force_close=self.max_keepalive <= 0, ssl=self._ssl_context or shared_ssl_context())
        self._session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None), trust_env=False)
        self._loop = loop
        return self._session

    def _timeout(self, extension: Mapping[str, float | None], *, read: bool = True) -> aiohttp.ClientTimeout:
        """aiohttp's timeouts for httpx's timeout extension; without ``read``, no per-read timer."""
        connect, pool = extension.get("connect"), extension.get("pool")
        read_s = extension.get("read") if read else None
        key = (connect, read_s, pool)
        timeout = self._timeouts.get(key)
        if timeout is None:
            import aiohttp

            # aiohttp's ``connect`` covers waiting for a pooled connection and opening one;
            # ``sock_connect`` only the opening; ``sock_read`` the gap between bytes received.
            acquire = None if pool is None else pool + (connect or 0.0)
            timeout = aiohttp.ClientTimeout(total=None, connect=acquire, sock_connect=connect, sock_read=read_s)
            if len(self._timeouts) < 64:
                self._timeouts[key] = timeout
        return timeout

    def _url(self, request: httpx.Request) -> Any:
        return self._url_of(str(request.url))

    def _url_of(self, raw: str) -> Any:
        url = self._urls.get(raw)
        if url is None:
            import yarl

            url = yarl.URL(raw, encoded=True)  # httpx already percent-encoded it
            if len(self._urls) >= _URL_CACHE_MAX:
                self._urls.clear()
            self._urls[raw] = url
        return url

    # --- one request ------------------------------------------------------------------------

    async def send_whole(self, method: str, url: str, headers: Sequence[tuple[str, str]], content: bytes,
                         timeout: Mapping[str, float | None], *, read_bounded: bool = False) -> WholeResponse:
        """One request with a byte body whose response is read whole, without httpx's ``Request``
        and ``Response`` objects (building them costs about a third of the client's CPU per call).

        What ``handle_async_request`` does for that request with ``READ_BODY`` set: the same bytes
        on the wire (``headers`` as ``wire_headers`` gives them; aiohttp adds ``Content-Length``),
        the same timeouts (``timeout`` is httpx's timeout extension), the connection handed back
        or closed the same way, and every failure raised as the same httpx error (its ``request``
        is built only then). ``plugins/ora-openai/tests/test_call_path.py`` pins the two side by side.

        ``read_bounded``: the caller awaits this under its own deadline no longer than the read
        timeout, so the read timeout is left to that deadline instead of arming aiohttp's
        per-read timer (re-armed on every chunk received: timer-heap work on every call). A
        cancelled call (that deadline) closes the connection: it cannot be reused mid-response."""
        session = self._open_session()
        try:
            response = await session.request(method, self._url_of(url), headers=headers, data=content or None,
                                             allow_redirects=False,
                                             timeout=self._timeout(timeout, read=not read_bounded))
        except _client_errors() as exc:  # evaluated only when something was raised
            raise _as_httpx_error(exc, _request_for(method, url, headers, content)) from exc
        try:
            body = await response.read()
        except _client_errors() as exc:  # evaluated only when something was raised
            response.close()  # broken mid-body: the connection cannot be reused
            raise _as_httpx_error(exc, _request_for(method, url, headers, content), reading_body=True) from exc
        except BaseException:
            response.close()  # cancelled mid-body (a caller's deadline): not reusable either
            raise
        response.release()
        return WholeResponse(response.status, response.headers, body)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import aiohttp

        session = self._open_session()
        headers = _header_pairs(request)
        stream = request.stream
        # a byte body as bytes (None when empty), anything else streamed chunk by chunk
        data: Any = (request.read() or None) if isinstance(stream, httpx.ByteStream) else _body_chunks(stream)
        try:
            response = await session.request(
                request.method, self._url(request), headers=headers, data=data, allow_redirects=False,
                timeout=self._timeout(request.extensions.get("timeout") or {}))
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _as_httpx_error(exc, request) from exc
        version = response.version
        extensions = {"http_version": b"HTTP/%d.%d" % (version.major, version.minor) if version else b"HTTP/1.1",
                      "reason_phrase": (response.reason or "").encode("latin-1", "replace")}
        if request.extensions.get(READ_BODY):
            # The caller reads the whole body anyway: read it here in one step and hand the
            # connection back, instead of streaming it through httpx's async byte iterators.
            try:
                body = await response.read()
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                response.close()  # broken mid-body: the connection cannot be reused
                raise _as_httpx_error(exc, request, reading_body=True) from exc
            response.release()
            return httpx.Response(response.status, headers=response.raw_headers, content=body, request=request,
                                  extensions=extensions)
        return httpx.Response(
            response.status, headers=response.raw_headers, stream=_AiohttpResponseStream(response, request),
            request=request, extensions=extensions)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        self._loop = None
        if session is not None and not session.closed:
            await session.close()


class WholeResponse:
    """A response read whole by ``AiohttpTransport.send_whole``: the status, the headers
    (aiohttp's case-insensitive multidict: ``headers.get("retry-after")``) and the raw body."""

    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status_code: int, headers: Mapping[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content


def wire_headers(raw: Sequence[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """Raw httpx header pairs as ``send_whole`` takes them: text, minus the headers aiohttp
    frames itself (``Content-Length`` included: it is computed from the body)."""
    try:
        return [(k.decode(), v.decode()) for k, v in raw if k.lower().decode() not in _FRAMED]
    except UnicodeDecodeError as exc:  # aiohttp writes headers as UTF-8 text
        raise httpx.LocalProtocolError(f"a request header is not UTF-8 text and cannot be sent: {exc}") from exc


def _request_for(method: str, url: str, headers: Sequence[tuple[str, str]], content: bytes) -> httpx.Request:
    """The httpx request ``send_whole`` sent, for the httpx error that reports its failure."""
    return httpx.Request(method, url, headers=list(headers), content=content)


def _header_pairs(request: httpx.Request) -> list[tuple[str, str]]:
    """The request's headers as sent (names keep their case), minus the ones aiohttp frames."""
    try:
        return [(k.decode(), v.decode()) for k, v in request.headers.raw if k.lower().decode() not in _HOP_BY_HOP]
    except UnicodeDecodeError as exc:  # aiohttp writes headers as UTF-8 text
        raise httpx.LocalProtocolError(f"a request header is not UTF-8 text and cannot be sent: {exc}",
                                       request=request) from exc


async def _body_chunks(stream: Any) -> AsyncIterator[bytes]:
    async for chunk in stream:
        yield chunk


def env_proxy_applies(url: str) -> bool:
    """Does an environment proxy (``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``, minus ``NO_PROXY``)
    cover ``url``? (See ``make_client``.)"""
    import urllib.request
    from urllib.parse import urlsplit

    proxies = urllib.request.getproxies()
    parts = urlsplit(url)
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


def make_transport(kind: str, *, max_connections: int, max_keepalive: int, shard_size: int = 8,
                   keepalive_expiry_s: float = 5.0) -> httpx.AsyncBaseTransport:
    """The transport a backend's ``transport`` option names (already validated by its options)."""
    if kind == "aiohttp":
        return AiohttpTransport(max_connections=max_connections, max_keepalive=max_keepalive,
                                keepalive_expiry_s=keepalive_expiry_s)
    if kind == "httpcore":
        return ShardedTransport(max_connections, max_keepalive, shard_size, keepalive_expiry_s)
    raise ValueError(f"unknown transport {kind!r}; expected one of {', '.join(TRANSPORT_KINDS)}")


def make_client(kind: str, url: str, *, headers: dict[str, str], timeout: httpx.Timeout, max_connections: int,
                max_keepalive: int, shard_size: int = 8,
                keepalive_expiry_s: float = 5.0) -> tuple[httpx.AsyncClient, httpx.AsyncBaseTransport | None]:
    """An httpx client for requests to ``url``, and the transport under it.

    The client runs over the transport ``kind`` names, except where an environment proxy covers
    ``url``: httpx ignores environment proxies once a client is given its own transport, so there
    the client keeps httpx's transport, which routes through the proxy, and the transport
    returned is None (send through the client, not around it)."""
    if env_proxy_applies(url):
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive,
                              keepalive_expiry=keepalive_expiry_s)
        return httpx.AsyncClient(headers=headers, timeout=timeout, limits=limits, verify=shared_ssl_context()), None
    transport = make_transport(kind, max_connections=max_connections, max_keepalive=max_keepalive,
                               shard_size=shard_size, keepalive_expiry_s=keepalive_expiry_s)
    return httpx.AsyncClient(transport=transport, headers=headers, timeout=timeout), transport
