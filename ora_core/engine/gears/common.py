"""What gears 2-4 share: judging steps, verification cycles, the final gate, the finish.

The state they pass is the ``GearContext`` (``ora_core.engine.turn_state``): the context package,
the mode, the supplement results fetched so far, the verdicts, and the pool the steps call
through (a ``RoutedPool``, which lets a gear move a role onto another configured backend for this
turn only while the role ledger, fallback chains and token budgets stay the kernel's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

from ora_core.engine import evidence_answer, profiles, supplement
from ora_core.engine.gears import prompts
from ora_core.engine.lineage import ModelIdentity
from ora_core.engine.reliability import (
    StepHalted,
    StepOutcome,
    StepSpec,
    judged_context,
    refused_outcome,
    run_model_step,
    summary,
)
from ora_core.engine.turn_state import GearContext
from ora_core.engine.verification import Which, verify
from ora_core.kernel.errors import PluginError
from ora_core.kernel.models import TurnResult, Verdict, VerdictStatus

T = TypeVar("T")


async def run_judging_step(gc: GearContext, build: Callable[[GearContext], StepSpec], *, name: str, role: str,
                           author: ModelIdentity | list[ModelIdentity] | None, edge: str,
                           prefer: str | None = None) -> StepOutcome:
    """A model step that judges ``author``'s output (a cross-evaluation, a review): the lineage rule
    decides where it runs (``judged_context``: re-routed under ``refuse``), the spec is built for
    that context, and the step labels the edge by the models that ran (``StepSpec.judges``). Under
    ``refuse`` with no backend of another lineage the step does not run: a degraded, named outcome."""
    edge_gc, routed, refused = judged_context(gc, role, author, name, prefer)
    spec = replace(build(edge_gc), judges=author, edge=edge, routed_to=routed)
    if refused:
        return refused_outcome(gc, spec, refused)
    return await run_model_step(edge_gc, spec)


async def together(*jobs: Awaitable[T]) -> list[T]:
    """Run steps concurrently; a halt (or any crash) in one is raised after all have ended."""
    results = await asyncio.gather(*jobs, return_exceptions=True)
    for result in results:
        if isinstance(result, StepHalted):
            raise result
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [r for r in results if not isinstance(r, BaseException)]  # every exception was raised above


def oversight(gc: GearContext, step: str, reason: str, verdict: Verdict | None, answer: str) -> None:
    gc.turn.emit("oversight", step=step, reason=reason, mode=gc.package.mode, gear=gc.gear,
                 verdict=verdict.status.value if verdict is not None else None,
                 reasons=list(verdict.reasons) if verdict is not None else [],
                 answer_preview=summary(answer, 300))


async def verify_cycles(gc: GearContext, *, prefix: str, slot: str, text: str, revision_role: str,
                        which: Which = "verifier", author: ModelIdentity | None = None,
                        prefer: str | None = None) -> tuple[str, Verdict, ModelIdentity | None]:
    """Verify; FAIL re-revises ``text`` and verifies again, at most ``verification_cycles``
    verifications (at least one: the configuration bounds it). PASS and BROKEN both end the loop;
    BROKEN is recorded, never PASS. ``author``: the model that wrote ``text`` (a re-revision's model
    after it); ``prefer``: a backend to verify on when its lineage differs from the author's
    (``verification.verify``). Returns the text, the last verdict and the model that wrote that text."""
    cycles, why = profiles.verification_cycles(gc.runtime.config, gc.backend_for(revision_role))
    part = f"-{slot}" if slot else ""
    cycle = 1
    while True:
        step = f"{prefix}-cycle{cycle}{part}-verify"
        verdict = await verify(gc, step=step, subject=text, which=which, slot=slot, cycle=cycle,
                               broken_contingency=f"{prefix}-cycle{cycle}{part}-verifier-BROKEN-not-verified",
                               author=author, prefer=prefer)
        if verdict.status is not VerdictStatus.FAIL:
            return text, verdict, author
        if cycle >= cycles:
            gc.turn.contingency(f"{prefix}-cycle{cycle}{part}-FAIL-cap-reached-not-verified", step,
                                f"still FAIL after {cycles} verification cycle(s) ({why}): "
                                + "; ".join(verdict.reasons)[:400], severity="degraded", cycles=cycles)
            return text, verdict, author
        spec = prompts.re_revision_spec(gc, f"{prefix}-cycle{cycle}{part}-re-revision", slot, revision_role,
                                        text, verdict, cycle)
        revised = await run_model_step(gc, spec)
        if revised.degraded or not revised.text.strip():
            gc.turn.contingency(f"{spec.name}-degraded-kept-previous", spec.name,
                                f"the re-revision degraded ({revised.degraded_reason}); the previous text "
                                "stands, unverified", severity="degraded")
            return text, verdict, author
        text, author = revised.text, revised.author
        cycle += 1


def warning_header(verdict: Verdict, corrections: int) -> str:
    if verdict.status is VerdictStatus.BROKEN:
        reason = (verdict.reasons[0] if verdict.reasons else "no reason given")[:160]
        return (f"[warning: not verified — the verifier was BROKEN ({reason}); "
                "this answer is queued for human oversight]")
    return (f"[warning: verification FAILED after {corrections} corrective revision(s) — this answer is "
            "not verified; it is queued for human oversight]")


async def final_gate(gc: GearContext, text: str, *, step: str, correction_role: str, which: Which = "final_verifier",
                     prefix: str = "", author: ModelIdentity | None = None) -> tuple[str, Verdict]:
    """Seed 001 step 8: verify; FAIL -> one corrective revision -> verify; still FAIL (or BROKEN)
    -> a one-line warning header and an oversight event. ``author``: the model that wrote ``text``."""
    verdict = await verify(gc, step=step, subject=text, which=which,
                           broken_contingency=f"{step}-verifier-BROKEN-not-verified", author=author)
    corrections = 0
    if verdict.status is VerdictStatus.FAIL:
        spec = prompts.corrective_spec(gc, f"{prefix or step}-corrective-revision", correction_role, text, verdict)
        corrected = await run_model_step(gc, spec)
        corrections = 1
        if corrected.degraded or not corrected.text.strip():
            gc.turn.contingency(f"{spec.name}-degraded-kept-previous", spec.name,
                                f"the corrective revision degraded ({corrected.degraded_reason})",
                                severity="degraded")
        else:
            text, author = corrected.text, corrected.author
            verdict = await verify(gc, step=f"{step}-after-correction", subject=text, which=which,
                                   broken_contingency=f"{step}-after-correction-verifier-BROKEN-not-verified",
                                   author=author)
    if verdict.status is VerdictStatus.PASS:
        return text, verdict
    reason = "verifier-broken" if verdict.status is VerdictStatus.BROKEN else "final-verification-failed"
    if verdict.status is VerdictStatus.FAIL and on_fail(gc, author) == "evidence":
        return withhold(gc, step, text, verdict), verdict
    if verdict.status is VerdictStatus.FAIL:
        gc.turn.contingency(f"{step}-FAIL-after-correction-shipped-with-warning", step,
                            "; ".join(verdict.reasons)[:400], severity="degraded")
    header = warning_header(verdict, corrections)
    gc.warnings.append(header)
    oversight(gc, step, reason, verdict, text)
    return header + "\n" + text, verdict


def finish(gc: GearContext, answer: str, *, gear: int) -> TurnResult:
    """The shipped answer through the ``final_output`` detectors, in a ``final-output`` step."""
    turn = gc.turn
    with turn.step("final-output", gear=gear, mode=gc.package.mode) as step:
        signals = turn.detect("final_output", answer, step="final-output")
        always = supplement.assess_turn(turn)  # the turn-level pattern of seed 000 §5.3
        if always is not None:
            step.health.noncompliance["always-requester"] = always["requesting_steps"]
            step.output["always_requester"] = always
            step.contingency("turn-always-requester",
                             f"supplement protocol non-compliance: always-requester ({always['requesting_steps']} "
                             f"of {always['steps']} protocol steps asked for a supplement; "
                             f"{always['unneeded']} request(s) for terms the package already had)",
                             severity="warning", pattern="always-requester", **always)
        step.output.update(answer=answer, verdicts=dict(gc.verdicts), warnings=list(gc.warnings),
                           signals=[s.model_dump(mode="json") for s in signals])
        if gc.withheld:
            step.output["withheld_answer"] = gc.withheld[-1]
    degraded = any(h.degraded for h in turn.health.values())
    return TurnResult(status="degraded" if degraded else "ok", answer=answer, mode=gc.package.mode, gear=gear,
                      verdicts=dict(gc.verdicts), withheld_answer=gc.withheld[-1] if gc.withheld else None)


def ship_after_cycles(gc: GearContext, text: str, verdict: Verdict | None, step: str,
                      author: ModelIdentity | None = None) -> str:
    """Gears 2-3: the verification cycles are the last gate; FAIL at the cap or BROKEN ship
    with a one-line warning header and an oversight event (FAIL under ``on_fail = "evidence"``:
    the answer is withheld and the evidence ships, ``withhold``)."""
    if verdict is None or verdict.status is VerdictStatus.PASS:
        return text
    if verdict.status is VerdictStatus.FAIL and on_fail(gc, author) == "evidence":
        return withhold(gc, step, text, verdict)
    cycles, _ = profiles.verification_cycles(gc.runtime.config, gc.backend_for("reviser"))
    header = warning_header(verdict, cycles - 1)
    gc.warnings.append(header)
    oversight(gc, step, "verifier-broken" if verdict.status is VerdictStatus.BROKEN else "verification-failed",
              verdict, text)
    return header + "\n" + text


def on_fail(gc: GearContext, author: ModelIdentity | None) -> str:
    """``[verification] on_fail``, else by the prompt profile of the backend that wrote the answer:
    ``evidence`` under ``compact`` (a small local model's answers seldom pass a grounding check, and
    what the evidence says is the honest answer then), ``warn`` under ``full``."""
    config = gc.runtime.config
    chosen = config.verification.on_fail
    if chosen:
        return chosen
    backend = author.backend if author is not None and author.backend in config.backends else gc.backend_for("analyst")
    return "evidence" if profiles.profile_of(config, backend) == "compact" else "warn"


EVIDENCE_STEP = "evidence-answer"


def withhold(gc: GearContext, step: str, text: str, verdict: Verdict) -> str:
    """Withhold ``text`` (it FAILed verification after the last corrective revision) and return what
    the retrieved evidence says instead (``ora_core.engine.evidence_answer``), in a deterministic
    step of its own; the withheld text stays in the trace and in ``TurnResult.withheld_answer``."""
    turn = gc.turn
    question = gc.package.cleaned_prompt or turn.prompt
    embedder, problem = None, ""
    try:
        embedder = turn.embedder()
    except PluginError as exc:
        problem = str(exc)
    built = evidence_answer.build(question, gc.evidence().chunks, embedder, problem)
    with turn.step(EVIDENCE_STEP, kind="deterministic", failed_step=step, question=question,
                   verdict=verdict.status.value, reasons=list(verdict.reasons)[:10]) as st:
        st.health.kind = "deterministic"
        st.health.verdict = "DEGRADED"
        st.output.update(built.model_dump(mode="json"), withheld_answer=text)
        st.contingency(evidence_answer.CONTINGENCY,
                       f"the answer FAILed verification at {step} ({'; '.join(verdict.reasons)[:300]}); it is "
                       f"withheld and {len(built.sentences)} evidence sentence(s) ship instead "
                       f"(ranked by {built.ranked_by})", severity="degraded", failed_step=step,
                       sentences=len(built.sentences))
        if built.fallback_reason:
            st.contingency(evidence_answer.LEXICAL, f"{built.fallback_reason}; the evidence sentences were ranked by "
                           "content-word overlap with the question", severity="warning")
    gc.withheld.append(text)
    gc.warnings.append(built.answer.splitlines()[0])
    oversight(gc, step, "verification-failed-answer-withheld", verdict, text)
    return built.answer


def halted(gc: GearContext, outcome: StepOutcome, why: str) -> TurnResult:
    """No usable output is left (every model that could answer failed): halt with the diagnostic."""
    gc.turn.contingency(f"{outcome.step}-no-output-halted", outcome.step, why, severity="error")
    diagnostic = {"step": outcome.step, "final_failure": why, "error": outcome.error,
                  "degraded_reason": outcome.degraded_reason, "mode": gc.package.mode, "gear": gc.gear,
                  "attempts": [a.model_dump(mode="json", exclude={"text"}) for a in outcome.attempts]}
    return TurnResult(status="halted", mode=gc.package.mode, gear=gc.gear, diagnostic=diagnostic,
                      verdicts=dict(gc.verdicts))
