"""``options.stream``: a turn's model calls read as server-sent-event streams and assembled, against
the fault server on 127.0.0.1 (under each transport). A stream that breaks, stalls, errs, aborts or
ends without ``[DONE]`` is a typed ``BackendError`` carrying the text received so far as
``partial_output``; a prompt over the context window is ``BackendContextExceeded`` in every shape
the servers we know use, never retried."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import ora_openai
import pytest
from fault_server import CONTEXT_BODIES
from ora_openai.http import context_overflow

import ora_core.api as api
from ora_core.api import (
    BackendContextExceeded,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    CompletionParams,
    Redactor,
    StopUnless,
)
from ora_core.testing import BackendPool, TurnContext, build_messages, call_role, make_config, make_host

MESSAGES = build_messages("Answer briefly.", "What is the capital of France?")
FAST = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05}


@pytest.fixture(autouse=True)
def _under_each_transport(transport_kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FAST, "transport", transport_kind)


def backend_table(base_url: str, **over: Any) -> dict[str, Any]:
    options = {**FAST, "stream": True, **over.pop("options", {})}
    return {"type": "openai", "model": "test-model", "family": "test", "base_url": base_url,
            "timeout_s": 2.0, "max_retries": 2, "options": options, **over}


def make_backend(base_url: str, **over: Any) -> Any:
    config = make_config({"backends": {"local": backend_table(base_url, **over)}}, base_default=False)
    return make_host(ora_openai).get("backend", "openai").create(config.config.backends["local"])


def complete(backend: Any, **params: Any) -> Any:
    async def go() -> Any:
        try:
            params.setdefault("timeout_s", backend.settings.timeout_s)  # as the kernel's params_for gives it
            return await backend.complete(MESSAGES, CompletionParams(model=backend.model, **params))
        finally:
            await backend.aclose()

    return asyncio.run(go())


def failure(backend: Any, **params: Any) -> BackendError:
    with pytest.raises(BackendError) as caught:
        complete(backend, **params)
    return caught.value


# --- a stream that ends well --------------------------------------------------------------------


def test_a_streamed_call_is_assembled_with_finish_reason_usage_and_latency(fault_server) -> None:
    url = fault_server.script("st-ok", ["ok:one two three four"])
    completion = complete(make_backend(url, options={"stream_usage": True}))
    assert completion.text == "one two three four" and completion.finish_reason == "stop"
    assert (completion.prompt_tokens, completion.completion_tokens) == (11, 4)
    assert completion.latency_s > 0 and completion.attempts == 1 and completion.warnings == []
    assert (completion.provider, completion.model, completion.family) == ("openai", "test-model", "test")
    [seen] = fault_server.seen("st-ok")
    assert seen.body["stream"] is True and seen.body["stream_options"] == {"include_usage": True}


def test_a_stream_without_usage_says_its_token_counts_are_not_measured(fault_server) -> None:
    completion = complete(make_backend(fault_server.script("st-nousage", ["ok"])))
    assert completion.text == "Paris is the capital of France."
    assert (completion.prompt_tokens, completion.completion_tokens) == (0, 0)
    [warning] = completion.warnings
    assert "reported no token usage" in warning and "stream_usage is off" in warning
    assert "stream_options" not in fault_server.seen("st-nousage")[0].body


def test_without_the_option_a_call_is_one_json_answer(fault_server) -> None:
    url = fault_server.script("st-off", ["ok"])
    completion = complete(make_backend(url, options={"stream": False}))
    assert completion.prompt_tokens == 11 and fault_server.seen("st-off")[0].body["stream"] is False


def test_a_failure_before_any_text_is_retried_and_the_stream_then_read(fault_server) -> None:
    url = fault_server.script("st-retry", ["drop", "503", "ok:after two failures"])
    completion = complete(make_backend(url))
    assert completion.text == "after two failures" and completion.attempts == 3
    assert len(fault_server.seen("st-retry")) == 3


def test_stop_unless_stops_a_reply_that_does_not_start_as_needed(fault_server) -> None:
    url = fault_server.script("st-stop", ["ok:alpha beta gamma delta epsilon zeta"])
    stopped = complete(make_backend(url), stop_unless=StopUnless(text="CLEANED PROMPT", within_chars=10))
    assert stopped.finish_reason == "stop_unless" and stopped.text == "alpha beta"
    url = fault_server.script("st-nostop", ["ok:CLEANED PROMPT: alpha beta gamma delta"])
    kept = complete(make_backend(url), stop_unless=StopUnless(text="cleaned prompt", within_chars=10))
    assert kept.finish_reason == "stop" and kept.text == "CLEANED PROMPT: alpha beta gamma delta"


# --- a stream that fails: typed, with the partial output -------------------------------------------


@pytest.mark.parametrize(("behaviour", "error_class", "message", "partial"), [
    # the fault server's stream is delimited by the connection's close: a drop reads as an early end
    ("stream-drop", BackendUnavailable, r"stream broke after 8 characters|ended without \[DONE\] after 8", "Paris is"),
    ("stream-nodone", BackendUnavailable, r"ended without \[DONE\] after 31 characters",
     "Paris is the capital of France."),
    ("stream-error", BackendUnavailable, "carried an error after 8 characters: injected mid-stream failure",
     "Paris is"),
    ("stream-error-line", BackendUnavailable, "carried an error after 8 characters: injected mid-stream failure",
     "Paris is"),
    ("stream-abort", BackendUnavailable, "finish_reason='abort' after 8 characters", "Paris is"),
    ("stream-slow:0.8", BackendTimeout, "passed timeout_s=2s after", "Paris is"),
    ("stream-empty", BackendUnavailable, "sent no event at all", ""),
])
def test_a_broken_stream_is_a_typed_error_carrying_the_partial_output(fault_server, behaviour, error_class, message,
                                                                       partial) -> None:
    prefix = "st-" + behaviour.replace(":", "-").replace(".", "")
    error = failure(make_backend(fault_server.script(prefix, [behaviour, "ok"])))
    assert type(error) is error_class
    assert error.partial_output.startswith(partial) and (partial or error.partial_output == "")
    assert error.describe()["partial_output_chars"] == str(len(error.partial_output))
    assert error.describe()["kind"] == error_class.kind
    assert re.search(message, str(error)), str(error)
    # text had arrived, or the server answered: never sent again (the second behaviour, "ok", is unused)
    assert len(fault_server.seen(prefix)) == 1 and getattr(error, "attempts", 1) == 1


def test_the_partial_output_reaches_the_call_record_of_the_turn(fault_server) -> None:
    url = fault_server.script("st-turn", ["stream-drop"])
    resolved = make_config({"backends": {"local": backend_table(url)}}, base_default=False)
    pool = BackendPool(resolved.config, make_host(ora_openai))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> BackendError:
        try:
            with pytest.raises(BackendUnavailable) as caught:
                await call_role(turn, pool, "direct", MESSAGES, prompt_key="test.direct")
            return caught.value
        finally:
            await pool.aclose()

    error = asyncio.run(go())
    record = turn.calls[-1]
    assert error.partial_output == "Paris is"
    assert record.error is not None and record.error["kind"] == "unavailable"
    assert record.error["partial_output_chars"] == "8"
    assert record.output == "Paris is", "ModelCallRecord.output keeps a failed call's partial output"


# --- the context window ---------------------------------------------------------------------------


#: (shape in ``CONTEXT_BODIES``, the window and the prompt size its message gives)
SHAPES = [("llama-cpp-python", 2048, 3127), ("openai", 8192, 9013), ("vllm", 4096, 4488), ("vllm-new", 4096, 3900),
          ("llama.cpp", 4096, 4476)]


def test_every_shape_the_fault_server_knows_is_tested() -> None:
    assert {shape for shape, _, _ in SHAPES} == set(CONTEXT_BODIES)


@pytest.mark.parametrize(("shape", "window", "prompt"), SHAPES)
@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_over_the_context_window_is_named_and_never_retried(fault_server, shape, window, prompt,
                                                                     stream) -> None:
    prefix = f"ctx-{shape}-{stream}".replace(".", "")
    url = fault_server.script(prefix, [f"ctx:{shape}", "ok"])
    error = failure(make_backend(url, max_retries=3, options={"stream": stream}))
    assert isinstance(error, BackendContextExceeded) and error.kind == "context_window"
    assert (error.context_window, error.prompt_tokens) == (window, prompt)
    assert f"context window of {window} tokens" in str(error) and f"a prompt of {prompt} tokens" in str(error)
    assert "HTTP 400" in str(error) and "not retried" in str(error)
    assert len(fault_server.seen(prefix)) == 1 and error.attempts == 1  # type: ignore[attr-defined]


def test_an_error_in_the_stream_saying_the_window_is_full_is_the_context_error_too(fault_server) -> None:
    error = failure(make_backend(fault_server.script("ctx-in-stream", ["stream-ctx"])))
    assert isinstance(error, BackendContextExceeded)
    assert (error.context_window, error.prompt_tokens) == (4096, 4476) and "an error in the stream" in str(error)
    assert len(fault_server.seen("ctx-in-stream")) == 1


def test_other_errors_are_not_taken_for_the_context_window() -> None:
    assert context_overflow(400, b'{"error": {"message": "temperature must be at most 2"}}') is None
    assert context_overflow(429, b'{"error": {"message": "maximum context length is 8192 tokens"}}') is None
    assert context_overflow(500, b"Internal Server Error") is None
    assert context_overflow(400, b'{"error": {"code": "context_length_exceeded", "message": "too long"}}') == \
        (None, None)
    assert context_overflow(413, b"Requested tokens (5000) exceed context window of 4096") == (4096, 5000)


def test_the_context_error_is_exported_and_describes_its_partial_output() -> None:
    assert api.BackendContextExceeded is BackendContextExceeded and issubclass(BackendContextExceeded, BackendError)
    error = BackendError("boom", provider="openai", model="m")
    assert error.partial_output == "" and error.describe()["partial_output_chars"] == "0"
    secret_config = make_config({"backends": {"local": {"type": "openai", "model": "m",
                                                         "api_key": "sk-live-abcdef123456"}}}, base_default=False)
    partial = BackendError("broke", partial_output="the key is sk-live-abcdef123456, then")
    partial.redact(Redactor.for_config(secret_config))
    assert "sk-live-abcdef123456" not in partial.partial_output and partial.partial_output.startswith("the key is ")
