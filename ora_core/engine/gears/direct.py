"""Gear 1: one direct model call, steered by a gear-1 mode's guidance (``simple`` or ``direct``).

Two modes run here, by design (a choice, not an accident of naming):

- ``simple``: the Stage 0 bypass target (greetings, time and date questions, references to
  earlier conversation, grammar fixes, explicit opt-outs) and small talk. Its contract is narrow:
  state nothing the material in front of the model does not hold (the clock, conversation memory).
- ``direct``: requests that need no analysis, recognised by pre-routing after Phase A: creative
  writing, rewriting, translation, drafting. Its guidance is to produce the artefact; a separate
  mode (rather than broadening ``simple``) because the two contracts differ: ``simple``'s
  "no fact the material lacks" would forbid the invention a poem is made of, and ``direct``'s
  "write what was asked" would license inventing a time. A mode pack can replace either.

Neither is graded against evidence: a greeting or a poem was never meant to rest on evidence.
The step records ``verification: not-applicable`` with the reason (the routing decision or the
bypass), so the skipped check is named in the trace, never silent.

**Clock answers from the clock** (seed 000, #5). For a time or date question the prompt carries a
reading of the system clock (UTC and local, with the zone's name and offset) as grounded material,
and the detectors of kind ``clock_claim`` (``SignalKind.CLOCK_CLAIM``: ora-bypass's ``clock-claims``) check the
answer. An answer the clock contradicts is
regenerated once with the contradiction named; contradicted again (or no answer at all: the
backend failed), the answer is written from the clock reading itself, deterministically, under
the contingency ``gear1-clock-answered-from-clock``. A contradicted time is never shipped.

**Earlier conversation** (bypass category ``earlier_conversation``). The ``conversation`` stream's
retriever (``turn_retrievers``: the caller's own messages when it sent them) is asked for this
conversation's exchanges nearest the prompt, without the evidence similarity floor (a reference
resembles nothing of what was said); they go
to the model as material. When conversation memory is switched off, has no retriever, fails, or holds
nothing that matches, the answer says it cannot see the earlier exchange (written here, not by a
model that would reconstruct it) and the reason is a named contingency.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import BaseModel, Field

from ora_core.engine.backends import call_role
from ora_core.engine.context import retrieve_bounded, turn_retrievers
from ora_core.engine.prompts import build_turn_messages
from ora_core.engine.runtime import Runtime
from ora_core.kernel.ctx_data import CLOCK, EXPECTED_MIN_WORDS
from ora_core.kernel.errors import BackendError
from ora_core.kernel.models import Chunk, Message, RetrievalFilters, Signal, TurnResult
from ora_core.kernel.modes import Mode
from ora_core.kernel.signals import SignalKind
from ora_core.kernel.trace import StepRecorder, TurnContext

STEP = "direct-response"
DIRECT_TASK = "You answer the user's message directly and briefly. You have no tools."
GUIDANCE = ("DEPTH ANALYSIS GUIDANCE", "BREADTH ANALYSIS GUIDANCE", "OUTPUT FORMAT GUIDANCE")
MEMORY_STREAM = "conversation"
MEMORY_MIN_SCORE = -1.0  # no similarity floor for a lookup of earlier exchanges (see read_conversation_memory)


def clock_reading(now: datetime | None = None) -> dict[str, str]:
    """The system clock: ISO timestamps in UTC and local time, the local zone's name and offset."""
    now = now or datetime.now(timezone.utc)
    local = now.astimezone()
    offset = local.strftime("%z") or "+0000"
    return {"utc": now.isoformat(timespec="seconds"), "local": local.isoformat(timespec="seconds"),
            "timezone": local.tzname() or "local time", "utc_offset": offset}


def _clock_block(clock: dict[str, str]) -> str:
    utc = datetime.fromisoformat(clock["utc"])
    local = datetime.fromisoformat(clock["local"])
    zone = clock.get("timezone") or local.tzname() or "local time"
    return ("## SYSTEM CLOCK READING (grounded: read from the machine running Ora just now)\n"
            f"- Local: {local.strftime('%A, %d %B %Y, %H:%M')} ({zone}, UTC{clock.get('utc_offset', '')})\n"
            f"- UTC: {utc.strftime('%A, %d %B %Y, %H:%M')} UTC\n"
            "State the time or date only as given here.")


