"""Step 2, context assembly: every enabled retrieval stream, concurrently, never silently empty.

Streams (``config.retrieval.streams``): concept, conversation, relationship, web (off by
default). Each stream's retriever is ``config.retrieval.retrievers[stream]`` or the registered
retriever whose ``stream`` is that stream. Retrievers are synchronous; they run in threads,
side by side.

Seed 000 §5.1 and failure #4: a retriever that raises (``RetrievalError`` or anything else)
yields an empty context for its stream *and* a ``rag_failure`` event (stream, query, error
class and message, time) that the trace writes to ``rag-failures.jsonl``; an empty result
without an exception must carry an ``empty_diagnosis`` (``index_empty``, ``no_match``,
``filtered_out``, ``ranker_truncation``), and one that does not is itself a named contingency.

Budget signals 0-6 are computed against the context window of the backend that will read the
package (role ``direct`` for Gear 1, else ``analyst``); tokens are estimated at 4 characters
per token. Over budget, the lowest-scored chunks are dropped and named.

Retrieved text is data, never instructions (issue 13). Every chunk, here and in every
supplement result, goes through the ``context_package`` detectors (``screen_chunks``; the chunk
itself is in ``ctx.data["chunk"]`` for its provenance). A chunk with ``instruction`` signals
stays in the package (it is data, and an answer may discuss it) but is named in a contingency
with its source (``context-instruction-in-chunk``: source, collection, stream, heading, chunk id,
what matched) and marked: ``provenance.extra["instruction_like"]`` lists the signals' data, so
the ``model_output`` detectors can tell an answer that repeats planted text. In a prompt each
chunk sits inside a data fence (``fenced``): ``<data ID>[provenance]`` ... ``</data ID>``, where
ID is a random per-turn word (``fence_id``) and any ``<data``/``</data`` inside the chunk is
neutralised, so a chunk can neither close its fence nor open a fake one; the evidence block says
once, ahead of everything else of the package, that fenced text is evidence, never instructions.

A target backend on the ``compact`` prompt profile (``ora_core.engine.profiles``) gets its evidence
fitted to its budget before the budget signals are computed (``fit_evidence``): at most
``CompactFit.k_per_stream`` chunks per stream (the highest scored; the others dropped by id) and
each kept chunk cut at a sentence end to its share of ``CompactFit.evidence_tokens`` (marked
``[…]`` in the text, ``provenance.extra["fitted"]`` with the sizes). The fit, with its numbers and
the per-step ``max_tokens`` of the profile, is budget signal 4 (``hardware_constraint``) and the
step output's ``evidence_fit``: never silent. What was cut is what every later step, verifiers
included, sees: an answer is checked against the evidence its model was given.
"""

from __future__ import annotations

import asyncio
import math
import re
import secrets
import time
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ora_core.engine import faults, profiles
from ora_core.engine.profiles import ProfileName
from ora_core.engine.prompts import assumptions_block, directive, evidence_fence_note
from ora_core.kernel.components import ComponentRegistry, Retriever
from ora_core.kernel.config import OraConfig
from ora_core.kernel.ctx_data import CHUNK
from ora_core.kernel.models import (
    BUDGET_SIGNAL_NAMES,
    INSTRUCTION_MARK_KEY,
    BudgetReport,
    BudgetSignal,
    Chunk,
    ContextPackage,
    EmptyDiagnosis,
    EmptyReason,
    FaultPoint,
    RagFailure,
    Retrieval,
    RetrievalFilters,
)
from ora_core.kernel.modes import STREAMS, Mode
from ora_core.kernel.signals import SignalKind
from ora_core.kernel.stash import StashKey
from ora_core.kernel.trace import TurnContext

if TYPE_CHECKING:
    from ora_core.engine.runtime import Runtime

