"""The ``unsupported-specifics`` detector: numbers, dates, names and quotations the evidence lacks.

Layer ``model_output``, assumes ``evidence_available``: the reliability layer puts the step's
evidence package in ``ctx.data["evidence"]`` before it runs the detectors. Plain Python (no
model): the specifics checks of the grounding verifier, alone.

Signals:
- ``unsupported-specifics`` (kind ``unsupported_specifics``, strong): at least one specific of a
  claim is absent from the evidence; ``data`` has ``evidence_checked``, ``missing`` (the
  specifics) and ``claims`` (claim, kind, text). The kernel counts it towards the confident
  confabulator pattern (``ora_core.supplement.unsupported_specifics``). An empty package is
  checked like any other: every specific is then unsupported. Chunks of the streams the
  verifier sets aside (``conversation`` memory by default) are not evidence here either.
- ``specifics-unchecked`` (kind ``specifics``, weak, no evidence flag): the text states
  specifics but no evidence package was at hand (Gear 1's direct answer has none), so they were
  not checked. Recorded, never counted as confabulation.
"""

from __future__ import annotations

from typing import Any

from ora_core.models import Signal

from .evidence import normalise_package
from .specifics import EvidenceIndex, SpecificCheck, check_specifics
from .subject import checkable_text
from .text import split_claims

EVIDENCE_KEY = "evidence"
MAX_REPORTED = 20


class UnsupportedSpecificsDetector:
    name = "unsupported-specifics"
    kind = "unsupported_specifics"
    layer = "model_output"
    assumes = ("evidence_available",)

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        data = getattr(ctx, "data", None)
        has_package = isinstance(data, dict) and EVIDENCE_KEY in data
        claims = split_claims(checkable_text(text).text)
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
        index = EvidenceIndex.build(item.text for item in items)
        unsupported: list[tuple[str, SpecificCheck]] = [
            (claim, check) for claim in claims for check in check_specifics(claim, index) if not check.supported
        ]
        if not unsupported:
            return []
        missing = list(dict.fromkeys(m for _, check in unsupported for m in (check.missing or [check.text])))
        first = unsupported[0][1]
        start = text.find(first.text)
        return [Signal(
            detector=self.name, kind=self.kind, name="unsupported-specifics", strength="strong",
            matched=first.text[:200], start=start if start >= 0 else None,
            end=start + len(first.text) if start >= 0 else None,
            data={"evidence_checked": True, "evidence_items": len(items), "missing": missing[:MAX_REPORTED],
                  "claims": [{"claim": claim[:300], "kind": check.kind, "text": check.text}
                             for claim, check in unsupported[:MAX_REPORTED]]},
        )]
