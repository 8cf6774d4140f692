"""The OpenAI-compatible backend against a real fault server on 127.0.0.1: every failure ends
in the right typed error, retry, breaker state or fallback, and the role ledger shows what ran."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import ora_openai
import pytest
from ora_openai.breaker import breaker_for

from ora_core.api import (
    BackendAuthError,
    BackendBadResponse,
    BackendError,
    BackendRateLimited,
    BackendTimeout,
    BackendUnavailable,
    CompletionParams,
    ConfigError,
)
from ora_core.testing import BackendPool, TurnContext, build_messages, call_role, make_config, make_host

MESSAGES = build_messages("Answer briefly.", "What is the capital of France?")
FAST = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05}


@pytest.fixture(autouse=True)
def _under_each_transport(transport_kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs once per ``transport`` option: each fault ends in the same typed outcome."""
    monkeypatch.setitem(FAST, "transport", transport_kind)


def backend_table(base_url: str, **over: Any) -> dict[str, Any]:
    options = {**FAST, **over.pop("options", {})}
    return {"type": "openai", "model": "test-model", "family": "test", "base_url": base_url,
            "timeout_s": 2.0, "max_retries": 2, "options": options, **over}


def make_backend(base_url: str, **over: Any) -> Any:
    config = make_config({"backends": {"local": backend_table(base_url, **over)}}, base_default=False)
    return make_host(ora_openai).get("backend", "openai").create(config.config.backends["local"])


def complete(backend: Any, **params: Any) -> Any:
    async def go() -> Any:
        try:
            return await backend.complete(MESSAGES, CompletionParams(model=backend.model, **params))
        finally:
            await backend.aclose()

    return asyncio.run(go())


def test_a_plain_answer_carries_tokens_model_and_the_key_from_the_environment(fault_server, monkeypatch) -> None:
    monkeypatch.setenv("ORA_TEST_OPENAI_KEY", "sk-test-secret-1234")
    url = fault_server.script("plain", ["ok"])
    completion = complete(make_backend(url, api_key_env="ORA_TEST_OPENAI_KEY"))
    assert completion.text == "Paris is the capital of France."
    assert (completion.provider, completion.model, completion.family) == ("openai", "test-model", "test")
    assert completion.prompt_tokens == 11 and completion.completion_tokens == 6 and completion.attempts == 1
    [seen] = fault_server.seen("plain")
    assert seen.headers["Authorization"] == "Bearer sk-test-secret-1234"
    assert seen.body["messages"][0]["role"] == "system" and seen.body["stream"] is False


def test_429_with_retry_after_is_honoured_then_retried(fault_server) -> None:
    url = fault_server.script("ra", ["429:0.4", "ok"])
    start = time.monotonic()
    completion = complete(make_backend(url))
    assert completion.attempts == 2
    first, second = fault_server.seen("ra")
    assert second.at - first.at >= 0.38, "the retry waited for Retry-After"
    assert time.monotonic() - start < 2.0


def test_a_retry_after_beyond_the_cap_fails_over_at_once_and_the_ledger_shows_the_fallback(fault_server) -> None:
    primary = fault_server.script("ra-long", ["429:120"])
    spare = fault_server.script("ra-spare", ["ok:From the spare endpoint."])
    resolved = make_config({
        "backends": {"local": backend_table(primary, fallbacks=["spare"]),
                     "spare": backend_table(spare, model="spare-model")}}, base_default=False)
    pool = BackendPool(resolved.config, make_host(ora_openai))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> Any:
        try:
            return await call_role(turn, pool, "analyst", MESSAGES, prompt_key="k", step="analyst")
        finally:
            await pool.aclose()

    completion = asyncio.run(go())
    assert completion.text == "From the spare endpoint."
    assert len(fault_server.seen("ra-long")) == 1, "a Retry-After of 120 s is not waited for"
    failed, ran = turn.calls
    assert failed.error["kind"] == "rate_limited" and "Retry-After 120s" in failed.error["message"]
    assert (ran.planned_model, ran.effective_model, ran.effective_provider) == ("test-model", "spare-model", "openai")
    assert ran.fallback_flags == ["fallback:local->spare:rate_limited"] and ran.mismatch
    assert "analyst-backend-rate_limited-fallback" in [c.name for c in turn.contingencies]