STEP = "context-assembly"
COMPRESSION_WARNING_AT = 0.70  # share of the input budget
CRITICAL_AT = 1.00
TRUNCATE_TO = 0.85
ANALYTICAL_MIN_WINDOW = 4096  # tokens an analytical gear needs to hold guidance + evidence + answer
PROMPT_SECTIONS = ("DEPTH ANALYSIS GUIDANCE", "BREADTH ANALYSIS GUIDANCE", "OUTPUT FORMAT GUIDANCE")
INSTRUCTION_CONTINGENCY = "context-instruction-in-chunk"
MARK_KEY = INSTRUCTION_MARK_KEY  # provenance.extra key: the instruction signals of a flagged chunk
#: This turn's fence ID (``fence_id``): one per turn, so every step renders the same evidence prefix.
FENCE: StashKey[str] = StashKey("evidence_fence")
#: The context package as Step 2 assembled it (before its assertions and any injected fault).
CONTEXT: StashKey[ContextPackage] = StashKey("context")
_SYLLABLES = tuple(c + v for c in "bdfgklmnprstvz" for v in "aeiou")  # 70: 4 of them, ~24 million IDs
_FENCE_TAG = re.compile(r"<(?=\s*/?\s*data\b)", re.IGNORECASE)
#: A sentence end (., !, ? with any closing quote or bracket) before white space, or a line end.
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s)|\n")
CUT_MARK = " […]"
#: A cut keeps at least this share of its limit (a chunk whose first sentence end comes earlier is
#: cut at a word instead of being left as its title line).
MIN_CUT_SHARE = 0.4


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def resolve_retrievers(host: ComponentRegistry | None,
                       config: OraConfig) -> tuple[dict[str, Retriever], dict[str, str]]:
    """``{stream: retriever}`` for the enabled streams, and ``{stream: why missing}``."""
    enabled = [s for s in STREAMS if getattr(config.retrieval.streams, s, False)]
    registered = host.components("retriever") if host is not None else {}
    found: dict[str, Retriever] = {}
    missing: dict[str, str] = {}
    for stream in enabled:
        wanted = config.retrieval.retrievers.get(stream)
        if wanted:
            if wanted in registered:
                found[stream] = registered[wanted]
            else:
                missing[stream] = (f"retrieval.retrievers.{stream} names {wanted!r}, which is not "
                                   f"registered (registered: {', '.join(sorted(registered)) or 'none'})")
            continue
        matching = sorted(n for n, r in registered.items() if getattr(r, "stream", None) == stream)
        if matching:
            found[stream] = registered[matching[0]]
        else:
            missing[stream] = f"no installed retriever serves the {stream!r} stream"
    return found, missing


def turn_retrievers(turn: TurnContext, config: OraConfig) -> tuple[dict[str, Retriever], dict[str, str]]:
    """``resolve_retrievers`` for one turn: the ``conversation`` stream is read from the caller's own
    messages when the turn was given them (``ora_core.engine.history``)."""
    from ora_core.engine.history import with_history

    found, missing = resolve_retrievers(turn.host, config)
    return with_history(turn, found, missing,
                        conversation_enabled=bool(getattr(config.retrieval.streams, "conversation", False)))


def retrieve_stream(retriever: Retriever, stream: str, query: str, filters: RetrievalFilters, k: int,
                    turn: TurnContext) -> tuple[Retrieval, RagFailure | None]:
    name = getattr(retriever, "name", type(retriever).__name__)
    start = time.perf_counter()
    try:
        faults.inject(turn, FaultPoint(site="retrieve", step=STEP, purpose="retrieval", stream=stream,
                                       step_kind="deterministic"))
        result = retriever.retrieve(query, filters, k, turn)
        if not isinstance(result, Retrieval):
            result = Retrieval.model_validate(result)
    except Exception as exc:  # noqa: BLE001 - named below as a rag_failure, never silent
        failure = RagFailure(stream=stream, query=query, retriever=name,
                             error_class=type(exc).__name__, message=str(exc)[:2000])
        return Retrieval(stream=stream, query=query, retriever=name,
                         latency_s=time.perf_counter() - start), failure
    if not result.retriever:
        result.retriever = name
    if not result.latency_s:
        result.latency_s = time.perf_counter() - start
    return result, None


