"""Phase A with structured output: where the ``phase_a`` backend declares ``structured_output``, Phase
A asks for one JSON object under ``RESPONSE_SCHEMA`` and validates the constrained reply (one that does
not validate is ``phase-a-unparseable-used-raw-prompt``, the raw prompt going on); a backend without
the capability gets the three sections and the text parser; under the compact prompt profile
(``[pipeline] phase_a = "auto"``) Phase A is skipped, named ``phase-a-skipped-profile``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import ora_scripted
import pytest

from ora_core import hookimpl
from ora_core.engine.backends import BackendPool
from ora_core.engine.phase_a import (
    RESPONSE_SCHEMA,
    SCHEMA_NAME,
    SKIPPED_CONFIG,
    SKIPPED_PROFILE,
    TASK,
    TASK_STRUCTURED,
    UNPARSEABLE,
    run_phase_a,
)
from ora_core.engine.prompts import PHASE_A
from ora_core.kernel.models import Completion, PhaseAResult
from ora_core.kernel.trace import TurnContext
from ora_core.testing import RecordingSink, make_config, make_host, scripted_config

PROMPT = "waht causes the seasons on earth"


class Structured:
    """A backend type that can constrain its replies (``structured_output``): it answers each call with
    the next of ``replies``, ``constrained`` exactly when the call carried a schema (as a real one does),
    and keeps the parameters and messages of every call."""

    name = "structured"

    def __init__(self, *replies: str, finish_reason: str = "stop") -> None:
        self.replies = list(replies)
        self.finish_reason = finish_reason
        self.params: list[Any] = []
        self.messages: list[Any] = []

    def create(self, settings: Any) -> Any:
        outer = self

        class _Backend:
            provider, model, family = "structured", settings.model, "test"
            structured_output = True

            async def complete(self, messages: Any, params: Any) -> Completion:
                outer.params.append(params)
                outer.messages.append(messages)
                return Completion(text=outer.replies.pop(0), provider="structured", model=settings.model,
                                  family="test", finish_reason=outer.finish_reason,
                                  constrained=params.response_schema is not None)

        return _Backend()

    @hookimpl
    def ora_register_backends(self, register: Any) -> None:
        register(self)


def run(backend: Any, *plugins: Any, local: dict[str, Any] | None = None, spare: dict[str, Any] | None = None,
        **config: Any) -> tuple[PhaseAResult, TurnContext, RecordingSink]:
    """Phase A of one turn; the ``local`` backend (every role's) is ``backend``'s type, ``local`` adds to
    its table, ``spare`` configures a second backend."""
    backends = {"local": {"type": "structured", "model": "m", **(local or {})}, **({"spare": spare} if spare else {})}
    resolved = make_config({"backends": backends, **config}, base_default=False)
    sink = RecordingSink()
    host = make_host(backend, *plugins)
    turn = TurnContext(prompt=PROMPT, config=resolved.config, config_hash=resolved.hash, sinks=[sink], host=host)
    return asyncio.run(run_phase_a(turn, BackendPool(resolved.config, host), PROMPT)), turn, sink


def reply(cleaned: str, corrections: list[str] | None = None, inferred: list[str] | None = None) -> str:
    return json.dumps({"cleaned_prompt": cleaned, "corrections": corrections or [], "inferred_items": inferred or []})


def test_a_structured_backend_is_asked_for_json_and_its_constrained_reply_parses() -> None:
    backend = Structured(reply("What causes the seasons on Earth?", ["waht -> what", "earth -> Earth"],
                               ["none", "the user means the planet's yearly seasons"]))
    result, turn, _ = run(backend)
    assert result.parsed and not result.used_raw_prompt
    assert result.cleaned_prompt == "What causes the seasons on Earth?"
    assert result.corrections == ["waht -> what", "earth -> Earth"]
    assert result.inferred_items == ["the user means the planet's yearly seasons"], "a 'none' entry is no item"
    assert not turn.contingencies
    [params] = backend.params
    assert params.response_schema == RESPONSE_SCHEMA and params.schema_name == SCHEMA_NAME
    assert params.stop_unless is None, "a header watch cannot apply to a JSON reply"
    [messages] = backend.messages
    assert TASK_STRUCTURED in messages[0].content and "CLEANED PROMPT:" not in messages[0].content


@pytest.mark.parametrize(("text", "why"), [
    ('{"cleaned_prompt": "What causes the seasons on Earth and', "cut at its token budget"),
    (reply("   "), "the cleaned prompt is empty"),
    (json.dumps({"cleaned_prompt": "x", "corrections": []}), "inferred_items"),
    (reply("<the cleaned prompt>"), "template's own wording"),
])
def test_a_constrained_reply_that_does_not_validate_is_named_unparseable(text: str, why: str) -> None:
    backend = Structured(text, finish_reason="length" if why.startswith("cut") else "stop")
    result, turn, sink = run(backend)
    assert result.cleaned_prompt == PROMPT and result.used_raw_prompt and not result.parsed
    assert result.raw_output == text
    [named] = turn.contingencies
    assert named.name == UNPARSEABLE and named.data["constrained"] is True
    if why.startswith("cut"):
        assert "token budget" in named.detail and named.data["finish_reason"] == "length"
    else:
        assert why in named.detail
    assert any(e.kind == "contingency" and e.data["name"] == UNPARSEABLE for e in sink.events)


def test_a_backend_without_the_capability_gets_the_sections_and_the_text_parser() -> None:
    text = "CLEANED PROMPT:\nWhat causes the seasons on Earth?\nCORRECTIONS:\n- waht -> what\nINFERRED ITEMS:\n- none"
    resolved = scripted_config(default=text)
    host = make_host(ora_scripted)
    turn = TurnContext(prompt=PROMPT, config=resolved.config, config_hash=resolved.hash, host=host)
    pool = BackendPool(resolved.config, host)
    result = asyncio.run(run_phase_a(turn, pool, PROMPT))
    assert result.parsed and result.cleaned_prompt == "What causes the seasons on Earth?"
    assert result.corrections == ["waht -> what"] and not turn.contingencies
    [sent] = pool.get(pool.planned("phase_a")[0]).calls
    assert TASK in sent[0].content and TASK_STRUCTURED not in sent[0].content


def test_an_unconstrained_fallback_asked_for_json_is_read_as_json_then_as_sections() -> None:
    """The phase_a backend can constrain, but it fails and its fallback (the scripted backend) cannot:
    the fallback's text is read as a JSON object when it is one, else by the text parser."""
    for answer, cleaned in ((f"Sure! {reply('What causes the seasons?')}", "What causes the seasons?"),
                            ("CLEANED PROMPT:\nWhy do seasons change?\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none",
                             "Why do seasons change?")):
        backend = Structured("unused")
        backend.replies = []  # an empty script: the structured backend raises, the chain falls back
        result, turn, _ = run(backend, ora_scripted, local={"fallbacks": ["spare"]},
                              spare={"type": "scripted", "options": {"default": answer}})
        assert result.parsed and result.cleaned_prompt == cleaned, (answer, result)
        assert any(c.name.endswith("-fallback") for c in turn.contingencies)
        assert [c.effective_provider for c in turn.calls] == ["structured", "scripted"]


def test_under_the_compact_profile_phase_a_is_skipped_and_named() -> None:
    backend = Structured(reply("never asked"))
    result, turn, sink = run(backend, local={"prompt_profile": "compact"})
    assert result.cleaned_prompt == PROMPT and result.used_raw_prompt and not result.parsed
    assert backend.params == [] and turn.calls == [], "a skipped Phase A spends no model call"
    [named] = turn.contingencies
    assert named.name == SKIPPED_PROFILE and named.severity == "info" and "compact" in named.detail
    assert turn.stash[PHASE_A] is result
    steps = [e for e in sink.events if e.kind == "step_finished" and e.step == "phase-a"]
    assert steps and steps[0].data["health"]["verdict"] == "SKIPPED"


def test_the_setting_decides_run_under_compact_or_skip_always() -> None:
    backend = Structured(reply("What causes the seasons on Earth?"))
    result, turn, _ = run(backend, local={"prompt_profile": "compact"}, pipeline={"phase_a": "run"})
    assert result.parsed and len(backend.params) == 1 and not turn.contingencies
    skipped = Structured(reply("never asked"))
    result, turn, _ = run(skipped, pipeline={"phase_a": "skip"})
    assert skipped.params == [] and [c.name for c in turn.contingencies] == [SKIPPED_CONFIG]
    assert result.cleaned_prompt == PROMPT


def test_template_lines_echoed_as_json_entries_are_left_out_and_named() -> None:
    echo = '<one line per correction, or "- none">'
    backend = Structured(reply("What causes the seasons on Earth?", [echo, "waht -> what"]))
    result, turn, _ = run(backend)
    assert result.parsed and result.corrections == ["waht -> what"]
    [named] = turn.contingencies
    assert named.name == "phase-a-placeholder-items-dropped" and named.data["lines"] == [echo]