def test_persistent_500_is_retried_then_unavailable(fault_server) -> None:
    url = fault_server.script("five", ["500"])
    with pytest.raises(BackendUnavailable, match="HTTP 500") as caught:
        complete(make_backend(url))
    assert len(fault_server.seen("five")) == 3 and caught.value.attempts == 3
    assert "injected HTTP 500" in caught.value.detail


def test_500_then_ok_recovers_with_the_attempts_recorded(fault_server) -> None:
    url = fault_server.script("five-ok", ["500", "503", "ok"])
    assert complete(make_backend(url)).attempts == 3


def test_malformed_json_is_a_bad_response_and_not_retried(fault_server) -> None:
    url = fault_server.script("bad-json", ["malformed"])
    with pytest.raises(BackendBadResponse, match="malformed JSON"):
        complete(make_backend(url))
    assert len(fault_server.seen("bad-json")) == 1


def test_an_empty_reply_is_a_bad_response_never_an_empty_answer(fault_server) -> None:
    url = fault_server.script("empty", ["empty"])
    with pytest.raises(BackendBadResponse, match="no text"):
        complete(make_backend(url))


def test_a_hang_past_the_timeout_is_a_typed_timeout(fault_server) -> None:
    url = fault_server.script("hang", ["hang:5"])
    start = time.monotonic()
    with pytest.raises(BackendTimeout, match="no answer within 0.5s"):
        complete(make_backend(url, timeout_s=0.5), timeout_s=0.5)
    assert time.monotonic() - start < 2.0
    assert len(fault_server.seen("hang")) == 1, "timeouts are not retried unless retry_on_timeout is set"


def test_a_dropped_connection_is_retried_and_then_unavailable(fault_server) -> None:
    url = fault_server.script("drop", ["drop", "ok"])
    assert complete(make_backend(url)).attempts == 2
    url = fault_server.script("drop-all", ["drop"])
    with pytest.raises(BackendUnavailable, match="dropped the connection"):
        complete(make_backend(url, max_retries=1))
    assert len(fault_server.seen("drop-all")) == 2


def test_the_breaker_opens_fails_fast_then_probes_and_closes(fault_server) -> None:
    url = fault_server.script("brk", ["500", "500", "ok"])
    options = {"breaker_failures": 2, "breaker_reset_s": 0.4}
    backend = make_backend(url, max_retries=0, options=options)
    for _ in range(2):
        with pytest.raises(BackendUnavailable, match="HTTP 500"):
            complete(backend)
    breaker = breaker_for(url)
    assert breaker.state == "open"
    with pytest.raises(BackendUnavailable, match="circuit open"):
        complete(backend)
    assert len(fault_server.seen("brk")) == 2, "an open circuit does not touch the endpoint"
    time.sleep(0.45)
    assert breaker.state == "half_open"
    assert complete(backend).text
    assert breaker.state == "closed"
    assert [t[1] for t in breaker.transitions] == ["open", "half_open", "closed"]


def test_a_failed_probe_reopens_the_circuit(fault_server) -> None:
    url = fault_server.script("brk2", ["500"])
    backend = make_backend(url, max_retries=0, options={"breaker_failures": 1, "breaker_reset_s": 0.2})
    with pytest.raises(BackendUnavailable):
        complete(backend)
    time.sleep(0.25)
    with pytest.raises(BackendUnavailable, match="HTTP 500"):
        complete(backend)
    assert breaker_for(url).state == "open" and len(fault_server.seen("brk2")) == 2


