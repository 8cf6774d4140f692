"""Typed events of a turn, as it happens: what ``Ora.stream`` yields and ``ora run`` prints.

They are read off the turn's trace events (the same stream the trace sinks record), so the CLI's
progress, a server's stream and an exporter never re-derive the story each in their own way.
``TurnFinished`` is always the last event and carries the ``TurnResult``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ora_core.kernel.models import TraceEvent, TurnResult


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn_id: str
    at: datetime
    step: str = ""


class StepStarted(_Event):
    type: Literal["step_started"] = "step_started"
    index: int | None = None


class StepFinished(_Event):
    """A step ended: its verdict (``OK``, ``PASS``, ``FAIL``, ``BROKEN``, ``DEGRADED``, ...)."""

    type: Literal["step_finished"] = "step_finished"
    index: int | None = None
    verdict: str = "OK"
    latency_s: float = 0.0
    attempts: int = 1
    degraded: bool = False
    contingencies: list[str] = Field(default_factory=list)


class VerdictReached(_Event):
    """A verification step's verdict (it also ends as a ``StepFinished``)."""

    type: Literal["verdict"] = "verdict"
    status: Literal["PASS", "FAIL", "BROKEN"]
    verifier: str = ""
    reasons: list[str] = Field(default_factory=list)


class ContingencyRaised(_Event):
    """A named fallback fired."""

    type: Literal["contingency"] = "contingency"
    name: str
    severity: str = "warning"
    detail: str = ""


class SupplementFetched(_Event):
    """A Supplemental RAG request was run and its re-submission answered."""

    type: Literal["supplement"] = "supplement"
    n: int = 0
    gap: str = ""
    query: str = ""
    chunks: int = 0
    resolved: bool | None = None


class RetryStarted(_Event):
    """The reliability layer re-runs a step (a regeneration, or a retry with negative context)."""

    type: Literal["retry"] = "retry"
    reason: str = ""
    regenerate: bool = False
    attempt: int | None = None


class FaultInjected(_Event):
    """A staged fault acted (``--inject``)."""

    type: Literal["fault_injected"] = "fault_injected"
    mode: str = ""
    site: str = ""
    effect: str = ""


class TurnFinished(_Event):
    """The turn is over and its trace closed: the last event."""

    type: Literal["turn_finished"] = "turn_finished"
    result: TurnResult


TurnEvent = Annotated[
    StepStarted | StepFinished | VerdictReached | ContingencyRaised | SupplementFetched | RetryStarted
    | FaultInjected | TurnFinished,
    Field(discriminator="type"),
]


def from_trace(event: TraceEvent) -> list[Any]:
    """The typed events one trace event stands for (none for the bookkeeping kinds)."""
    data = event.data
    base = {"turn_id": event.turn_id, "at": event.at, "step": event.step}
    if event.kind == "step_started":
        return [StepStarted(index=event.step_index, **base)]
    if event.kind == "step_finished":
        health = data.get("health") or {}
        out: list[Any] = []
        output = data.get("output") or {}
        verdict = output.get("verdict") if isinstance(output, dict) else None
        if isinstance(verdict, dict) and verdict.get("status") in ("PASS", "FAIL", "BROKEN"):
            out.append(VerdictReached(status=verdict["status"], verifier=str(verdict.get("verifier", "")),
                                      reasons=[str(r) for r in verdict.get("reasons", [])][:20], **base))
        out.append(StepFinished(index=event.step_index, verdict=str(health.get("verdict", "OK")),
                                latency_s=float(health.get("latency_s") or 0.0),
                                attempts=int(health.get("attempts") or 1), degraded=bool(health.get("degraded")),
                                contingencies=list(health.get("contingencies") or []), **base))
        return out
    if event.kind == "contingency":
        return [ContingencyRaised(name=str(data.get("name", "")), severity=str(data.get("severity", "warning")),
                                  detail=str(data.get("detail", "")), **base)]
    if event.kind == "supplement":
        return [SupplementFetched(n=int(data.get("n") or 0), gap=str(data.get("gap", "")),
                                  query=str(data.get("query", "")), chunks=int(data.get("chunks") or 0),
                                  resolved=data.get("resolved"), **base)]
    if event.kind == "retry":
        return [RetryStarted(reason=str(data.get("reason", "")), regenerate=bool(data.get("regenerate")),
                             attempt=data.get("attempt"), **base)]
    if event.kind == "fault_injected":
        point = data.get("point") or {}
        return [FaultInjected(mode=str(data.get("mode", "")), site=str(point.get("site", "")),
                              effect=str(data.get("effect", "")), **base)]
    return []
