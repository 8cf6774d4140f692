"""The per-call path of ``call_role`` builds what validation would build.

The ledger record of a call that answered is built without a validation pass when its parts
are typed already, the call's parameters are copied without pydantic's ``model_copy``, and
``record_call`` emits the record's fields without a ``model_dump`` round trip. Each is pinned
here equal to the validated or dumped value it replaces, and anything unusual still goes
through validation.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ora_scripted
import pytest

from ora_core import hookimpl
from ora_core.engine.backends import BackendPool, _shallow_copy, _success_record, call_role, params_record
from ora_core.engine.prompts import build_messages
from ora_core.kernel.models import Completion, CompletionParams, ModelCallRecord
from ora_core.kernel.trace import TurnContext
from ora_core.testing import RecordingSink, make_config, make_host

MESSAGES = build_messages("Answer.", "Question?")


def _validated_twin(record: ModelCallRecord) -> ModelCallRecord:
    return ModelCallRecord(**{name: getattr(record, name) for name in ModelCallRecord.model_fields})


def _dumped(record: ModelCallRecord) -> dict[str, Any]:
    """What a ``model_call`` event carries: the record as ``model_dump(mode="json")`` gives it, the
    fields it leaves out of the ledger (the call verbatim) included, the step (the event's own) not."""
    return {**record.model_dump(mode="json", exclude={"step"}),
            "messages": [m.model_dump(mode="json") for m in record.messages], "params": record.params,
            "output": record.output}


@pytest.mark.parametrize("completion", [
    Completion(text="a", provider="scripted", model="m"),
    Completion(text="a", provider="scripted", model="other", family="f", prompt_tokens=7, completion_tokens=3,
               latency_s=1.25, finish_reason="stop", cached=True, attempts=3),
])
@pytest.mark.parametrize("flags", [[], ["tpm:a->b", "fallback:b->c:timeout"]])
def test_the_success_record_equals_the_validated_record(completion: Completion, flags: list[str]) -> None:
    resolved = make_config({"backends": {"local": {"type": "scripted", "model": "m"}}}, base_default=False)
    planned = resolved.config.backends["local"]
    record = _success_record("analyst", "gear2.analyst", "local", planned, "local", planned, list(flags), 0.5,
                             completion, "first attempt", list(MESSAGES), params_record(CompletionParams(model="m")))
    twin = _validated_twin(record)
    assert record == twin and record.model_dump() == twin.model_dump()
    assert record.model_dump_json() == twin.model_dump_json()
    assert record.mismatch == twin.mismatch == (completion.model != "m")  # planned: scripted/m
    assert record.model_fields_set == set(ModelCallRecord.model_fields)
    assert record.fallback_flags == flags and record.error is None


def test_a_completion_bent_after_validation_takes_the_validating_path() -> None:
    resolved = make_config({"backends": {"local": {"type": "scripted", "model": "m"}}}, base_default=False)
    bent = Completion(text="a", provider="openai", model="m")
    bent.attempts = "2"  # type: ignore[assignment]  # no validate_assignment: a careless plugin can
    local = resolved.config.backends["local"]
    record = _success_record("analyst", "k", "local", local, "local", local, [], 0.5, bent, "first attempt",
                             list(MESSAGES), {})
    assert record.attempts == 2 and type(record.attempts) is int, "validated, so coerced as before"
    bent.prompt_tokens = "many"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="prompt_tokens"):
        _success_record("analyst", "k", "local", local, "local", local, [], 0.5, bent, "first attempt",
                        list(MESSAGES), {})


def test_the_shallow_params_copy_equals_model_copy_and_is_its_own_object() -> None:
    original = CompletionParams(model="m", max_tokens=64, stop=["\n"], extra={"seed": 1})
    copy = _shallow_copy(original)
    twin = original.model_copy()
    assert copy == twin and copy.model_fields_set == twin.model_fields_set
    assert copy.model_dump() == original.model_dump()
    copy.max_tokens = 9
    assert original.max_tokens == 64, "the cached parameters are not changed through a copy"
    assert copy.stop is original.stop and twin.stop is original.stop, "shallow, as model_copy() is"


class _Bending:
    """A backend whose Completion arrives with a field bent after validation."""

    class _Factory:
        name = "bending"

        def create(self, settings: Any) -> Any:
            class _Backend:
                provider, model, family = "bending", settings.model, "test"

                async def complete(self, messages: Any, params: Any) -> Completion:
                    completion = Completion(text="ok", provider="bending", model=settings.model, prompt_tokens=4)
                    completion.completion_tokens = 2.0  # type: ignore[assignment]
                    return completion

            return _Backend()

    @hookimpl
    def ora_register_backends(self, register: Any) -> None:
        register(self._Factory())


@pytest.mark.parametrize("backend", [
    {"type": "scripted", "model": "scripted-1", "options": {"default": "hello"}},
    {"type": "bending", "model": "b-1"},
])
def test_call_role_records_and_emits_what_validation_and_model_dump_give(backend: dict[str, Any]) -> None:
    resolved = make_config({"backends": {"local": backend}}, base_default=False)
    pool = BackendPool(resolved.config, make_host(ora_scripted, _Bending()))
    sink = RecordingSink()
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash, sinks=[sink]).open()

    async def go() -> Completion:
        try:
            return await call_role(turn, pool, "analyst", MESSAGES, prompt_key="test.key", step="step-x")
        finally:
            await pool.aclose()

    completion = asyncio.run(go())
    [record] = turn.calls
    assert record == _validated_twin(record)
    assert (record.effective_model, record.prompt_tokens) == (backend["model"], completion.prompt_tokens)
    assert type(record.completion_tokens) is int
    [event] = [e for e in sink.events if e.kind == "model_call"]
    assert event.step == record.step == "step-x" and (record.call, record.step_call) == (1, 1)
    assert event.data == {**_dumped(record), "mismatch": record.mismatch}
    assert list(event.data) == [*(f for f in ModelCallRecord.model_fields if f != "step"), "mismatch"], \
        "the fields in their order (the step is the event's own)"
    assert record.messages == list(MESSAGES) and record.output == completion.text
    assert record.params == CompletionParams(**record.params).model_dump(mode="json")
    event.data["fallback_flags"].append("changed")
    assert record.fallback_flags == [], "the event holds copies, not the record's own list"


def test_record_call_of_a_failed_call_emits_the_dumped_error() -> None:
    turn_sink = RecordingSink()
    turn = TurnContext(prompt="q", config=None, config_hash="h", sinks=[turn_sink]).open()
    record = ModelCallRecord(role="r", prompt_key="k", planned_provider="p", planned_model="m",
                             effective_provider="p", effective_model="m", latency_s=0.1,
                             error={"kind": "timeout", "message": "late"}, attempts=2)
    turn.record_call(record, step="s")
    [event] = [e for e in turn_sink.events if e.kind == "model_call"]
    assert event.data == {**_dumped(record), "mismatch": False}
    event.data["error"]["kind"] = "changed"
    assert record.error == {"kind": "timeout", "message": "late"}