def test_refused_credentials_and_a_missing_key_are_auth_errors(fault_server, monkeypatch) -> None:
    url = fault_server.script("auth", ["401"])
    with pytest.raises(BackendAuthError, match="HTTP 401"):
        complete(make_backend(url))
    assert len(fault_server.seen("auth")) == 1
    monkeypatch.delenv("ORA_TEST_MISSING_KEY", raising=False)
    url = fault_server.script("nokey", ["ok"])
    with pytest.raises(BackendAuthError, match="ORA_TEST_MISSING_KEY"):
        complete(make_backend(url, api_key_env="ORA_TEST_MISSING_KEY"))
    assert fault_server.seen("nokey") == []


def test_nothing_listening_is_unavailable() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BackendUnavailable, match="cannot connect"):
        complete(make_backend(f"http://127.0.0.1:{port}/v1", max_retries=0))


def test_streaming_yields_deltas_and_broken_streams_raise(fault_server) -> None:
    backend = make_backend(fault_server.script("st", ["ok:one two three four"]))

    async def collect(b: Any) -> list[str]:
        try:
            return [d async for d in b.stream(MESSAGES, CompletionParams(model="test-model"))]
        finally:
            await b.aclose()

    assert asyncio.run(collect(backend)) == ["one", " two", " three", " four"]
    assert fault_server.seen("st")[0].body["stream"] is True
    with pytest.raises(BackendUnavailable, match="stream broke after|ended without"):
        asyncio.run(collect(make_backend(fault_server.script("st-drop", ["stream-drop:a b c d e"]))))
    with pytest.raises(BackendUnavailable, match=r"without \[DONE\]"):
        asyncio.run(collect(make_backend(fault_server.script("st-nodone", ["stream-nodone:a b c"]))))
    with pytest.raises(BackendRateLimited):
        asyncio.run(collect(make_backend(fault_server.script("st-429", ["429:300"]))))


def test_the_cache_answers_identical_requests_only(fault_server, tmp_path: Path) -> None:
    url = fault_server.script("cache", ["ok:cached text"])
    backend = make_backend(url, options={"cache": True, "cache_dir": str(tmp_path / "c")})
    first, second = complete(backend), complete(backend)
    assert (first.cached, second.cached) == (False, True) and second.text == first.text == "cached text"
    assert len(fault_server.seen("cache")) == 1
    complete(backend, temperature=0.9)
    assert len(fault_server.seen("cache")) == 2, "a different request is a miss"
    uncached = make_backend(url)
    complete(uncached)
    assert len(fault_server.seen("cache")) == 3, "the cache is opt-in"
    assert not any(b"Bearer" in p.read_bytes() for p in (tmp_path / "c").rglob("*") if p.is_file())


def test_one_backend_reuses_one_connection(fault_server) -> None:
    url = fault_server.script("reuse", ["ok"])
    backend = make_backend(url)

    async def go() -> None:
        try:
            for _ in range(5):
                await backend.complete(MESSAGES, CompletionParams(model="test-model"))
        finally:
            await backend.aclose()

    asyncio.run(go())
    assert len({r.client_port for r in fault_server.seen("reuse")}) == 1


def test_the_backend_is_usable_again_after_aclose_on_a_new_event_loop(fault_server) -> None:
    backend = make_backend(fault_server.script("reopen", ["ok"]))
    assert complete(backend).text and complete(backend).text


def test_check_lists_models_and_says_whether_ours_is_there(fault_server) -> None:
    backend = make_backend(fault_server.url("chk"))

    async def go() -> dict[str, Any]:
        try:
            return await backend.check()
        finally:
            await backend.aclose()

    info = asyncio.run(go())
    assert info["model_listed"] is True and "test-model" in info["models"] and info["breaker"] == "closed"


def test_bad_options_are_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"options\.breaker_failures"):
        make_backend("http://127.0.0.1:9/v1", options={"breaker_failures": 0})


# --- every fault through a role: the typed error, the retries, the fallback, on the ledger ------

