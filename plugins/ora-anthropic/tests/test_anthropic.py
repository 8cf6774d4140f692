"""The Anthropic backend against a local server that speaks (and checks) the Messages API
wire format: answers, streams, and every failure as a typed error."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import ora_anthropic
import ora_scripted
import pytest
from fake_anthropic import API_KEY, FakeAnthropic

from ora_core.api import (
    BackendAuthError,
    BackendBadResponse,
    BackendRateLimited,
    BackendTimeout,
    BackendUnavailable,
    CompletionParams,
    ConfigError,
    Message,
)
from ora_core.testing import BackendPool, TurnContext, build_messages, call_role, make_config, make_host

MESSAGES = build_messages("Answer briefly.", "What is the capital of France?")
#: The ``transport`` option every backend of the running test gets (see ``_under_each_transport``).
OPTIONS: dict[str, Any] = {}


@pytest.fixture(scope="module", params=["aiohttp", "httpcore"])
def transport_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def fake(transport_kind: str) -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:  # one per transport: request counts per prefix stay per run
        yield server


@pytest.fixture(autouse=True)
def _under_each_transport(transport_kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs once per ``transport`` option: each failure ends in the same typed error."""
    monkeypatch.setitem(OPTIONS, "transport", transport_kind)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORA_TEST_ANTHROPIC_KEY", API_KEY)


def table(base_url: str, **over: Any) -> dict[str, Any]:
    options = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05, **OPTIONS, **over.pop("options", {})}
    return {"type": "anthropic", "model": "claude-test-1", "family": "claude", "base_url": base_url,
            "api_key_env": "ORA_TEST_ANTHROPIC_KEY", "timeout_s": 2.0, "max_retries": 2, "options": options, **over}


def backend(base_url: str, **over: Any) -> Any:
    config = make_config({"backends": {"local": table(base_url, **over)}}, base_default=False)
    return make_host(ora_anthropic).get("backend", "anthropic").create(config.config.backends["local"])


def run(b: Any, coro_factory: Any) -> Any:
    async def go() -> Any:
        try:
            return await coro_factory(b)
        finally:
            await b.aclose()

    return asyncio.run(go())


def complete(b: Any, messages: list[Message] = MESSAGES, **params: Any) -> Any:
    return run(b, lambda x: x.complete(messages, CompletionParams(model=x.model, **params)))


def test_a_message_round_trip_in_the_real_wire_format(fake: FakeAnthropic) -> None:
    completion = complete(backend(fake.script("ok", ["ok"])))
    assert completion.text == "Paris is the capital of France."
    assert (completion.provider, completion.model, completion.family) == ("anthropic", "claude-test-1", "claude")
    assert (completion.prompt_tokens, completion.completion_tokens, completion.finish_reason) == (42, 6, "end_turn")
    [seen] = fake.seen("ok")
    assert seen["headers"]["x-api-key"] == API_KEY and seen["headers"]["anthropic-version"] == "2023-06-01"
    body = seen["body"]
    assert body["system"].startswith("## UNIVERSAL ANTI-CONFABULATION DIRECTIVE")
    assert [m["role"] for m in body["messages"]] == ["user"] and body["max_tokens"] >= 1


def test_consecutive_turns_are_merged_so_roles_alternate(fake: FakeAnthropic) -> None:
    messages = [*MESSAGES, Message(role="user", content="And Germany?")]
    complete(backend(fake.script("merge", ["ok"])), messages)
    [seen] = fake.seen("merge")
    assert len(seen["body"]["messages"]) == 1 and seen["body"]["messages"][0]["content"].endswith("And Germany?")


def test_an_assistant_first_conversation_is_refused_before_sending(fake: FakeAnthropic) -> None:
    with pytest.raises(BackendBadResponse, match="first non-system message"):
        complete(backend(fake.script("asst", ["ok"])), [Message(role="assistant", content="hi")])
    assert fake.seen("asst") == []


def test_429_honours_retry_after_and_529_is_retried(fake: FakeAnthropic) -> None:
    url = fake.script("ra", ["429:0.3", "529", "ok"])
    assert complete(backend(url)).attempts == 3
    first, second, _ = fake.seen("ra")
    assert second["at"] - first["at"] >= 0.28