def answer_from_clock(clock: dict[str, str]) -> str:
    """The deterministic answer to a time or date question: the clock reading, in words. (The zone
    offset is written without a colon so it is never read as a clock time.)"""
    utc = datetime.fromisoformat(clock["utc"])
    local = datetime.fromisoformat(clock["local"])
    zone = clock.get("timezone") or "local time"
    if local.utcoffset() == utc.utcoffset():
        where = "UTC" if zone == "UTC" else f"{zone}, UTC{clock.get('utc_offset', '')}"
    else:
        where = f"{zone}, UTC{clock.get('utc_offset', '')}; {utc:%H:%M} UTC"
    return f"It is {local:%H:%M} on {local:%A}, {local.day} {local:%B %Y} ({where}), as read from the system clock."


class MemoryReading(BaseModel):
    """What conversation memory gave a Gear 1 turn that refers to earlier conversation."""

    status: str  # found | empty | failed | missing | disabled
    detail: str = ""
    retriever: str | None = None
    chunks: list[Chunk] = Field(default_factory=list)


async def read_conversation_memory(runtime: Runtime, turn: TurnContext, prompt: str,
                                   mode: Mode | None) -> MemoryReading:
    config = runtime.config
    if not getattr(config.retrieval.streams, MEMORY_STREAM, False):
        return MemoryReading(status="disabled",
                             detail="conversation memory is switched off (retrieval.streams.conversation = false)")
    retrievers, missing = turn_retrievers(turn, config)
    if MEMORY_STREAM not in retrievers:
        return MemoryReading(status="missing", detail=missing.get(MEMORY_STREAM, "no conversation retriever"))
    retriever = retrievers[MEMORY_STREAM]
    filters = mode.retrieval.filters_for(MEMORY_STREAM) if mode is not None else RetrievalFilters()
    # A reference ("what we talked about last time") resembles nothing of what was talked about:
    # the similarity floor that keeps weak evidence out would keep the exchange out, so memory is
    # asked without it (the retriever still scopes to this conversation and returns its k nearest).
    filters = filters.model_copy(update={"min_score": MEMORY_MIN_SCORE})
    retrieval, failure = await retrieve_bounded(retriever, MEMORY_STREAM, prompt, filters,
                                                 config.retrieval.k, turn)
    if failure is not None:
        turn.emit("rag_failure", step=STEP, **failure.model_dump(mode="json"))
        return MemoryReading(status="failed", retriever=failure.retriever,
                             detail=f"{failure.error_class}: {failure.message}"[:500])
    turn.emit("retrieval", step=STEP, stream=MEMORY_STREAM, retriever=retrieval.retriever, query=prompt,
              chunks=len(retrieval.chunks), latency_s=retrieval.latency_s,
              empty_diagnosis=(retrieval.empty_diagnosis.model_dump(mode="json")
                               if retrieval.empty_diagnosis else None))
    if not retrieval.chunks:
        diagnosis = retrieval.empty_diagnosis
        why = (f"{diagnosis.empty_reason.value}" + (f": {diagnosis.detail}" if diagnosis.detail else "")
               if diagnosis is not None else "nothing matched, and the retriever gave no diagnosis")
        return MemoryReading(status="empty", retriever=retrieval.retriever,
                             detail=f"conversation memory holds no earlier exchange that matches ({why})")
    return MemoryReading(status="found", retriever=retrieval.retriever, chunks=list(retrieval.chunks))


def _memory_block(chunks: list[Chunk]) -> str:
    lines = ["## CONVERSATION MEMORY (earlier exchanges of this conversation, retrieved just now)"]
    for chunk in chunks:
        p = chunk.provenance
        lines.append(f"[{p.source}" + (f" § {p.heading}" if p.heading else "") + f" | score {p.score:.2f}]")
        lines.append(chunk.text.strip())
    lines.append("Answer from these exchanges only. If they do not hold what the user refers to, say that you "
                 "cannot see it; never reconstruct an exchange that is not here.")
    return "\n".join(lines)


def cannot_see_answer(memory: MemoryReading) -> str:
    return (f"I can't see our earlier conversation: {memory.detail}. If you paste the part you mean, I'll work "
            "from that.")


