"""Gear 1 (issue 14 items 2, 5, 6): requests that need no analysis run the ``direct`` mode with
verification named as not applicable; a clock question never ships a time the clock contradicts;
a reference to earlier conversation is answered from conversation memory, or says it cannot see it."""

from __future__ import annotations

import io
from pathlib import Path

import ora_health_detectors
import pytest

from ora_core import hookimpl
from ora_core.engine import run_turn
from ora_core.engine.gears.direct import answer_from_clock, clock_reading

CORRECTION = {"match": "## CORRECTION", "on": "system", "reply": "I can't tell you the exact time from here."}


def _checker_ctx(clock):
    return type("Ctx", (), {"data": {"clock": clock}})()


# --- item 2: no analysis needed ---------------------------------------------------------------------


def test_a_creative_request_runs_the_direct_mode_and_names_verification_not_applicable(front):
    prompt = "Write a haiku about autumn."
    rt = front.runtime(rules=[front.phase_a_rule(prompt), {"match": "haiku", "reply": "Red leaves drift and fall"}])
    result = run_turn(rt, prompt)
    assert (result.status, result.mode, result.gear) == ("ok", "direct", 1)
    step = front.step_doc(result.trace_path, "direct-response")
    assert step["output"]["verification"]["status"] == "not-applicable"
    assert "pre-routing" in step["output"]["verification"]["reason"]
    assert "write a haiku" in step["output"]["verification"]["reason"]
    system = rt.pool._built["local"].calls[-1][0].content
    assert "Produce the text the user asked for" in system  # the direct mode's guidance, not simple's
    assert not list(Path(result.trace_path).glob("*-context-assembly.json"))


def test_a_bypassed_turn_names_verification_not_applicable_with_the_stage0_reason(front):
    result = run_turn(front.runtime(), "Hello there!")
    verification = front.step_doc(result.trace_path, "direct-response")["output"]["verification"]
    assert verification["status"] == "not-applicable" and "Stage 0 bypass" in verification["reason"]


# --- item 5: clock answers from the clock -----------------------------------------------------------------


def test_a_contradicted_time_is_regenerated_once_and_a_clean_answer_ships(front):
    rt = front.runtime(rules=[CORRECTION, {"match": "what time", "reply": front.invented_time()}])
    result = run_turn(rt, "Hello, what time is it?")
    assert result.answer == CORRECTION["reply"]
    assert "gear1-clock-regenerated" in result.contingencies
    assert "gear1-clock-answered-from-clock" not in result.contingencies
    step = front.step_doc(result.trace_path, "direct-response")
    assert step["health"]["regenerations"] == 1 and len(rt.pool._built["local"].calls) == 2


@pytest.mark.parametrize("prompt", ["What day is it today?", "what's the date", "Quick question, what year is it?",
                                    "Quelle heure est-il ?"])
def test_date_and_day_questions_take_the_same_clock_path(front, prompt):
    rt = front.runtime(rules=[{"match": ".", "reply": "It is Sunday, 3 March 1991."}])
    result = run_turn(rt, prompt)
    assert "1991" not in result.answer and "Sunday, 3 March" not in result.answer
    assert "gear1-clock-answered-from-clock" in result.contingencies
    assert "SYSTEM CLOCK READING" in rt.pool._built["local"].calls[0][0].content


def test_a_failed_backend_still_gets_the_clock_answer(front):
    rt = front.runtime(rules=[{"match": ".", "reply": "!error:timeout"}])
    result = run_turn(rt, "What time is it?")
    assert result.status == "degraded" and "as read from the system clock" in result.answer
    assert {"direct-response-backend-failed", "gear1-clock-answered-from-clock"} <= set(result.contingencies)


def test_without_a_clock_check_the_model_time_is_not_trusted(front):
    import ora_bypass
    import ora_scripted
    import ora_signals
    import ora_trace_fs

    import ora_modes
    from ora_core.testing import make_host, make_runtime, scripted_config

    class StageZeroOnly:  # the bypass detectors without clock-claims
        @staticmethod
        @hookimpl
        def ora_register_detectors(register):
            register(ora_bypass.bypass_detector())

    host = make_host(ora_scripted, StageZeroOnly(), ora_signals, ora_modes, ora_trace_fs)
    resolved = scripted_config(front.tmp_path / "traces", rules=[{"match": ".", "reply": "It is 23:15."}])
    rt = make_runtime(host, resolved, stderr=io.StringIO())
    result = run_turn(rt, "What time is it?")
    assert "23:15" not in result.answer and "system clock" in result.answer
    assert {"gear1-clock-check-unavailable", "gear1-clock-answered-from-clock"} <= set(result.contingencies)


def test_the_clock_answer_states_the_clock_reading_with_its_timezone_and_passes_the_clock_check():
    from datetime import datetime, timezone

    import ora_bypass

    clock = clock_reading(datetime(2026, 11, 24, 0, 38, tzinfo=timezone.utc))
    answer = answer_from_clock(clock)
    local = datetime.fromisoformat(clock["local"])
    assert f"{local:%H:%M}" in answer and clock["timezone"] in answer and "2026" in answer
    assert ora_bypass.ClockClaimsDetector().detect(answer, _checker_ctx(clock)) == []


