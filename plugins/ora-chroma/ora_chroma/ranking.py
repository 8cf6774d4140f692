"""From Chroma hits to chunks with provenance, and the diagnosis of an empty result.

A retrieval runs in three stages, and each empty reason names the stage that emptied it:

1. the Chroma query, with the mode's filters as a ``where`` clause (type, source type,
   approved) -> *candidates*;
2. the similarity floor (``[plugins.chroma] min_score``, or ``RetrievalFilters.min_score``)
   -> *matches*; a hit below the floor is not a match;
3. the ranker: approved sources weighted up (``retrieval.approved_weight``), duplicates
   dropped, the character budget (``max_chars``) and ``k`` applied -> *chunks*.

When no chunk comes out and nothing raised, two cheap probes (the collection count and the
same query without the mode's filters) say why:

- ``index_empty``: the collection (or this conversation's part of it) holds nothing;
- ``filtered_out``: without the filters the query has matches above the floor, with them none;
- ``no_match``: nothing reaches the similarity floor, filters or not;
- ``ranker_truncation``: there were matches, and the ranker's budget dropped every one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from ora_core.api import Chunk, EmptyDiagnosis, EmptyReason, Provenance, RetrievalFilters

from .notes import EXTRA_PREFIX

DIRECTION = "direction"  # the provenance.extra key the fact-check reads a pre-labelled direction from


class Candidate(BaseModel):
    id: str
    text: str
    meta: dict[str, Any]
    score: float  # cosine similarity to the query

    @property
    def source(self) -> str:
        return str(self.meta.get("source", ""))


def build_where(filters: RetrievalFilters, base: dict[str, Any] | None = None) -> dict[str, Any] | None:
    clauses: list[dict[str, Any]] = [base] if base else []
    clauses.extend(filter_clauses(filters))
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def filter_clauses(filters: RetrievalFilters) -> list[dict[str, Any]]:
    clauses: list[dict[str, Any]] = []
    if filters.types:
        clauses.append({"type": {"$in": list(filters.types)}})
    if filters.source_types:
        clauses.append({"source_type": {"$in": list(filters.source_types)}})
    if filters.approved_only:
        clauses.append({"approved": True})
    return clauses


def filters_applied(filters: RetrievalFilters, floor: float, k: int) -> dict[str, Any]:
    applied = filters.model_dump(exclude_defaults=True)
    applied["similarity_floor"] = floor
    applied["k"] = k
    return applied


def query(collection: Any, vector: list[float], n: int, where: dict[str, Any] | None) -> list[Candidate]:
    result = collection.query(query_embeddings=[vector], n_results=max(1, n), where=where,
                              include=["documents", "metadatas", "distances"])
    ids = (result.get("ids") or [[]])[0]
    docs = (result.get("documents") or [[]])[0]
    metas = (result.get("metadatas") or [[]])[0]
    dists = (result.get("distances") or [[]])[0]
    return [Candidate(id=i, text=d or "", meta=dict(m or {}), score=1.0 - float(dist))
            for i, d, m, dist in zip(ids, docs, metas, dists, strict=False)]


def _when(raw: Any, info: dict[str, Any]) -> datetime | None:
    """The chunk's ingest time; an unreadable stored value is kept, named, in the provenance's
    ``extra["ingested_at_unreadable"]`` rather than dropped (a store written by another tool)."""
    if not raw:
        return None
    try:
        return datetime.fromisoformat(str(raw))
    except ValueError:
        info["ingested_at_unreadable"] = str(raw)[:100]
        return None


@dataclass(frozen=True)
class DirectionRule:
    """``[plugins.chroma] direction_from`` / ``directions``: a front-matter field whose value names a
    chunk's evidence direction (``settings.ChromaSettings``)."""

    field: str
    directions: Mapping[str, str]

    @classmethod
    def of(cls, settings: Any) -> DirectionRule | None:
        return cls(settings.direction_from, dict(settings.directions)) if settings.direction_from else None

    def apply(self, info: dict[str, Any]) -> None:
        if DIRECTION in info or self.field not in info:
            return  # the note states its direction itself, or has no such field
        value = str(info[self.field]).strip()
        if value in self.directions:
            info[DIRECTION] = self.directions[value]
            info["direction_from"] = f"{self.field}: {value}"


