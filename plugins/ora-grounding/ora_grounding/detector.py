"""The ``unsupported-specifics`` detector: numbers, dates, names and quotations the evidence lacks.

Layer ``model_output``, assumes ``evidence_available``: the reliability layer puts the step's
evidence package in ``ctx.data["evidence"]`` before it runs the detectors. Plain Python (no
model): the specifics checks of the grounding verifier, alone.

Signals:
- ``unsupported-specifics`` (kind ``unsupported_specifics``, strong): at least one specific of a
  claim is absent from the evidence; ``data`` has ``evidence_checked``, ``missing`` (the
  specifics: the whole spans of ``lexical.missing_specifics`` first — "14 March", "$4.7", "83%" —
  then what the claim-level checks found) and ``claims`` (claim, kind, text). The engine counts
  it towards the confident and cap-forced confabulator patterns of the Supplemental RAG
  protocol. Specifics the user's own prompt states (raw or as Phase A cleaned it) count as
  supported. An empty package is checked like any other: every specific is then unsupported. Chunks of the streams the
  verifier sets aside (``conversation`` memory by default) are not evidence here either.
  Evaluator and verifier outputs (``ctx.data["material"].purpose``) quote what they judge and are
  not checked; headings are structure, never claims.
- ``specifics-unchecked`` (kind ``specifics``, weak, no evidence flag): the text states
  specifics but no evidence package was at hand (Gear 1's direct answer has none), so they were
  not checked. Recorded, never counted as confabulation.
"""

from __future__ import annotations

from typing import Any

from ora_core.api import Signal

from .evidence import normalise_package
from .lexical import missing_specifics
from .specifics import EvidenceIndex, SpecificCheck, check_specifics
from .subject import checkable_text
from .text import split_claims

EVIDENCE_KEY = "evidence"
#: Steps whose output quotes what it judges (an evaluator the analysis it attacks, a verifier what it
#: grades): their specifics are the subject's, not claims of their own (``StepMaterial.purpose``).
QUOTING_PURPOSES = frozenset({"evaluator", "verifier"})
MAX_REPORTED = 20


class UnsupportedSpecificsDetector:
    name = "unsupported-specifics"
    kind = "unsupported_specifics"
    layer = "model_output"
    assumes = ("evidence_available",)

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        data = getattr(ctx, "data", None)
        material = data.get("material") if isinstance(data, dict) else None
        if material is not None and getattr(material, "purpose", "") in QUOTING_PURPOSES:
            return []
        has_package = isinstance(data, dict) and EVIDENCE_KEY in data
        checkable = checkable_text(text).text  # the answer without protocol lines (CONFIDENCE: 0.90 ...)
        claims = split_claims(checkable)
        if not has_package:
            found = [(c, s) for c in claims for s in check_specifics(c, EvidenceIndex())]
            if not found:
                return []
            return [Signal(detector=self.name, kind="specifics", name="specifics-unchecked", strength="weak",
                           matched=found[0][1].text[:200],
                           data={"reason": f"no evidence package in ctx.data[{EVIDENCE_KEY!r}]",
                                 "specifics": [s.text for _, s in found][:MAX_REPORTED]})]
        from .verifier import excluded  # conversation memory is earlier model output, not evidence

        skip = excluded(ctx)
        items = [item for item in normalise_package(data[EVIDENCE_KEY]) if item.stream not in skip]
        # What the user wrote is no confabulation either: a figure from the prompt (raw, or as
        # Phase A cleaned it) may be repeated without evidence.
        user = [t for t in (getattr(ctx, "prompt", ""), getattr(data[EVIDENCE_KEY], "prompt", ""))
                if isinstance(t, str) and t]
        sources = [*(item.text for item in items), *user]
        index = EvidenceIndex.build(sources)
        unsupported: list[tuple[str, SpecificCheck]] = [
            (claim, check) for claim in claims for check in check_specifics(claim, index) if not check.supported
        ]
        spans = missing_specifics(checkable, "\n".join(sources))
        if not unsupported and not spans:
            return []
        found = [m for _, check in unsupported for m in (check.missing or [check.text])]
        missing = list(dict.fromkeys([*spans, *found]))
        first_text = unsupported[0][1].text if unsupported else spans[0]
        start = text.find(first_text)
        return [Signal(
            detector=self.name, kind=self.kind, name="unsupported-specifics", strength="strong",
            matched=first_text[:200], start=start if start >= 0 else None,
            end=start + len(first_text) if start >= 0 else None,
            data={"evidence_checked": True, "evidence_items": len(items), "missing": missing[:MAX_REPORTED],
                  "claims": [{"claim": claim[:300], "kind": check.kind, "text": check.text}
                             for claim, check in unsupported[:MAX_REPORTED]]},
        )]
