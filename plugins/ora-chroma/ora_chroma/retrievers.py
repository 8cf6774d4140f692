"""The three Chroma retrievers, one per stream: ``concept`` (the vault), ``conversation``
(conversation memory) and ``relationship`` (the link graph between vault notes).

Sync, called by the kernel from worker threads. The query is embedded by the embedder the host
registers under the configured name (``ctx.embedder()``, see ``embedding``). Any failure of
Chroma, the manifest or the embedder (an unknown ``embedding.embedder`` included) is raised as
``RetrievalError`` with the cause named and chained: the kernel turns it into empty context plus
a named record in ``rag-failures.jsonl``. An empty result without an error carries an
``EmptyDiagnosis`` (see ``ranking``); an empty collection needs no query vector.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from ora_core.api import EmptyDiagnosis, EmptyReason, OraError, Retrieval, RetrievalError, RetrievalFilters

from .embedding import embed_query
from .ranking import DirectionRule, build_where, diagnose, filter_clauses, filters_applied, query, rank
from .settings import load_settings, store_location
from .store import VaultStore, configured_embedder

_stores: dict[tuple[str, str, str], VaultStore] = {}
#: Settings a retrieval reads from its own configuration, not from the (shared) store.
PER_TURN_SETTINGS = {"direction_from", "directions"}
_stores_lock = threading.Lock()


def store_for(config: Any) -> VaultStore:
    """One ``VaultStore`` per (location, settings, embedder) per process, so collections are reused.
    The direction mapping (``direction_from``, ``directions``) is read per retrieval
    (``DirectionRule.of(load_settings(config))``), not from the store: turns that differ only in it
    share one store."""
    settings = load_settings(config)
    key = (store_location(config).label, settings.model_dump_json(exclude=PER_TURN_SETTINGS),
           configured_embedder(config))
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            store = _stores[key] = VaultStore(config, settings)
    return store


def forget_stores() -> None:
    with _stores_lock:
        _stores.clear()


class _ChromaRetriever:
    name = ""
    stream = ""
    layer = "context_package"
    assumes: frozenset[str] = frozenset()

    def warm_up(self, config: Any) -> None:
        """Import Chroma and open the store and its collections (the kernel calls this in a
        background thread while Phase A runs; errors propagate to it and are recorded by name).
        The embedder is the host's: it loads its model on first use, once per process."""
        store = store_for(config)
        store.vault.count()
        store.conversations.count()

    def retrieve(self, query: str, filters: RetrievalFilters, k: int, ctx: Any) -> Retrieval:
        started = time.perf_counter()
        config = getattr(ctx, "config", None)
        if config is None:
            raise RetrievalError(f"{self.name}: the context carries no configuration")
        filters = filters or RetrievalFilters()
        try:
            store = store_for(config)
            result = self._retrieve(store, config, query, filters, max(1, int(k)), ctx)
        except RetrievalError:
            raise
        except OraError as exc:  # an unknown embedding.embedder, an embedder that failed: named as is
            raise RetrievalError(f"{self.stream} retrieval failed: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - re-raised as the typed error, cause chained
            where = store_location(config).label if config is not None else "?"
            raise RetrievalError(f"{self.stream} retrieval from {where} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
        result.latency_s = time.perf_counter() - started
        return result

    def _retrieve(self, store: VaultStore, config: Any, query: str, filters: RetrievalFilters, k: int,
                  ctx: Any) -> Retrieval:
        raise NotImplementedError

    # --- shared -------------------------------------------------------------------------------

    def _floor(self, store: VaultStore, filters: RetrievalFilters) -> float:
        return filters.min_score if filters.min_score is not None else store.settings.min_score

    def _applied(self, store: VaultStore, filters: RetrievalFilters, floor: float, k: int) -> dict[str, Any]:
        applied = filters_applied(filters, floor, k)
        applied["max_chars"] = store.settings.max_chars
        return applied

    def _excluded(self, collection: str, col: Any, filters: RetrievalFilters, query: str,
                  applied: dict[str, Any]) -> Retrieval | None:
        if filters.collections and collection not in filters.collections:
            return Retrieval(stream=self.stream, query=query, retriever=self.name,
                             empty_diagnosis=EmptyDiagnosis(
                                 empty_reason=EmptyReason.filtered_out, collection_total_count=col.count(),
                                 filters_applied=applied,
                                 detail=f"collection {collection!r} is not among the filter's "
                                        f"collections {filters.collections}"))
        return None

    def _nothing_to_search(self, query_text: str, filters: RetrievalFilters, floor: float, applied: dict[str, Any],
                           scope: str, detail: str = "") -> Retrieval:
        """The ``index_empty`` result of a scope holding no chunk: no query vector is needed."""
        diag = diagnose(scope_total=0, candidates=[], matches=[], unfiltered=[], floor=floor,
                        filtered=bool(filter_clauses(filters)), dropped_by_budget=0, applied=applied, scope=scope)
        if detail:
            diag.detail = detail
        return Retrieval(stream=self.stream, query=query_text, retriever=self.name, empty_diagnosis=diag)

    def _nearest(self, store: VaultStore, config: Any, col: Any, name: str, query_text: str,
                 filters: RetrievalFilters, k: int, floor: float, ctx: Any,
                 scope: dict[str, Any] | None = None) -> _Search:
        """Embed the query (once per turn), query ``col`` under the filters (and ``scope``),
        keep what clears the floor, rank it: the part every Chroma stream shares."""
        vector = embed_query(query_text, ctx)
        where = build_where(filters, scope)
        n = k * store.settings.oversample
        candidates = query(col, vector, n, where)
        matches = [c for c in candidates if c.score >= floor]
        ranked = rank(matches, k=k, approved_weight=config.retrieval.approved_weight,
                      max_chars=store.settings.max_chars, collection=name, stream=self.stream,
                      directions=DirectionRule.of(load_settings(config)))
        out = Retrieval(stream=self.stream, query=query_text, chunks=ranked.chunks, retriever=self.name)
        return _Search(vector=vector, where=where, n=n, candidates=candidates, matches=matches, ranked=ranked,
                       out=out)


@dataclass
class _Search:
    vector: Any
    where: Any
    n: int
    candidates: list[Any]
    matches: list[Any]
    ranked: Any
    out: Retrieval


class ConceptRetriever(_ChromaRetriever):
    """Vault chunks nearest the query."""

    name = "chroma-concept"
    stream = "concept"

    def _retrieve(self, store: VaultStore, config: Any, query_text: str, filters: RetrievalFilters, k: int,
                  ctx: Any) -> Retrieval:
        col = store.vault
        name = store.settings.collection
        floor = self._floor(store, filters)
        applied = self._applied(store, filters, floor, k)
        excluded = self._excluded(name, col, filters, query_text, applied)
        if excluded:
            return excluded
        if col.count() == 0:
            return self._nothing_to_search(query_text, filters, floor, applied, f"collection {name!r}")
        found = self._nearest(store, config, col, name, query_text, filters, k, floor, ctx)
        if not found.ranked.chunks:
            unfiltered = found.candidates if found.where is None else query(col, found.vector, found.n, None)
            found.out.empty_diagnosis = diagnose(
                scope_total=col.count(), candidates=found.candidates, matches=found.matches,
                unfiltered=unfiltered, floor=floor, filtered=found.where is not None,
                dropped_by_budget=found.ranked.dropped_by_budget, applied=applied, scope=f"collection {name!r}")
        return found.out


class ConversationRetriever(_ChromaRetriever):
    """Earlier exchanges of the same conversation (indexed after each turn)."""

    name = "chroma-conversation"
    stream = "conversation"

    def _retrieve(self, store: VaultStore, config: Any, query_text: str, filters: RetrievalFilters, k: int,
                  ctx: Any) -> Retrieval:
        col = store.conversations
        name = store.settings.conversations_collection
        conversation_id = getattr(ctx, "conversation_id", None) or config.pipeline.conversation_id
        floor = self._floor(store, filters)
        applied = self._applied(store, filters, floor, k)
        applied["conversation_id"] = conversation_id
        scope = {"conversation_id": conversation_id}
        excluded = self._excluded(name, col, filters, query_text, applied)
        if excluded:
            return excluded
        if not col.get(where=scope, limit=1, include=[])["ids"]:
            return self._nothing_to_search(
                query_text, filters, floor, applied, f"collection {name!r} for conversation {conversation_id!r}",
                detail=f"no turn of conversation {conversation_id!r} is indexed (collection {name!r} holds "
                       f"{col.count()} chunk(s) in all)")
        found = self._nearest(store, config, col, name, query_text, filters, k, floor, ctx, scope)
        out = found.out
        if not found.ranked.chunks:
            filtered = bool(filter_clauses(filters))
            unfiltered = query(col, found.vector, found.n, scope) if filtered else found.candidates
            out.empty_diagnosis = diagnose(
                scope_total=col.count(), candidates=found.candidates, matches=found.matches,
                unfiltered=unfiltered, floor=floor, filtered=filtered,
                dropped_by_budget=found.ranked.dropped_by_budget, applied=applied,
                scope=f"collection {name!r} for conversation {conversation_id!r}")
        return out


class RelationshipRetriever(_ChromaRetriever):
    """Chunks of the notes linked (``[[wiki links]]``, ``related:``) to the top concept hits;
    ``provenance.extra["path"]`` is the walk, e.g. ``["a.md", "b.md"]``."""

    name = "chroma-relationship"
    stream = "relationship"

    def _retrieve(self, store: VaultStore, config: Any, query_text: str, filters: RetrievalFilters, k: int,
                  ctx: Any) -> Retrieval:
        col = store.vault
        name = store.settings.collection
        settings = store.settings
        floor = self._floor(store, filters)
        applied = self._applied(store, filters, floor, k)
        total = col.count()
        excluded = self._excluded(name, col, filters, query_text, applied)
        if excluded:
            return excluded
        out = Retrieval(stream=self.stream, query=query_text, retriever=self.name)
        if total == 0:
            out.empty_diagnosis = EmptyDiagnosis(empty_reason=EmptyReason.index_empty,
                                                 filters_applied=applied,
                                                 detail=f"collection {name!r} holds no chunks")
            return out
        vector = embed_query(query_text, ctx)
        # The walk starts from the notes nearest the query whatever their type; the mode's
        # filters apply to what the walk returns.
        hits = query(col, vector, k * settings.oversample, None)
        seeds: list[str] = []
        for hit in hits:
            if hit.score >= floor and hit.source not in seeds:
                seeds.append(hit.source)
        seeds = seeds[:settings.seed_notes]
        if not seeds:
            out.empty_diagnosis = diagnose(
                scope_total=total, candidates=[], matches=[], unfiltered=hits, floor=floor,
                filtered=False, dropped_by_budget=0, applied=applied, scope=f"collection {name!r}")
            out.empty_diagnosis.detail = "no concept hit to expand from: " + out.empty_diagnosis.detail
            return out
        neighbours = store.manifest.neighbours(seeds, settings.hops)
        applied["seeds"] = [store_note(store, s) for s in seeds]
        if not neighbours:
            out.empty_diagnosis = EmptyDiagnosis(
                empty_reason=EmptyReason.no_match, collection_total_count=total,
                raw_chunks_returned=len(hits), filters_applied=applied,
                detail=f"the top concept hits {applied['seeds']} link to no other ingested note")
            return out
        by_source = {n.source: n for n in neighbours}
        scope = {"source": {"$in": sorted(by_source)}}
        where = build_where(filters, scope)
        n = max(k * settings.oversample, 2 * len(by_source))
        candidates = query(col, vector, n, where)
        extras = {s: {"path": nb.path, "link_kinds": nb.kinds, "hops": nb.hops, "seed": nb.path[0]}
                  for s, nb in by_source.items()}
        ranked = rank(candidates, k=k, approved_weight=config.retrieval.approved_weight,
                      max_chars=settings.max_chars, collection=name, stream=self.stream,
                      per_source=1, extras=extras, directions=DirectionRule.of(load_settings(config)))
        out.chunks = ranked.chunks
        if not ranked.chunks:
            filtered = bool(filter_clauses(filters))
            unfiltered = query(col, vector, n, scope) if filtered else candidates
            # Neighbour chunks are not held to the floor (the link is the evidence of relevance),
            # so here every candidate counts as a match.
            out.empty_diagnosis = diagnose(
                scope_total=total, candidates=candidates, matches=candidates,
                unfiltered=unfiltered, floor=-1.0, filtered=filtered,
                dropped_by_budget=ranked.dropped_by_budget, applied=applied,
                scope=f"the notes linked to {applied['seeds']}")
        return out


def store_note(store: VaultStore, source: str) -> str:
    record = store.manifest.get(source)
    return record.note if record else source


RETRIEVERS = (ConceptRetriever, ConversationRetriever, RelationshipRetriever)
