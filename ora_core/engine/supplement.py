"""The Supplemental RAG protocol (seed 000 §5.2-5.3): an authorised path other than confabulation.

Every analyst, evaluator, reviser, consolidator and model-verifier call carries
``protocol_text()`` in its system prompt. When the model's *own* output holds a
``## SUPPLEMENTAL RAG REQUEST`` block (gap, query terms, why), the query runs through the
same retriever registry as context assembly (``ora_core.engine.context``), a
``## SUPPLEMENTAL RAG RESULT`` block is appended to the package, and the whole package is
re-submitted as a fresh stateless call. At most ``pipeline.max_supplements`` per step; after
that the model is told to write ``## COVERAGE GAP`` instead. One ``supplement`` trace event per
request (the trace sink writes ``supplemental-rag.jsonl``): step, gap, query, result length,
and whether the re-submission resolved the gap.

A request block is read only from the model's own text: blocks inside fenced code, ``>``
quotations or a data fence (``<data ID>`` ... ``</data ID>``: a retrieved chunk the model copied
with its fence), and blocks whose gap and query were already in the package the model was sent
(a retrieved chunk, a supplement result or an analysed text quoting a request), word for word or
nearly (``copied_request``: most of their words come from a request block of the package), are
not requests. Supplement results are retrieved chunks like any other: each goes through the
``context_package`` detectors (``ora_core.engine.context.screen_chunks``; an instruction-like one
is named ``<step>-supplement-instruction-in-chunk`` and marked) and is rendered in its data fence.

``assess_compliance`` names the per-step non-compliance patterns of §5.3 (the confident
confabulator, the cap-forced confabulator, and unneeded requests); ``assess_turn`` names the
turn-level one (the always-requester), from what ``note_step`` recorded of every step that
carried the protocol. "Specific claims the package did not supply" are the signals of the
evidence-checking ``model_output`` detectors (kinds ``UNSUPPORTED_SPECIFICS_KINDS``; ora-grounding's
``unsupported-specifics`` checks years, dates, percentages, figures, names and quotations against
the evidence and the user's own prompt). With no such detector installed the confabulator
patterns cannot be seen, and ``ora plugins list`` shows that none is.
"""

from __future__ import annotations

import asyncio
import functools
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ora_core.engine import profiles
from ora_core.engine.profiles import ProfileName
from ora_core.kernel.models import Chunk, Retrieval, RetrievalFilters, Signal
from ora_core.kernel.stash import StashKey
from ora_core.kernel.trace import TurnContext

if TYPE_CHECKING:
    from ora_core.engine.runtime import Runtime

REQUEST_HEADING = "## SUPPLEMENTAL RAG REQUEST"
RESULT_HEADING = "## SUPPLEMENTAL RAG RESULT"
COVERAGE_GAP_HEADING = "## COVERAGE GAP"

#: Signal kinds that say "this output states a specific the evidence does not hold".
UNSUPPORTED_SPECIFICS_KINDS = frozenset({"unsupported_specifics", "specifics", "confabulation"})
#: Only signals that were checked against the evidence count (a clock check is not).
EVIDENCE_FLAG_KEYS = ("evidence_checked", "unsupported", "missing")


@functools.cache
def protocol_text(cap: int, profile: ProfileName = "full") -> str:
    """The protocol instructions every protocol step carries, in ``profile``'s wording
    (``ora_core.engine.profiles.PROTOCOL``: both wordings carry the same rules and the request
    block the parser reads). Cached: the wordings are frozen module constants, so the text
    depends on ``cap`` and ``profile`` only (it was rebuilt on every model call)."""
    return profiles.PROTOCOL.text(profile, cap=cap, request=REQUEST_HEADING, result=RESULT_HEADING,
                                  gap=COVERAGE_GAP_HEADING)


@functools.cache
def coverage_gap_text(cap: int, profile: ProfileName = "full") -> str:
    """The instruction added once the step's cap is used up, in ``profile``'s wording (cached, as
    ``protocol_text``)."""
    return profiles.CAP_REACHED.text(profile, cap=cap, gap=COVERAGE_GAP_HEADING)


class SupplementRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gap: str
    query: str
    why: str = ""
    block: str  # the request block as the model wrote it
    malformed: list[str] = Field(default_factory=list)


class SupplementRecord(BaseModel):
    """One request, what it fetched, and whether the re-submission resolved the gap."""

    model_config = ConfigDict(extra="forbid")

    step: str
    n: int
    gap: str
    query: str
    why: str = ""
    streams: list[str] = Field(default_factory=list)
    chunks: int = 0
    result_chars: int = 0
    failed_streams: list[str] = Field(default_factory=list)
    package_had_terms: bool = False  # every query term was already in the package it was sent
    resolved: bool | None = None  # None until the re-submitted call has answered
    resolution: str = ""
    #: What the request fetched, verbatim: each chunk's id, stream, text and provenance (as the
    #: model was shown it, inside the RESULT block of the re-submitted package).
    fetched: list[dict[str, Any]] = Field(default_factory=list)


