"""Claim-level grounding scores: how well each claim of an output rests on the evidence.

For every claim (a sentence that asserts something, see ``text.split_claims``):

- ``lexical`` — the share of the claim's content words found in the evidence (stem-aware);
- ``semantic`` — the best MiniLM cosine between the claim and an evidence unit (a sentence, or
  two adjacent sentences). Long evidence is first narrowed to the ``candidates`` units sharing
  the most content words with the claim, so a 100-sentence page costs a few encodes;
- ``specifics`` — every number, date, name and quotation of the claim, looked up in the
  evidence (``specifics.check_specifics``).

    claim score = lexical
                  - specific_penalty * min(missing specifics, max_penalised_specifics)
                  - semantic_penalty * max(0, semantic_floor - semantic)   (claims of >= semantic_min_words)

clipped to [0, 1]; a claim found word for word in the evidence (a span such as "New York
Cotton Exchange") has similarity 1.0. The output's score is the weakest claim's (one unsupported claim is enough
to fail an answer). Similarity only *lowers* a score, and only for claims long enough for a
sentence embedding to mean something: a short fragment ("2005, 2007") is always dissimilar to
a whole evidence sentence, so for it the lexical and specifics checks are the test. The
constants sit on a plateau of the dev files (``benchmarks/grounding.py``), not on its peak.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from .evidence import EvidenceItem
from .specifics import EvidenceIndex, SpecificCheck, check_specifics
from .text import content_stems, content_words, split_sentences


class Embedder(Protocol):
    def encode(self, texts: Sequence[str]) -> Any: ...


class ScoringWeights(BaseModel):
    """How the features combine; defaults chosen on the dev files."""

    model_config = ConfigDict(extra="forbid")

    specific_penalty: float = 0.5
    max_penalised_specifics: int = 3
    semantic_floor: float = 0.9
    semantic_penalty: float = 0.5
    semantic_min_words: int = 4
    candidates: int = Field(default=8, ge=1)
    unit_chars: int = Field(default=600, ge=50)


class ClaimScore(BaseModel):
    """One claim, its features, its score, and the evidence unit that supports it best."""

    model_config = ConfigDict(extra="forbid")

    claim: str
    score: float
    lexical: float
    semantic: float
    best_evidence: str = ""
    best_source: str = ""
    specifics: list[SpecificCheck] = []
    missing_specifics: list[str] = []
    supported: bool = False


class EvidenceUnit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    source: str = ""
    stems: frozenset[str] = frozenset()


def evidence_units(items: Sequence[EvidenceItem], max_chars: int = 600) -> list[EvidenceUnit]:
    """Sentences of every evidence item, plus each pair of adjacent sentences of one item that
    fits in ``max_chars``; a longer sentence is cut there (MiniLM reads up to 256 word pieces)."""
    units: list[EvidenceUnit] = []
    for item in items:
        sentences = split_sentences(item.text) or [item.text.strip()]
        source = item.source or item.id
        for i, sentence in enumerate(sentences):
            text = sentence[:max_chars]
            units.append(EvidenceUnit(text=text, source=source, stems=frozenset(content_stems(text))))
            if i + 1 < len(sentences) and len(sentence) + len(sentences[i + 1]) < max_chars:
                pair = f"{sentence} {sentences[i + 1]}"
                units.append(EvidenceUnit(text=pair, source=source, stems=frozenset(content_stems(pair))))
    return units


def _candidates(claim_stems: set[str], units: Sequence[EvidenceUnit], k: int) -> list[int]:
    if len(units) <= k:
        return list(range(len(units)))
    ranked = sorted(range(len(units)), key=lambda i: (-len(claim_stems & units[i].stems), len(units[i].text)))
    return ranked[:k]


def lexical_support(claim_words: Sequence[str], index: EvidenceIndex) -> float:
    """The share of the claim's content words the evidence has (1.0 when it has none)."""
    if not claim_words:
        return 1.0
    return sum(index.has_word(w) for w in claim_words) / len(claim_words)


def score_claims(claims: Sequence[str], items: Sequence[EvidenceItem], embedder: Embedder,
                 weights: ScoringWeights | None = None, *, threshold: float = 0.5) -> list[ClaimScore]:
    """Score each claim against the evidence items (non-empty: the caller handles no evidence)."""
    weights = weights or ScoringWeights()
    index = EvidenceIndex.build(item.text for item in items)
    units = evidence_units(items, weights.unit_chars)
    picks = [_candidates(set(content_stems(c)), units, weights.candidates) for c in claims]
    wanted = sorted({i for p in picks for i in p})
    position = {u: n for n, u in enumerate(wanted)}
    claim_vectors = embedder.encode(list(claims))
    unit_vectors = embedder.encode([units[i].text for i in wanted])
    scores: list[ClaimScore] = []
    for c, claim in enumerate(claims):
        best_i, best = -1, 0.0
        for i in picks[c]:
            sim = float(claim_vectors[c] @ unit_vectors[position[i]])
            if best_i < 0 or sim > best:
                best_i, best = i, sim
        if index.has_phrase(claim):  # the claim quotes the evidence word for word: a span of it
            best = 1.0
        claim_words = content_words(claim)
        lexical = lexical_support(claim_words, index)
        checks = check_specifics(claim, index)
        missing = [m for check in checks if not check.supported for m in (check.missing or [check.text])]
        raw = lexical - weights.specific_penalty * min(len(missing), weights.max_penalised_specifics)
        if len(claim_words) >= weights.semantic_min_words:
            raw -= weights.semantic_penalty * max(0.0, weights.semantic_floor - best)
        score = round(min(1.0, max(0.0, raw)), 4)
        scores.append(ClaimScore(
            claim=claim, score=score, lexical=round(lexical, 4), semantic=round(best, 4),
            best_evidence=units[best_i].text[:300] if best_i >= 0 else "",
            best_source=units[best_i].source if best_i >= 0 else "",
            specifics=checks, missing_specifics=missing, supported=score >= threshold,
        ))
    return scores


def output_score(scores: Sequence[ClaimScore]) -> float:
    """The weakest claim's score (0.0 when there is no claim)."""
    return min((s.score for s in scores), default=0.0)
