"""Claim-level grounding scores: how well each claim of an output rests on the evidence.

For every claim (a sentence that asserts something, see ``text.split_claims``):

- ``lexical`` — the share of the claim's content words found in the evidence (stem-aware);
- ``missing_words`` — those content words the evidence lacks, counted: unsupported material
  grows with what a hallucination adds, which a share dilutes in a long claim;
- ``semantic`` — the best MiniLM cosine between the claim and an evidence unit: a sentence, two
  adjacent sentences, or a part of a sentence (one to three of its clauses, ``clause_units``: a
  claim that restates one part of a long sentence is compared with that part). Only the
  ``candidates`` sentence units and the ``clause_candidates`` clause units sharing the most
  content words with the claim are encoded, so a 100-sentence page costs a few encodes. A claim
  found word for word in the evidence (a span such as "New York Cotton Exchange") has similarity 1.0;
- ``specifics`` — every number, date, name and quotation of the claim, looked up in the
  evidence (``specifics.check_specifics``);
- ``order`` — the share of the claim's consecutive content-word pairs that some evidence sentence
  has in that order, at most ``ORDER_WINDOW`` content words apart; ``copy_reorder`` is ``1 - order``
  for a claim whose every content word the evidence has (else 0): a copy of a knowledge sentence
  that swaps who or what it is about keeps the words but not their order;
- ``focus`` — the share of the claim's content words in its best single evidence unit (reported
  for the refit's candidate terms, not weighted).

They combine in a logistic model (``model``: the fitted constants and how they were fitted)::

    claim logit = intercept + lexical * w_lexical + semantic * w_semantic
                  + w_missing * min(missing specifics, max_missing)
                  + w_missing_word * min(missing words, max_missing_words)
                  + w_answer_lexical * answer lexical + w_copy_reorder * copy_reorder

and a claim's score is ``sigmoid(logit)``, an estimate of P(supported). The answer's score is
the weakest claim's, lowered by ``w_personal`` (in logit) when a sentence of the answer talks
about the speaker or the listener (``text.speaks_of_persons``; a sentence the evidence holds
word for word is exempt): chit-chat and opinion make no claim the evidence can support.

A claim with a specific the evidence lacks is unsupported whatever its score: an invented
figure, date, name or quotation is named and fails the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ora_core.api import lazy_compile

from . import model
from .evidence import EvidenceItem
from .specifics import EvidenceIndex, SpecificCheck, check_specifics
from .text import content_stems, content_words, speaks_of_persons, split_sentences


class Embedder(Protocol):
    def encode(self, texts: Sequence[str]) -> Any: ...


class ScoringWeights(BaseModel):
    """How the features combine: the logistic model of ``model`` (fitted constants by default)."""

    model_config = ConfigDict(extra="forbid")

    intercept: float = model.INTERCEPT
    lexical: float = model.LEXICAL
    semantic: float = model.SEMANTIC
    missing_specific: float = model.MISSING_SPECIFIC
    max_missing: int = Field(default=model.MAX_MISSING, ge=0)
    missing_word: float = model.MISSING_WORD
    max_missing_words: int = Field(default=model.MAX_MISSING_WORDS, ge=0)
    personal: float = model.PERSONAL
    answer_lexical: float = model.ANSWER_LEXICAL
    copy_reorder: float = model.COPY_REORDER
    candidates: int = Field(default=model.CANDIDATES, ge=1)
    clause_candidates: int = Field(default=model.CLAUSE_CANDIDATES, ge=0)
    unit_chars: int = Field(default=600, ge=50)


class ClaimScore(BaseModel):
    """One claim, its features, its score, and the evidence unit that supports it best."""

    model_config = ConfigDict(extra="forbid")

    claim: str
    score: float
    logit: float
    lexical: float
    semantic: float
    verbatim: bool = False
    best_evidence: str = ""
    best_source: str = ""
    specifics: list[SpecificCheck] = []
    missing_specifics: list[str] = []
    missing_words: list[str] = []
    #: the share of the claim's content words found in its best single evidence unit (a sentence or two)
    focus: float = 1.0
    #: the share of the claim's consecutive content-word pairs some evidence sentence has in that order, close
    order: float = 1.0
    #: ``1 - order`` when every content word of the claim is in the evidence, else 0 (the model's term)
    copy_reorder: float = 0.0
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


#: Where a sentence divides into clauses: commas, semicolons, colons, brackets, a spaced dash.
_CLAUSE_BREAK = lazy_compile(r"\s*(?:[,;:()\[\]]|\s[–—-]\s)\s*")
#: Clauses joined into one unit at most, and the fewest words a clause unit has.
CLAUSE_SPAN = 3
CLAUSE_MIN_WORDS = 3


def clause_units(items: Sequence[EvidenceItem], max_chars: int = 600) -> list[EvidenceUnit]:
    """Parts of the evidence sentences: one to ``CLAUSE_SPAN`` consecutive clauses of a sentence
    (never the whole sentence, which ``evidence_units`` has), of ``CLAUSE_MIN_WORDS`` words or more.
    A claim often restates one part of a long sentence ("he was born in 1935" of "Presley (January
    8, 1935 – August 16, 1977) was an American singer"): compared with the whole sentence, the
    rest of it lowers the similarity of a claim that part supports."""
    units: list[EvidenceUnit] = []
    seen: set[str] = set()
    for item in items:
        source = item.source or item.id
        for sentence in split_sentences(item.text) or [item.text.strip()]:
            parts = [part for part in _CLAUSE_BREAK.split(sentence[:max_chars]) if part.strip()]
            for i in range(len(parts)):
                for j in range(i + 1, min(len(parts), i + CLAUSE_SPAN) + 1):
                    if j - i == len(parts):
                        continue
                    text = " ".join(parts[i:j]).strip()
                    if text in seen or len(text.split()) < CLAUSE_MIN_WORDS:
                        continue
                    seen.add(text)
                    units.append(EvidenceUnit(text=text, source=source, stems=frozenset(content_stems(text))))
    return units


#: Two content words of an evidence sentence count as an ordered pair when at most this many apart.
ORDER_WINDOW = 4


def ordered_pairs(items: Sequence[EvidenceItem], window: int = ORDER_WINDOW) -> frozenset[tuple[str, str]]:
    """Every (earlier, later) pair of content stems of one evidence sentence at most ``window``
    content words apart: what "in that order, close together" means for ``order_support``."""
    pairs: set[tuple[str, str]] = set()
    for item in items:
        for sentence in split_sentences(item.text) or [item.text]:
            stems = content_stems(sentence)
            for i, a in enumerate(stems):
                for b in stems[i + 1:i + 1 + window]:
                    pairs.add((a, b))
    return frozenset(pairs)


def order_support(claim_stems: Sequence[str], pairs: frozenset[tuple[str, str]]) -> float:
    """The share of the claim's consecutive content-word pairs that some evidence sentence has in
    the same order, close together (1.0 when the claim has fewer than two content words): a claim
    that copies an evidence sentence but swaps who did what to whom keeps its words, not their order."""
    steps = list(zip(claim_stems, claim_stems[1:], strict=False))
    if not steps:
        return 1.0
    return sum(step in pairs for step in steps) / len(steps)


def focus_support(claim_stems: set[str], units: Sequence[EvidenceUnit]) -> float:
    """The share of the claim's content stems found in its best single evidence unit (a sentence,
    or two adjacent ones): words gathered from all over the evidence support less than one passage."""
    if not claim_stems:
        return 1.0
    return max((len(claim_stems & u.stems) for u in units), default=0) / len(claim_stems)


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


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def copy_reorder(lexical: float, order: float) -> float:
    """The copy-reorder term: ``1 - order`` for a claim whose every content word the evidence has
    (``lexical`` 1.0), else 0: a claim that copies an evidence sentence's words and changes who or
    what they are about keeps its words but not their order."""
    return 1.0 - order if lexical >= 1.0 else 0.0


def claim_logit(lexical: float, semantic: float, missing: int, missing_words: int, weights: ScoringWeights,
                answer_lexical: float = 1.0, reorder: float = 0.0) -> float:
    """A claim's logit (``model``'s formula); ``answer_lexical`` is the whole answer's share of
    content words the evidence has, the same for every claim of the answer; ``reorder`` is the
    claim's ``copy_reorder`` term."""
    return (weights.intercept + weights.lexical * lexical + weights.semantic * semantic
            + weights.missing_specific * min(missing, weights.max_missing)
            + weights.missing_word * min(missing_words, weights.max_missing_words)
            + weights.answer_lexical * answer_lexical + weights.copy_reorder * reorder)