async def run_direct(runtime: Runtime, turn: TurnContext, prompt: str, mode: Mode | None, *,
                     category: str | None = None, mode_name: str = "simple", reason: str = "") -> TurnResult:
    guidance = "\n\n".join(f"## {s}\n{mode.section(s)}" for s in GUIDANCE if mode is not None
                           and mode.section(s).strip())
    task = DIRECT_TASK + ("\n\n" + guidance if guidance else "")
    extra = ""
    clock = clock_reading() if category == "time_date" else None
    if clock is not None:
        CLOCK.put(turn.data, clock)
        extra = _clock_block(clock)
    memory: MemoryReading | None = None
    if category == "earlier_conversation":
        memory = await read_conversation_memory(runtime, turn, prompt, mode)
        if memory.status == "found":
            extra = _memory_block(memory.chunks)
    messages = build_turn_messages(turn, task, prompt, extra_system=extra)
    with turn.step(STEP, prompt=prompt, mode=mode_name, gear=1, category=category,
                   messages=[m.model_dump() for m in messages], clock=clock) as step:
        step.output["verification"] = {
            "status": "not-applicable",
            "reason": f"Gear 1 ({mode_name}) answers directly and is not graded against evidence"
                      + (f"; routed: {reason}" if reason else ""),
        }
        if memory is not None:
            step.output["conversation_memory"] = memory.model_dump(mode="json", exclude={"chunks"}) | {
                "chunks": [c.id for c in memory.chunks]}
            if memory.status != "found":
                severity = {"failed": "degraded", "missing": "warning",
                            "disabled": "warning"}.get(memory.status, "info")
                step.contingency(f"gear1-conversation-memory-{memory.status}",
                                 f"{memory.detail}; the answer says it cannot see the earlier exchange",
                                 severity=severity, stream=MEMORY_STREAM)
                answer = cannot_see_answer(memory)
                step.output["answer"] = answer
                step.output["answered_by"] = "engine (no conversation memory to answer from)"
                return _finish(turn, answer, mode_name)
        try:
            completion = await call_role(turn, runtime.pool, "direct", messages,
                                         prompt_key="gear1.direct", step=STEP, why="first attempt")
        except BackendError as exc:
            step.output["error"] = exc.describe()
            step.health.verdict = "BROKEN"
            step.contingency("direct-response-backend-failed", str(exc), severity="error")
            if clock is not None:  # the clock answers a clock question even with no model
                return _finish(turn, _from_clock(clock, step, "the backend failed"), mode_name)
            return TurnResult(status="halted", mode=mode_name, gear=1,
                              diagnostic={"step": STEP, **exc.describe()})
        answer = completion.text
        step.output["completion"] = completion.model_dump(mode="json")
        answer = await _healthy(runtime, turn, step, messages, answer, mode_name)
        if clock is not None:
            answer = await _clock_checked(runtime, turn, step, clock, task, prompt, extra, answer)
        step.output["answer"] = answer
    return _finish(turn, answer, mode_name)


def _finish(turn: TurnContext, answer: str, mode_name: str) -> TurnResult:
    turn.detect("final_output", answer, step=STEP)
    status = "degraded" if any(h.degraded for h in turn.health.values()) else "ok"
    return TurnResult(status=status, answer=answer, mode=mode_name, gear=1)


def _detect_output(turn: TurnContext, answer: str) -> list[Signal]:
    # Every model_output detector runs (third-party ones included); a direct answer is short by
    # design, so the brief-stub length floor does not apply here.
    with EXPECTED_MIN_WORDS.given(turn.data, 1):
        return turn.detect("model_output", answer, step=STEP)


#: Unhealthy signals that are no fault in a Gear 1 mode: a reply to a greeting or small talk
#: (``simple``) may well ask what the user wants.
NOT_UNHEALTHY_IN = {"simple": frozenset({"clarification-loop"})}


def _unhealthy(signals: list[Signal], mode_name: str) -> list[str]:
    exempt = NOT_UNHEALTHY_IN.get(mode_name, frozenset())
    return sorted({s.name for s in signals if s.kind == SignalKind.UNHEALTHY and s.strength == "strong"
                   and s.name not in exempt})


async def _healthy(runtime: Runtime, turn: TurnContext, step: StepRecorder, messages: list[Message], answer: str,
                   mode_name: str) -> str:
    """The reliability layer's regenerate-on-unhealthy gate for the direct answer: an unhealthy
    answer (a refusal, a leaked tool call, an echo of the prompt, a placeholder; a clarification
    loop outside ``simple``) is regenerated once; unhealthy again, it ships under a one-line header,
    named (``direct-response-unhealthy-after-regenerate``). A failed regeneration keeps the first."""
    unhealthy = _unhealthy(_detect_output(turn, answer), mode_name)
    if not unhealthy:
        return answer
    step.health.regenerations += 1
    step.output["unhealthy"] = unhealthy
    step.output["discarded_answer"] = answer
    turn.emit("retry", step=STEP, reason="unhealthy", regenerate=True, signals=unhealthy, attempt=1)
    try:
        completion = await call_role(turn, runtime.pool, "direct", messages, prompt_key="gear1.direct.regenerate",
                                     step=STEP, why=f"regenerate: {', '.join(unhealthy)} (the first answer was "
                                                    "unhealthy and is discarded)")
    except BackendError as exc:
        step.output["regenerate_error"] = exc.describe()
        step.contingency("direct-response-regenerate-failed-kept-first", f"{exc}", severity="degraded")
        return f"[degraded — the direct answer is unhealthy ({', '.join(unhealthy)})]\n" + answer
    again = _unhealthy(_detect_output(turn, completion.text), mode_name)
    step.output["regenerated"] = {"answer": completion.text, "completion": completion.model_dump(mode="json")}
    if not again:
        return completion.text
    step.health.verdict = "DEGRADED"
    step.contingency("direct-response-unhealthy-after-regenerate",
                     f"still unhealthy after one regeneration: {', '.join(again)}", severity="degraded", signals=again)
    return f"[degraded — the direct answer is unhealthy ({', '.join(again)})]\n" + completion.text


