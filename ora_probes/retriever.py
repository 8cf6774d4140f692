"""``bench-documents``: the retriever that serves ``ora bench`` its documents, and nothing else.

It declares the stream ``bench``, which no configuration enables, so it is never picked for a
stream on its own: a turn uses it only where ``retrieval.retrievers.<stream> = "bench-documents"``
maps a stream to it (the bench does that for ``concept``), and its results carry that stream.
The documents are the Markdown files (front matter optional) of the directory
``[plugins.probes-default] bench_documents``; each document is one chunk.

Ranking is deterministic: the number of distinct words of four letters or more the query shares
with the document (ties by file name); a document sharing none is no match. Filters by ``types``
apply to the front matter's ``type`` (default ``note``). An empty result carries its diagnosis
(``index_empty``, ``no_match``, ``filtered_out``); a missing setting or directory raises
``RetrievalError`` naming it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ora_core.api import (
    Chunk,
    ConfigError,
    EmptyDiagnosis,
    EmptyReason,
    PluginOptions,
    Provenance,
    Retrieval,
    RetrievalError,
)

PLUGIN = "probes-default"
SETTING = "bench_documents"


class ProbesDefaultOptions(PluginOptions):
    """``[plugins.probes-default]``, declared to the kernel (``ora_register_options``)."""

    bench_documents: str | None = None  # the directory of the documents ``bench-documents`` serves
_WORD = re.compile(r"[a-z0-9]{4,}")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


def read_document(path: Path) -> tuple[dict[str, Any], str]:
    """``(front matter, body)`` of a Markdown document; a malformed front matter is a
    ``RetrievalError`` naming the file."""
    import yaml

    text = path.read_text(encoding="utf-8")
    match = _FRONT.match(text)
    if match is None:
        return {}, text.strip()
    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        raise RetrievalError(f"bench document {path}: malformed front matter: {exc}") from None
    if not isinstance(meta, dict):
        raise RetrievalError(f"bench document {path}: the front matter is not a mapping")
    return meta, text[match.end():].strip()


class BenchDocumentsRetriever:
    name = "bench-documents"
    stream = "bench"

    def retrieve(self, query: str, filters: Any, k: int, ctx: Any) -> Retrieval:
        config = getattr(ctx, "config", None)
        if config is None:
            raise RetrievalError("bench-documents: the context carries no configuration")
        streams = [s for s, name in config.retrieval.retrievers.items() if name == self.name]
        if not streams:
            raise RetrievalError("bench-documents serves only streams mapped to it "
                                 "(retrieval.retrievers.<stream> = \"bench-documents\"); none is")
        try:
            setting = ProbesDefaultOptions.of(config, PLUGIN).bench_documents
        except ConfigError as exc:
            raise RetrievalError(f"bench-documents: {exc}") from exc
        if not setting:
            raise RetrievalError(f"bench-documents: [plugins.{PLUGIN}] {SETTING} names no directory")
        directory = Path(str(setting)).expanduser()
        if not directory.is_dir():
            raise RetrievalError(f"bench-documents: {SETTING} {str(directory)!r} is not a directory")
        docs = sorted(p for p in directory.glob("*.md") if not p.name.upper().startswith("README"))
        wanted = set(_WORD.findall(query.lower()))
        types = list(getattr(filters, "types", None) or [])
        scored: list[tuple[int, Path, dict[str, Any], str]] = []
        filtered = 0
        for path in docs:
            meta, body = read_document(path)
            if types and str(meta.get("type", "note")) not in types:
                filtered += 1
                continue
            shared = len(wanted & set(_WORD.findall(body.lower() + " " + str(meta.get("title", "")).lower())))
            if shared:
                scored.append((shared, path, meta, body))
        scored.sort(key=lambda item: (-item[0], item[1].name))
        chunks = [Chunk(id=f"bench-{path.stem}", text=body,
                        provenance=Provenance(collection=self.name, source=f"bench/{path.name}",
                                              heading=str(meta.get("title", path.stem)),
                                              type=str(meta.get("type", "note")), source_type="bench",
                                              score=round(shared / max(1, len(wanted)), 4), stream=streams[0]))
                  for shared, path, meta, body in scored[:max(1, int(k))]]
        diagnosis = None
        if not chunks:
            reason = (EmptyReason.index_empty if not docs else
                      EmptyReason.filtered_out if filtered == len(docs) else EmptyReason.no_match)
            diagnosis = EmptyDiagnosis(empty_reason=reason, collection_total_count=len(docs),
                                       filters_applied={"types": types} if types else {},
                                       detail=f"{len(docs)} document(s) in {directory}, {filtered} filtered out "
                                              "by type, none of the rest shares a word with the query")
        return Retrieval(stream=streams[0], query=query, chunks=chunks, empty_diagnosis=diagnosis,
                         retriever=self.name)