def to_chunk(c: Candidate, *, collection: str, stream: str, weight: float,
             extra: dict[str, Any] | None = None, directions: DirectionRule | None = None) -> Chunk:
    """The chunk with its provenance: Ora's fields, then the note's own front-matter extras (stored as
    ``fm.<key>``; Ora's names are never among them), then ``extra`` (the relationship stream's path)."""
    meta = c.meta
    tags = [t for t in str(meta.get("tags", "")).split(",") if t]
    info: dict[str, Any] = {k: meta[k] for k in ("note", "title", "chunk_index", "conversation_id", "turn_id")
                            if k in meta}
    if tags:
        info["tags"] = tags
    for key, value in meta.items():
        if key.startswith(EXTRA_PREFIX) and key[len(EXTRA_PREFIX):] not in info:
            info[key[len(EXTRA_PREFIX):]] = value
    if directions is not None:
        directions.apply(info)
    info["weighted_score"] = round(c.score * weight, 4)
    info.update(extra or {})
    ingested_at = _when(meta.get("ingested_at"), info)
    return Chunk(id=c.id, text=c.text, provenance=Provenance(
        collection=collection,
        source=c.source,
        heading=str(meta.get("heading", "")),
        type=str(meta.get("type", "")),
        source_type=str(meta.get("source_type", "")),
        approved=bool(meta.get("approved", False)),
        score=round(c.score, 4),
        weight=weight,
        ingested_at=ingested_at,
        stream=stream,
        extra=info,
    ))


class Ranked(BaseModel):
    chunks: list[Chunk]
    dropped_by_budget: int = 0


def rank(matches: list[Candidate], *, k: int, approved_weight: float, max_chars: int, collection: str,
         stream: str, per_source: int | None = None,
         extras: dict[str, dict[str, Any]] | None = None, directions: DirectionRule | None = None) -> Ranked:
    """Weight approved sources, sort, drop duplicate texts, keep within budget and ``k``."""
    weighted = sorted(
        ((c.score * (approved_weight if c.meta.get("approved") else 1.0), c) for c in matches),
        key=lambda wc: wc[0], reverse=True)
    out: list[Chunk] = []
    seen: set[str] = set()
    per: dict[str, int] = {}
    used = dropped = 0
    for _, c in weighted:
        if len(out) >= k:
            break
        if c.text in seen or (per_source is not None and per.get(c.source, 0) >= per_source):
            continue
        if used + len(c.text) > max_chars:
            dropped += 1
            continue
        seen.add(c.text)
        per[c.source] = per.get(c.source, 0) + 1
        used += len(c.text)
        weight = approved_weight if c.meta.get("approved") else 1.0
        out.append(to_chunk(c, collection=collection, stream=stream, weight=weight,
                            extra=(extras or {}).get(c.source), directions=directions))
    return Ranked(chunks=out, dropped_by_budget=dropped)


def diagnose(*, scope_total: int, candidates: list[Candidate], matches: list[Candidate],
             unfiltered: list[Candidate], floor: float, filtered: bool, dropped_by_budget: int,
             applied: dict[str, Any], scope: str) -> EmptyDiagnosis:
    """Name why a retrieval came back empty, from the probes' results (see the module doc)."""
    unfiltered_matches = [c for c in unfiltered if c.score >= floor]
    base = {"collection_total_count": scope_total, "raw_chunks_returned": len(unfiltered),
            "filtered_chunks_returned": len(candidates), "filters_applied": applied}
    if scope_total == 0:
        return EmptyDiagnosis(empty_reason=EmptyReason.index_empty, **base,
                              detail=f"{scope} holds no chunks")
    if matches and dropped_by_budget:
        return EmptyDiagnosis(empty_reason=EmptyReason.ranker_truncation, **base,
                              detail=f"{len(matches)} match(es) above the floor; the ranker's budget of "
                                     f"{applied.get('max_chars')} characters dropped all "
                                     f"{dropped_by_budget}")
    if filtered and unfiltered_matches:
        return EmptyDiagnosis(empty_reason=EmptyReason.filtered_out, **base,
                              detail=f"{len(unfiltered_matches)} match(es) above the floor without the "
                                     f"filters; none pass the filters")
    best = max((c.score for c in unfiltered or candidates), default=None)
    shown = f"{best:.3f}" if best is not None else "none"
    return EmptyDiagnosis(empty_reason=EmptyReason.no_match, **base,
                          detail=f"no hit reaches the similarity floor {floor:.2f} (best similarity {shown})")
