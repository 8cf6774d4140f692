"""Structured output over the OpenAI wire format: a call with ``CompletionParams.response_schema`` sends
``response_format`` in the form ``options.response_format`` names (``json_object`` with the schema, the
default: what llama-cpp-python's server constrains with; ``json_schema``: OpenAI, vLLM, llama.cpp's
llama-server; ``off``: nothing), the reply says ``constrained``, and a server that refuses the field is
a BackendBadResponse naming the option. Against the fault server (the request as it arrived) and a real
``python -m llama_cpp.server`` (what it accepts)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, Literal

import ora_openai
import pytest
from fault_server import FaultServer
from pydantic import BaseModel, ConfigDict

from ora_core.api import BackendBadResponse, BackendError, Completion, CompletionParams
from ora_core.testing import LlamaServer, LlamaServers, build_messages, make_config, make_host

MESSAGES = build_messages("Grade the statement.", "Statement: Paris is the capital of France. Give your verdict.")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"status": {"type": "string", "enum": ["PASS", "FAIL"]},
                   "findings": {"type": "array", "items": {"type": "string", "maxLength": 80}, "maxItems": 3}},
    "required": ["status", "findings"], "additionalProperties": False}
REPLY = '{"status": "PASS", "findings": []}'


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["PASS", "FAIL"]
    findings: list[str]


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def make_backend(base_url: str, model: str = "test-model", **options: Any) -> Any:
    table = {"type": "openai", "model": model, "base_url": base_url, "timeout_s": 60.0, "max_retries": 0,
             "max_tokens": 64, "options": {"backoff_initial_s": 0.01, **options}}
    settings = make_config({"backends": {"local": table}}, base_default=False).config.backends["local"]
    return make_host(ora_openai).get("backend", "openai").create(settings)


def complete(backend: Any, params: CompletionParams) -> Completion:
    async def go() -> Completion:
        try:
            return await backend.complete(MESSAGES, params)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def with_schema(**over: Any) -> CompletionParams:
    return CompletionParams(max_tokens=64, response_schema=SCHEMA, schema_name="verdict", **over)


def test_the_default_form_is_json_object_with_the_schema(server: FaultServer) -> None:
    backend = make_backend(server.script("json-object", [f"ok:{REPLY}"]))
    assert backend.structured_output is True and backend.options.response_format == "json_object"
    completion = complete(backend, with_schema())
    [seen] = server.seen("json-object")
    assert seen.body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert completion.constrained is True and Verdict.model_validate_json(completion.text).status == "PASS"


def test_the_json_schema_form_names_the_schema_and_is_strict(server: FaultServer) -> None:
    backend = make_backend(server.script("json-schema", [f"ok:{REPLY}"]), response_format="json_schema")
    completion = complete(backend, with_schema())
    [seen] = server.seen("json-schema")
    assert seen.body["response_format"] == {"type": "json_schema",
                                            "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": True}}
    assert completion.constrained is True
    loose = make_backend(server.script("json-schema-loose", [f"ok:{REPLY}"]), response_format="json_schema",
                         json_schema_strict=False)
    complete(loose, with_schema())
    assert server.seen("json-schema-loose")[0].body["response_format"]["json_schema"]["strict"] is False


def test_off_sends_no_response_format_and_the_reply_is_text(server: FaultServer) -> None:
    backend = make_backend(server.script("format-off", ["ok:PASS"]), response_format="off")
    assert backend.structured_output is False
    completion = complete(backend, with_schema())
    assert "response_format" not in server.seen("format-off")[0].body and completion.constrained is False


def test_a_call_without_a_schema_sends_none(server: FaultServer) -> None:
    completion = complete(make_backend(server.script("no-schema", ["ok"])), CompletionParams(max_tokens=8))
    assert "response_format" not in server.seen("no-schema")[0].body and completion.constrained is False


@pytest.mark.parametrize("status", ["400", "422"])
def test_a_server_that_refuses_response_format_is_a_typed_error_naming_the_option(server: FaultServer,
                                                                                 status: str) -> None:
    backend = make_backend(server.script(f"refused-{status}", [status]))
    with pytest.raises(BackendBadResponse) as caught:
        complete(backend, with_schema())
    message = str(caught.value)
    assert f"HTTP {status}" in message and "options.response_format = 'json_object'" in message
    assert '"off"' in message and "replies are read as text" in message
    plain = make_backend(server.script(f"refused-plain-{status}", [status]))
    with pytest.raises(BackendBadResponse) as without:
        complete(plain, CompletionParams(max_tokens=8))
    assert "response_format" not in str(without.value), "a request without the field names no such option"


@pytest.fixture(scope="module")
def llama(llama_servers: LlamaServers) -> LlamaServer:
    return llama_servers.start(alias="SmolLM2-135M-Instruct", n_ctx=2048, threads=1)


@pytest.mark.slow
def test_llama_cpp_server_constrains_the_json_object_form_to_the_schema(llama: LlamaServer) -> None:
    for _ in range(3):
        completion = complete(make_backend(llama.base_url, model="SmolLM2-135M-Instruct"), with_schema())
        assert completion.constrained is True
        Verdict.model_validate_json(completion.text)  # raises if the server did not hold the reply to it


@pytest.mark.slow
def test_llama_cpp_server_refuses_the_json_schema_form_and_the_error_names_the_option(llama: LlamaServer) -> None:
    """llama-cpp-python 0.3.x's server types ``response_format`` as ``{"type": "text" | "json_object",
    "schema"?}`` and answers another type with HTTP 500 and its validation error: the json_schema form
    is refused (why json_object is the default), and the error says which option to change."""
    backend = make_backend(llama.base_url, model="SmolLM2-135M-Instruct", response_format="json_schema")
    with pytest.raises(BackendError) as caught:
        complete(backend, with_schema())
    message = str(caught.value)
    assert "HTTP 500" in message and "'json_object'" in message, message
    assert "options.response_format = 'json_schema'" in message and '"off"' in message
