"""Layers of a turn and the properties each provides (seed 000 §6b, made structural).

Data flows one way through these layers. A detector (or verifier, or retriever) declares the
layer it reads and the properties of its input it relies on; the kernel refuses at load time
any component whose assumptions its layer does not provide. A bypass detector declared on
``cleaned_prompt`` (which is expanded by Phase A) is failure #7 of seed 000 and is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

LAYER_ORDER: tuple[str, ...] = (
    "raw_prompt",
    "cleaned_prompt",
    "routing",
    "context_package",
    "model_output",
    "verifier_output",
    "final_output",
)

#: What each property means, so a refusal message can say why it matters.
PROPERTY_MEANINGS: dict[str, str] = {
    "verbatim": "the text is exactly what the user typed",
    "unexpanded": "no model has expanded or rewritten the text (Phase A has not run on it)",
    "user_authored": "every word comes from the user, none from a model",
    "expanded": "Phase A has expanded the text into operational notation",
    "corrections_logged": "spelling and grammar corrections are recorded beside the text",
    "mode_selected": "a mode has been dispatched (or a clarification is pending)",
    "signals_scored": "signal strengths behind the dispatch are recorded",
    "provenance": "every chunk carries its source, collection and score",
    "empty_diagnosed": "an empty retrieval carries a diagnosis of why it is empty",
    "model_generated": "the text was produced by a model and may confabulate",
    "evidence_available": "the evidence package the text was meant to rest on is at hand",
    "verdict_raw": "the verifier's raw output is kept beside its parsed verdict",
    "user_facing": "the text is what the user will see",
}

LAYER_PROVIDES: dict[str, frozenset[str]] = {
    "raw_prompt": frozenset({"verbatim", "unexpanded", "user_authored"}),
    "cleaned_prompt": frozenset({"expanded", "corrections_logged"}),
    "routing": frozenset({"expanded", "mode_selected", "signals_scored"}),
    "context_package": frozenset({"provenance", "empty_diagnosed", "expanded"}),
    "model_output": frozenset({"model_generated", "evidence_available"}),
    "verifier_output": frozenset({"model_generated", "verdict_raw", "evidence_available"}),
    "final_output": frozenset({"model_generated", "user_facing", "evidence_available"}),
}


class LayerError(ValueError):
    """A component's declared layer or assumptions are not valid."""


@dataclass(frozen=True)
class AssumptionCheck:
    """The outcome of checking one component's declared assumptions against its layer."""

    component: str
    layer: str
    missing: frozenset[str]

    @property
    def ok(self) -> bool:
        return not self.missing

    def message(self) -> str:
        if self.ok:
            return f"{self.component} on layer {self.layer!r}: assumptions hold"
        parts = []
        for prop in sorted(self.missing):
            meaning = PROPERTY_MEANINGS.get(prop)
            parts.append(f"{prop!r} ({meaning})" if meaning else repr(prop))
        provided = ", ".join(sorted(LAYER_PROVIDES[self.layer])) or "nothing"
        return (
            f"{self.component} assumes {', '.join(parts)} but layer {self.layer!r} does not "
            f"provide it (it provides: {provided})"
        )


def validate_layer(layer: object, component: str) -> str:
    """Return ``layer`` if it names a known layer, else raise ``LayerError`` naming the component."""
    if layer is None or layer == "":
        raise LayerError(f"{component} declares no layer; declare one of: {', '.join(LAYER_ORDER)}")
    if not isinstance(layer, str) or layer not in LAYER_PROVIDES:
        raise LayerError(
            f"{component} declares unknown layer {layer!r}; known layers: {', '.join(LAYER_ORDER)}"
        )
    return layer


def check_assumptions(component: str, layer: str, assumes: Iterable[str]) -> AssumptionCheck:
    """Compare what a component assumes with what its layer provides."""
    validate_layer(layer, component)
    assumed = frozenset(assumes)
    return AssumptionCheck(component=component, layer=layer, missing=assumed - LAYER_PROVIDES[layer])


def layer_index(layer: str) -> int:
    """Position of a layer in the one-way flow (raw_prompt is 0)."""
    return LAYER_ORDER.index(layer)
