"""Gear 2: one analyst, then verification with corrective re-revision (at most
``pipeline.verification_cycles`` verifications); FAIL at the cap or BROKEN ships under a
one-line warning header with an oversight event."""

from __future__ import annotations

from ora_core.engine.gears.common import finish, halted, ship_after_cycles, verify_cycles
from ora_core.engine.gears.prompts import analyst_spec
from ora_core.engine.reliability import run_model_step
from ora_core.engine.turn_state import GearContext
from ora_core.kernel.models import TurnResult

STEP = "gear2-analyst"


async def run_gear2(gc: GearContext) -> TurnResult:
    out = await run_model_step(gc, analyst_spec(gc, name=STEP, role="analyst", kind="single", primary=True))
    if not out.usable:
        return halted(gc, out, f"the analyst produced no usable output ({out.degraded_reason or 'empty'})")
    text = out.text
    header = ""
    if out.degraded:
        header = f"[degraded — the analyst's output is unhealthy ({out.degraded_reason})]"
        gc.turn.contingency("gear2-analyst-degraded-shipped-with-header", STEP, header, severity="degraded")
    text, verdict, author = await verify_cycles(gc, prefix="gear2", slot="", text=text, revision_role="reviser",
                                        author=out.author)
    answer = ship_after_cycles(gc, text, verdict, step=list(gc.verdicts)[-1], author=author)
    # the header speaks of the analyst's text: when that was withheld, the evidence ships without it
    return finish(gc, (header + "\n" + answer) if header and not gc.withheld else answer, gear=2)
