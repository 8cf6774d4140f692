"""One side of a pair: a fact-check turn read into a ``SideResult``, or its failure diagnosed.

A side without a truth percentage is never scored as 50: a turn that crashed or halted, a turn that
carries no fact-check payload, and an article that is BROKEN (a claim whose advocate gave no readable
verdict) each fail the side with structured diagnostics (seed 002 A-2c): error class, message,
truncated stack (when an exception reached us; an error handled inside the turn is in its trace),
stage, provider and model.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import Any

from ora_core.engine.calibration.metrics import occurrences, warning_counts
from ora_core.engine.calibration.models import (
    ClaimSummary,
    EvidenceSummary,
    FailureDiagnostics,
    RoleCall,
    Side,
    SideResult,
)
from ora_core.kernel.models import FACT_CHECK_DEGRADATION_TYPES, ClaimVerdict, ModelCallRecord, TurnResult

STACK_CHARS = 4000
REASONING_CHARS = 600


def truncate_stack(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text if len(text) <= STACK_CHARS else "... (truncated)\n" + text[-STACK_CHARS:]


def role_call(record: ModelCallRecord) -> RoleCall:
    """The ledger record in the report's shape: its fields of the same name (copied), the latency
    rounded, and its mismatch flag."""
    shared = set(RoleCall.model_fields) - {"latency_s", "mismatch"}
    return RoleCall(**record.model_dump(include=shared), latency_s=round(record.latency_s, 4),
                    mismatch=record.mismatch)


def cost_of(calls: list[RoleCall], prices: Mapping[str, Any]) -> tuple[float | None, list[str]]:
    """USD for ``calls`` at ``prices`` (model -> per-million-token prices); None, with the models that
    have no price, when any call's model is unpriced (or nothing is priced at all)."""
    if not prices:
        return None, sorted({c.effective_model or c.planned_model for c in calls})
    total = 0.0
    missing: set[str] = set()
    for call in calls:
        model = call.effective_model or call.planned_model
        price = prices.get(model)
        if price is None:
            missing.add(model)
            continue
        total += (call.prompt_tokens * price["input_per_mtok"]
                  + call.completion_tokens * price["output_per_mtok"]) / 1e6
    return (None, sorted(missing)) if missing else (round(total, 6), [])


def _claim_summary(c: ClaimVerdict) -> ClaimSummary:
    return ClaimSummary(
        index=c.index, claim=c.claim, status=c.status, truth_pct=c.truth_pct, confidence=c.confidence,
        verdict=c.verdict, reasoning=c.reasoning[:REASONING_CHARS], broken_reason=c.broken_reason,
        insufficient_reason=c.insufficient_reason, cited_evidence_ids=list(c.cited_evidence_ids),
        evidence=[EvidenceSummary(id=i.id, source=i.source, source_type=i.source_type, source_class=i.source_class,
                                  direction=i.direction, search_strategy=i.search_strategy) for i in c.evidence],
        evidence_counts=c.evidence_counts.model_dump(mode="json"),
        partition_mode=c.partition.mode if c.partition is not None else None,
        contrarian=c.contrarian.model_dump(mode="json") if c.contrarian is not None else None,
        self_consistency_spread_pp=c.self_consistency.spread_pp if c.self_consistency is not None else None,
        advocate_truth_pct=c.advocate.truth_pct if c.advocate is not None else None, llm_calls=c.llm_calls)


def _last_call(calls: list[RoleCall], role: str) -> RoleCall | None:
    found = [c for c in calls if c.role == role]
    return found[-1] if found else None


def broken_diagnostics(side: Side, claims: list[ClaimVerdict], calls: list[RoleCall],
                       trace_path: str | None) -> FailureDiagnostics:
    """A BROKEN article: the first broken claim, the call its advocate step made."""
    claim = next(c for c in claims if c.status == "broken")
    stage = claim.advocate.step if claim.advocate is not None else f"factcheck-claim{claim.index}-advocate"
    call = _last_call(calls, "advocate")
    if call is not None and call.error:
        error = call.error
        return FailureDiagnostics(side=side, error_class=error.get("error_class", "BackendError"),
                                  message=f"{error.get('message', '')} -> claim {claim.index} BROKEN: "
                                          f"{claim.broken_reason}", stack=None, stage=stage,
                                  provider=error.get("provider") or call.effective_provider or call.planned_provider,
                                  model=error.get("model") or call.effective_model or call.planned_model,
                                  trace_path=trace_path)
    return FailureDiagnostics(side=side, error_class="BrokenVerdict",
                              message=f"claim {claim.index} has no truth percentage: {claim.broken_reason}",
                              stack=None, stage=stage,
                              provider=(call.effective_provider or call.planned_provider) if call else "",
                              model=(call.effective_model or call.planned_model) if call else "", trace_path=trace_path)


