import asyncio

import ora_example_backend
import pytest
from ora_example_backend.backend import TextCompletionFactory, TextCompletionOptions
from pydantic import ValidationError

from ora_core.api import (
    BackendContextExceeded,
    BackendTimeout,
    BackendUnavailable,
    CompletionParams,
    Message,
)
from ora_core.testing import make_config, make_host, make_runtime, run_turn

MESSAGES = [Message(role="system", content="Answer in one sentence."),
            Message(role="user", content="What is the capital of France?")]


def backend(**overrides):
    settings = {"type": "text-completion", "model": "SmolLM2-135M", "family": "smollm", "context_window": 512,
                **overrides}
    return TextCompletionFactory().create(make_config({"backends": {"local": settings}}).config.backends["local"])


@pytest.fixture(scope="module")
def shared():
    return backend()  # the model loads once for the module's tests


def test_the_prompt_is_the_template_filled_in():
    prompt = TextCompletionOptions().render(MESSAGES)
    assert prompt == ("Answer in one sentence.\n\n### User:\nWhat is the capital of France?\n\n"
                      "### Assistant:\n")


def test_a_template_without_the_transcript_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match="template") as caught:
        TextCompletionOptions(template="{system} only")
    assert "must contain {transcript}" in str(caught.value)


def test_a_completion_carries_its_usage_and_names(shared):
    done = asyncio.run(shared.complete(MESSAGES, CompletionParams(max_tokens=16, temperature=0.0)))
    assert done.text and "###" not in done.text
    assert (done.provider, done.model, done.family) == ("text-completion", "SmolLM2-135M", "smollm")
    assert done.prompt_tokens > 10 and 0 < done.completion_tokens <= 16
    assert done.finish_reason in {"stop", "length"}


def test_a_prompt_over_the_window_is_context_exceeded(shared):
    long = [Message(role="user", content="word " * 800)]
    with pytest.raises(BackendContextExceeded) as caught:
        asyncio.run(shared.complete(long, CompletionParams(max_tokens=16)))
    assert caught.value.context_window == 512 and caught.value.prompt_tokens > 512


def test_a_reply_past_its_time_is_a_timeout_with_the_partial_text(shared):
    with pytest.raises(BackendTimeout) as caught:
        asyncio.run(shared.complete(MESSAGES, CompletionParams(max_tokens=200, timeout_s=0.001)))
    assert "timeout_s=0.001s" in str(caught.value) and caught.value.partial_output is not None


def test_a_missing_model_file_is_unavailable():
    missing = backend(options={"model_path": "/nowhere/model.gguf"})
    with pytest.raises(BackendUnavailable, match="model file not found: /nowhere/model.gguf"):
        asyncio.run(missing.complete(MESSAGES, CompletionParams(max_tokens=4)))


def test_a_turn_runs_on_it_and_the_ledger_names_it(tmp_path):
    import ora_modes  # the default mode pack (it ships with ora-core)

    host = make_host(ora_example_backend, ora_modes)
    resolved = make_config({"trace": {"root": str(tmp_path / "traces")},
                            "backends": {"local": {"type": "text-completion", "model": "SmolLM2-135M",
                                                   "family": "smollm", "context_window": 2048,
                                                   "prompt_profile": "compact"}}})
    result = run_turn(make_runtime(host, resolved), "What is the capital of France?", mode="simple")
    assert result.status in {"ok", "degraded"} and result.answer.strip()
    calls = [c for c in result.runtime_role_models if c.effective_provider == "text-completion"]
    assert calls and calls[0].effective_model == "SmolLM2-135M" and calls[0].completion_tokens > 0
