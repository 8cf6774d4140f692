"""An honest answer when verification fails: what the retrieved evidence says (``on_fail = "evidence"``).

After the last corrective revision an answer that still FAILs verification is withheld, and the turn
ships instead the evidence sentences most relevant to the question, each with its source, under a
header that says the model's answer failed verification and was withheld. The withheld text stays in
the trace (the verify steps' subjects, the ``final-output`` step) and in the result
(``TurnResult.withheld_answer``, so in ``ora run --json``).

What counts as evidence is what the verifier was given (``GearContext.evidence``: the context
package's chunks and every supplement result) minus conversation memory (an earlier answer of the
same model is not evidence) and minus the sentences the engine marked instruction-like (planted text
is shown to nobody as an answer). Sentences are ranked by the configured embedder's cosine similarity
to the question; without a usable embedder by content-word overlap, named
(``answer-evidence-ranked-lexically``). A question the evidence does not touch at all gets a header
that says so and no sentence.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ora_core.engine.context import CUT_MARK
from ora_core.kernel.models import INSTRUCTION_MARK_KEY, Chunk

CONTINGENCY = "answer-withheld-evidence-shown"
LEXICAL = "answer-evidence-ranked-lexically"
MAX_SENTENCES = 4
#: A sentence shorter than this many words says too little to stand for the evidence on its own.
MIN_WORDS = 5
#: Below this cosine (or share of the question's content words) a sentence does not address the question.
MIN_SIMILARITY = 0.2
MIN_OVERLAP = 0.15
NOT_EVIDENCE_STREAMS = frozenset({"conversation"})
HEADER = ("[verification FAILED — the model's answer was withheld; what follows is what the retrieved "
          "evidence says, each sentence with its source]")
EMPTY_HEADER = ("[verification FAILED — the model's answer was withheld, and the retrieved evidence holds nothing "
                "on this question]")

#: How a sentence ends: its final punctuation, perhaps inside a closing quote or bracket.
_ENDS = re.compile(r"[.!?…][\"'”’)\]]*$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'“(\[]?[A-Z0-9À-Ý])|\n{1,}")
_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset({"a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do",
                   "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its",
                   "may", "might", "of", "on", "or", "our", "should", "so", "than", "that", "the", "their", "them",
                   "then", "there", "these", "they", "this", "those", "to", "was", "we", "were", "what", "when",
                   "where", "which", "who", "why", "will", "with", "would", "you", "your"})


class EvidenceSentence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    source: str
    heading: str = ""
    chunk_id: str = ""
    stream: str = ""
    score: float


class EvidenceAnswer(BaseModel):
    """What ships instead of a withheld answer, and how it was chosen (kept in the trace)."""

    model_config = ConfigDict(extra="forbid")

    answer: str
    sentences: list[EvidenceSentence] = Field(default_factory=list)
    ranked_by: str  # embedder <name> | lexical overlap
    candidates: int = 0
    withheld_sentences: int = 0  # instruction-like sentences kept out
    fallback_reason: str = ""


def _content(text: str) -> set[str]:
    return {w for w in (m.group(0).lower() for m in _WORDS.finditer(text)) if w not in _STOP and len(w) > 1}


def _marked(chunk: Chunk) -> list[str]:
    marks = chunk.provenance.extra.get(INSTRUCTION_MARK_KEY)
    if not isinstance(marks, list):
        return []
    return [m["matched"].strip().lower() for m in marks if isinstance(m, dict) and isinstance(m.get("matched"), str)
            and m["matched"].strip()]


def candidate_sentences(chunks: list[Chunk]) -> tuple[list[tuple[str, Chunk]], int]:
    """Each evidence chunk's sentences of at least ``MIN_WORDS`` words, without conversation memory and
    without the sentences holding an instruction-like passage; and how many of those were kept out.
    A sentence is a stretch that ends as a sentence does: a heading line ("Title — Section"), a list
    fragment or flattened code has no such end and is not one; the mark of a compact cut (``[…]``) goes."""
    found: list[tuple[str, Chunk]] = []
    seen: set[str] = set()
    withheld = 0
    for chunk in chunks:
        if chunk.provenance.stream in NOT_EVIDENCE_STREAMS:
            continue
        planted = _marked(chunk)
        for raw in _SENTENCE.split(chunk.text.replace(CUT_MARK.strip(), "")):
            sentence = " ".join(raw.split()).strip(" -*#>")
            if planted and any(p in sentence.lower() or sentence.lower() in p for p in planted):
                withheld += 1
                continue
            key = sentence.lower()
            if len(_WORDS.findall(sentence)) < MIN_WORDS or key in seen or not _ENDS.search(sentence):
                continue
            seen.add(key)
            found.append((sentence, chunk))
    return found, withheld


def _cosines(embedder: Any, question: str, texts: list[str]) -> list[float]:
    raw = embedder.embed([question, *texts])
    rows = raw.tolist() if hasattr(raw, "tolist") else [list(r) for r in raw]
    if len(rows) != len(texts) + 1:
        raise ValueError(f"embedder {getattr(embedder, 'name', '?')!r} returned {len(rows)} vectors for "
                         f"{len(texts) + 1} texts")
    units = []
    for row in rows:
        norm = math.sqrt(sum(float(x) * float(x) for x in row))
        if not norm or not math.isfinite(norm):
            raise ValueError(f"embedder {getattr(embedder, 'name', '?')!r} returned a zero or non-finite vector")
        units.append([float(x) / norm for x in row])
    q = units[0]
    return [sum(a * b for a, b in zip(q, u, strict=True)) for u in units[1:]]


def _overlaps(question: str, texts: list[str]) -> list[float]:
    wanted = _content(question)
    return [len(wanted & _content(t)) / len(wanted) if wanted else 0.0 for t in texts]


def build(question: str, chunks: list[Chunk], embedder: Any = None, embedder_error: str = "") -> EvidenceAnswer:
    """The evidence answer for ``question`` from ``chunks`` (ranked by ``embedder`` when given)."""
    candidates, withheld = candidate_sentences(chunks)
    texts = [t for t, _ in candidates]
    fallback = embedder_error
    scores: list[float] = []
    ranked_by = f"embedder {getattr(embedder, 'name', '?')}"
    if embedder is not None and texts:
        try:
            scores = _cosines(embedder, question, texts)
        except Exception as exc:  # noqa: BLE001 - the lexical ranking takes over, named by the caller
            fallback = f"the embedder failed: {type(exc).__name__}: {exc}"
    floor = MIN_SIMILARITY
    if not scores:
        ranked_by, floor = "lexical overlap", MIN_OVERLAP
        if embedder is None and not fallback:
            fallback = "no embedder"
        scores = _overlaps(question, texts)
    ranked = sorted(zip(scores, candidates, strict=True), key=lambda x: -x[0])
    chosen = [(s, c) for s, c in ranked if s >= floor][:MAX_SENTENCES]
    sentences = [EvidenceSentence(text=t, source=c.provenance.source, heading=c.provenance.heading, chunk_id=c.id,
                                  stream=c.provenance.stream, score=round(s, 4)) for s, (t, c) in chosen]
    if not sentences:
        answer = EMPTY_HEADER
    else:
        lines = [HEADER] + [f"- {s.text} (source: {s.source}" + (f" § {s.heading}" if s.heading else "") + ")"
                            for s in sentences]
        answer = "\n".join(lines)
    return EvidenceAnswer(answer=answer, sentences=sentences, ranked_by=ranked_by, candidates=len(candidates),
                          withheld_sentences=withheld, fallback_reason=fallback if ranked_by == "lexical overlap"
                          else "")