async def _clock_checked(runtime: Runtime, turn: TurnContext, step: StepRecorder, clock: dict[str, str], task: str,
                         prompt: str, extra: str, answer: str) -> str:
    """The answer if the clock supports it; else one regeneration; else the clock's own answer."""
    claims = _clock_claims(turn, step, answer)
    if claims is None:
        return _from_clock(clock, step, "the model's answer could not be checked against the clock")
    if not claims:
        return answer
    step.output["clock_claims"] = claims
    said = ", ".join(repr(c) for c in claims)
    step.contingency("gear1-answer-time-not-grounded",
                     f"the answer states {said}, which the system clock contradicts; regenerating once",
                     severity="warning", claims=claims)
    retry_note = (f"## CORRECTION\nA previous answer stated {said}, which the system clock reading above "
                  "contradicts. State the time or date exactly as the clock reading gives it, or say you "
                  "cannot tell.")
    messages = build_turn_messages(turn, task, prompt, extra_system=extra + "\n\n" + retry_note)
    step.health.regenerations += 1
    try:
        completion = await call_role(turn, runtime.pool, "direct", messages,
                                     prompt_key="gear1.direct.clock-regenerate", step=STEP,
                                     why=f"regenerate: the answer states {said}, which the system clock contradicts")
    except BackendError as exc:
        step.output["regenerate_error"] = exc.describe()
        return _from_clock(clock, step, f"the regeneration failed ({exc})")
    second = completion.text
    step.output["regenerated"] = {"answer": second, "completion": completion.model_dump(mode="json")}
    _detect_output(turn, second)
    again = _clock_claims(turn, step, second)
    if again is None:
        return _from_clock(clock, step, "the regenerated answer could not be checked against the clock")
    if again:
        step.output["regenerated"]["clock_claims"] = again
        return _from_clock(clock, step, f"the regenerated answer states {', '.join(repr(c) for c in again)} too")
    step.contingency("gear1-clock-regenerated", "the regenerated answer agrees with the system clock",
                     severity="info")
    return second


def _from_clock(clock: dict[str, str], step: StepRecorder, why: str) -> str:
    answer = answer_from_clock(clock)
    step.health.verdict = "DEGRADED"
    step.output["answered_by"] = "system clock (deterministic)"
    step.contingency("gear1-clock-answered-from-clock",
                     f"{why}; the answer is the system clock reading, written without the model",
                     severity="degraded")
    return answer


def _clock_claims(turn: TurnContext, step: StepRecorder, answer: str) -> list[str] | None:
    """The times and dates in ``answer`` the clock does not support (the signals of the
    ``model_output`` detectors of kind ``SignalKind.CLOCK_CLAIM``: ora-bypass's ``clock-claims``, or
    any plugin's), or None when no check ran (no such detector installed, or it failed): named, and
    then the clock answers, since an unchecked time may be a contradicted one."""
    checkers = turn.host.detectors(layer="model_output", kind=SignalKind.CLOCK_CLAIM.value) \
        if turn.host is not None else []
    if not checkers:
        step.contingency("gear1-clock-check-unavailable",
                         f"no model_output detector of kind {SignalKind.CLOCK_CLAIM.value!r} is installed "
                         "(ora-bypass's clock-claims is one); times in the answer are unchecked", severity="warning")
        return None
    signals = []
    for detector in checkers:
        try:
            signals += detector.detect(answer, turn)
        except Exception as exc:  # noqa: BLE001 - named, the answer is flagged as unchecked
            step.contingency("gear1-clock-check-failed", f"{type(exc).__name__}: {exc}", severity="degraded")
            return None
    step.output.setdefault("clock_checks", []).append([s.model_dump(mode="json") for s in signals])
    return [s.matched for s in signals]