FAULTS = [  # (script, error kind, requests the primary saw, retries)
    (["429:120"], "rate_limited", 1, 0),  # Retry-After beyond the cap: fail over at once
    (["500"], "unavailable", 3, 2),  # retried max_retries times, then given up
    (["malformed"], "bad_response", 1, 0),  # not retried: the same request gets the same body
    (["hang:5"], "timeout", 1, 0),  # past timeout_s, not retried by default
    (["drop"], "unavailable", 3, 2),  # a dropped connection is retried
]


def _role_call(primary: str, spare: str | None, **primary_over: Any) -> tuple[TurnContext, Any]:
    backends = {"local": backend_table(primary, timeout_s=0.5, **primary_over,
                                       **({"fallbacks": ["spare"]} if spare else {}))}
    if spare:
        backends["spare"] = backend_table(spare, model="spare-model")
    resolved = make_config({"backends": backends}, base_default=False)
    pool = BackendPool(resolved.config, make_host(ora_openai))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> Any:
        try:
            return await call_role(turn, pool, "analyst", MESSAGES, prompt_key="k", step="analyst")
        finally:
            await pool.aclose()

    try:
        return turn, asyncio.run(go())
    except BackendError as exc:
        return turn, exc


@pytest.mark.parametrize(("script", "kind", "requests", "retries"), FAULTS,
                         ids=[f[0][0].split(":")[0] for f in FAULTS])
def test_each_fault_falls_back_and_the_ledger_shows_what_ran(fault_server, script, kind, requests,
                                                             retries) -> None:
    name = f"ledger-{script[0].split(':')[0]}"
    spare = fault_server.script(f"{name}-spare", ["ok:From the spare endpoint."])
    turn, completion = _role_call(fault_server.script(name, script), spare)
    assert completion.text == "From the spare endpoint.", "the fallback answered, not error text"
    assert len(fault_server.seen(name)) == requests
    failed, ran = turn.calls
    assert failed.error["kind"] == kind and failed.attempts == retries + 1
    assert (failed.effective_model, failed.prompt_tokens, failed.completion_tokens) == ("test-model", 0, 0)
    assert (ran.role, ran.planned_model, ran.effective_model) == ("analyst", "test-model", "spare-model")
    assert ran.fallback_flags == [f"fallback:local->spare:{kind}"] and ran.mismatch and not ran.error
    assert f"analyst-backend-{kind}-fallback" in [c.name for c in turn.contingencies]


@pytest.mark.parametrize(("script", "kind", "requests", "retries"), FAULTS,
                         ids=[f[0][0].split(":")[0] for f in FAULTS])
def test_each_fault_without_a_fallback_raises_its_type_and_is_on_the_ledger(fault_server, script, kind, requests,
                                                                           retries) -> None:
    name = f"alone-{script[0].split(':')[0]}"
    turn, error = _role_call(fault_server.script(name, script), None)
    assert isinstance(error, BackendError) and error.kind == kind
    assert (error.provider, error.model) == ("openai", "test-model") and error.detail
    [failed] = turn.calls
    assert failed.error["kind"] == kind and failed.effective_model == "test-model" and not failed.fallback_flags


def test_an_open_breaker_fails_fast_to_the_fallback_and_the_ledger_says_so(fault_server) -> None:
    primary = fault_server.script("brk-ledger", ["500"])
    spare = fault_server.script("brk-ledger-spare", ["ok:spare"])
    options = {"breaker_failures": 1, "breaker_reset_s": 60}
    first, _ = _role_call(primary, spare, max_retries=0, options=options)
    assert breaker_for(primary).state == "open" and len(fault_server.seen("brk-ledger")) == 1
    turn, completion = _role_call(primary, spare, max_retries=0, options=options)
    assert completion.text == "spare"
    assert len(fault_server.seen("brk-ledger")) == 1, "the open circuit kept the call off the endpoint"
    failed, ran = turn.calls
    assert failed.error["kind"] == "unavailable" and "circuit open" in failed.error["message"]
    # fast: the open circuit answered without the network (the endpoint saw no second request, above)
    assert failed.latency_s < 1.0 and ran.fallback_flags == ["fallback:local->spare:unavailable"]
