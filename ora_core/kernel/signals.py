"""The signal kinds that change what a turn does, and what each one changes.

A detector's ``kind`` says what it detects. Most kinds are information: their signals are
traced, counted and shown, and change nothing. The kinds below are the whole vocabulary by
which a plugin steers control flow; the kernel acts on these and on nothing else, so a
detector cannot change a turn's path by accident (``docs/hooks.md`` states each effect).
"""

from __future__ import annotations

from enum import Enum


class SignalKind(str, Enum):
    """Detector kinds the engine acts on. Any other kind is traced, never acted on."""

    BYPASS = "bypass"
    MODE_SIGNAL = "mode_signal"
    UNHEALTHY = "unhealthy"
    BROKEN = "broken"
    VERDICT = "verdict"
    UNSUPPORTED_SPECIFICS = "unsupported_specifics"
    INSTRUCTION = "instruction"
    CLOCK_CLAIM = "clock_claim"
    REQUEST_SHAPE = "request_shape"


#: What a signal of each kind does, by layer and strength (the text of docs/hooks.md's table).
SIGNAL_EFFECTS: dict[SignalKind, str] = {
    SignalKind.BYPASS: (
        "raw_prompt (Stage 0): a strong signal sends the turn to Gear 1 with the `simple` mode; weak "
        "signals do only when nothing but courtesies is left of the prompt. cleaned_prompt (Stage 1 "
        "re-scan): a strong signal with no strong mode signal routes to `simple`."),
    SignalKind.MODE_SIGNAL: (
        "cleaned_prompt: vocabulary for the signal's `mode` in pre-routing: a strong phrase (or three weak "
        "ones) gives the mode a full vocabulary share, combined with the semantic score (the embedder "
        "against the mode's examples) into the mode's one routing score."),
    SignalKind.UNHEALTHY: (
        "model_output: a strong signal regenerates the step once; unhealthy again, the step is degraded "
        "(`<step>-unhealthy-after-regenerate`). Weak signals are traced only."),
    SignalKind.BROKEN: (
        "verifier_output: a strong signal makes the verdict BROKEN (recorded, never PASS), whatever "
        "verdict line the output holds. Weak signals are traced in the verdict's data."),
    SignalKind.VERDICT: (
        "verifier_output: the verdict read from a verifier's raw text; `data.status` is PASS or FAIL and "
        "`data.line` the decisive line. With no strong `broken` signal, the last `verdict` signal decides; "
        "with none at all, the verdict is BROKEN (no verdict line)."),
    SignalKind.UNSUPPORTED_SPECIFICS: (
        "model_output: the output states a specific (a name, date, figure, quotation) the evidence lacks; "
        "counted by the Supplemental RAG compliance check (confident / cap-forced confabulator)."),
    SignalKind.INSTRUCTION: (
        "context_package: a retrieved chunk carries instruction-like text (imperatives to the model, "
        "role markers, verdict tokens, protocol blocks): named as a contingency with the chunk's source "
        "and marked on the chunk (provenance.extra['instruction_like']); the chunk stays as data. An "
        "output that repeats or obeys the marked text is `unhealthy` (ora-evidence-guard's "
        "planted-instruction-echo), so the step is regenerated, then degraded: never `ok`."),
    SignalKind.CLOCK_CLAIM: (
        "model_output (Gear 1, a time or date question, the clock reading in `ctx.data['clock']`): a time or "
        "date the answer states that the system clock contradicts. The engine regenerates the answer once "
        "with the contradiction named; contradicted again, the answer is the clock's own reading "
        "(`gear1-clock-answered-from-clock`). No detector of this kind installed: the clock answers, named "
        "(`gear1-clock-check-unavailable`)."),
    SignalKind.REQUEST_SHAPE: (
        "cleaned_prompt: what the prompt asks for by its form, the signal named for the shape. A mode "
        "whose front matter `shapes.claims` names it counts it as a strong phrase; a mode whose "
        "`shapes.requires` names a shape the prompt lacks stands aside (cannot lead, compete or claim); "
        "`context-reference` (the request leans on something shared earlier that the prompt does not "
        "contain) makes routing ask what it refers to, naming the words (best-guess: the fallback mode, "
        "which names the assumption)."),
}


def acts_on(kind: str) -> bool:
    """Whether the engine acts on signals of ``kind`` (otherwise they are only traced)."""
    return kind in _VALUES


_VALUES = frozenset(k.value for k in SignalKind)
