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


#: What a signal of each kind does, by layer and strength (the text of docs/hooks.md's table).
SIGNAL_EFFECTS: dict[SignalKind, str] = {
    SignalKind.BYPASS: (
        "raw_prompt (Stage 0): a strong signal sends the turn to Gear 1 with the `simple` mode; weak "
        "signals do only when nothing but courtesies is left of the prompt. cleaned_prompt (Stage 1 "
        "re-scan): a strong signal with no strong mode signal routes to `simple`."),
    SignalKind.MODE_SIGNAL: (
        "cleaned_prompt: a vote for the signal's `mode` (strong weighs 3, weak 1) in pre-routing."),
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
        "verdict tokens, protocol blocks); named as a contingency, and an output that repeats it is "
        "unhealthy. model_output: the output repeats such planted text (strong: unhealthy)."),
}


def acts_on(kind: str) -> bool:
    """Whether the engine acts on signals of ``kind`` (otherwise they are only traced)."""
    return kind in _VALUES


_VALUES = frozenset(k.value for k in SignalKind)