def score_claims(claims: Sequence[str], items: Sequence[EvidenceItem], embedder: Embedder,
                 weights: ScoringWeights | None = None, *, threshold: float = 0.5,
                 index: EvidenceIndex | None = None, from_question: bool = False,
                 denied: bool = False, answer_lexical: float = 1.0) -> list[ClaimScore]:
    """Score each claim against the evidence items (non-empty: the caller handles no evidence).

    ``from_question``: the claims are the proposition of the question a bare "Yes."/"No."
    answers. Its wording is the asker's (often one question joining what two evidence sentences
    say), no paraphrase of an evidence sentence, so its similarity counts as at least its
    lexical share: its subject matter is what must be grounded; its words the evidence lacks are
    not counted as ``missing_words`` (the answer adds none of its own).
    ``denied``: the answer denies that proposition (a bare "No."): a specific of it that the
    evidence lacks may be the very reason for the denial, so it is reported in ``specifics``
    but neither counted nor failing.
    ``answer_lexical``: the share of the whole answer's content words the evidence has (one value
    for every claim of the answer; 1.0, the default, when the claims are all there is)."""
    weights = weights or ScoringWeights()
    index = index or EvidenceIndex.build(item.text for item in items)
    units = evidence_units(items, weights.unit_chars)
    clauses = clause_units(items, weights.unit_chars) if weights.clause_candidates else []
    everything = [*units, *clauses]
    pairs = ordered_pairs(items)
    picks = []
    for claim in claims:
        stems = set(content_stems(claim))
        picks.append([*_candidates(stems, units, weights.candidates),
                      *(len(units) + i for i in _candidates(stems, clauses, weights.clause_candidates))])
    wanted = sorted({i for p in picks for i in p})
    position = {u: n for n, u in enumerate(wanted)}
    claim_vectors = embedder.encode(list(claims))
    unit_vectors = embedder.encode([everything[i].text for i in wanted])
    scores: list[ClaimScore] = []
    for c, claim in enumerate(claims):
        best_i, best = -1, 0.0
        for i in picks[c]:
            sim = float(claim_vectors[c] @ unit_vectors[position[i]])
            if best_i < 0 or sim > best:
                best_i, best = i, sim
        verbatim = index.has_phrase(claim)
        if verbatim:  # the claim quotes the evidence word for word: a span of it
            best = 1.0
        said = content_words(claim)
        absent = [w for w in said if not index.has_word(w)]
        lexical = (len(said) - len(absent)) / len(said) if said else 1.0  # lexical_support's share
        if from_question:
            best = max(best, lexical)
        checks = check_specifics(claim, index)
        missing = [] if denied else [m for check in checks if not check.supported
                                     for m in (check.missing or [check.text])]
        # the question's proposition is worded by the asker: its share and similarity say how much of
        # its subject matter the evidence holds, and a bare yes/no adds no word of its own to count
        missing_words = [] if from_question else absent
        claim_stems = content_stems(claim)
        focus = focus_support(set(claim_stems), units)
        order = order_support(claim_stems, pairs)
        reorder = copy_reorder(lexical, order)
        logit = claim_logit(lexical, best, len(missing), len(missing_words), weights, answer_lexical, reorder)
        score = round(sigmoid(logit), 4)
        scores.append(ClaimScore(
            claim=claim, score=score, logit=round(logit, 4), lexical=round(lexical, 4), semantic=round(best, 4),
            verbatim=verbatim, best_evidence=everything[best_i].text[:300] if best_i >= 0 else "",
            best_source=everything[best_i].source if best_i >= 0 else "",
            specifics=checks, missing_specifics=missing, missing_words=missing_words,
            focus=round(focus, 4), order=round(order, 4), copy_reorder=round(reorder, 4),
            supported=score >= threshold and not missing,
        ))
    return scores


def personal_sentences(sentences: Sequence[str], index: EvidenceIndex) -> list[str]:
    """The sentences that talk about the speaker or the listener, except those the evidence
    holds word for word (a title such as "I Will Always Love You" quoted from it)."""
    return [s for s in sentences if speaks_of_persons(s) and not index.has_phrase(s)]


def output_score(scores: Sequence[ClaimScore], weights: ScoringWeights | None = None, *,
                 personal: bool = False) -> float:
    """The answer's score: the weakest claim's, lowered (in logit) by ``weights.personal`` when
    the answer talks about the speaker or the listener; 0.0 when there is no claim."""
    if not scores:
        return 0.0
    weights = weights or ScoringWeights()
    logit = min(s.logit for s in scores) + (weights.personal if personal else 0.0)
    return round(sigmoid(logit), 4)
