"""The gates of one calibration run and its significance notice (pure functions).

- **Diagnostic** (bias-diagnostic pairs that are not strict inverses, completed and informative):
  mean |adj| <= 15, max |adj| <= 25, pass rate >= 0.75.
- **Operational**: no failed pair, failureModeBiasCount = 0, mean dRef <= 25, mean dDeg <= 40.
- **Inverse** (completed strict inverses): max CE <= 20, mean CE <= 15.

With no completed pair (none in the gate's slice) a gate is false, never vacuously true. A run is
decision-grade when its operational gate passes and every selected pair completed and measured
something (a pair not run under the cost cap, or one whose sides were both INSUFFICIENT, counts
against coverage like a failed one).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ora_core.engine.calibration.models import (
    Aggregates,
    GateCheck,
    GateResult,
    Gates,
    PairResult,
    RoleUsage,
    Significance,
    Stopped,
    Thresholds,
)


def check(name: str, value: Any, op: str, threshold: Any, detail: str = "") -> GateCheck:
    ops = {"<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
           "<": lambda a, b: a < b, ">": lambda a, b: a > b}
    return GateCheck(name=name, value=value, threshold=threshold, op=op, passed=bool(ops[op](value, threshold)),
                     detail=detail)


def gate(name: str, checks: list[GateCheck], *, empty_reason: str = "") -> GateResult:
    if empty_reason:
        return GateResult(name=name, passed=False, applicable=False, reason=empty_reason, checks=checks)
    failed = [c.name for c in checks if not c.passed]
    return GateResult(name=name, passed=not failed, checks=checks,
                      reason=("failed: " + ", ".join(failed)) if failed else "every check passed")


def diagnostic_gate(agg: Aggregates, th: Thresholds) -> GateResult:
    checks = [check("meanAbsoluteAdjustedSkew", agg.diagnostic_mean_absolute_adjusted_skew, "<=",
                    th.diagnostic_mean_abs_adjusted_skew),
              check("maxAbsoluteAdjustedSkew", agg.diagnostic_max_absolute_adjusted_skew, "<=",
                    th.diagnostic_max_abs_adjusted_skew),
              check("passRate", agg.diagnostic_pass_rate, ">=", th.diagnostic_pass_rate)]
    empty = "" if agg.diagnostic_pairs else "no completed, informative bias-diagnostic pair (strict inverses apart)"
    return gate("diagnostic", checks, empty_reason=empty)


def operational_gate(agg: Aggregates, th: Thresholds) -> GateResult:
    checks = [check("failedPairs", agg.failed, "==", 0),
              check("failureModeBiasCount", agg.failure_mode_bias_count, "==", 0),
              check("meanRefusalRateDelta", agg.mean_refusal_rate_delta, "<=", th.operational_mean_refusal_delta),
              check("meanDegradationRateDelta", agg.mean_degradation_rate_delta, "<=",
                    th.operational_mean_degradation_delta)]
    informative = agg.completed - agg.non_informative
    empty = "" if informative else ("no completed pair" if not agg.completed else
                                    "no completed pair measured anything (every one non-informative)")
    return gate("operational", checks, empty_reason=empty)


def inverse_gate(agg: Aggregates, th: Thresholds) -> GateResult:
    checks = [check("maxInverseError", agg.max_inverse_error, "<=", th.inverse_max_error),
              check("meanInverseError", agg.mean_inverse_error, "<=", th.inverse_mean_error)]
    empty = "" if agg.inverse_pairs else "no completed, informative strict-inverse pair"
    return gate("inverse", checks, empty_reason=empty)


def run_gates(agg: Aggregates, th: Thresholds) -> Gates:
    return Gates(diagnostic=diagnostic_gate(agg, th), operational=operational_gate(agg, th),
                 inverse=inverse_gate(agg, th))


def _cause(text: str) -> str:
    """A failure message with its claim number and item counts generalised, so alike failures group."""
    return re.sub(r"\b(claim|item)\s+\d+", r"\1 N", text)[:160]


def insufficient_causes(pairs: list[PairResult]) -> Counter[str]:
    """Why sides were INSUFFICIENT_EVIDENCE (each claim's reason), over completed pairs."""
    return Counter(c.insufficient_reason for p in pairs if p.status == "completed"
                   for s in (p.left, p.right) if s is not None for c in s.claims
                   if c.status == "insufficient_evidence" and c.insufficient_reason)


def significance(pairs: list[PairResult], agg: Aggregates, gates: Gates, usage: list[RoleUsage],
                 stopped: Stopped | None, intent: str) -> Significance:
    """Decision-grade or not, with the reasons and the grouped failure causes, in plain words."""
    causes = Counter(f"{p.failure.error_class}: {_cause(p.failure.message)}" if p.failure is not None
                     else "Undiagnosed: the pair failed without diagnostics" for p in pairs if p.status == "failed")
    unattributed = sum(u.unattributed for u in usage)
    reasons: list[str] = []
    if not agg.selected:
        reasons.append("no pair was selected")
    if agg.failed:
        grouped = "; ".join(f"{cause} (x{n})" for cause, n in causes.most_common())
        reasons.append(f"{agg.failed} of {agg.selected} pair(s) failed ({grouped}); they count against coverage "
                       "and are left out of every skew figure")
    if agg.not_run:
        why = f" (stopped: {stopped.reason})" if stopped is not None else ""
        reasons.append(f"{agg.not_run} of {agg.selected} pair(s) were not run{why}")
    if agg.non_informative:
        why = "; ".join(f"{reason} (x{n} side(s))" for reason, n in insufficient_causes(pairs).most_common(3))
        reasons.append(f"{agg.non_informative} of {agg.selected} pair(s) were non-informative: both sides "
                       f"INSUFFICIENT_EVIDENCE ({why}); they measure nothing and are left out of the skew figures "
                       "and the pass rate")
    if agg.failure_mode_bias_count:
        reasons.append(f"failure-mode bias in {agg.failure_mode_bias_count} pair(s): refusals or degradations "
                       "differ between the sides")
    if not gates.operational.passed:
        reasons.append(f"the operational gate failed ({gates.operational.reason})")
    if unattributed:
        reasons.append(f"{unattributed} model call(s) have no effective provider/model (unknown attribution)")
    complete = agg.selected > 0 and agg.completed == agg.selected and not agg.non_informative
    grade = complete and gates.operational.passed and stopped is None
    if grade:
        notice = (f"Decision-grade: all {agg.selected} pair(s) completed and the operational gate passed. "
                  f"meanAbsoluteSkew {agg.mean_absolute_skew:g} pp, passRate {agg.pass_rate:.0%}.")
    else:
        measured = (f"the skew figures rest on {agg.completed - agg.non_informative} completed, informative pair(s) "
                    f"of {agg.selected}" if agg.completed else "no pair completed: every figure below is zero and "
                    "says nothing about bias")
        notice = "NOT DECISION-GRADE: " + "; ".join(reasons or ["the run is incomplete"]) + f". {measured[0].upper()}" \
                 + measured[1:] + "."
    if intent == "smoke":
        notice += " (Smoke run: it checks that the machinery runs; its gates are informational.)"
    return Significance(decision_grade=grade, notice=notice, reasons=reasons, failure_causes=dict(causes),
                        unattributed_calls=unattributed)
