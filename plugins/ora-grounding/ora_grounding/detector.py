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

It runs in the kernel's one analysis of each output (``detect_analysed(analysis, ctx)``, see
``ora_core.kernel.detection``): the checkable part of the text and its claims are views of that
analysis (``grounding.checkable``, ``grounding.claims``; no other detector computes these, so the
keys are this plugin's own). Called directly, ``detect(text, ctx)`` analyses the text for that one
call: the same signals either way. The evidence index (words, numbers, months of the package) is
built once per package content and kept for the next outputs (``specifics.IndexCache``: the last
``INDEX_CACHE_SIZE`` packages, keyed by their texts), as every step of a turn checks against the
same evidence.
"""

from __future__ import annotations

from typing import Any

from ora_core.api import Signal, TextAnalysis

from .evidence import normalise_package
from .lexical import missing_specifics
from .specifics import EvidenceIndex, IndexCache, SpecificCheck, check_specifics
from .subject import checkable_text
from .text import split_claims

EVIDENCE_KEY = "evidence"
#: Steps whose output quotes what it judges (an evaluator the analysis it attacks, a verifier what it
#: grades): their specifics are the subject's, not claims of their own (``StepMaterial.purpose``).
QUOTING_PURPOSES = frozenset({"evaluator", "verifier"})
MAX_REPORTED = 20
#: Evidence packages whose index is kept (a turn's steps share one; concurrent turns each have theirs).
INDEX_CACHE_SIZE = 8
CHECKABLE_VIEW = "grounding.checkable"
CLAIMS_VIEW = "grounding.claims"


def _checkable(text: str) -> str:
    return checkable_text(text).text  # the answer without protocol lines (CONFIDENCE: 0.90 ...)


class UnsupportedSpecificsDetector:
    name = "unsupported-specifics"
    kind = "unsupported_specifics"
    layer = "model_output"
    assumes = ("evidence_available",)

    def __init__(self, *, index_cache_size: int = INDEX_CACHE_SIZE) -> None:
        self.indexes = IndexCache(index_cache_size)

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        return self.detect_analysed(TextAnalysis(text), ctx)

    def detect_analysed(self, analysis: Any, ctx: Any) -> list[Signal]:
        data = getattr(ctx, "data", None)
        material = data.get("material") if isinstance(data, dict) else None
        if material is not None and getattr(material, "purpose", "") in QUOTING_PURPOSES:
            return []
        has_package = isinstance(data, dict) and EVIDENCE_KEY in data
        checkable = analysis.view(CHECKABLE_VIEW, _checkable)
        claims: list[str] = analysis.view(CLAIMS_VIEW, lambda _text: split_claims(checkable))
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
        index = self.indexes.get([*(item.text for item in items), *user])
        unsupported: list[tuple[str, SpecificCheck]] = [
            (claim, check) for claim in claims for check in check_specifics(claim, index) if not check.supported
        ]
        spans = missing_specifics(checkable, index.text)
        if not unsupported and not spans:
            return []
        found = [m for _, check in unsupported for m in (check.missing or [check.text])]
        missing = list(dict.fromkeys([*spans, *found]))
        first_text = unsupported[0][1].text if unsupported else spans[0]
        text = analysis.text
        start = text.find(first_text)
        return [Signal(
            detector=self.name, kind=self.kind, name="unsupported-specifics", strength="strong",
            matched=first_text[:200], start=start if start >= 0 else None,
            end=start + len(first_text) if start >= 0 else None,
            data={"evidence_checked": True, "evidence_items": len(items), "missing": missing[:MAX_REPORTED],
                  "claims": [{"claim": claim[:300], "kind": check.kind, "text": check.text}
                             for claim, check in unsupported[:MAX_REPORTED]]},
        )]
