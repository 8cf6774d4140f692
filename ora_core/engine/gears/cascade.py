"""Gear 4: the adversarial cascade of seed 001 (steps 3-8; Phase A and context assembly are
steps 1-2).

- Step 3: Depth and Breadth analysts, truly concurrent (asyncio), on the depth slot and the
  breadth slot (which excludes the depth model; ``roles.py``).
- Step 4: directional cross-evaluation against the seven-section contract: the breadth model
  critiques the depth stream, the depth model the breadth stream.
- Step 5: parallel revisers; each records the criticisms it accepted and rejected.
- Step 6: cross-verification, PASS | FAIL | BROKEN, at most ``verification_cycles``: FAIL
  re-revises that stream; BROKEN unblocks, recorded as
  ``step6-cycleN-<slot>-verifier-BROKEN-not-verified``, never as PASS.
- Step 7: consolidation into one answer.
- Step 8: final verification; FAIL -> one corrective revision; still FAIL (or BROKEN) -> a
  one-line warning header and an oversight event.

Degradation (seed 001's contingency layer): one stream degraded -> the cascade continues on the
other and says so; both -> Gear 3 on the healthier endpoint; consolidation degraded -> the
longer verified stream ships under ``[degraded — consolidation failed]``.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core.engine.gears.common import final_gate, finish, run_judging_step, together, verify_cycles
from ora_core.engine.gears.prompts import analyst_spec, consolidator_spec, evaluator_spec, reviser_spec
from ora_core.engine.gears.roles import resolve_slots
from ora_core.engine.gears.sequential import run_gear3
from ora_core.engine.lineage import ModelIdentity
from ora_core.engine.reliability import StepOutcome, StepSpec, run_model_step
from ora_core.engine.turn_state import GearContext
from ora_core.kernel.models import TurnResult

SLOTS = ("depth", "breadth")
OTHER = {"depth": "breadth", "breadth": "depth"}
CONSOLIDATION = "step7-consolidation"
FINAL = "step8-final-verify"
DEGRADED_HEADER = "[degraded — consolidation failed]"


def _healthier(streams: dict[str, StepOutcome]) -> str:
    """The stream whose endpoint still answers (unhealthy text beats a backend failure), then
    the one with fewer unhealthy signals; depth on a tie."""
    return min(SLOTS, key=lambda s: (streams[s].backend_failed, streams[s].unhealthy_signals, SLOTS.index(s)))


async def run_gear4(gc: GearContext) -> TurnResult:
    turn = gc.turn
    resolve_slots(gc)
    # Step 3: the two analysts, concurrently.
    outs = await together(*(run_model_step(gc, analyst_spec(gc, name=f"step3-{s}-analyst", role=s, kind=s,
                                                            primary=s == "depth", stream=s)) for s in SLOTS))
    streams = dict(zip(SLOTS, outs, strict=True))
    healthy = [s for s in SLOTS if not streams[s].degraded and streams[s].usable]
    if not healthy:
        endpoint = _healthier(streams)
        backend = gc.backend_for(endpoint)
        turn.contingency("gear4-both-streams-degraded-fell-back-to-gear-3", "step3-analysts",
                         f"depth: {streams['depth'].degraded_reason}; breadth: {streams['breadth'].degraded_reason}; "
                         f"running gear 3 on the healthier endpoint, the {endpoint} slot's backend {backend!r}",
                         severity="degraded", endpoint=backend, slot=endpoint)
        return await run_gear3(gc, endpoint=backend)
    for s in SLOTS:
        if s not in healthy:
            turn.contingency(f"gear4-{s}-stream-degraded-continued-on-{OTHER[s]}", f"step3-{s}-analyst",
                             f"the {s} stream degraded ({streams[s].degraded_reason}); cross-evaluation and "
                             f"consolidation run on the {OTHER[s]} stream alone", severity="degraded")
    # Step 4: directional cross-evaluation (the other slot's model critiques each stream), each edge
    # checked by the lineage rule.
    def evaluation(s: str) -> Callable[[GearContext], StepSpec]:
        """The spec of the other slot's critique of stream ``s``, built for the context it runs in."""
        return lambda egc: evaluator_spec(egc, name=f"step4-{OTHER[s]}-evaluates-{s}", role=OTHER[s], target=s,
                                          text=streams[s].text)

    evaluations = await together(*(run_judging_step(
        gc, evaluation(s), name=f"step4-{OTHER[s]}-evaluates-{s}", role=OTHER[s], author=streams[s].author,
        edge=f"cross-evaluation: {OTHER[s]} evaluates {s}") for s in healthy))
    critiques = dict(zip(healthy, evaluations, strict=True))
    # Step 5: parallel revisers, each on its own slot.
    revised = dict(zip(healthy, await together(*(_revise(gc, s, streams[s], critiques[s]) for s in healthy)),
                       strict=True))
    # Step 6: cross-verification cycles, per stream, concurrently; a model verifier runs on the
    # other stream's backend when its lineage differs from the stream's author (seed 001 step 6).
    checked = await together(*(verify_cycles(gc, prefix="step6", slot=s, text=revised[s][0], revision_role=s,
                                             author=revised[s][1], prefer=gc.backend_for(OTHER[s]))
                               for s in healthy))
    verified = {s: (text, verdict) for s, (text, verdict, _) in zip(healthy, checked, strict=True)}
    authors = {s: author for s, (_, _, author) in zip(healthy, checked, strict=True)}
    # Step 7: consolidation.
    consolidated = await run_model_step(gc, consolidator_spec(
        gc, name=CONSOLIDATION, streams={s: (text, v.status.value) for s, (text, v) in verified.items()}))
    header = ""
    author = consolidated.author
    if consolidated.degraded or not consolidated.usable:
        slot, (text, _) = max(verified.items(), key=lambda kv: len(kv[1][0]))
        author = authors[slot]
        header = DEGRADED_HEADER
        turn.contingency("step7-consolidation-degraded-shipped-longer-stream", CONSOLIDATION,
                         f"consolidation degraded ({consolidated.degraded_reason or 'empty'}); the longer "
                         f"verified stream ({slot}, {len(text)} chars) ships under {DEGRADED_HEADER}",
                         severity="degraded", shipped=slot)
        gc.warnings.append(header)
    else:
        text = consolidated.text
    # Step 8: the final gate.
    answer, _ = await final_gate(gc, text, step=FINAL, correction_role="consolidator", prefix="step8", author=author)
    return finish(gc, (header + "\n" + answer) if header else answer, gear=4)


async def _revise(gc: GearContext, slot: str, analysis: StepOutcome,
                  critique: StepOutcome) -> tuple[str, ModelIdentity | None]:
    """The stream's revised text and the model that wrote it (the analyst's, when unrevised)."""
    name = f"step5-{slot}-reviser"
    if critique.degraded or not critique.usable:
        gc.turn.contingency(f"{name}-skipped-no-critique", critique.step,
                            f"the {OTHER[slot]} model's critique of the {slot} stream degraded "
                            f"({critique.degraded_reason or 'empty'}); the analysis goes on unrevised",
                            severity="degraded")
        return analysis.text, analysis.author
    out = await run_model_step(gc, reviser_spec(gc, name=name, role=slot, slot=slot, own=analysis.text,
                                                critique=critique.text, critic=OTHER[slot]))
    if out.degraded or not out.usable:
        gc.turn.contingency(f"{name}-degraded-kept-analysis", name,
                            f"the reviser degraded ({out.degraded_reason or 'empty'}); the pre-revision "
                            "analysis goes on", severity="degraded")
        return analysis.text, analysis.author
    return out.text, out.author