_FENCE = re.compile(r"^\s*(```|~~~)")
_DATA_OPEN = re.compile(r"^\s*<data\s+\w+>", re.IGNORECASE)
_DATA_CLOSE = re.compile(r"^\s*</data\s+\w+>", re.IGNORECASE)
_REQUEST_ANYWHERE = re.compile(r"SUPPLEMENTAL\W+RAG\W+REQUEST", re.IGNORECASE)
_INLINE_FIELD = re.compile(r"\b(?P<key>gap|query terms|query|search terms|terms|why(?: it matters)?)[\s*_]*[:：]\s*"
                           r"(?P<value>.*?)(?=\b(?:gap|query terms|query|search terms|why(?: it matters)?)[\s*_]*[:：]"
                           r"|\n\s*\n|\n\s{0,3}#|$)", re.IGNORECASE | re.DOTALL)
#: A request is a copy when at least this share of its gap's and its query's words come from one
#: request block of the package it was sent.
COPIED_SHARE = 0.8
_ANY_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
_REQUEST = re.compile(r"^\s{0,3}(?:#{1,6}\s*|\*\*\s*)SUPPLEMENTAL RAG REQUEST\b", re.IGNORECASE)
_GAP_BLOCK = re.compile(r"^\s{0,3}(?:#{1,6}\s*|\*\*\s*)COVERAGE GAP\b", re.IGNORECASE | re.MULTILINE)
_FIELD = re.compile(r"^[\s>*_-]*(?P<key>gap|query terms|query|terms|search terms|why(?: it matters)?)"
                    r"[\s*_]*[:：]\s*(?P<value>.*)$", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"the", "a", "an", "of", "and", "or", "to", "in", "on", "for", "with", "by", "is", "are",
                   "was", "were", "be", "what", "who", "which", "how", "why", "that", "this", "it", "its",
                   "as", "at", "from", "about"})


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def own_lines(text: str) -> list[str | None]:
    """``text``'s lines, with fenced, data-fenced and ``>``-quoted lines replaced by None."""
    out: list[str | None] = []
    fence: str | None = None
    in_data = False
    for line in text.split("\n"):
        opener = _FENCE.match(line)
        if fence is not None:
            out.append(None)
            if opener and opener.group(1) == fence:
                fence = None
            continue
        if in_data:
            out.append(None)
            in_data = not _DATA_CLOSE.match(line)
            continue
        if opener:
            fence = opener.group(1)
            out.append(None)
            continue
        if _DATA_OPEN.match(line):
            in_data = True
            out.append(None)
            continue
        out.append(None if line.lstrip().startswith(">") else line)
    return out


def _blocks(text: str) -> list[tuple[int, int, list[str]]]:
    """``(start_line, end_line, lines)`` of every request block in the own text."""
    lines = own_lines(text)
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line is not None and _REQUEST.match(line):
            j = i + 1
            while j < len(lines) and not (lines[j] is not None and _ANY_HEADING.match(lines[j] or "")):
                if lines[j] is None:
                    break
                j += 1
            found.append((i, j, [ln or "" for ln in lines[i:j]]))
            i = j
        else:
            i += 1
    return found


def parse_request(output: str, sent: str) -> tuple[SupplementRequest | None, list[str]]:
    """The first request block of the model's own output, and notes on blocks not taken."""
    notes: list[str] = []
    if output.isascii() and "supplemental rag request" not in output.lower():
        return None, notes  # no block can start here (the test ``_REQUEST`` makes, without a line scan)
    sent_norm: str | None = None  # the package's words, read only when a block is there to compare
    for _, _, lines in _blocks(output):
        fields: dict[str, str] = {}
        for line in lines[1:]:
            match = _FIELD.match(line)
            if match:
                key = match.group("key").lower()
                key = "gap" if key == "gap" else "why" if key.startswith("why") else "query"
                fields.setdefault(key, match.group("value").strip().strip("*_`\"'"))
        gap, query = fields.get("gap", ""), fields.get("query", "")
        block = "\n".join(lines).strip()
        if not gap and not query:
            notes.append(f"request block without gap or query terms ignored: {block[:120]!r}")
            continue
        if sent_norm is None:
            sent_norm = _norm(sent)
        echoed = [v for v in (gap, query) if v and _norm(v) and _norm(v) in sent_norm]
        if len(echoed) == len([v for v in (gap, query) if v]):
            notes.append(f"request block copied from the package it was sent ignored: {block[:120]!r}")
            continue
        if copied_request(gap, query, sent):
            notes.append(f"request block nearly copied from a request block of the package it was sent "
                         f"ignored: {block[:120]!r}")
            continue
        malformed = [name for name, value in (("gap", gap), ("query terms", query)) if not value]
        return SupplementRequest(gap=gap or query, query=query or gap, why=fields.get("why", ""),
                                 block=block, malformed=malformed), notes
    return None, notes