async def retrieve_bounded(retriever: Retriever, stream: str, query: str, filters: RetrievalFilters, k: int,
                           turn: TurnContext) -> tuple[Retrieval, RagFailure | None]:
    """``retrieve_stream`` on a thread of its own, bounded by ``[retrieval] timeout_s``: a retriever
    that hangs is a named ``RetrievalTimeout`` of its stream (empty context, a rag-failures.jsonl
    line), never a hung turn; its thread is left to finish, its late result discarded."""
    from ora_core.engine.bounded import call_in_thread

    timeout_s = float(getattr(getattr(turn.config, "retrieval", None), "timeout_s", 30.0))
    name = getattr(retriever, "name", type(retriever).__name__)
    try:
        return await call_in_thread(retrieve_stream, retriever, stream, query, filters, k, turn,
                                    timeout_s=timeout_s, name=f"ora-retrieve-{stream}")
    except TimeoutError:
        failure = RagFailure(stream=stream, query=query, retriever=name, error_class="RetrievalTimeout",
                             message=f"retriever {name!r} did not return within {timeout_s:g} s "
                                     "([retrieval] timeout_s); the turn went on without it")
        return Retrieval(stream=stream, query=query, retriever=name, latency_s=timeout_s), failure


def new_fence_id() -> str:
    """A fence ID: four random syllables (``kotabefu``), cheap in tokens, unguessable by a chunk."""
    return "".join(secrets.choice(_SYLLABLES) for _ in range(4))


def fence_id(turn: TurnContext) -> str:
    """This turn's fence ID (one per turn, so every step renders the same evidence prefix)."""
    fence = turn.stash.get(FENCE)
    if not fence:
        fence = turn.stash[FENCE] = new_fence_id()
    return fence


def neutralise(text: str, fence: str) -> str:
    """``text`` unable to open or close a data fence: ``<data``/``</data`` become ``‹data``/``‹/data``,
    and the fence ID itself is blanked."""
    text = _FENCE_TAG.sub("‹", text)
    return text.replace(fence, "?" * len(fence)) if fence in text else text


def fenced(chunk: Chunk, stream: str, fence: str) -> str:
    """One chunk in its data fence, provenance on the opening line."""
    p = chunk.provenance
    where = f"{stream} | {p.collection} | {p.source}" + (f" § {p.heading}" if p.heading else "")
    where = neutralise(" ".join(where.split()), fence)
    return f"<data {fence}>[{where} | score {p.score:.2f}]\n{neutralise(chunk.text.strip(), fence)}\n</data {fence}>"


def screen_chunks(turn: TurnContext, chunks: list[Chunk], *, step: str, contingency: str = INSTRUCTION_CONTINGENCY,
                  stream: str = "") -> list[Chunk]:
    """Every ``context_package`` detector over each chunk; a chunk with ``instruction`` signals is
    named (``contingency``, with its source) and returned marked (``provenance.extra[MARK_KEY]``)."""
    if not chunks or turn.host is None:
        return chunks
    out: list[Chunk] = []
    for chunk in chunks:
        seen = chunk  # the detectors read the stream from the provenance: fill it in when the retriever did not
        if stream and not chunk.provenance.stream:
            seen = chunk.model_copy(update={"provenance": chunk.provenance.model_copy(update={"stream": stream})})
        with CHUNK.given(turn.data, seen):
            signals = turn.detect("context_package", chunk.text, step=step)
        found = [s for s in signals if s.kind == SignalKind.INSTRUCTION]
        if not found:
            out.append(chunk)
            continue
        marks = [{**s.data, "detector": s.detector, "name": s.name, "strength": s.strength, "matched": s.matched}
                 for s in found]
        p = chunk.provenance
        chunk = chunk.model_copy(update={"provenance": p.model_copy(update={"extra": {**p.extra, MARK_KEY: marks}})})
        shown = "; ".join(f"{m['name']}: {m['matched'][:80]!r}" for m in marks[:6])
        turn.contingency(contingency, step,
                         f"{p.source}: {len(marks)} instruction-like passage(s), kept as data and marked: {shown}",
                         severity="warning" if any(s.strength == "strong" for s in found) else "info",
                         source=p.source, collection=p.collection, stream=p.stream or stream, heading=p.heading,
                         chunk_id=chunk.id, matched=[m["matched"] for m in marks], rules=[m["name"] for m in marks])
        out.append(chunk)
    return out