def test_a_long_retry_after_is_a_rate_limit_at_once(fake: FakeAnthropic) -> None:
    with pytest.raises(BackendRateLimited) as caught:
        complete(backend(fake.script("ra-long", ["429:600"])))
    assert caught.value.retry_after == 600 and len(fake.seen("ra-long")) == 1


def test_persistent_overload_is_unavailable_after_the_retries(fake: FakeAnthropic) -> None:
    with pytest.raises(BackendUnavailable, match="overloaded_error"):
        complete(backend(fake.script("over", ["529"])))
    assert len(fake.seen("over")) == 3


def test_wrong_or_missing_key_is_an_auth_error(fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORA_TEST_ANTHROPIC_KEY", "sk-ant-wrong")
    with pytest.raises(BackendAuthError, match="authentication_error"):
        complete(backend(fake.script("badkey", ["ok"])))
    monkeypatch.delenv("ORA_TEST_ANTHROPIC_KEY")
    with pytest.raises(BackendAuthError, match="ORA_TEST_ANTHROPIC_KEY"):
        complete(backend(fake.script("nokey", ["ok"])))
    assert fake.seen("nokey") == []


def test_malformed_empty_hang_and_drop_are_typed(fake: FakeAnthropic) -> None:
    with pytest.raises(BackendBadResponse, match="malformed JSON"):
        complete(backend(fake.script("mal", ["malformed"])))
    with pytest.raises(BackendBadResponse, match="no text"):
        complete(backend(fake.script("empty", ["empty"])))
    start = time.monotonic()
    with pytest.raises(BackendTimeout):
        complete(backend(fake.script("hang", ["hang:5"]), timeout_s=0.4), timeout_s=0.4)
    assert time.monotonic() - start < 2
    with pytest.raises(BackendUnavailable, match="connection"):
        complete(backend(fake.script("drop", ["drop"]), max_retries=1))
    assert len(fake.seen("drop")) == 2


def test_streaming_and_its_failures(fake: FakeAnthropic) -> None:
    def stream(b: Any) -> list[str]:
        async def collect(x: Any) -> list[str]:
            return [d async for d in x.stream(MESSAGES, CompletionParams(model=x.model))]

        return run(b, collect)

    assert stream(backend(fake.script("st", ["ok:one two three"]))) == ["one", " two", " three"]
    with pytest.raises(BackendUnavailable, match="overloaded_error"):
        stream(backend(fake.script("st-err", ["stream-error:a b c"])))
    with pytest.raises(BackendUnavailable, match="without message_stop"):
        stream(backend(fake.script("st-nostop", ["stream-nostop:a b c"])))


def test_check_lists_models(fake: FakeAnthropic) -> None:
    info = run(backend(fake.script("chk", ["ok"])), lambda b: b.check())
    assert info["model_listed"] is True and "claude-test-small" in info["models"]


def test_a_role_falls_back_across_providers_and_the_ledger_shows_it(fake: FakeAnthropic) -> None:
    resolved = make_config({"backends": {
        "local": table(fake.script("fb", ["529"]), max_retries=0, fallbacks=["offline"]),
        "offline": {"type": "scripted", "model": "scripted-1", "options": {"default": "offline answer"}}}},
        base_default=False)
    pool = BackendPool(resolved.config, make_host(ora_anthropic, ora_scripted))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> Any:
        try:
            return await call_role(turn, pool, "verifier", MESSAGES, prompt_key="k", step="verify")
        finally:
            await pool.aclose()

    assert asyncio.run(go()).text == "offline answer"
    failed, ran = turn.calls
    assert (failed.effective_provider, failed.error["kind"]) == ("anthropic", "unavailable")
    assert (ran.planned_provider, ran.effective_provider, ran.mismatch) == ("anthropic", "scripted", True)
    assert ran.fallback_flags == ["fallback:local->offline:unavailable"]


def test_bad_options_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"options\.api_versoin"):
        backend("http://127.0.0.1:9", options={"api_versoin": "x"})


def test_a_bad_transport_option_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"options\.transport"):
        backend("http://127.0.0.1:9", options={"transport": "requests"})


def test_an_environment_proxy_still_carries_the_requests(fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    fake.script("via-proxy", ["ok"])
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{fake.port}")  # the fake acts as the proxy
    assert complete(backend("http://upstream.invalid/via-proxy")).text == "Paris is the capital of France."
    [seen] = fake.seen("via-proxy")
    assert seen["proxied"], "the request went to the proxy in absolute form"
