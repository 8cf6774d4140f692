"""The ``openai`` backend's per-call path over the default transport, against a real server on
127.0.0.1: ``AiohttpTransport.send_whole`` (no httpx ``Request``/``Response`` objects) puts the
same request on the wire and ends every outcome the same way as ``handle_async_request`` with
``READ_BODY``; the ``Completion`` built without a validation pass equals the validated one."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import ora_openai
import pytest
from fault_server import FaultServer
from ora_openai.backend import _built_completion
from ora_openai.transport import READ_BODY, AiohttpTransport

from ora_core.api import Completion, CompletionParams
from ora_core.api.http import deadline
from ora_core.testing import build_messages, make_config, make_host

MESSAGES = build_messages("Answer briefly.", "What is the capital of France?")


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def make_backend(base_url: str, **over: Any) -> Any:
    options = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05, **over.pop("options", {})}
    table = {"type": "openai", "model": "test-model", "base_url": base_url, "timeout_s": 2.0, "max_retries": 0,
             "options": options, **over}
    config = make_config({"backends": {"local": table}}, base_default=False)
    return make_host(ora_openai).get("backend", "openai").create(config.config.backends["local"])


async def both_ways(backend: Any, body: dict[str, Any], timeout_s: float = 2.0) -> list[Any]:
    """The same request sent through ``handle_async_request`` (READ_BODY) and ``send_whole``:
    each outcome as (status, body, retry-after) or the exception raised."""
    backend._http()
    transport = backend._transport
    assert isinstance(transport, AiohttpTransport)
    outcomes: list[Any] = []
    try:
        response = await transport.handle_async_request(backend._request(body, timeout_s, whole=True))
        outcomes.append((response.status_code, await response.aread(), response.headers.get("retry-after")))
    except httpx.HTTPError as exc:
        outcomes.append(exc)
    try:
        whole = await transport.send_whole("POST", backend._chat_url_text, backend._wire_headers(),
                                           backend._encode(body), backend._timeout_extension(timeout_s))
        outcomes.append((whole.status_code, whole.content, whole.headers.get("retry-after")))
    except httpx.HTTPError as exc:
        outcomes.append(exc)
    return outcomes


def run(backend: Any, work: Any) -> Any:
    async def go() -> Any:
        try:
            return await work(backend)
        finally:
            await backend.aclose()

    return asyncio.run(go())


BODY = {"model": "test-model", "messages": [{"role": "user", "content": "héllo"}], "max_tokens": 8, "stream": False}


def test_the_same_request_reaches_the_server_either_way(server: FaultServer, monkeypatch) -> None:
    monkeypatch.setenv("ORA_TEST_WHOLE_KEY", "sk-whole-1")
    backend = make_backend(server.script("wire", ["ok"]), api_key_env="ORA_TEST_WHOLE_KEY",
                           options={"headers": {"X-Ora-Trace": "t-1"}})
    run(backend, lambda b: both_ways(b, BODY))
    via_httpx, via_whole = server.seen("wire")
    assert via_whole.headers == via_httpx.headers, "every header, Content-Length and User-Agent included"
    assert via_whole.headers["Authorization"] == "Bearer sk-whole-1"
    assert via_whole.body == via_httpx.body == BODY and via_whole.method == via_httpx.method == "POST"
    assert via_whole.path == via_httpx.path


@pytest.mark.parametrize("behaviour", ["ok", "500", "429:3", "401", "malformed", "empty"])
def test_every_answer_comes_back_the_same_either_way(server: FaultServer, behaviour: str) -> None:
    backend = make_backend(server.script(f"answer-{behaviour}", [behaviour]))
    via_httpx, via_whole = run(backend, lambda b: both_ways(b, BODY))
    assert via_whole == via_httpx
    assert via_whole[0] == (200 if behaviour in ("ok", "malformed", "empty") else int(behaviour.split(":")[0]))
    assert via_whole[2] == ("3" if behaviour == "429:3" else None)


@pytest.mark.parametrize(("behaviour", "error"), [
    ("drop", httpx.RemoteProtocolError), ("truncated", httpx.RemoteProtocolError),
    ("garbage", httpx.RemoteProtocolError)])
def test_a_broken_response_is_the_same_httpx_error_either_way(server: FaultServer, behaviour: str,
                                                                error: type[Exception]) -> None:
    url = server.script(f"broken-{behaviour}", [behaviour])
    via_httpx, via_whole = run(make_backend(url), lambda b: both_ways(b, BODY))
    assert type(via_whole) is type(via_httpx) is error
    assert str(via_whole) == str(via_httpx)
    assert via_whole.request.url == via_httpx.request.url and via_whole.request.method == "POST"


def test_refused_and_unanswered_connects_are_the_same_errors_either_way(full_backlog: int) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        refused_port = probe.getsockname()[1]
    via_httpx, via_whole = run(make_backend(f"http://127.0.0.1:{refused_port}/v1"), lambda b: both_ways(b, BODY))
    assert type(via_whole) is type(via_httpx) is httpx.ConnectError
    backend = make_backend(f"http://127.0.0.1:{full_backlog}/v1", options={"connect_timeout_s": 0.3})
    start = time.monotonic()
    via_httpx, via_whole = run(backend, lambda b: both_ways(b, BODY))
    assert type(via_whole) is type(via_httpx) is httpx.ConnectTimeout
    assert time.monotonic() - start < 3.0


def test_read_bounded_leaves_the_read_timeout_to_the_callers_deadline(server: FaultServer) -> None:
    """Without ``read_bounded`` aiohttp's per-read timer ends a slow answer at the read
    timeout; with it only the caller's deadline does, and a cancelled call never leaves its
    connection (and the late answer on it) to the next call."""
    backend = make_backend(server.script("bounded", ["hang:0.6", "hang:0.6", "hang:0.6", "ok:second"]))

    async def work(b: Any) -> list[Any]:
        b._http()
        transport = b._transport
        args = ("POST", b._chat_url_text, b._wire_headers(), b._encode(BODY), b._timeout_extension(0.3))
        seen: list[Any] = []
        with pytest.raises(httpx.ReadTimeout):
            await transport.send_whole(*args)
        seen.append((await transport.send_whole(*args, read_bounded=True)).status_code)  # waits it out
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            async with deadline(0.2):
                await transport.send_whole(*args, read_bounded=True)
        seen.append(time.monotonic() - start)
        answer = await transport.send_whole(*args, read_bounded=True)
        seen.append(answer.content)
        return seen

    status, cancelled_after, last = run(backend, work)
    assert status == 200 and cancelled_after < 0.5
    assert b"second" in last, "the next call read its own answer, not the cancelled call's late one"


def test_the_built_completion_equals_the_validated_one(server: FaultServer) -> None:
    backend = make_backend(server.script("built", ["ok:Paris it is."]))
    completion = run(backend, lambda b: b.complete(MESSAGES, CompletionParams(model=b.model)))
    twin = Completion(**{name: getattr(completion, name) for name in Completion.model_fields})
    assert completion == twin and completion.model_dump_json() == twin.model_dump_json()
    assert completion.model_fields_set == set(Completion.model_fields)
    assert (completion.text, completion.provider, completion.attempts) == ("Paris it is.", "openai", 1)
    assert type(completion.latency_s) is float and completion.latency_s > 0
    fields = {"text": "t", "provider": "openai", "model": "m", "family": "f", "prompt_tokens": 1,
              "completion_tokens": 2, "latency_s": 0.5, "finish_reason": "stop", "cached": False, "attempts": 2,
              "warnings": ["w"], "constrained": False}
    assert _built_completion(dict(fields)) == Completion(**fields)
    assert list(fields) == list(Completion.model_fields), "every field, in field order"


def test_read_body_extension_is_still_honoured_by_the_client_path(server: FaultServer) -> None:
    url = server.script("client-path", ["ok"]) + "/chat/completions"

    async def go() -> Any:
        async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
            request = client.build_request("POST", url, json=BODY, extensions={READ_BODY: True})
            return (await client.send(request)).json()

    assert asyncio.run(go())["choices"][0]["message"]["content"]


def test_a_base_url_with_a_query_string_and_a_password_builds_the_right_request() -> None:
    """The fault matrix found ``{base_url}/chat/completions`` breaking a base URL with a query string,
    and a password in it crashing the aiohttp transport beside the Authorization header."""
    from types import SimpleNamespace

    from ora_openai.backend import OpenAIBackend
    from ora_openai.options import OpenAIOptions

    settings = SimpleNamespace(model="m", family="f", base_url="http://user:s3cret-pass@127.0.0.1:9/v1?api-version=2",
                               max_retries=0, timeout_s=5.0, api_key_env=None, resolved_api_key=lambda: None,
                               options={})
    backend = OpenAIBackend(settings, OpenAIOptions())
    assert str(backend.url_for("chat/completions")) == "http://127.0.0.1:9/v1/chat/completions?api-version=2"
    assert str(backend.url_for("models")) == "http://127.0.0.1:9/v1/models?api-version=2"
    assert "s3cret" not in backend._chat_url_text and "s3cret" not in backend.endpoint
    assert backend._auth_headers() == {"Authorization": "Basic dXNlcjpzM2NyZXQtcGFzcw=="}
