"""Structured output in process: a call with ``CompletionParams.response_schema`` is generated under
llama.cpp's grammar of that JSON schema, on the real SmolLM2 GGUF, and says so (``constrained``)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Literal

import ora_local_llm
import pytest
from ora_local_llm.engine import SchemaError, schema_grammar
from pydantic import BaseModel, ConfigDict

from ora_core.api import BackendBadResponse, BackendTimeout, CompletionParams, StopUnless
from ora_core.testing import build_messages, make_config, make_host

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"status": {"type": "string", "enum": ["PASS", "FAIL"]},
                   "findings": {"type": "array", "items": {"type": "string", "maxLength": 80}, "maxItems": 3}},
    "required": ["status", "findings"], "additionalProperties": False}
QUESTION = build_messages("Grade the statement.", "Statement: Paris is the capital of France. Give your verdict.")


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["PASS", "FAIL"]
    findings: list[str]


def backend_for(**options: object) -> Any:
    table = {"type": "local-llm", "model": "SmolLM2-135M-Instruct", "family": "smollm", "max_tokens": 96,
             "options": {"threads": 1, **options}}
    settings = make_config({"backends": {"local": table}}).config.backends["local"]
    return make_host(ora_local_llm).get("backend", "local-llm").create(settings)


def test_the_grammar_keeps_raw_control_characters_out_of_json_strings() -> None:
    text = schema_grammar(VERDICT_SCHEMA)._grammar
    [char] = [line for line in text.splitlines() if line.startswith("char ::=")]
    assert r"\x00-\x1F" in char and r"\x7F" in char, char
    assert schema_grammar(VERDICT_SCHEMA) is schema_grammar(dict(VERDICT_SCHEMA)), "compiled once per schema"


def test_a_schema_llama_cpp_cannot_convert_is_a_typed_error_not_any_json() -> None:
    bad = {"type": "object", "properties": {"x": {"type": "tensor"}}, "required": ["x"]}
    with pytest.raises(SchemaError, match="cannot turn the response schema into a grammar"):
        schema_grammar(bad)
    backend = backend_for()
    with pytest.raises(BackendBadResponse, match="response schema 'odd'"):
        asyncio.run(backend.complete(QUESTION, CompletionParams(response_schema=bad, schema_name="odd")))


@pytest.mark.slow
def test_a_constrained_call_on_the_bundled_model_returns_json_that_validates() -> None:
    backend = backend_for(seed=7)
    assert backend.structured_output is True
    # a StopUnless the JSON can never meet: under a schema it does not apply (the reply's shape is the grammar's)
    params = CompletionParams(max_tokens=96, temperature=0.2, response_schema=VERDICT_SCHEMA, schema_name="verdict",
                              stop_unless=StopUnless(text="VERDICT:", within_chars=5))
    for _ in range(3):
        completion = asyncio.run(backend.complete(QUESTION, params))
        assert completion.constrained is True and completion.finish_reason == "stop", completion
        verdict = Verdict.model_validate_json(completion.text)  # raises if it does not validate
        assert json.loads(completion.text) == verdict.model_dump()
        assert completion.prompt_tokens > 50 and completion.completion_tokens > 0


@pytest.mark.slow
def test_without_a_schema_or_with_the_option_off_the_reply_is_text() -> None:
    plain = asyncio.run(backend_for().complete(QUESTION, CompletionParams(max_tokens=16)))
    assert plain.constrained is False
    off = backend_for(structured_output=False)
    assert off.structured_output is False
    ignored = asyncio.run(off.complete(QUESTION, CompletionParams(max_tokens=16, response_schema=VERDICT_SCHEMA)))
    assert ignored.constrained is False


@pytest.mark.slow
def test_a_constrained_generation_past_its_timeout_stops_there() -> None:
    """A grammar forbids end-of-sequence until its document is complete, so the guard cannot end the reply
    by forcing it: the stream is closed instead, and the timeout is the typed error as for any reply."""
    essay = {"type": "object", "properties": {"essay": {"type": "string"}}, "required": ["essay"],
             "additionalProperties": False}
    backend = backend_for()
    asyncio.run(backend.complete(QUESTION, CompletionParams(max_tokens=2)))  # loaded before the clock runs
    long_prompt = build_messages("Write at length.", "Write a very long essay about rivers, in many paragraphs.")
    with pytest.raises(BackendTimeout, match="partial reply is not an answer") as caught:
        asyncio.run(backend.complete(long_prompt, CompletionParams(max_tokens=1000, timeout_s=0.5,
                                                                   response_schema=essay)))
    found = re.search(r"generation passed timeout_s=0\.5s after (\d+) token", str(caught.value))
    assert found is not None, str(caught.value)
    # ~0.5 s of generation, not the 1000-token budget run out under a forced end that the grammar refuses
    assert int(found.group(1)) < 300, str(caught.value)
