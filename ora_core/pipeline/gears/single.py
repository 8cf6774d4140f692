"""The stand-in for the analytical gears: one analyst call over the context package.

Gears 2-4 (verification, sequential, the adversarial cascade) replace this module. Until then
it runs a single, unverified analyst call, which is structurally Gear 1, and says so: the step
records the gear the mode requested and the gear that ran, and the contingency
``gear-N-unavailable-ran-gear-1`` marks the turn degraded.
"""

from __future__ import annotations

from typing import Any

from ...backends import call_role
from ...errors import BackendError
from ...models import ContextPackage, TurnResult
from ...prompts import build_turn_messages
from ..context import render_evidence

STEP = "single-analyst"
GEAR_RAN = 1
RUNNER = "single-analyst-unverified"


def analyst_task(package: ContextPackage) -> str:
    parts = [f"You are the analyst for the {package.mode!r} mode. Answer from the evidence package."]
    parts += [f"## {name}\n{text}" for name, text in package.mode_sections.items() if text.strip()]
    return "\n\n".join(parts)


async def run_single(runtime: Any, turn: Any, package: ContextPackage) -> TurnResult:
    requested = package.requested_gear
    messages = build_turn_messages(turn, analyst_task(package),
                                   package.cleaned_prompt + "\n\n" + render_evidence(package))
    with turn.step(STEP, mode=package.mode, requested_gear=requested, gear_ran=GEAR_RAN, runner=RUNNER,
                   messages=[m.model_dump() for m in messages]) as step:
        step.contingency(f"gear-{requested}-unavailable-ran-gear-{GEAR_RAN}",
                         f"mode {package.mode!r} asks for gear {requested}; gears 2-4 are not built "
                         "yet, so one unverified analyst call answered", severity="degraded",
                         requested_gear=requested, gear_ran=GEAR_RAN)
        try:
            completion = await call_role(turn, runtime.pool, "analyst", messages,
                                         prompt_key=f"{RUNNER}.{package.mode}", step=STEP)
        except BackendError as exc:
            step.output["error"] = exc.describe()
            step.health.verdict = "BROKEN"
            step.contingency("single-analyst-backend-failed", str(exc), severity="error")
            return TurnResult(status="halted", mode=package.mode, gear=GEAR_RAN,
                              diagnostic={"step": STEP, **exc.describe()})
        step.output.update(answer=completion.text, completion=completion.model_dump(mode="json"),
                           requested_gear=requested, gear_ran=GEAR_RAN, runner=RUNNER, verified=False)
    return TurnResult(status="degraded", answer=completion.text, mode=package.mode, gear=GEAR_RAN)
