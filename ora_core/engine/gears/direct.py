"""Gear 1: one direct model call, steered by the ``simple`` mode's guidance.

For a time or date question (bypass category ``time_date``) the prompt carries a reading of the
system clock as grounded material, and the answer is checked by the ``clock-claims`` detector:
a time or date the clock does not support is a named contingency and a one-line warning on the
answer (seed 000, #5), never passed on as fact.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ora_core.engine.backends import call_role
from ora_core.engine.prompts import build_turn_messages
from ora_core.kernel.errors import BackendError
from ora_core.kernel.models import TurnResult

STEP = "direct-response"
DIRECT_TASK = "You answer the user's message directly and briefly. You have no tools."
GUIDANCE = ("DEPTH ANALYSIS GUIDANCE", "BREADTH ANALYSIS GUIDANCE", "OUTPUT FORMAT GUIDANCE")


def clock_reading(now: datetime | None = None) -> dict[str, str]:
    now = now or datetime.now(timezone.utc)
    return {"utc": now.isoformat(timespec="seconds"),
            "local": now.astimezone().isoformat(timespec="seconds")}


def _clock_block(clock: dict[str, str]) -> str:
    utc = datetime.fromisoformat(clock["utc"])
    local = datetime.fromisoformat(clock["local"])
    return ("## SYSTEM CLOCK READING (grounded: read from the machine running Ora just now)\n"
            f"- UTC: {utc.strftime('%A, %d %B %Y, %H:%M')} UTC\n"
            f"- Local: {local.strftime('%A, %d %B %Y, %H:%M')} ({local.tzname() or 'local time'})\n"
            "State the time or date only as given here.")


async def run_direct(runtime: Any, turn: Any, prompt: str, mode: Any, *, category: str | None = None,
                     mode_name: str = "simple") -> TurnResult:
    guidance = "\n\n".join(f"## {s}\n{mode.section(s)}" for s in GUIDANCE if mode is not None
                           and mode.section(s).strip())
    task = DIRECT_TASK + ("\n\n" + guidance if guidance else "")
    extra = ""
    if category == "time_date":
        turn.data["clock"] = clock_reading()
        extra = _clock_block(turn.data["clock"])
    messages = build_turn_messages(turn, task, prompt, extra_system=extra)
    with turn.step(STEP, prompt=prompt, mode=mode_name, gear=1,
                   messages=[m.model_dump() for m in messages], clock=turn.data.get("clock")) as step:
        try:
            completion = await call_role(turn, runtime.pool, "direct", messages,
                                         prompt_key="gear1.direct", step=STEP)
        except BackendError as exc:
            step.output["error"] = exc.describe()
            step.health.verdict = "BROKEN"
            step.contingency("direct-response-backend-failed", str(exc), severity="error")
            return TurnResult(status="halted", mode=mode_name, gear=1,
                              diagnostic={"step": STEP, **exc.describe()})
        answer = completion.text
        step.output["completion"] = completion.model_dump(mode="json")
        # Every model_output detector runs (third-party ones included); a direct answer is short
        # by design, so the brief-stub length floor does not apply here.
        turn.data["expected_min_words"] = 1
        try:
            turn.detect("model_output", answer, step=STEP)
        finally:
            turn.data.pop("expected_min_words", None)
        if "clock" in turn.data:
            answer = _check_clock(turn, step, answer)
        step.output["answer"] = answer
    turn.detect("final_output", answer, step=STEP)
    status = "degraded" if any(h.degraded for h in turn.health.values()) else "ok"
    return TurnResult(status=status, answer=answer, mode=mode_name, gear=1)


def _check_clock(turn: Any, step: Any, answer: str) -> str:
    checkers = [d for d in turn.host.detectors(layer="model_output") if d.name == "clock-claims"] \
        if turn.host is not None else []
    if not checkers:
        step.contingency("gear1-clock-check-unavailable",
                         "no 'clock-claims' detector is installed; times in the answer are unchecked",
                         severity="warning")
        return answer
    signals = []
    for detector in checkers:
        try:
            signals += detector.detect(answer, turn)
        except Exception as exc:  # noqa: BLE001 - named, the answer is flagged as unchecked
            step.contingency("gear1-clock-check-failed", f"{type(exc).__name__}: {exc}", severity="degraded")
            return answer
    step.output["clock_claims"] = [s.model_dump(mode="json") for s in signals]
    if not signals:
        return answer
    claims = ", ".join(repr(s.matched) for s in signals)
    step.health.verdict = "FAIL"
    step.contingency("gear1-answer-time-not-grounded",
                     f"the answer states {claims}, which the system clock does not support",
                     severity="degraded", claims=[s.matched for s in signals])
    return f"[warning: unverified — the system clock does not support {claims}]\n{answer}"
