"""A turn's events as a tree of OpenTelemetry spans, with the times the events carry.

One builder for both ways a turn is exported: live (the sink feeds it the events as they come) and
after the fact (``replay`` feeds it the events read back from the turn's directory). The tree::

    invoke_workflow ora                     the turn (INTERNAL)
      <step>                                one span per step, siblings (Gear 4's parallel steps too)
        chat <planned model>                one per model call (CLIENT), its duration the call's latency
        retrieval <retriever>               one per retrieval (CLIENT)

A verification step's verdict is a ``gen_ai.evaluation.result`` event on the verification step's
span; that span also carries a link (``ora.link.relation = "evaluates"``) to the span of the step
whose output it judged, found by that output's text (a verdict arrives after the judged step's span
has ended, and an ended span takes no more events). Contingencies are ``ora.contingency`` events on
the span of the step they name (else the turn's). Span status is ERROR only where something broke:
a failed model call, a BROKEN step, a failed or halted step, a contingency of severity ``error``, a
halted turn; a FAIL verdict is a result, not an error.

Ids are derived from the turn id and each span's place in the turn (``TurnIds``): a turn replayed
from disk gets the trace id and span ids its live export had, so a collector that received part of
it sees the rest join the same trace.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from . import conventions as c
from .ids import digest as _digest
from .ids import span_id_for, trace_id_for

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MAX_DETAIL_CHARS = 1000
#: Fields of other events (``judge``, ``retry``, ``rag_failure``...) exported as ``ora.<kind>.<key>``:
#: names and numbers, never text a model or a user wrote.
SAFE_EVENT_KEYS = frozenset({
    "name", "kind", "severity", "stream", "retriever", "error_class", "judge", "layer", "site", "mode",
    "injector", "attempt", "attempts", "score", "threshold", "passed", "purpose", "role", "reason", "gear",
    "collection", "status", "action", "text_chars", "count", "stage", "retry", "regeneration", "call",
})


def ns(at: datetime) -> int:
    """Nanoseconds since the epoch, exactly (a float would round to ~256 ns)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    delta = at - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


class TurnIds(IdGenerator):
    """Ids from the turn id and a key naming the span's place (``turn``, ``step:3``, ``call:17``),
    set by ``expect`` right before the span starts, on the same thread. Without one: random."""

    def __init__(self) -> None:
        self._next = threading.local()

    def expect(self, turn_id: str, key: str) -> None:
        self._next.value = (turn_id, key)

    def generate_trace_id(self) -> int:
        expected = getattr(self._next, "value", None)
        return trace_id_for(expected[0]) if expected else random.getrandbits(128) or 1

    def generate_span_id(self) -> int:
        expected = getattr(self._next, "value", None)
        self._next.value = None
        return span_id_for(*expected) if expected else random.getrandbits(64) or 1

    def is_trace_id_random(self) -> bool:
        return False


@dataclass(frozen=True)
class ContentPolicy:
    """Whether message content goes on the spans, and how much of each piece."""

    capture: bool = False
    max_chars: int = 16384

    def cut(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars] + f"…[{len(text) - self.max_chars} more chars not exported]"

    def part(self, text: str) -> dict[str, str]:
        return {"type": "text", "content": self.cut(text)}


@dataclass
class _Step:
    span: Any
    name: str
    index: int | None
    inputs: dict[str, Any]
    subject: str | None = None
    calls: list[tuple[Any, int, bool]] = field(default_factory=list)  # (span, end ns, succeeded)


