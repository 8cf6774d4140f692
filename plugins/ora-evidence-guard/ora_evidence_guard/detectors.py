"""The three detectors: a chunk that carries instructions, an output that repeats them, a verifier
that obeys them."""

from __future__ import annotations

import re
from typing import Any

from ora_core.api import Signal, lazy_compile

from .echo import Repeat, own_text, planted_in, repeated
from .rules import IMPERATIVE, scan

CHUNK_KEY = "chunk"  # ctx.data["chunk"]: the Chunk being screened (its provenance), set by the engine
EVIDENCE_KEY = "evidence"  # ctx.data["evidence"]: the step's EvidencePackage, set by the engine
MAX_SIGNALS = 8

_FAIL = lazy_compile(r"\bverdict\W*fail|\bverification\W+failed\b|\bnot\W+verified\b", re.IGNORECASE)


def _data(ctx: Any) -> dict[str, Any]:
    data = getattr(ctx, "data", None)
    return data if isinstance(data, dict) else {}


class InstructionInChunkDetector:
    """Layer ``context_package``, kind ``instruction``: the instruction-like passages of one retrieved
    chunk (``rules.scan``). The engine names each flagged chunk as a contingency with its source
    and marks it, so later checks know the planted text."""

    name = "instruction-in-chunk"
    kind = "instruction"
    layer = "context_package"
    assumes = frozenset({"provenance"})

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        chunk = _data(ctx).get(CHUNK_KEY)
        provenance = getattr(chunk, "provenance", None)
        heading = str(getattr(provenance, "heading", "") or "")
        source = str(getattr(provenance, "source", "") or "")
        conversation = getattr(provenance, "stream", "") == "conversation" or source.startswith("conversation:")
        findings = scan(text, heading=heading, conversation=conversation)
        return [Signal(detector=self.name, kind=self.kind, name=f"{f.family}:{f.rule}", strength="strong",
                       matched=f.matched, data=f.model_dump(mode="json", exclude={"matched"}))
                for f in findings[:MAX_SIGNALS * 4]]


def _repeat_signal(detector: str, kind: str, name: str, repeat: Repeat, why: str) -> Signal:
    p = repeat.planted
    return Signal(detector=detector, kind=kind, name=name, strength="strong", matched=p.matched[:200],
                  data={"family": p.family, "rule": p.rule, "how": repeat.how, "source": p.source,
                        "chunk_id": p.chunk_id, "planted": p.core or p.unit, "why": why,
                        "reasons": [f"{why}: {p.matched[:120]!r} from {p.source or 'a retrieved chunk'}"]})


class PlantedEchoDetector:
    """Layer ``model_output``, kind ``unhealthy`` (strong): the output repeats instruction-like text
    planted in the evidence (``echo.repeated``). The reliability layer regenerates the step once,
    then degrades it: such an output never ships as ``ok``."""

    name = "planted-instruction-echo"
    kind = "unhealthy"
    layer = "model_output"
    assumes = frozenset({"model_generated", "evidence_available"})

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        planted = planted_in(_data(ctx).get(EVIDENCE_KEY))
        if not planted:
            return []
        why = "the output repeats instruction-like text planted in a retrieved chunk"
        return [_repeat_signal(self.name, self.kind, "planted-instruction-repeated", r, why)
                for r in repeated(text, planted)[:MAX_SIGNALS]]


class PlantedVerdictDetector:
    """Layer ``verifier_output``, kind ``broken`` (strong): a verifier that repeats, in its own voice
    (outside code, ``>`` quotations and double quotes), an imperative planted in the evidence and
    does not fail the subject has followed the evidence instead of grading against it. Its verdict
    is BROKEN (recorded, never PASS). A bare verdict line is not enough: the contract's own line
    looks the same."""

    name = "planted-instruction-verdict"
    kind = "broken"
    layer = "verifier_output"
    assumes = frozenset({"model_generated", "evidence_available"})

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        planted = [p for p in planted_in(_data(ctx).get(EVIDENCE_KEY)) if p.family in IMPERATIVE]
        if not planted or _FAIL.search(text):
            return []
        mine = own_text(text, double_quotes=True)
        why = "the verifier repeats, in its own voice, an instruction planted in the evidence"
        return [_repeat_signal(self.name, self.kind, "verifier-obeys-planted-instruction", r, why)
                for r in repeated(mine, planted, families=IMPERATIVE, obedience=False)[:MAX_SIGNALS]]
