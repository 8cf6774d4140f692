"""The ``otel`` sink against a real OTLP/HTTP receiver on 127.0.0.1: a Gear 4 turn arrives as a span
tree with the GenAI attributes, verdicts as evaluation events on the spans that judged, contingencies
as span events; content only when asked for, never a secret; and a collector that is down is a named
contingency (or, after the turn, a stderr line), recorded for replay, never a broken turn."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ora_otel import conventions as c
from ora_otel.failures import FailureRecord, log_path, unreplayed
from ora_otel.ids import trace_id_for

INTERNAL, CLIENT = 1, 3  # OTLP SpanKind values
ERROR = 2  # OTLP StatusCode.STATUS_CODE_ERROR


def _ns(iso: str) -> int:
    at = datetime.fromisoformat(iso)
    return int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000


def _step_file(trace_path: str, step: str) -> dict[str, Any]:
    [found] = Path(trace_path).glob(f"[0-9][0-9]-{step}.json")
    return json.loads(found.read_text())


def _records(root: Path) -> list[FailureRecord]:
    return [FailureRecord.model_validate_json(line) for line in log_path(root).read_text().splitlines() if line]


def test_a_gear_4_turn_arrives_as_a_span_tree_with_the_genai_attributes(gear4, receiver) -> None:
    result, rt, sink = gear4.run(otel={"endpoint": receiver.url})
    assert (result.status, result.gear, result.mode) == ("ok", 4, "cui-bono"), rt.stderr.getvalue()
    assert sink.flush(10)
    assert set(receiver.paths) == {"/v1/traces"}
    spans = receiver.spans
    assert {s.trace_id for s in spans} == {f"{trace_id_for(result.turn_id):032x}"}  # one trace, the turn's
    assert {s.schema_url for s in spans} == {c.SCHEMA_URL} and {s.scope for s in spans} == {"ora"}
    assert spans[0].resource["service.name"] == "ora"

    turn = receiver.one("invoke_workflow ora")
    assert turn.parent_id == "" and turn.kind == INTERNAL and turn.status != ERROR
    assert turn.attributes[c.OPERATION] == "invoke_workflow" and turn.attributes[c.WORKFLOW] == "ora"
    assert turn.attributes[c.CONVERSATION] == result.conversation_id
    assert (turn.attributes[c.TURN_ID], turn.attributes[c.TURN_STATUS]) == (result.turn_id, "ok")
    assert (turn.attributes[c.MODE], turn.attributes[c.GEAR]) == ("cui-bono", 4)

    # one span per step, every one a child of the turn: Gear 4's parallel streams are siblings
    steps = {name: receiver.one(name) for name in gear4.steps}
    assert all(s.parent_id == turn.span_id and s.kind == INTERNAL for s in steps.values())
    depth, breadth = steps["step3-depth-analyst"], steps["step3-breadth-analyst"]
    assert depth.parent_id == breadth.parent_id == turn.span_id
    for name, span in steps.items():  # the times the trace recorded, to the microsecond
        doc = _step_file(result.trace_path, name)
        assert (span.start, span.end) == (_ns(doc["started_at"]), _ns(doc["finished_at"])), name
        assert turn.start <= span.start <= span.end <= turn.end

    # one CLIENT span per model call, under the step that made it, planned and effective models
    chats = [s for s in spans if s.attributes.get(c.OPERATION) == "chat"]
    assert len(chats) == len(result.runtime_role_models) == 11
    by_id = {s.span_id: s for s in spans}
    for chat in chats:
        step = by_id[chat.parent_id]
        assert chat.kind == CLIENT and step.name == chat.attributes[c.STEP]
        assert step.start <= chat.start <= chat.end <= step.end
        assert chat.name == f"chat {chat.attributes[c.REQUEST_MODEL]}" and chat.status != ERROR
        assert chat.attributes[c.CONVERSATION] == result.conversation_id
    ledger = {(r.prompt_key, r.planned_model): r for r in result.runtime_role_models}
    breadth_call = next(s for s in chats if s.attributes[c.PROMPT_KEY] == "gear4.breadth-analyst")
    record = ledger[("gear4.breadth-analyst", "scripted-2")]
    assert breadth_call.parent_id == breadth.span_id
    assert {k: breadth_call.attributes[k] for k in (c.PROVIDER, c.REQUEST_MODEL, c.RESPONSE_MODEL, c.ROLE)} == {
        c.PROVIDER: "scripted", c.REQUEST_MODEL: "scripted-2", c.RESPONSE_MODEL: "scripted-2", c.ROLE: "breadth"}
    assert breadth_call.attributes[c.INPUT_TOKENS] == record.prompt_tokens > 0
    assert breadth_call.attributes[c.OUTPUT_TOKENS] == record.completion_tokens > 0
    assert breadth_call.end - breadth_call.start == int(record.latency_s * 1e9)
    assert breadth_call.attributes[c.MISMATCH] is False

    # the retrieval, under the step that assembled the context
    retrieval = receiver.one("retrieval vault")
    assert retrieval.parent_id == steps["context-assembly"].span_id and retrieval.kind == CLIENT
    assert retrieval.attributes[c.OPERATION] == "retrieval" and retrieval.attributes[c.RETRIEVAL_CHUNKS] == 1

    # each verdict: an evaluation event on the verification step's span, linked to the step it judged
    judged = {"step6-cycle1-depth-verify": "step5-depth-reviser",
              "step6-cycle1-breadth-verify": "step5-breadth-reviser", "step8-final-verify": "step7-consolidation"}
    for verifier, subject in judged.items():
        [evaluation] = steps[verifier].events_named(c.EVALUATION_EVENT)
        assert evaluation[c.EVALUATION_NAME] == "model" and evaluation[c.EVALUATION_LABEL] == "pass"
        assert "VERDICT: PASS" in evaluation[c.EVALUATION_EXPLANATION]
        assert evaluation[c.SUBJECT_STEP] == subject
        [(link_trace, link_span, link_attributes)] = steps[verifier].links
        assert (link_trace, link_span) == (turn.trace_id, steps[subject].span_id)
        assert link_attributes[c.LINK_RELATION] == "evaluates"
    assert sum(len(s.events_named(c.EVALUATION_EVENT)) for s in spans) == 3

    assert [s.name for s in spans if s.status == ERROR] == []
    assert not any(c.INPUT_MESSAGES in s.attributes or c.OUTPUT_MESSAGES in s.attributes for s in spans)
    assert gear4.prompt.encode() not in receiver.payload()  # no content unless capture_content


def test_a_fallback_exports_the_planned_and_the_effective_model_and_the_failed_call_as_an_error(
        gear4, receiver) -> None:
    flaky = {"type": "scripted", "model": "flaky-1", "family": "flaky", "fallbacks": ["local"], "max_retries": 0,
             "options": {"rules": [{"match": "ROLE: CONSOLIDATOR", "reply": "!error:unavailable", "on": "system"}]}}
    result, _, sink = gear4.run(otel={"endpoint": receiver.url}, backends={"flaky": flaky},
                                roles={"consolidator": "flaky"})
    assert result.status == "degraded" and "step7-consolidation-backend-unavailable-fallback" in result.contingencies
    assert sink.flush(10)
    step = receiver.one("step7-consolidation")
    failed, answered = sorted((s for s in receiver.spans if s.parent_id == step.span_id), key=lambda s: s.start)
    assert (failed.name, failed.status) == ("chat flaky-1", ERROR)
    assert failed.attributes[c.ERROR_TYPE] == "BackendUnavailable" and failed.attributes[c.ERROR_KIND] == "unavailable"
    assert answered.status != ERROR and answered.attributes[c.REQUEST_MODEL] == "flaky-1"
    assert answered.attributes[c.RESPONSE_MODEL] == "scripted-1" and answered.attributes[c.MISMATCH] is True
    assert answered.attributes[c.FALLBACK_FLAGS] == ["fallback:flaky->local:unavailable"]
    # the fallback is a contingency event on the step's span; the step degraded but did not break
    [contingency] = step.events_named(c.CONTINGENCY_EVENT)
    assert contingency[c.CONTINGENCY_NAME] == "step7-consolidation-backend-unavailable-fallback"
    assert contingency[c.CONTINGENCY_SEVERITY] == "degraded" and "flaky" in contingency[c.CONTINGENCY_DETAIL]
    assert step.status != ERROR and step.attributes[c.STEP_DEGRADED] is True
    turn = receiver.one("invoke_workflow ora")
    assert turn.status != ERROR and turn.attributes[c.TURN_STATUS] == "degraded"
    assert "step7-consolidation-backend-unavailable-fallback" in turn.attributes[c.CONTINGENCIES]


def test_a_broken_verifier_is_a_broken_evaluation_on_an_error_span(gear4, receiver) -> None:
    result, _, sink = gear4.run(otel={"endpoint": receiver.url}, inject="verifier-exception")
    assert result.verdicts["step8-final-verify"] == "BROKEN"
    assert sink.flush(10)
    for name in ("step6-cycle1-depth-verify", "step6-cycle1-breadth-verify", "step8-final-verify"):
        span = receiver.one(name)
        assert span.status == ERROR and span.attributes[c.ERROR_TYPE] == "verdict_broken"
        [evaluation] = span.events_named(c.EVALUATION_EVENT)
        assert evaluation[c.EVALUATION_LABEL] == "broken"
        assert "RuntimeError: injected fault" in evaluation[c.EVALUATION_EXPLANATION]
    assert receiver.one("step7-consolidation").status != ERROR  # only what broke is an error


def test_an_unreachable_collector_is_a_named_contingency_of_the_turn_and_the_turn_is_fine(gear4, dead_url) -> None:
    log = log_path(gear4.root)

    def until_the_export_has_failed() -> None:  # holds the turn open (in its retrieval) until then
        deadline = time.monotonic() + 30
        while not log.exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    result, rt, _ = gear4.run(otel={"endpoint": dead_url, "export_interval_s": 0.02, "timeout_s": 0.5},
                              gate=until_the_export_has_failed)
    assert (result.status, result.gear) == ("ok", 4) and result.answer.startswith("CONSOLIDATED")
    assert result.contingencies.count("otel-export-failed") == 1
    [logged] = [json.loads(line) for line in (Path(result.trace_path) / "contingencies.jsonl").read_text().splitlines()
                if json.loads(line)["name"] == "otel-export-failed"]
    assert logged["step"] == "turn" and logged["severity"] == "warning"
    assert f"not exported to {dead_url}/v1/traces" in logged["detail"]
    assert f"ora trace export --otlp {dead_url} {result.turn_id}" in logged["detail"]
    # the close reported it too: tracing degraded, the sink named on stderr
    assert result.tracing_degraded
    assert "trace sink 'otel' failed" in rt.stderr.getvalue()
    # recorded for the replay
    assert unreplayed(gear4.root) == ([result.turn_id], [])
    assert _records(gear4.root)[0].turns[0].reported == "contingency"


def test_a_failure_after_the_turn_returned_is_a_stderr_line_and_a_record(gear4, dead_url) -> None:
    result, rt, sink = gear4.run(otel={"endpoint": dead_url, "export_interval_s": 60, "timeout_s": 0.5})
    assert result.status == "ok" and "otel-export-failed" not in result.contingencies
    assert not result.tracing_degraded and rt.stderr.getvalue() == ""  # nothing had failed yet
    assert sink.flush(10)
    line = next(line for line in rt.stderr.getvalue().splitlines() if line.startswith("ora: otel:"))
    assert line.startswith(f"ora: otel: turn {result.turn_id}: ") and f"not exported to {dead_url}/v1/traces" in line
    assert f"replay with `ora trace export --otlp {dead_url} {result.turn_id}`" in line
    [record] = _records(gear4.root)
    assert record.endpoint == f"{dead_url}/v1/traces"
    assert "Connection refused" in record.reason and "retrying in" not in record.reason
    assert [(t.turn_id, t.reported) for t in record.turns] == [(result.turn_id, "stderr")]
    # every span of the turn: itself, its steps, its model calls and its retrieval
    assert record.turns[0].spans == 1 + len(gear4.steps) + len(result.runtime_role_models) + 1


def test_a_fault_in_building_the_spans_is_named_and_the_turn_is_fine(gear4, receiver, monkeypatch) -> None:
    from ora_otel.spans import TurnSpans

    def broken(self: Any, event: Any, at: int) -> None:
        raise RuntimeError("no span for this retrieval")

    monkeypatch.setattr(TurnSpans, "_on_retrieval", broken)
    result, rt, sink = gear4.run(otel={"endpoint": receiver.url})
    assert (result.status, result.gear) == ("ok", 4) and result.tracing_degraded
    assert "trace sink 'otel' failed" in rt.stderr.getvalue()
    assert ("building the turn's spans failed (RuntimeError: no span for this retrieval); the rest of it is not "
            "exported") in rt.stderr.getvalue()
    assert sink.flush(10)
    assert {s.name for s in receiver.spans} >= {"phase-a", "pre-routing"}  # what was built before it went out
