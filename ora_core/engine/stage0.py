"""Stage 0: the bypass check on the raw prompt, before Phase A can expand it.

Seed 000 failures #1, #6 and #7: bypass vocabulary is matched on the user's own words (layer
``raw_prompt``) by the detectors of kind ``bypass``. Any *strong* signal bypasses; *weak*
signals (greetings) bypass only when nothing but courtesies is left of the prompt, so
"Hi, who benefits from X?" goes on to the analysis. A bypass sends the turn to Gear 1 with the
``simple`` mode.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from ora_core.kernel.models import Signal
from ora_core.kernel.trace import TurnContext

STEP = "stage0-bypass"
MAX_RESIDUAL_WORDS = 2  # a weak-only prompt with more words than this is not a bypass
_WORD = re.compile(r"\w+")


class BypassDecision(BaseModel):
    bypass: bool
    category: str | None = None
    reason: str
    signals: list[Signal] = Field(default_factory=list)
    residual_words: int = 0


def decide(prompt: str, signals: list[Signal]) -> BypassDecision:
    strong = [s for s in signals if s.strength == "strong"]
    if strong:
        first = min(strong, key=lambda s: s.start or 0)
        return BypassDecision(bypass=True, category=first.data.get("category"), signals=signals,
                              reason=f"strong bypass trigger {first.name!r} in the raw prompt")
    residual = prompt
    for s in sorted(signals, key=lambda s: -(s.start or 0)):
        if s.start is not None and s.end is not None:
            residual = residual[:s.start] + " " + residual[s.end:]
    words = len(_WORD.findall(residual))
    if signals and words <= MAX_RESIDUAL_WORDS:
        return BypassDecision(bypass=True, category=signals[0].data.get("category"), signals=signals,
                              residual_words=words,
                              reason=f"only weak triggers ({', '.join(s.name for s in signals)}) and "
                                     f"{words} other word(s)")
    if signals:
        return BypassDecision(bypass=False, signals=signals, residual_words=words,
                              reason=f"only weak triggers, and {words} other words: not a bypass")
    return BypassDecision(bypass=False, reason="no bypass trigger in the raw prompt")


def run_stage0(turn: TurnContext, prompt: str) -> BypassDecision:
    with turn.step(STEP, raw_prompt=prompt, layer="raw_prompt") as step:
        detectors = [d.name for d in turn.host.detectors(layer="raw_prompt", kind="bypass")] if turn.host else []
        if not detectors:
            step.contingency("stage0-no-bypass-detector",
                             "no detector of kind 'bypass' on layer 'raw_prompt' is installed; "
                             "nothing can bypass", severity="warning")
        signals = turn.detect("raw_prompt", prompt, step=STEP, kind="bypass")
        decision = decide(prompt, signals)
        step.output.update(decision.model_dump(mode="json"), detectors=detectors)
    return decision