def halted_diagnostics(side: Side, result: TurnResult, calls: list[RoleCall]) -> FailureDiagnostics:
    diag = result.diagnostic or {}
    last = calls[-1] if calls else None
    stack = diag.get("stack")
    return FailureDiagnostics(
        side=side, error_class=str(diag.get("error_class") or ("TurnHalted" if result.status == "halted"
                                                                else "NoFactCheckPayload")),
        message=str(diag.get("message") or diag.get("final_failure")
                    or f"the turn ended {result.status} in mode {result.mode or '?'} (gear {result.gear}) with no "
                       "fact-check payload"),
        stack=str(stack)[-STACK_CHARS:] if stack else None, stage=str(diag.get("step") or "turn"),
        provider=(last.effective_provider or last.planned_provider) if last else "",
        model=(last.effective_model or last.planned_model) if last else "", trace_path=result.trace_path)


def exception_side(side: Side, claim: str, exc: BaseException, *, provider: str, model: str, runtime_s: float,
                   config_hash: str, messages: list[str]) -> SideResult:
    """A side whose turn raised: the exception is the diagnosis."""
    failure = FailureDiagnostics(side=side, error_class=type(exc).__name__, message=str(exc)[:2000],
                                 stack=truncate_stack(exc), stage="turn", provider=provider, model=model)
    return SideResult(side=side, claim=claim, status="error", config_hash=config_hash, runtime_s=round(runtime_s, 3),
                      engine_messages=messages, failure=failure)


def build_side(side: Side, claim: str, result: TurnResult, *, runtime_s: float, config_hash: str,
               prices: Mapping[str, Any], messages: list[str]) -> SideResult:
    calls = [role_call(r) for r in result.runtime_role_models]
    cost, _ = cost_of(calls, prices)
    base: dict[str, Any] = {
        "side": side, "claim": claim, "turn_status": result.status, "turn_id": result.turn_id,
        "trace_path": result.trace_path, "config_hash": config_hash, "runtime_s": round(runtime_s, 3),
        "runtime_role_models": calls, "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls), "cost_usd": cost, "engine_messages": messages}
    fc = result.fact_check
    if fc is None or result.status == "halted":
        return SideResult(status="error", llm_calls=len(calls), failure=halted_diagnostics(side, result, calls),
                          **base)
    claims = list(fc.claim_verdicts)
    warnings = [w for c in claims for w in c.warnings]
    degradation_types = list(fc.degradation_types or FACT_CHECK_DEGRADATION_TYPES)
    supports = sum(c.evidence_counts.supports for c in claims)
    directional = sum(c.evidence_counts.directional for c in claims)
    sources = sorted({s for c in claims for s in c.sources})
    status = {"verdict": "verdict", "non_informative": "non_informative"}.get(fc.article_status, "broken")
    failure = broken_diagnostics(side, claims, calls, result.trace_path) if status == "broken" and any(
        c.status == "broken" for c in claims) else None
    if status == "broken" and failure is None:
        failure = FailureDiagnostics(side=side, error_class="BrokenArticle", message=fc.article_reason,
                                     stage="factcheck-article", trace_path=result.trace_path)
    return SideResult(
        status=status, truth_pct=fc.article_truth_pct if status != "broken" else None,
        confidence=fc.article_confidence, verdict=fc.article_verdict, article_status=fc.article_status,
        article_reason=fc.article_reason, claims=[_claim_summary(c) for c in claims], claim_count=len(claims),
        source_count=len(sources), sources=sources,
        support_ratio=round(supports / directional, 4) if directional else None,
        evidence_total=sum(c.evidence_counts.total for c in claims), warnings=warning_counts(warnings),
        llm_calls=fc.llm_calls, refusals=occurrences(warnings, ["refusal"]),
        degradations=occurrences(warnings, degradation_types), degradation_types=degradation_types,
        failure=failure, **base)
