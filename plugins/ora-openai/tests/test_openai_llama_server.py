"""The OpenAI-compatible backend driving a real model server: ``python -m llama_cpp.server``
serving the SmolLM2 GGUF on 127.0.0.1 (``ora_core.testing.LlamaServer``, through the
``llama_servers`` fixture): chat, streaming, streamed calls inside a role, the model check, a
prompt over the server's context window, and the server killed in the middle of a reply."""

from __future__ import annotations

import asyncio
from typing import Any

import ora_openai
import pytest

from ora_core.api import BackendContextExceeded, BackendError, BackendUnavailable, Completion, CompletionParams
from ora_core.testing import (
    BackendPool,
    LlamaServer,
    LlamaServers,
    TurnContext,
    build_messages,
    call_role,
    make_config,
    make_host,
)

pytestmark = pytest.mark.slow
MODEL = "SmolLM2-135M-Instruct"
N_CTX = 2048
MESSAGES = build_messages("Answer in one short sentence.", "What is the capital of France?")
#: ~3000 tokens of prompt: over the server's 2048-token window
OVERSIZED = build_messages("Answer in one short sentence.", "Count the words: " + "word " * 3000)
LONG = build_messages("Write at length, with many details.",
                      "Write a very long story about a dragon who learns to read, in many chapters.")


@pytest.fixture(scope="module")
def server(llama_servers: LlamaServers) -> LlamaServer:
    return llama_servers.start(alias=MODEL, n_ctx=N_CTX, threads=1)


def server_config(base_url: str, *, max_tokens: int = 24, **options: Any) -> Any:
    return make_config({"backends": {"local": {
        "type": "openai", "model": MODEL, "family": "smollm", "base_url": base_url, "max_tokens": max_tokens,
        "temperature": 0.2, "timeout_s": 60, "max_retries": 2,
        "options": {"backoff_initial_s": 0.05, "backoff_max_s": 0.2, **options}}}}, base_default=False)


def role_call(base_url: str, messages: Any = MESSAGES, *, max_tokens: int = 24,
              **options: Any) -> tuple[TurnContext, Completion | BackendError]:
    """One ``direct`` call the way a step makes it; the turn (its ledger) and the completion or error."""
    resolved = server_config(base_url, max_tokens=max_tokens, **options)
    pool = BackendPool(resolved.config, make_host(ora_openai))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> Completion | BackendError:
        try:
            return await call_role(turn, pool, "direct", messages, prompt_key="test.direct")
        except BackendError as exc:
            return exc
        finally:
            await pool.aclose()

    return turn, asyncio.run(go())


def test_chat_completion_through_a_role_names_the_served_model(server: LlamaServer) -> None:
    turn, completion = role_call(server.base_url)
    assert isinstance(completion, Completion), completion
    assert completion.text.strip() and completion.provider == "openai" and completion.model == MODEL
    assert completion.prompt_tokens > 50 and 0 < completion.completion_tokens <= 24
    [record] = turn.calls
    assert (record.effective_provider, record.effective_model, record.mismatch) == ("openai", MODEL, False)
    assert (record.prompt_tokens, record.completion_tokens) == (completion.prompt_tokens, completion.completion_tokens)


def test_a_streamed_call_inside_a_role_is_assembled(server: LlamaServer) -> None:
    before = len(server.requests())
    turn, completion = role_call(server.base_url, stream=True, stream_usage=True)
    assert isinstance(completion, Completion), completion
    assert completion.text.strip() and completion.model == MODEL and completion.finish_reason in ("stop", "length")
    assert completion.latency_s > 0 and completion.attempts == 1
    # llama-cpp-python's server ignores stream_options.include_usage (its request model has no such field, and
    # extra fields are dropped): the stream carries no usage, which the completion names instead of passing 0
    # off as measured
    assert (completion.prompt_tokens, completion.completion_tokens) == (0, 0)
    [warning] = completion.warnings
    assert "reported no token usage" in warning and "the server sent none" in warning
    assert server.requests()[before:] == [200]
    [record] = turn.calls
    assert record.output == completion.text and record.finish_reason == completion.finish_reason