def _content(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def planted_requests(sent: str) -> list[set[str]]:
    """The words of each request block anywhere in ``sent`` (at a line start or not, fenced or
    not: a chunk's block, flattened by its retriever, is still a block the model could copy)."""
    blocks = []
    for match in _REQUEST_ANYWHERE.finditer(sent):
        tail = sent[match.end():match.end() + 600]
        fields = [m.group("value") for m in _INLINE_FIELD.finditer(tail)]
        words = _content(" ".join(fields))
        if words:
            blocks.append(words)
    return blocks


def copied_request(gap: str, query: str, sent: str) -> bool:
    """Whether most of the request's gap and query words come from one request block of ``sent``."""
    mine = [w for w in (_content(gap), _content(query)) if w]
    if not mine:
        return False
    return any(all(len(part & block) / len(part) >= COPIED_SHARE for part in mine)
               for block in planted_requests(sent))


def fetched_text(retrievals: list[Retrieval]) -> str:
    """The chunk texts this step's supplements fetched: part of what the model was sent (a request
    block inside one of them is the chunk's, never the model's)."""
    return "".join("\n" + c.text for r in retrievals for c in r.chunks)


def strip_request(output: str) -> str:
    """``output`` without its own request blocks (for a request past the cap)."""
    lines = output.split("\n")
    drop: set[int] = set()
    for start, end, _ in _blocks(output):
        drop.update(range(start, end))
    return "\n".join(line for i, line in enumerate(lines) if i not in drop).strip()


def has_coverage_gap(text: str) -> bool:
    return bool(_GAP_BLOCK.search(text)) or "COVERAGE GAP:" in text


def query_terms_in(query: str, package: str) -> bool:
    terms = [w for w in _WORD.findall(query.lower()) if w not in _STOP and len(w) > 2]
    have = set(_WORD.findall(package.lower()))
    return bool(terms) and all(t in have for t in terms)


async def fetch(runtime: Runtime, turn: TurnContext, step: str, request: SupplementRequest,
                n: int, package_text: str) -> tuple[SupplementRecord, list[Retrieval], str]:
    """Run one request through the retrievers; the record, the retrievals and the RESULT block."""
    from ora_core.engine.context import fence_id, fenced, retrieve_bounded, screen_chunks, turn_retrievers

    config = runtime.config
    record = SupplementRecord(step=step, n=n, gap=request.gap, query=request.query, why=request.why,
                              package_had_terms=query_terms_in(request.query, package_text))
    found, missing = turn_retrievers(turn, config)
    wanted = [s for s in config.pipeline.supplement_streams if s in found]
    fence = fence_id(turn)
    lines = [f"{RESULT_HEADING} (request {n} of at most {config.pipeline.max_supplements})",
             f"Gap: {request.gap}", f"Query: {request.query}"]
    if not wanted:
        why = "; ".join(f"{s}: {missing[s]}" for s in config.pipeline.supplement_streams if s in missing) \
            or f"no enabled stream among {config.pipeline.supplement_streams}"
        turn.contingency(f"{step}-supplement-no-retriever", step, f"supplement {n} could not run: {why}",
                         severity="degraded", query=request.query)
        lines.append(f"No retriever is available for this request ({why}). Nothing was fetched.")
        return record, [], "\n".join(lines)
    jobs = [retrieve_bounded(found[s], s, request.query, RetrievalFilters(),
                              config.retrieval.k, turn) for s in wanted]
    retrievals: list[Retrieval] = []
    for retrieval, failure in await asyncio.gather(*jobs):
        record.streams.append(retrieval.stream)
        if failure is not None:
            record.failed_streams.append(retrieval.stream)
            turn.emit("rag_failure", step=step, supplement=n, **failure.model_dump(mode="json"))
            turn.contingency(f"{step}-supplement-rag-failure", step,
                             f"{failure.retriever}: {failure.error_class}: {failure.message}",
                             severity="degraded", stream=retrieval.stream, query=request.query)
            lines.append(f"[{retrieval.stream}] retrieval FAILED ({failure.error_class}): nothing could "
                         "be fetched; treat the gap as open.")
            continue
        retrieval.chunks = screen_chunks(turn, [_tag(c) for c in retrieval.chunks], step=step,
                                         contingency=f"{step}-supplement-instruction-in-chunk",
                                         stream=retrieval.stream)
        retrievals.append(retrieval)
        lines += [fenced(chunk, retrieval.stream, fence) for chunk in retrieval.chunks]
        if not retrieval.chunks:
            reason = retrieval.empty_diagnosis.empty_reason.value if retrieval.empty_diagnosis else "undiagnosed"
            lines.append(f"[{retrieval.stream}] nothing found ({reason}).")
    record.chunks = sum(len(r.chunks) for r in retrievals)
    record.result_chars = sum(len(c.text) for r in retrievals for c in r.chunks)
    record.fetched = [{"id": c.id, "stream": r.stream, "text": c.text,
                       "provenance": c.provenance.model_dump(mode="json")} for r in retrievals for c in r.chunks]
    return record, retrievals, "\n".join(lines)


def _tag(chunk: Chunk) -> Chunk:
    if chunk.provenance.stream == "supplement":
        return chunk
    provenance = chunk.provenance.model_copy(update={"extra": {**chunk.provenance.extra,
                                                               "retrieved_by": "supplement"}})
    return chunk.model_copy(update={"provenance": provenance})


def finish(turn: TurnContext, record: SupplementRecord, next_output: str | None, next_request: bool) -> None:
    """Decide whether the re-submission resolved the gap, and emit the ``supplement`` event."""
    if next_output is None:
        record.resolved, record.resolution = False, "no re-submitted answer (the step failed)"
    elif record.chunks == 0:
        record.resolved, record.resolution = False, "the query found nothing"
    elif next_request:
        record.resolved, record.resolution = False, "the re-submitted call asked again"
    elif has_coverage_gap(next_output):
        record.resolved, record.resolution = False, "the re-submitted call admitted a coverage gap"
    else:
        record.resolved, record.resolution = True, "the re-submitted call answered without a new request"
    turn.emit("supplement", step=record.step, **record.model_dump(mode="json", exclude={"step"}))


def unsupported_specifics(signals: list[Signal]) -> list[Signal]:
    """Signals saying the text states specifics the evidence lacks (checked against evidence)."""
    return [s for s in signals if s.kind in UNSUPPORTED_SPECIFICS_KINDS
            and (s.kind != "specifics" or any(k in s.data for k in EVIDENCE_FLAG_KEYS))]


def assess_compliance(records: list[SupplementRecord], final_text: str, signals: list[Signal],
                      cap: int) -> dict[str, int]:
    """Seed 000 §5.3's patterns for one step: counts by pattern name (absent when zero)."""
    found: dict[str, int] = {}
    specifics = bool(unsupported_specifics(signals))
    if not records and specifics:
        found["confident-confabulator"] = 1
    if records and len(records) >= cap and specifics and not has_coverage_gap(final_text):
        found["cap-forced-confabulator"] = 1
    unneeded = sum(1 for r in records if r.package_had_terms)
    if unneeded:
        found["unneeded-request"] = unneeded
    return found


# --- the turn-level pattern: the always-requester -----------------------------------------------------

#: The always-requester: at least this many protocol steps ran, and at least this share of them
#: asked for a supplement.
ALWAYS_REQUESTER_MIN_STEPS = 2
ALWAYS_REQUESTER_RATE = 0.8


class StepRequests(BaseModel):
    """What one step that carried the protocol did with it (kept on the turn for ``assess_turn``)."""

    model_config = ConfigDict(extra="forbid")

    step: str
    requests: int
    unneeded: int = 0


#: Every step of this turn that carried the protocol, with what it did (``note_step``; read by ``assess_turn``).
PROTOCOL_STEPS: StashKey[list[StepRequests]] = StashKey("supplement_steps")


def note_step(turn: TurnContext, step: str, records: list[SupplementRecord]) -> None:
    """Record that ``step`` carried the protocol, and how many requests it made."""
    turn.stash.setdefault(PROTOCOL_STEPS, []).append(StepRequests(
        step=step, requests=len(records), unneeded=sum(1 for r in records if r.package_had_terms)))


def assess_turn(turn: TurnContext) -> dict[str, Any] | None:
    """The always-requester (seed 000 §5.3): a request on (nearly) every step of the turn, the
    package adequate or not. ``None`` when the pattern is absent; else its counts."""
    steps = turn.stash.get(PROTOCOL_STEPS, [])
    if len(steps) < ALWAYS_REQUESTER_MIN_STEPS:
        return None
    asking = [s for s in steps if s.requests]
    rate = len(asking) / len(steps)
    if rate < ALWAYS_REQUESTER_RATE:
        return None
    return {"steps": len(steps), "requesting_steps": len(asking), "rate": round(rate, 3),
            "requests": sum(s.requests for s in steps), "unneeded": sum(s.unneeded for s in steps),
            "step_names": [s.step for s in asking]}
