"""Gear 3: sequential. A depth analyst, then a breadth reviewer (on the breadth slot, which
excludes the depth model) who reviews that analysis and writes the improved one, then
verification with corrective re-revision as in Gear 2.

Gear 4 falls back to this gear, on the healthier endpoint, when both of its streams degrade.
"""

from __future__ import annotations

from ora_core.engine.gears.common import (
    finish,
    halted,
    run_judging_step,
    ship_after_cycles,
    verify_cycles,
)
from ora_core.engine.gears.prompts import analyst_spec, breadth_review_spec
from ora_core.engine.gears.roles import resolve_slots
from ora_core.engine.reliability import run_model_step
from ora_core.engine.turn_state import GearContext
from ora_core.kernel.models import TurnResult

DEPTH = "gear3-depth-analyst"
REVIEW = "gear3-breadth-review"
ALONE = "gear3-breadth-analyst"


async def run_gear3(gc: GearContext, *, endpoint: str | None = None) -> TurnResult:
    """``endpoint``: run every analysis role on this one backend (the Gear 4 fallback)."""
    gc.gear = 3
    if endpoint is not None:
        for role in ("depth", "breadth", "reviser"):
            gc.overrides[role] = endpoint
    else:
        resolve_slots(gc)
    depth = await run_model_step(gc, analyst_spec(gc, name=DEPTH, role="depth", kind="depth", primary=True,
                                                  stream="depth"))
    if not depth.usable:
        gc.turn.contingency("gear3-depth-failed-breadth-analysed-alone", DEPTH,
                            f"the depth analyst produced no usable output ({depth.degraded_reason or 'empty'})",
                            severity="degraded")
        alone = await run_model_step(gc, analyst_spec(gc, name=ALONE, role="breadth", kind="breadth",
                                                      primary=False, stream="breadth"))
        if not alone.usable:
            return halted(gc, alone, "neither the depth nor the breadth analyst produced usable output")
        text, author = alone.text, alone.author
    else:
        review = await run_judging_step(
            gc, lambda egc: breadth_review_spec(egc, name=REVIEW, role="breadth", depth_text=depth.text),
            name=REVIEW, role="breadth", author=depth.author, edge="review: breadth reviews depth")
        if review.degraded or not review.usable:
            gc.turn.contingency("gear3-breadth-review-degraded-shipped-depth", REVIEW,
                                f"the breadth review degraded ({review.degraded_reason or 'empty'}); the depth "
                                "analysis goes on unreviewed", severity="degraded")
            text, author = depth.text, depth.author
        else:
            text, author = review.text, review.author
    # a model verifier runs on the other slot's backend when its lineage differs from the author's
    other = "depth" if author is not None and author.role == "breadth" else "breadth"
    text, verdict, author = await verify_cycles(gc, prefix="gear3", slot="", text=text, revision_role="reviser",
                                                author=author, prefer=gc.backend_for(other))
    answer = ship_after_cycles(gc, text, verdict, step=list(gc.verdicts)[-1], author=author)
    return finish(gc, answer, gear=3)