def _attrs(values: Mapping[str, Any]) -> dict[str, Any]:
    """Attribute values OpenTelemetry takes (no None, sequences of one scalar type)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, (str, bool, int, float)):
            out[key] = value
        elif isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value]
        else:
            out[key] = str(value)
    return out


def _own_time(data: Any) -> datetime | None:
    """The time a record carries itself (a contingency's, a RAG failure's ``at``): the forensic trace
    files keep that one, so live and replayed spans agree to the microsecond."""
    value = data.get("at") if isinstance(data, dict) else None
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


class TurnSpans:
    """Builds one turn's spans from its events, in order (``feed``); ``finish`` ends what is open."""

    def __init__(self, tracer: Any, ids: TurnIds, *, turn_id: str, conversation_id: str, started_at: datetime,
                 prompt: str = "", content: ContentPolicy | None = None, replayed: bool = False) -> None:
        self.tracer = tracer
        self.ids = ids
        self.turn_id = turn_id
        self.conversation_id = conversation_id
        self.content = content or ContentPolicy()
        self.prompt = prompt
        self.last_ns = ns(started_at)
        self.finished = False
        self._open: dict[str, list[_Step]] = {}
        self._outputs: dict[bytes, tuple[str, Any]] = {}  # output text digest -> (step, span context)
        self._contingencies: list[str] = []
        self.turn = self._start(f"{c.OP_WORKFLOW} {c.WORKFLOW_NAME}", "turn", None, SpanKind.INTERNAL,
                                self.last_ns, {c.OPERATION: c.OP_WORKFLOW, c.WORKFLOW: c.WORKFLOW_NAME,
                                               c.CONVERSATION: conversation_id, c.TURN_ID: turn_id,
                                               c.REPLAYED: replayed or None})
        self._turn_context = trace.set_span_in_context(self.turn)
        if self.content.capture and _text(prompt):
            self.turn.set_attribute(c.INPUT_MESSAGES, json.dumps(
                [{"role": "user", "parts": [self.content.part(prompt)]}], ensure_ascii=False))

    # --- plumbing -----------------------------------------------------------------------------

    def _start(self, name: str, key: str, parent: Any, kind: SpanKind, start: int, attributes: Mapping[str, Any],
               links: Iterable[Link] = ()) -> Any:
        self.ids.expect(self.turn_id, key)
        return self.tracer.start_span(name, context=parent, kind=kind, start_time=start,
                                      attributes=_attrs(attributes), links=list(links))

    def _step_of(self, name: str) -> _Step | None:
        stack = self._open.get(name)
        return stack[-1] if stack else None

    def _span_of(self, step: str) -> Any:
        found = self._step_of(step) if step else None
        return found.span if found is not None else self.turn

    @staticmethod
    def _error(span: Any, error_type: str, description: str = "") -> None:
        if getattr(span, "status", None) is not None and span.status.status_code is StatusCode.ERROR:
            return
        span.set_attribute(c.ERROR_TYPE, error_type)
        span.set_status(Status(StatusCode.ERROR, description[:MAX_DETAIL_CHARS] or error_type))

    # --- events -------------------------------------------------------------------------------

    def feed(self, event: Any) -> None:
        """One event of the turn (a ``TraceEvent``, or anything with its fields)."""
        if self.finished:
            return
        at = ns(_own_time(event.data) or event.at)
        self.last_ns = max(self.last_ns, at)
        handler = getattr(self, "_on_" + event.kind, None)
        if handler is not None:
            handler(event, at)
        else:
            self._other(event, at)

    def _on_turn_started(self, event: Any, at: int) -> None:
        self.turn.set_attributes(_attrs({c.CONFIG_HASH: event.data.get("config_hash")}))

    def _on_step_started(self, event: Any, at: int) -> None:
        inputs = event.data.get("input")
        inputs = inputs if isinstance(inputs, dict) else {}
        links, subject = [], None
        judged = _text(inputs.get("subject"))
        if judged is not None:
            found = self._outputs.get(_digest(judged))
            if found is not None:
                subject = found[0]
                links.append(Link(found[1], {c.LINK_RELATION: "evaluates", c.STEP: subject}))
        key = f"step:{event.step_index}" if event.step_index is not None else f"step:{event.step}:{event.seq}"
        span = self._start(event.step or "step", key, self._turn_context, SpanKind.INTERNAL, at, {
            c.STEP: event.step, c.STEP_INDEX: event.step_index, c.STEP_KIND: _text(inputs.get("kind")),
            c.STEP_STREAM: _text(inputs.get("stream")) or _text(inputs.get("slot")),
            c.ROLE: _text(inputs.get("role")), c.PROMPT_KEY: _text(inputs.get("prompt_key")),
            c.CONVERSATION: self.conversation_id, c.SUBJECT_STEP: subject}, links)
        self._open.setdefault(event.step, []).append(_Step(span, event.step, event.step_index, inputs, subject))

    def _on_model_call(self, event: Any, at: int) -> None:
        d = event.data
        step = self._step_of(event.step) if event.step else None
        parent = trace.set_span_in_context(step.span) if step is not None else self._turn_context
        latency = d.get("latency_s") if isinstance(d.get("latency_s"), (int, float)) else 0.0
        start = at - max(0, int(latency * 1e9))
        planned_model, effective_model = _text(d.get("planned_model")), _text(d.get("effective_model"))
        provider = _text(d.get("effective_provider")) or _text(d.get("planned_provider")) or "unknown"
        span = self._start(f"{c.OP_CHAT} {planned_model or effective_model or 'unknown'}", f"call:{event.seq}",
                           parent, SpanKind.CLIENT, start, {
                               c.OPERATION: c.OP_CHAT, c.PROVIDER: provider, c.REQUEST_MODEL: planned_model,
                               c.RESPONSE_MODEL: effective_model, c.INPUT_TOKENS: d.get("prompt_tokens"),
                               c.OUTPUT_TOKENS: d.get("completion_tokens"), c.CONVERSATION: self.conversation_id,
                               c.ROLE: d.get("role"), c.PROMPT_KEY: d.get("prompt_key"), c.STEP: event.step or None,
                               c.PLANNED_PROVIDER: d.get("planned_provider"),
                               c.FALLBACK_FLAGS: list(d.get("fallback_flags") or []) or None,
                               c.MISMATCH: bool(d.get("mismatch")), c.ATTEMPTS: d.get("attempts"),
                               c.CACHED: d.get("cached")})
        error = d.get("error")
        failed = isinstance(error, dict)
        if failed:
            span.set_attributes(_attrs({c.ERROR_KIND: error.get("kind")}))
            self._error(span, str(error.get("error_class") or error.get("kind") or "backend_error"),
                        str(error.get("message") or ""))
        if step is not None and self.content.capture:
            step.calls.append((span, at, not failed))  # ended with its step, which knows the content
        else:
            span.end(end_time=at)

    def _on_retrieval(self, event: Any, at: int) -> None:
        d = event.data
        retriever = _text(d.get("retriever")) or _text(d.get("stream")) or "retriever"
        step = self._step_of(event.step) if event.step else None
        parent = trace.set_span_in_context(step.span) if step is not None else self._turn_context
        latency = d.get("latency_s") if isinstance(d.get("latency_s"), (int, float)) else 0.0
        chunks = d.get("chunks")
        empty = d.get("empty_diagnosis")
        span = self._start(f"{c.OP_RETRIEVAL} {retriever}", f"retrieval:{event.seq}", parent, SpanKind.CLIENT,
                           at - max(0, int(latency * 1e9)), {
                               c.OPERATION: c.OP_RETRIEVAL, c.DATA_SOURCE: retriever,
                               c.RETRIEVAL_STREAM: d.get("stream"), c.CONVERSATION: self.conversation_id,
                               c.RETRIEVAL_CHUNKS: len(chunks) if isinstance(chunks, list) else chunks
                               if isinstance(chunks, int) else None,
                               c.RETRIEVAL_EMPTY: empty.get("empty_reason") if isinstance(empty, dict) else None,
                               c.RETRIEVAL_QUERY: self.content.cut(d["query"])
                               if self.content.capture and _text(d.get("query")) else None})
        span.end(end_time=at)

    def _on_contingency(self, event: Any, at: int) -> None:
        d = event.data
        name = str(d.get("name") or "contingency")
        severity = str(d.get("severity") or "warning")
        span = self._span_of(event.step)
        self._contingencies.append(name)
        span.add_event(c.CONTINGENCY_EVENT, _attrs({
            c.CONTINGENCY_NAME: name, c.CONTINGENCY_SEVERITY: severity, c.STEP: event.step or None,
            c.CONTINGENCY_DETAIL: str(d.get("detail") or "")[:MAX_DETAIL_CHARS] or None}), timestamp=at)
        if severity == "error":
            self._error(span, name, str(d.get("detail") or ""))

    def _on_step_finished(self, event: Any, at: int) -> None:
        stack = self._open.get(event.step)
        if not stack:
            return  # a step that never started: nothing to end
        step = stack.pop()
        span = step.span
        d = event.data
        output = d.get("output") if isinstance(d.get("output"), dict) else {}
        health = d.get("health") if isinstance(d.get("health"), dict) else {}
        span.set_attributes(_attrs({
            c.STEP_VERDICT: health.get("verdict"), c.STEP_DEGRADED: health.get("degraded"),
            c.STEP_ATTEMPTS: health.get("attempts"), c.STEP_REGENERATIONS: health.get("regenerations"),
            c.STEP_CONFIDENCE: health.get("confidence")}))
        verdict = output.get("verdict")
        if isinstance(verdict, dict) and verdict.get("status"):
            reasons = verdict.get("reasons") if isinstance(verdict.get("reasons"), list) else []
            span.add_event(c.EVALUATION_EVENT, _attrs({
                c.EVALUATION_NAME: verdict.get("verifier") or "verifier",
                c.EVALUATION_LABEL: c.verdict_label(verdict["status"]),
                c.EVALUATION_SCORE: verdict.get("score") if isinstance(verdict.get("score"), (int, float)) else None,
                c.EVALUATION_EXPLANATION: "; ".join(str(r) for r in reasons)[:MAX_DETAIL_CHARS] or None,
                c.SUBJECT_STEP: step.subject}), timestamp=at)
        error = output.get("error")
        status = output.get("status")
        if health.get("verdict") == "BROKEN" or status in {"failed", "halted"}:
            error_type = (error.get("error_class") or error.get("kind")) if isinstance(error, dict) else None
            if not error_type:
                error_type = "verdict_broken" if isinstance(verdict, dict) else f"step_{status or 'broken'}"
            message = error.get("message", "") if isinstance(error, dict) else ""
            self._error(span, str(error_type), str(message))
        text = _text(output.get("text"))
        if text is not None:
            self._outputs[_digest(text)] = (step.name, span.get_span_context())
        self._end_calls(step, output)
        span.end(end_time=at)
        if not stack:
            del self._open[event.step]

    def _on_turn_finished(self, event: Any, at: int) -> None:
        result = event.data.get("result") if isinstance(event.data.get("result"), dict) else {}
        self._finish_turn(at, result)

    def _other(self, event: Any, at: int) -> None:
        d = event.data
        attributes: dict[str, Any] = {c.STEP: event.step or None}
        for key, value in d.items():
            if key in SAFE_EVENT_KEYS and isinstance(value, (str, bool, int, float)):
                attributes[f"ora.{event.kind}.{key}"] = value[:MAX_DETAIL_CHARS] if isinstance(value, str) else value
            elif isinstance(value, list):
                attributes[f"ora.{event.kind}.{key}.count"] = len(value)
        self._span_of(event.step).add_event(f"ora.{event.kind}", _attrs(attributes), timestamp=at)

    # --- content and endings ------------------------------------------------------------------

    def _end_calls(self, step: _Step, output: dict[str, Any]) -> None:
        kept = next((i for i in range(len(step.calls) - 1, -1, -1) if step.calls[i][2]), None)
        for i, (call, end, _ok) in enumerate(step.calls):
            if i == kept:  # the call whose output the step kept
                self._set_content(call, step.inputs, output)
            call.end(end_time=end)
        step.calls.clear()

    def _set_content(self, span: Any, inputs: dict[str, Any], output: dict[str, Any]) -> None:
        system: list[dict[str, str]] = []
        messages: list[dict[str, Any]] = []
        given = inputs.get("messages")
        if isinstance(given, list):
            for m in given:
                if not isinstance(m, dict) or not _text(m.get("content")):
                    continue
                if m.get("role") == "system":
                    system.append(self.content.part(m["content"]))
                else:
                    messages.append({"role": str(m.get("role") or "user"), "parts": [self.content.part(m["content"])]})
        else:
            system = [self.content.part(inputs[k]) for k in ("evidence", "criteria", "task") if _text(inputs.get(k))]
            user = _text(inputs.get("package")) or _text(inputs.get("subject"))
            if user is not None:
                messages.append({"role": "user", "parts": [self.content.part(user)]})
        verdict = output.get("verdict") if isinstance(output.get("verdict"), dict) else {}
        said = _text(output.get("text")) or _text(output.get("raw_output")) or _text(verdict.get("raw_output"))
        if system:
            span.set_attribute(c.SYSTEM_INSTRUCTIONS, json.dumps(system, ensure_ascii=False))
        if messages:
            span.set_attribute(c.INPUT_MESSAGES, json.dumps(messages, ensure_ascii=False))
        if said is not None:
            span.set_attribute(c.OUTPUT_MESSAGES, json.dumps(
                [{"role": "assistant", "parts": [self.content.part(said)], "finish_reason": "stop"}],
                ensure_ascii=False))

    def _finish_turn(self, at: int, result: dict[str, Any], unfinished: str = "") -> None:
        for stack in list(self._open.values()):
            for step in stack:
                step.span.set_attribute(c.STEP_UNFINISHED, True)
                self._error(step.span, "step_unfinished", unfinished or f"step {step.name!r} never finished")
                self._end_calls(step, {})
                step.span.end(end_time=at)
        self._open.clear()
        status = result.get("status")
        names = result.get("contingencies") if isinstance(result.get("contingencies"), list) else self._contingencies
        self.turn.set_attributes(_attrs({c.TURN_STATUS: status, c.MODE: _text(result.get("mode")),
                                         c.GEAR: result.get("gear") if isinstance(result.get("gear"), int) else None,
                                         c.CONTINGENCIES: list(dict.fromkeys(str(n) for n in names)) or None}))
        if status == "halted":
            diagnostic = result.get("diagnostic") if isinstance(result.get("diagnostic"), dict) else {}
            self._error(self.turn, str(diagnostic.get("error_class") or "halted"), str(diagnostic.get("message") or ""))
        if unfinished:
            self._error(self.turn, "turn_unfinished", unfinished)
        answer = _text(result.get("answer"))
        if self.content.capture and answer is not None:
            self.turn.set_attribute(c.OUTPUT_MESSAGES, json.dumps(
                [{"role": "assistant", "parts": [self.content.part(answer)], "finish_reason": "stop"}],
                ensure_ascii=False))
        self.turn.end(end_time=at)
        self.finished = True

    def finish(self, why: str = "the turn ended without its turn_finished event") -> None:
        """End everything still open at the last time seen (a turn that never finished); idempotent."""
        if not self.finished:
            self._finish_turn(self.last_ns, {}, unfinished=why)