# --- item 6: earlier conversation ---------------------------------------------------------------------------


MEMORY_PROMPT = "Summarise what we talked about in our last conversation."


def test_a_reference_to_earlier_conversation_is_answered_from_conversation_memory(front):
    memory = front.Retriever("conv-mem", "conversation",
                             [{"text": "user: we talked about the conversation on night trains to Vienna",
                               "type": "chat", "source": "conversation:default/t1"}])
    rt = front.runtime(front.RetrieverPlugin(memory),
                       rules=[{"match": "CONVERSATION MEMORY", "on": "system",
                               "reply": "Last time we talked about night trains to Vienna."}])
    result = run_turn(rt, MEMORY_PROMPT)
    assert (result.mode, result.gear, result.status) == ("simple", 1, "ok")
    assert result.answer == "Last time we talked about night trains to Vienna."
    system = rt.pool._built["local"].calls[0][0].content
    assert "night trains to Vienna" in system and "conversation:default/t1" in system
    out = front.step_doc(result.trace_path, "direct-response")["output"]
    assert out["conversation_memory"]["status"] == "found" and out["conversation_memory"]["chunks"]
    query, filters, _k = memory.calls[0]
    assert query == MEMORY_PROMPT and filters.min_score == -1.0  # no evidence floor for a memory lookup


@pytest.mark.parametrize("setup, status, severity", [
    ("missing", "missing", "warning"),
    ("failed", "failed", "degraded"),
    ("empty", "empty", "info"),
    ("disabled", "disabled", "warning"),
])
def test_without_the_exchange_gear1_says_it_cannot_see_it_and_names_why(front, setup, status, severity):
    plugins, config = [], {}
    if setup == "failed":
        plugins.append(front.RetrieverPlugin(front.Retriever("conv-mem", "conversation", fail=True)))
    elif setup == "empty":
        plugins.append(front.RetrieverPlugin(front.Retriever("conv-mem", "conversation", [])))
    elif setup == "disabled":
        config["retrieval"] = {"streams": {"conversation": False}}
    rt = front.runtime(*plugins, rules=[{"match": ".", "reply": "We discussed your holiday plans in Spain."}], **config)
    result = run_turn(rt, MEMORY_PROMPT)
    assert result.answer.startswith("I can't see our earlier conversation")
    assert "Spain" not in result.answer
    assert not rt.pool._built.get("local") or not rt.pool._built["local"].calls, "no model reconstructs the exchange"
    [record] = [c for c in front.jsonl(result.trace_path, "contingencies.jsonl")
                if c["name"] == f"gear1-conversation-memory-{status}"]
    assert record["severity"] == severity and record["detail"]
    if setup == "failed":
        [failure] = front.jsonl(result.trace_path, "rag-failures.jsonl")
        assert failure["stream"] == "conversation" and failure["error_class"] == "RetrievalError"
        assert result.status == "degraded"
    if setup == "empty":
        assert "index_empty" in result.answer


# --- the reliability layer's regenerate-on-unhealthy gate ---------------------------------------------------

REFUSAL = "I'm sorry, but I can't help with that request."


def test_an_unhealthy_direct_answer_is_regenerated_once_and_the_discarded_one_is_kept(front):
    prompt = "Write a haiku about autumn."
    phase_a = front.phase_a_rule(prompt)
    rt = front.runtime(ora_health_detectors, rules=[phase_a])
    rt.config.backends["local"].options["replies"] = [phase_a["reply"], REFUSAL, "Red leaves drift and fall"]
    result = run_turn(rt, prompt)
    assert (result.status, result.answer) == ("ok", "Red leaves drift and fall")
    step = front.step_doc(result.trace_path, "direct-response")
    assert step["health"]["regenerations"] == 1 and step["output"]["unhealthy"] == ["refusal"]
    first, second = step["calls"]
    assert first["output"] == REFUSAL and second["why"].startswith("regenerate: refusal")


def test_unhealthy_twice_ships_under_a_header_named_degraded(front):
    prompt = "Write a haiku about autumn."
    phase_a = front.phase_a_rule(prompt)
    rt = front.runtime(ora_health_detectors, rules=[phase_a])
    rt.config.backends["local"].options["replies"] = [phase_a["reply"], REFUSAL, REFUSAL]
    result = run_turn(rt, prompt)
    assert result.status == "degraded" and "direct-response-unhealthy-after-regenerate" in result.contingencies
    assert result.answer.startswith("[degraded — the direct answer is unhealthy (refusal)]")


def test_a_greeting_answered_with_a_question_is_not_a_clarification_loop(front):
    reply = "Hello! What would you like to talk about today? Would you like some ideas?"
    rt = front.runtime(ora_health_detectors, rules=[{"match": "Hello there", "reply": reply}])
    result = run_turn(rt, "Hello there!")
    assert (result.status, result.answer) == ("ok", reply)
    assert "clarification-loop" in [s.name for s in result.signals]  # seen, and not a fault in `simple`
    assert len(rt.pool._built["local"].calls) == 1