def test_streaming_from_the_model_server(server: LlamaServer) -> None:
    settings = server_config(server.base_url).config.backends["local"]
    backend = make_host(ora_openai).get("backend", "openai").create(settings)

    async def go() -> list[str]:
        try:
            return [d async for d in backend.stream(MESSAGES, CompletionParams(model=MODEL, max_tokens=24))]
        finally:
            await backend.aclose()

    deltas = asyncio.run(go())
    assert len(deltas) >= 2 and "".join(deltas).strip()


def test_check_finds_the_model_listed(server: LlamaServer) -> None:
    settings = server_config(server.base_url).config.backends["local"]
    backend = make_host(ora_openai).get("backend", "openai").create(settings)

    async def go() -> dict[str, Any]:
        try:
            return await backend.check()
        finally:
            await backend.aclose()

    info = asyncio.run(go())
    assert info["model_listed"] is True and MODEL in info["models"]


def test_a_prompt_over_the_context_window_is_refused_once_naming_the_window(server: LlamaServer) -> None:
    """llama-cpp-python answers HTTP 400 with OpenAI's body (``code: context_length_exceeded``, "This
    model's maximum context length is 2048 tokens. However, you requested N tokens (P in the messages,
    M in the completion)"): one request, no retry, an error naming both sizes."""
    before = len(server.requests())
    turn, error = role_call(server.base_url, OVERSIZED)
    assert isinstance(error, BackendContextExceeded), error
    assert error.context_window == N_CTX and error.prompt_tokens is not None and error.prompt_tokens > N_CTX
    assert f"context window of {N_CTX} tokens" in str(error)
    assert f"a prompt of {error.prompt_tokens} tokens" in str(error)
    assert server.requests()[before:] == [400], "one request: a prompt that does not fit is never sent again"
    [record] = turn.calls
    assert record.error is not None and record.error["kind"] == "context_window" and record.attempts == 1


def test_a_streamed_prompt_over_the_window_is_an_empty_stream_named_as_such(server: LlamaServer) -> None:
    """Streamed, llama-cpp-python has already answered 200 when its generator raises the window error:
    the body ends cleanly with no event and no [DONE]. That is a typed failure saying so (never an
    empty answer), sent once."""
    before = len(server.requests())
    _, error = role_call(server.base_url, OVERSIZED, stream=True)
    assert isinstance(error, BackendUnavailable), error
    assert "sent no event at all" in str(error) and error.partial_output == ""
    assert server.requests()[before:] == [200]
    # the server's own account: its generator raised after the 200 (logged once it sees the client gone)
    assert server.wait_for_log(f"exceed context window of {N_CTX}"), server.log_text()[-2000:]


def test_a_server_killed_mid_generation_leaves_a_typed_error_with_the_partial_output(
        llama_servers: LlamaServers) -> None:
    doomed = llama_servers.start(alias=MODEL, n_ctx=N_CTX, threads=1)
    watcher = doomed.kill_when_sent(3000)  # headers, the role event, then some ten tokens of text
    turn, error = role_call(doomed.base_url, LONG, max_tokens=1500, stream=True)  # ~30 s of text, were it let run
    watcher.join(timeout=60)
    assert watcher.error is None and watcher.outcome.startswith("killed at"), watcher.outcome
    assert doomed.killed and not doomed.alive
    assert isinstance(error, BackendUnavailable), error
    assert f"after {len(error.partial_output)} characters" in str(error)
    assert error.partial_output.strip(), "text had arrived before the kill"
    assert doomed.requests() == [200] and getattr(error, "attempts", 0) == 1, "text had arrived: not sent again"
    [record] = turn.calls
    assert record.error is not None and record.error["partial_output_chars"] == str(len(error.partial_output))
    assert record.output == error.partial_output and record.finish_reason == "error"
