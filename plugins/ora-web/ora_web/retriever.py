"""The web retriever: ``GET <retrieval.web_endpoint>?q=<query>&format=json`` (the SearxNG JSON
API), results turned into chunks whose provenance source is the result's URL.

Timeouts are explicit (``[plugins.web] timeout_s``, ``connect_timeout_s``). Every failure
(unreachable, timeout, HTTP error status, a body that is not the expected JSON) raises
``RetrievalError`` with the cause chained; an empty result carries an ``EmptyDiagnosis``:

- ``no_match``: the endpoint answered with no results;
- ``filtered_out``: results came back and the filters (types, source types, approved only,
  min_score on the normalised score) removed them all;
- ``ranker_truncation``: results passed the filters and the character budget dropped them all.

``index_empty`` does not apply: a search engine has no count to probe.

The endpoint is named in errors and provenance with ``mask_url`` (a password or credential query
parameter in it masked), and what the engine answered reaches an error only through
``redact_text`` (a key it echoes back is replaced).

Scores: the engine's score divided by the best score of the response (so 1.0 for the best
result), or ``1 / rank`` when the engine gives none. A result is *approved* when its host is
one of ``approved_domains`` (or a subdomain); approved results get ``retrieval.approved_weight``.
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ora_core.api import (
    Chunk,
    ConfigError,
    EmptyDiagnosis,
    EmptyReason,
    PluginOptions,
    Provenance,
    Retrieval,
    RetrievalError,
    RetrievalFilters,
    mask_url,
    redact_text,
)

PLUGIN_NAME = "web"


class WebSettings(PluginOptions):
    """``[plugins.web]``, declared to the kernel (``ora_register_options``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: float = Field(default=10.0, gt=0, le=300)
    connect_timeout_s: float = Field(default=3.0, gt=0, le=60)
    max_results: int = Field(default=20, ge=1, le=100)
    max_chars: int = Field(default=6000, ge=1)
    approved_domains: list[str] = Field(default_factory=list)
    type: str = "web"
    source_type: str = "web"
    language: str | None = None
    user_agent: str = "ora-web/0.1 (+https://example.invalid/ora)"


class SearchResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    url: str = Field(min_length=1)
    title: str = ""
    content: str = ""
    engine: str = ""
    engines: list[str] = Field(default_factory=list)
    score: float | None = None
    publishedDate: str | None = None  # noqa: N815 - SearxNG's field name


class SearchResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    query: str = ""
    results: list[SearchResult] = Field(default_factory=list)
    unresponsive_engines: list[Any] = Field(default_factory=list)


def load_settings(config: Any) -> WebSettings:
    """``[plugins.web]`` as ``WebSettings`` (validated once per table content); a bad value is a
    ``ConfigError`` naming the table and each bad key."""
    return WebSettings.of(config, PLUGIN_NAME)


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _approved(url: str, domains: list[str]) -> bool:
    host = _host(url)
    return any(host == d.lower() or host.endswith("." + d.lower()) for d in domains)


class WebRetriever:
    name = "web"
    stream = "web"
    layer = "context_package"
    assumes: frozenset[str] = frozenset()

    def retrieve(self, query: str, filters: RetrievalFilters, k: int, ctx: Any) -> Retrieval:
        started = time.perf_counter()
        config = getattr(ctx, "config", None)
        if config is None:
            raise RetrievalError("web: the context carries no configuration")
        endpoint = config.retrieval.web_endpoint
        if not endpoint:
            raise RetrievalError("web: the web stream is enabled but retrieval.web_endpoint is not set "
                                 "(e.g. web_endpoint = \"http://127.0.0.1:8888/search\")")
        try:
            settings = load_settings(config)
        except ConfigError as exc:
            raise RetrievalError(f"web: {exc}") from exc
        response = self._search(endpoint, query, settings)
        shown = mask_url(endpoint)
        result = self._rank(response, query, filters or RetrievalFilters(), max(1, int(k)), settings,
                            config.retrieval.approved_weight, shown)
        result.latency_s = time.perf_counter() - started
        return result

    def _search(self, endpoint: str, query: str, settings: WebSettings) -> SearchResponse:
        import httpx

        params = {"q": query, "format": "json"}
        if settings.language:
            params["language"] = settings.language
        timeout = httpx.Timeout(settings.timeout_s, connect=settings.connect_timeout_s)
        shown = mask_url(endpoint)
        try:
            with httpx.Client(timeout=timeout, headers={"User-Agent": settings.user_agent,
                                                        "Accept": "application/json"}) as client:
                reply = client.get(endpoint, params=params)
        except httpx.TimeoutException as exc:
            raise RetrievalError(f"web search at {shown} timed out ({type(exc).__name__}, "
                                 f"timeout {settings.timeout_s}s)") from exc
        except httpx.HTTPError as exc:
            raise RetrievalError(redact_text(f"web search at {shown} failed: {type(exc).__name__}: {exc}")) from exc
        if reply.status_code != 200:
            raise RetrievalError(f"web search at {shown} answered HTTP {reply.status_code}: "
                                 f"{redact_text(reply.text[:200])!r}")
        try:
            return SearchResponse.model_validate_json(reply.content)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(body)"
            raise RetrievalError(f"web search at {shown} answered something other than search JSON "
                                 f"({where}: {first['msg']}); is format=json enabled on the instance?") from exc

    def _rank(self, response: SearchResponse, query: str, filters: RetrievalFilters, k: int,
              settings: WebSettings, approved_weight: float, endpoint: str) -> Retrieval:
        results = response.results[:settings.max_results]
        best = max((r.score for r in results if r.score is not None), default=None)
        fetched = datetime.now(timezone.utc)
        scored: list[tuple[float, int, SearchResult, bool]] = []
        for rank, r in enumerate(results, 1):
            score = (r.score / best) if (r.score is not None and best) else 1.0 / rank
            scored.append((round(score, 4), rank, r, _approved(r.url, settings.approved_domains)))
        kept = [s for s in scored
                if (not filters.types or settings.type in filters.types)
                and (not filters.source_types or settings.source_type in filters.source_types)
                and (not filters.approved_only or s[3])
                and (filters.min_score is None or s[0] >= filters.min_score)
                and (not filters.collections or "web" in filters.collections)]
        kept.sort(key=lambda s: s[0] * (approved_weight if s[3] else 1.0), reverse=True)
        chunks: list[Chunk] = []
        used = dropped = 0
        seen: set[str] = set()
        for score, rank, r, approved in kept:
            if len(chunks) >= k:
                break
            if r.url in seen:
                continue
            text = f"{r.title}\n\n{r.content}".strip()
            if used + len(text) > settings.max_chars:
                dropped += 1
                continue
            seen.add(r.url)
            used += len(text)
            weight = approved_weight if approved else 1.0
            chunks.append(Chunk(id=hashlib.sha256(r.url.encode()).hexdigest()[:32], text=text,
                                provenance=Provenance(
                                    collection="web", source=r.url, heading=r.title, type=settings.type,
                                    source_type=settings.source_type, approved=approved, score=score,
                                    weight=weight, ingested_at=fetched, stream="web",
                                    extra={"rank": rank, "domain": _host(r.url), "engine": r.engine,
                                           "engines": r.engines, "engine_score": r.score,
                                           "published": r.publishedDate, "endpoint": endpoint})))
        out = Retrieval(stream="web", query=query, chunks=chunks, retriever=self.name)
        if not chunks:
            applied = filters.model_dump(exclude_defaults=True)
            applied.update(k=k, max_chars=settings.max_chars)
            base = {"collection_total_count": 0, "raw_chunks_returned": len(results),
                    "filtered_chunks_returned": len(kept), "filters_applied": applied}
            if not results:
                silent = f" (unresponsive engines: {response.unresponsive_engines})" \
                    if response.unresponsive_engines else ""
                out.empty_diagnosis = EmptyDiagnosis(empty_reason=EmptyReason.no_match, **base,
                                                     detail=f"the search endpoint returned no results{silent}")
            elif not kept:
                out.empty_diagnosis = EmptyDiagnosis(empty_reason=EmptyReason.filtered_out, **base,
                                                     detail=f"{len(results)} result(s); the filters removed all")
            else:
                out.empty_diagnosis = EmptyDiagnosis(
                    empty_reason=EmptyReason.ranker_truncation, **base,
                    detail=f"{len(kept)} result(s) passed the filters; the budget of {settings.max_chars} "
                           f"characters dropped all {dropped}")
        return out