class FittedChunk(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    stream: str
    source: str
    tokens_before: int = 0
    tokens_after: int = 0


class EvidenceFit(BaseModel):
    """What the compact prompt profile did to a turn's evidence (budget signal 4, with its numbers)."""

    model_config = ConfigDict(extra="forbid")

    profile: ProfileName
    backend: str
    model: str
    context_window: int
    prompt_tokens_per_s: float
    evidence_tokens: int  # the evidence budget: min(window share, speed x seconds)
    k_per_stream: int
    chunk_tokens: int  # the longest a kept chunk's text may be
    dropped: list[FittedChunk] = Field(default_factory=list)  # past k_per_stream, lowest scored
    cut: list[FittedChunk] = Field(default_factory=list)  # cut at a sentence end to chunk_tokens
    configured_max_tokens: int
    max_tokens: dict[str, int] = Field(default_factory=dict)  # per step kind, for steps this backend serves

    def detail(self) -> str:
        fit = profiles.COMPACT_FIT
        dropped = ", ".join(f"{c.id} ({c.stream})" for c in self.dropped) or "none"
        cut = ", ".join(f"{c.id} {c.tokens_before}->{c.tokens_after}" for c in self.cut) or "none"
        caps = ", ".join(f"{k} {v}" for k, v in self.max_tokens.items())
        return (f"prompt profile {self.profile!r} for backend {self.backend!r} ({self.model or 'model'}, "
                f"{self.context_window}-token window, ~{self.prompt_tokens_per_s:g} prompt tokens/s assumed): "
                f"evidence fitted to ~{self.evidence_tokens} tokens (min of {fit.evidence_window_share:g} x window "
                f"and {fit.evidence_seconds:g} s x speed): at most {self.k_per_stream} chunk(s) per stream "
                f"(dropped {len(self.dropped)}: {dropped}), each at most ~{self.chunk_tokens} tokens, cut at a "
                f"sentence end (cut {len(self.cut)}: {cut}); max_tokens per step kind {caps} "
                f"(configured {self.configured_max_tokens}); a verifier's findings reach a reviser each reason once, "
                "without its closing figures (the verify step keeps them)")


#: The screened chunks of each stream as retrieved, before a compact fit kept ``k_per_stream`` of
#: them (set only when a fit ran): fact-check research builds its evidence pool from them, since its
#: sufficiency gate counts items, and fits each item's length instead (``item_chars``).
UNFITTED: StashKey[dict[str, list[Chunk]]] = StashKey("context_unfitted_chunks")


def item_chars(config: OraConfig, role: str, items: int) -> int | None:
    """The most characters of each of ``items`` evidence items in a prompt to ``role``'s backend:
    None under ``full``; under ``compact`` the fit's evidence budget shared among the items (never
    below ``min_chunk_tokens``), as ``fit_evidence`` shares it among chunks."""
    backend = getattr(config.roles, role, None)
    if backend is None or profiles.profile_of(config, backend) != "compact":
        return None
    return profiles.COMPACT_FIT.chunk_tokens(config.backends[backend].context_window, items) * 4 - len(CUT_MARK)


def cut_to(text: str, limit: int) -> str:
    """``text`` (stripped) cut at a sentence end to ``limit`` characters and marked with
    ``CUT_MARK``; unchanged when it fits in ``limit`` and the mark."""
    text = text.strip()
    return text if len(text) <= limit + len(CUT_MARK) else cut_at_sentence(text, limit) + CUT_MARK


def cut_at_sentence(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` at its last sentence end (or line end) within them,
    else at its last word boundary; unchanged when it fits."""
    if len(text) <= max_chars:
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, max_chars + 1) if m.end() <= max_chars]
    ends = [e for e in ends if e >= max_chars * MIN_CUT_SHARE]
    if ends:
        return text[:ends[-1]].rstrip()
    head = text[:max_chars]
    space = head.rfind(" ")
    return (head[:space] if space > 0 else head).rstrip()


def fit_evidence(config: OraConfig, retrievals: dict[str, Retrieval], role: str) -> EvidenceFit | None:
    """Fit the retrieved chunks to a ``compact`` target backend's budget (in place); None, and
    nothing changed, under ``full``. See the module docstring."""
    backend = getattr(config.roles, role)
    if profiles.profile_of(config, backend) != "compact":
        return None
    settings = config.backends[backend]
    fit = profiles.COMPACT_FIT
    budget = fit.evidence_tokens(settings.context_window)
    dropped: list[FittedChunk] = []
    for stream, retrieval in retrievals.items():
        ranked = sorted(retrieval.chunks, key=lambda c: -(c.provenance.score * c.provenance.weight))
        keep = {c.id for c in ranked[:fit.k_per_stream]}
        dropped += [FittedChunk(id=c.id, stream=stream, source=c.provenance.source,
                                tokens_before=estimate_tokens(c.text)) for c in retrieval.chunks if c.id not in keep]
        retrieval.chunks = [c for c in retrieval.chunks if c.id in keep]
    kept = sum(len(r.chunks) for r in retrievals.values())
    chunk_tokens = fit.chunk_tokens(settings.context_window, kept)
    cut: list[FittedChunk] = []
    limit = chunk_tokens * 4 - len(CUT_MARK)
    for stream, retrieval in retrievals.items():
        chunks = []
        for chunk in retrieval.chunks:
            before = estimate_tokens(chunk.text)
            if before > chunk_tokens:
                text = cut_to(chunk.text, limit)
                record = FittedChunk(id=chunk.id, stream=stream, source=chunk.provenance.source,
                                     tokens_before=before, tokens_after=estimate_tokens(text))
                cut.append(record)
                p = chunk.provenance
                extra = {**p.extra, "fitted": {"profile": "compact", "tokens_before": before,
                                               "tokens_after": record.tokens_after}}
                chunk = chunk.model_copy(update={"text": text, "provenance": p.model_copy(update={"extra": extra})})
            chunks.append(chunk)
        retrieval.chunks = chunks
    caps = {kind: min(cap, settings.max_tokens) for kind, cap in fit.max_tokens.items()}
    return EvidenceFit(profile="compact", backend=backend, model=settings.model,
                       context_window=settings.context_window, prompt_tokens_per_s=fit.prompt_tokens_per_s,
                       evidence_tokens=budget, k_per_stream=fit.k_per_stream, chunk_tokens=chunk_tokens,
                       dropped=dropped, cut=cut, configured_max_tokens=settings.max_tokens, max_tokens=caps)


def _budget(runtime: Runtime, package_text: str, chunks: list[Chunk], requested_gear: int,
            missing: list[str], failures: list[RagFailure],
            fit: EvidenceFit | None = None) -> tuple[BudgetReport, set[str]]:
    config = runtime.config
    role = "direct" if requested_gear <= 1 else "analyst"
    backend_name = getattr(config.roles, role)
    settings = config.backends[backend_name]
    window, reserved = settings.context_window, settings.max_tokens
    available = max(window - reserved, 1)
    base = estimate_tokens(package_text)
    sizes = {c.id: estimate_tokens(c.text) + 24 for c in chunks}  # + the fence lines and provenance
    total = base + sum(sizes.values())
    signals: list[BudgetSignal] = []
    dropped: set[str] = set()
    if total / available > CRITICAL_AT:
        for chunk in sorted(chunks, key=lambda c: (c.provenance.score * c.provenance.weight, c.id)):
            if total / available <= TRUNCATE_TO:
                break
            dropped.add(chunk.id)
            total -= sizes[chunk.id]
        signals.append(BudgetSignal(code=2, name=BUDGET_SIGNAL_NAMES[2],
                                    detail=f"dropped {len(dropped)} lowest-scored chunk(s) to fit "
                                           f"{available} input tokens"))
    elif total / available > COMPRESSION_WARNING_AT:
        signals.append(BudgetSignal(code=1, name=BUDGET_SIGNAL_NAMES[1],
                                    detail=f"{total}/{available} input tokens used"))
    if total > available:
        signals.append(BudgetSignal(code=3, name=BUDGET_SIGNAL_NAMES[3],
                                    detail=f"guidance and prompt alone need ~{total} tokens; the "
                                           f"window leaves {available} for input"))
    hardware = []
    if requested_gear >= 2 and window < ANALYTICAL_MIN_WINDOW:
        hardware.append(f"backend {backend_name!r} has a {window}-token window; "
                        f"gear {requested_gear} needs {ANALYTICAL_MIN_WINDOW}")
    if fit is not None:
        hardware.append(fit.detail())
    if hardware:
        signals.append(BudgetSignal(code=4, name=BUDGET_SIGNAL_NAMES[4], detail="; ".join(hardware)))
    if missing or failures:
        lost = sorted(set(missing) | {f.stream for f in failures})
        signals.append(BudgetSignal(code=5, name=BUDGET_SIGNAL_NAMES[5],
                                    detail=f"assembled without stream(s): {', '.join(lost)}"))
    if requested_gear == 4:  # the cascade spawns cross-family analysts; gear 5 (debate) does not
        depth, breadth = config.backends[config.roles.depth], config.backends[config.roles.breadth]
        if (depth.type, depth.model) == (breadth.type, breadth.model) or (
                depth.family and depth.family == breadth.family):
            signals.append(BudgetSignal(code=6, name=BUDGET_SIGNAL_NAMES[6],
                                        detail=f"depth and breadth resolve to the same model family "
                                               f"({depth.family or depth.model}); gear 4 cannot spawn "
                                               "cross-family analysts"))
    if not signals:
        signals.append(BudgetSignal(code=0, name=BUDGET_SIGNAL_NAMES[0]))
    report = BudgetReport(target_role=role, target_backend=backend_name, context_window=window,
                          reserved_output_tokens=reserved, estimated_input_tokens=total,
                          utilization=round(total / available, 4), level=max(s.code for s in signals),
                          signals=signals, truncated_chunks=sorted(dropped))
    return report, dropped


async def assemble_context(runtime: Runtime, turn: TurnContext, mode: Mode | None, cleaned_prompt: str,
                           inferred_items: list[str], requested_gear: int) -> ContextPackage:
    config = runtime.config
    query = cleaned_prompt  # Phase A's assumptions stay out of the query (seed 000, #10)
    mode_name = mode.name if mode is not None else "(none)"
    with turn.step(STEP, query=query, mode=mode_name, requested_gear=requested_gear) as step:
        retrievers, missing = turn_retrievers(turn, config)
        for stream, why in missing.items():
            step.contingency(f"context-{stream}-no-retriever", why, severity="warning", stream=stream)
        filters = {s: (mode.retrieval.filters_for(s) if mode is not None else None) for s in retrievers}
        jobs = [retrieve_bounded(r, s, query, filters[s] or RetrievalFilters(),
                                  config.retrieval.k, turn)
                for s, r in retrievers.items()]
        outcomes = await asyncio.gather(*jobs)
        retrievals: dict[str, Retrieval] = {}
        failures: list[RagFailure] = []
        for retrieval, failure in outcomes:
            stream = retrieval.stream
            retrievals[stream] = retrieval
            if failure is not None:
                failures.append(failure)
                turn.emit("rag_failure", step=STEP, **failure.model_dump(mode="json"))
                step.contingency(f"context-{stream}-rag-failure-empty-context",
                                 f"{failure.retriever}: {failure.error_class}: {failure.message}",
                                 severity="degraded", stream=stream)
                continue
            retrieval.chunks = screen_chunks(turn, retrieval.chunks, step=STEP, stream=stream)
            if not retrieval.chunks and retrieval.empty_diagnosis is None:
                step.contingency(f"context-{stream}-empty-undiagnosed",
                                 f"retriever {retrieval.retriever!r} returned nothing and no "
                                 "empty_diagnosis", severity="warning", stream=stream)
            turn.emit("retrieval", step=STEP, stream=stream, retriever=retrieval.retriever,
                      query=query, chunks=len(retrieval.chunks), latency_s=retrieval.latency_s,
                      empty_diagnosis=(retrieval.empty_diagnosis.model_dump(mode="json")
                                       if retrieval.empty_diagnosis else None))
        sections = {s: mode.section(s) for s in PROMPT_SECTIONS} if mode is not None else {}
        role = "direct" if requested_gear <= 1 else "analyst"
        unfitted = {stream: list(r.chunks) for stream, r in retrievals.items()}
        fit = fit_evidence(config, retrievals, role)
        if fit is not None:  # what was retrieved before the fit: fact-check research counts it
            turn.stash[UNFITTED] = unfitted
        profile = profiles.profile_of(config, getattr(config.roles, role))
        package_text = "\n".join([directive(profile), assumptions_block(inferred_items, profile),
                                  evidence_fence_note(fence_id(turn)), cleaned_prompt, *sections.values()])
        chunks = [c for r in retrievals.values() for c in r.chunks]
        budget, dropped = _budget(runtime, package_text, chunks, requested_gear,
                                  sorted(missing), failures, fit)
        if dropped:
            for retrieval in retrievals.values():
                before = len(retrieval.chunks)
                retrieval.chunks = [c for c in retrieval.chunks if c.id not in dropped]
                if before and not retrieval.chunks:  # emptied here: say so, never a bare empty stream
                    retrieval.empty_diagnosis = EmptyDiagnosis(
                        empty_reason=EmptyReason.ranker_truncation, raw_chunks_returned=before,
                        filtered_chunks_returned=before,
                        filters_applied={"context_budget_tokens": budget.context_window
                                         - budget.reserved_output_tokens},
                        detail=f"the context budget (signal 2, critical truncation) dropped all {before} "
                               f"chunk(s) of this stream: they scored lowest")
        for signal in budget.signals:
            if signal.code >= 1:
                step.contingency(f"context-budget-signal-{signal.code}-{signal.name}", signal.detail,
                                 severity="degraded" if signal.code in (2, 3) else "info")
        package = ContextPackage(mode=mode_name, requested_gear=requested_gear,
                                 mode_sections=sections, cleaned_prompt=cleaned_prompt,
                                 inferred_items=list(inferred_items), retrievals=retrievals,
                                 rag_failures=failures, missing_streams=sorted(missing), budget=budget)
        step.output.update(package.model_dump(mode="json"))
        step.output["empty_diagnosis"] = {
            s: (r.empty_diagnosis.model_dump(mode="json") if r.empty_diagnosis else None)
            for s, r in retrievals.items() if not r.chunks
        }
        if fit is not None:
            step.output["evidence_fit"] = fit.model_dump(mode="json")
        step.output["instruction_like"] = [
            {"source": c.provenance.source, "chunk_id": c.id,
             "rules": [m["name"] for m in c.provenance.extra[MARK_KEY]]}
            for c in package.chunks() if MARK_KEY in c.provenance.extra]
        if failures or missing:
            step.health.verdict = "DEGRADED"
            step.health.degraded = True
    turn.stash[CONTEXT] = package
    return package


def render_evidence(package: ContextPackage, *, fence: str | None = None) -> str:
    """The evidence block of an analytical prompt: what fenced text is, each chunk in its data
    fence with provenance, and named gaps. ``fence``: the turn's fence ID (``fence_id``)."""
    fence = fence or new_fence_id()
    lines = ["## EVIDENCE PACKAGE", evidence_fence_note(fence)]
    for stream, retrieval in package.retrievals.items():
        if retrieval.chunks:
            for chunk in retrieval.chunks:
                lines.append(fenced(chunk, stream, fence))
        elif any(f.stream == stream for f in package.rag_failures):
            lines.append(f"[{stream}] retrieval FAILED: this stream's evidence is missing, not empty.")
        elif retrieval.empty_diagnosis is not None:
            lines.append(f"[{stream}] nothing retrieved ({retrieval.empty_diagnosis.empty_reason.value}).")
        else:
            lines.append(f"[{stream}] nothing retrieved.")
    for stream in package.missing_streams:
        lines.append(f"[{stream}] no retriever installed: this stream was not searched.")
    if len(lines) == 2:
        lines.append("(no retrieval streams enabled)")
    lines.append("Use only this evidence for specific facts. Where it is silent, write "
                 "'COVERAGE GAP:' and name what is missing instead of supplying it from memory.")
    return "\n".join(lines)
