"""The httpx transports under the ``openai`` backend (option ``transport``), against real servers
on 127.0.0.1: each failure below HTTP surfaces as the same httpx error, and so as the same typed
``BackendError``, whichever transport runs; streams arrive as they are sent; connections are
reused; per-request timeouts, headers, bodies and environment proxies are honoured."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import ora_openai
import pytest
from ora_openai.options import OpenAIOptions
from ora_openai.transport import READ_BODY, AiohttpTransport, env_proxy_applies, make_transport

from ora_core.api import BackendTimeout, BackendUnavailable, CompletionParams, ConfigError
from ora_core.testing import build_messages, make_config, make_host

MESSAGES = build_messages("Answer briefly.", "What is the capital of France?")


def make_backend(base_url: str, kind: str, **over: Any) -> Any:
    options = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05, "transport": kind, **over.pop("options", {})}
    table = {"type": "openai", "model": "test-model", "base_url": base_url, "timeout_s": 2.0, "max_retries": 2,
             "options": options, **over}
    config = make_config({"backends": {"local": table}}, base_default=False)
    return make_host(ora_openai).get("backend", "openai").create(config.config.backends["local"])


def run_with(backend: Any, work: Any) -> Any:
    async def go() -> Any:
        try:
            return await work(backend)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def complete(backend: Any, **params: Any) -> Any:
    return run_with(backend, lambda b: b.complete(MESSAGES, CompletionParams(model=b.model, **params)))


def client_call(kind: str, work: Any, **client_kw: Any) -> Any:
    """``work(client)`` on an httpx client over a fresh transport of ``kind``."""
    async def go() -> Any:
        transport = make_transport(kind, max_connections=10, max_keepalive=10)
        async with httpx.AsyncClient(transport=transport, **client_kw) as client:
            return await work(client)

    return asyncio.run(go())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- failures below HTTP: the same httpx error from either transport ---------------------------


@pytest.mark.parametrize(("behaviour", "error"), [
    ("drop", httpx.RemoteProtocolError),  # closed without a response
    ("truncated", httpx.RemoteProtocolError),  # closed inside a body of announced length
    ("garbage", httpx.RemoteProtocolError),  # not an HTTP response
])
def test_a_broken_response_is_the_same_httpx_error_on_either_transport(fault_server, transport_kind, behaviour,
                                                                      error) -> None:
    url = fault_server.script(f"raw-{behaviour}", [behaviour]) + "/chat/completions"
    with pytest.raises(error):
        client_call(transport_kind, lambda c: c.post(url, json={"model": "m", "messages": []}))


@pytest.mark.parametrize(("behaviour", "error"), [
    ("drop", httpx.RemoteProtocolError), ("truncated", httpx.RemoteProtocolError),
    ("garbage", httpx.RemoteProtocolError), ("ok", None)])
def test_a_body_read_by_the_transport_fails_and_succeeds_as_a_streamed_one(fault_server, transport_kind, behaviour,
                                                                           error) -> None:
    """``READ_BODY``: the transport reads the whole body before returning (the backend's
    non-streaming calls); the outcome is what streaming the body would give."""
    url = fault_server.script(f"whole-{behaviour}", [behaviour]) + "/chat/completions"

    async def post(client: httpx.AsyncClient) -> Any:
        request = client.build_request("POST", url, json={"model": "m", "messages": []},
                                       extensions={READ_BODY: True})
        response = await client.send(request)
        return response.json()

    if error is not None:
        with pytest.raises(error):
            client_call(transport_kind, post)
    else:
        assert client_call(transport_kind, post)["choices"][0]["message"]["content"]


def test_refused_and_unanswered_connects_are_connect_errors(transport_kind, full_backlog) -> None:
    with pytest.raises(httpx.ConnectError):
        client_call(transport_kind, lambda c: c.get(f"http://127.0.0.1:{free_port()}/"))
    start = time.monotonic()
    with pytest.raises(httpx.ConnectTimeout):
        client_call(transport_kind, lambda c: c.get(f"http://127.0.0.1:{full_backlog}/"),
                    timeout=httpx.Timeout(5.0, connect=0.3))
    assert time.monotonic() - start < 2.0


def test_a_per_request_timeout_is_honoured_over_the_clients_default(fault_server, transport_kind) -> None:
    url = fault_server.script("per-request", ["hang:1.5", "hang:0.3"]) + "/chat/completions"

    async def both(client: httpx.AsyncClient) -> httpx.Response:
        start = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            await client.post(url, json={"model": "m"}, timeout=0.4)
        assert time.monotonic() - start < 1.2, "the request's 0.4 s read timeout, not the client's 10 s"
        return await client.post(url, json={"model": "m"}, timeout=5.0)  # a longer one lets it answer

    assert client_call(transport_kind, both, timeout=10.0).status_code == 200


def test_a_connect_timeout_is_a_typed_timeout_through_the_backend(transport_kind, full_backlog) -> None:
    start = time.monotonic()
    backend = make_backend(f"http://127.0.0.1:{full_backlog}/v1", transport_kind, max_retries=0,
                           options={"connect_timeout_s": 0.3})
    with pytest.raises(BackendTimeout, match="no answer within"):
        complete(backend)
    assert time.monotonic() - start < 1.5


def test_cut_and_garbled_responses_are_retried_then_unavailable(fault_server, transport_kind) -> None:
    assert complete(make_backend(fault_server.script("cut-ok", ["truncated", "ok"]), transport_kind)).attempts == 2
    with pytest.raises(BackendUnavailable, match="dropped the connection") as caught:
        complete(make_backend(fault_server.script("garbled", ["garbage"]), transport_kind, max_retries=1))
    assert caught.value.attempts == 2 and len(fault_server.seen("garbled")) == 2


# --- what goes through intact ------------------------------------------------------------------


def test_a_stream_arrives_chunk_by_chunk_not_at_the_end(fault_server, transport_kind) -> None:
    backend = make_backend(fault_server.script("slow-stream", ["stream-slow:0.3:one two three"]), transport_kind)
    arrivals: list[tuple[str, float]] = []

    async def collect(b: Any) -> None:
        async for delta in b.stream(MESSAGES, CompletionParams(model=b.model)):
            arrivals.append((delta, time.monotonic()))

    run_with(backend, collect)
    assert [d for d, _ in arrivals] == ["one", " two", " three"]
    assert arrivals[-1][1] - arrivals[0][1] >= 0.5, "the first delta came before the server sent the last"


def test_headers_and_the_json_body_arrive_as_sent(fault_server, transport_kind, monkeypatch) -> None:
    monkeypatch.setenv("ORA_TEST_TRANSPORT_KEY", "sk-transport-1")
    backend = make_backend(fault_server.script("headers", ["ok"]), transport_kind, api_key_env="ORA_TEST_TRANSPORT_KEY",
                           options={"headers": {"X-Ora-Trace": "trace-7"}})
    complete(backend, max_tokens=33, extra={"seed": 5})
    [seen] = fault_server.seen("headers")
    assert seen.headers["Authorization"] == "Bearer sk-transport-1" and seen.headers["X-Ora-Trace"] == "trace-7"
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.headers["User-Agent"].startswith("python-httpx/")
    assert seen.body["max_tokens"] == 33 and seen.body["seed"] == 5 and seen.body["messages"][1]["role"] == "user"
    assert int(seen.headers["Content-Length"]) == len(json.dumps(seen.body, ensure_ascii=False,
                                                                 separators=(",", ":")).encode())


def test_a_streamed_request_body_arrives_whole(fault_server, transport_kind) -> None:
    url = fault_server.script("streamed-body", ["ok"]) + "/chat/completions"
    payload = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]}).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(payload), 1000):
            yield payload[i:i + 1000]

    response = client_call(transport_kind, lambda c: c.post(url, content=chunks(),
                                                             headers={"Content-Length": str(len(payload))}))
    assert response.status_code == 200
    [seen] = fault_server.seen("streamed-body")
    assert seen.body["messages"][0]["content"] == "x" * 5000


def test_concurrent_calls_reuse_pooled_connections(fault_server, transport_kind) -> None:
    backend = make_backend(fault_server.script("pooled", ["ok"]), transport_kind)

    async def waves(b: Any) -> None:
        for _ in range(3):
            await asyncio.gather(*(b.complete(MESSAGES, CompletionParams(model=b.model)) for _ in range(6)))

    run_with(backend, waves)
    seen = fault_server.seen("pooled")
    assert len(seen) == 18 and len({r.client_port for r in seen}) <= 6, "later waves reuse the first wave's"


def test_no_keepalive_means_a_new_connection_per_call(fault_server, transport_kind) -> None:
    backend = make_backend(fault_server.script("no-keepalive", ["ok"]), transport_kind,
                           options={"max_keepalive": 0})

    async def three(b: Any) -> None:
        for _ in range(3):
            await b.complete(MESSAGES, CompletionParams(model=b.model))

    run_with(backend, three)
    assert len({r.client_port for r in fault_server.seen("no-keepalive")}) == 3


def test_an_environment_proxy_still_carries_the_requests(fault_server, transport_kind, monkeypatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", fault_server.url("").rstrip("/"))  # the fault server acts as the proxy
    url = "http://upstream.invalid/via-proxy/v1"
    assert env_proxy_applies(url)
    assert complete(make_backend(url, transport_kind)).text
    [seen] = fault_server.seen("via-proxy")
    assert seen.proxied, "the request went to the proxy in absolute form"
    monkeypatch.setenv("NO_PROXY", "upstream.invalid")
    assert not env_proxy_applies(url)


# --- the option -------------------------------------------------------------------------------


def test_the_transport_option_defaults_to_aiohttp_and_names_itself_when_wrong() -> None:
    assert OpenAIOptions().transport == "aiohttp"
    with pytest.raises(ConfigError, match=r"options\.transport: .*'aiohttp' or 'httpcore'.*'urllib3'"):
        make_backend("http://127.0.0.1:9/v1", "urllib3")


def test_an_aiohttp_transport_refuses_a_second_event_loop(fault_server) -> None:
    url = fault_server.script("one-loop", ["ok"]) + "/chat/completions"

    async def main() -> int:
        client = httpx.AsyncClient(transport=AiohttpTransport())
        try:
            status = (await client.post(url, json={})).status_code

            def from_another_loop() -> None:
                with pytest.raises(RuntimeError, match="bound to the event loop"):
                    asyncio.run(client.post(url, json={}))

            await asyncio.to_thread(from_another_loop)
            return status
        finally:
            await client.aclose()

    assert asyncio.run(main()) == 200
