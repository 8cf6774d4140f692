"""Chroma clients and collections, and the manifest kept beside them.

Embedded ``PersistentClient`` at ``retrieval.path`` by default; ``HttpClient`` when
``retrieval.server_url`` is set. Telemetry is off. One client per location per process.

Each collection records the embedder its vectors come from (``[embedding] embedder``, as the
embedding function ``ora-<embedder>``; see ``ora_chroma.embedding``): opening it with another
embedder configured is an ``EmbeddingError`` naming both, never a search that mixes two models.

The manifest (SQLite, ``<retrieval.path>/ora-vault.sqlite``) records which files were
ingested (with their content hashes and chunk ids) and the relationship graph: edges from
``[[wiki links]]`` and front-matter ``related:``. It is what ``ora vault sync`` and the
relationship retriever read.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .embedding import EmbeddingError, chroma_embedding_function, chroma_name
from .settings import ChromaSettings, StoreLocation, load_settings, store_location

_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def get_client(location: StoreLocation) -> Any:
    """The Chroma client for a location, created once per process."""
    key = location.label
    client = _clients.get(key)
    if client is not None:
        return client
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            import chromadb
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            if location.server_url:
                client = chromadb.HttpClient(host=location.host, port=location.port, ssl=location.ssl,
                                             settings=settings)
            else:
                location.path.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(path=str(location.path), settings=settings)
            _clients[key] = client
    return client


def forget_clients() -> None:
    """Drop cached clients (tests that reuse a path after deleting it)."""
    with _clients_lock:
        _clients.clear()
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()


def configured_embedder(config: Any) -> str:
    """The name of the embedder the configuration names (``[embedding] embedder``)."""
    return str(config.embedding.embedder)


class VaultStore:
    """The collections of one configuration, plus its manifest. The store knows the configured
    embedder's name (which its collections record); vectors are computed by the callers, with the
    embedder the host gives them, and passed in."""

    def __init__(self, config: Any, settings: ChromaSettings | None = None) -> None:
        self.settings = settings or load_settings(config)
        self.location = store_location(config)
        self.embedder_name = configured_embedder(config)
        self.manifest = Manifest(self.location.manifest_path)
        self._collections: dict[str, Any] = {}

    @property
    def client(self) -> Any:
        return get_client(self.location)

    def collection(self, name: str) -> Any:
        col = self._collections.get(name)
        if col is None:
            try:
                col = self.client.get_or_create_collection(
                    name,
                    embedding_function=chroma_embedding_function(self.embedder_name),
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={"created_by": "ora-chroma"},
                )
            except ValueError as exc:
                if "embedding function conflict" not in str(exc).lower():
                    raise
                raise self._built_with_another_embedder(name) from exc
            self._collections[name] = col
        return col

    def _built_with_another_embedder(self, name: str) -> EmbeddingError:
        stored = (self.client.get_collection(name, embedding_function=None).configuration_json or {}).get(
            "embedding_function") or {}
        function = str(stored.get("name", "?"))
        built_with = function.removeprefix("ora-") if function.startswith("ora-") else f"(Chroma's {function!r})"
        return EmbeddingError(
            f"collection {name!r} at {self.location.label} holds vectors of embedder {built_with!r} (embedding "
            f"function {function!r}), but embedding.embedder is {self.embedder_name!r} (embedding function "
            f"{chroma_name(self.embedder_name)!r}): the vectors of two models cannot be compared. Set "
            f"embedding.embedder = {built_with!r}, or ingest into another retrieval.path or [plugins.chroma] "
            "collection")

    @property
    def vault(self) -> Any:
        return self.collection(self.settings.collection)

    @property
    def conversations(self) -> Any:
        return self.collection(self.settings.conversations_collection)


class FileRecord(BaseModel):
    source: str  # absolute path: the manifest key and the chunks' ``source`` metadata
    root: str
    note: str
    title: str
    type: str
    source_type: str
    approved: bool
    file_hash: str
    meta_hash: str
    chunk_ids: list[str]
    ingested_at: str
    keys: list[str]  # link keys that name this note (stem, title)


class Neighbour(BaseModel):
    source: str
    note: str
    path: list[str]  # notes from the seed to this neighbour
    kinds: list[str]  # edge kinds along the path (wiki | related)
    hops: int


_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    source TEXT PRIMARY KEY, root TEXT NOT NULL, note TEXT NOT NULL, title TEXT NOT NULL,
    type TEXT NOT NULL, source_type TEXT NOT NULL, approved INTEGER NOT NULL,
    file_hash TEXT NOT NULL, meta_hash TEXT NOT NULL, chunk_ids TEXT NOT NULL,
    ingested_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS note_keys (key TEXT NOT NULL, source TEXT NOT NULL,
    PRIMARY KEY (key, source));
CREATE TABLE IF NOT EXISTS edges (src TEXT NOT NULL, target TEXT NOT NULL, kind TEXT NOT NULL,
    PRIMARY KEY (src, target, kind));
CREATE INDEX IF NOT EXISTS edges_target ON edges(target);
CREATE TABLE IF NOT EXISTS roots (root TEXT PRIMARY KEY, added_at TEXT NOT NULL);
"""


class Manifest:
    """The SQLite file beside Chroma: ingested files, their link keys, and the link edges."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            conn.executescript(_SCHEMA)
            with conn:
                yield conn
        finally:
            conn.close()

    def exists(self) -> bool:
        return self.path.is_file()

    def add_root(self, root: Path) -> None:
        with self.connect() as conn:
            conn.execute("INSERT OR IGNORE INTO roots VALUES (?, ?)", (str(root), now_iso()))

    def roots(self) -> list[Path]:
        if not self.exists():
            return []
        with self.connect() as conn:
            return [Path(r) for (r,) in conn.execute("SELECT root FROM roots ORDER BY root")]

    def get(self, source: str) -> FileRecord | None:
        with self.connect() as conn:
            row = conn.execute("SELECT * FROM files WHERE source = ?", (source,)).fetchone()
            keys = [k for (k,) in conn.execute("SELECT key FROM note_keys WHERE source = ?", (source,))]
        return self._record(row, keys) if row else None

    def files(self, root: Path | None = None) -> list[FileRecord]:
        if not self.exists():
            return []
        with self.connect() as conn:
            if root is None:
                rows = conn.execute("SELECT * FROM files ORDER BY source").fetchall()
            else:
                rows = conn.execute("SELECT * FROM files WHERE root = ? ORDER BY source",
                                    (str(root),)).fetchall()
            return [self._record(row, []) for row in rows]

    @staticmethod
    def _record(row: tuple[Any, ...], keys: list[str]) -> FileRecord:
        (source, root, note, title, type_, source_type, approved, file_hash, meta_hash, chunk_ids,
         ingested_at) = row
        return FileRecord(source=source, root=root, note=note, title=title, type=type_,
                          source_type=source_type, approved=bool(approved), file_hash=file_hash,
                          meta_hash=meta_hash, chunk_ids=json.loads(chunk_ids),
                          ingested_at=ingested_at, keys=keys)

    def put(self, record: FileRecord, links: Iterable[tuple[str, str]]) -> None:
        self.put_many([(record, links)])

    def put_many(self, items: Iterable[tuple[FileRecord, Iterable[tuple[str, str]]]]) -> None:
        """Record files and their outgoing links, all in one transaction."""
        with self.connect() as conn:
            for record, links in items:
                conn.execute("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?,?,?)", (
                    record.source, record.root, record.note, record.title, record.type,
                    record.source_type, int(record.approved), record.file_hash, record.meta_hash,
                    json.dumps(record.chunk_ids), record.ingested_at))
                conn.execute("DELETE FROM note_keys WHERE source = ?", (record.source,))
                conn.executemany("INSERT OR IGNORE INTO note_keys VALUES (?, ?)",
                                 [(k, record.source) for k in record.keys if k])
                conn.execute("DELETE FROM edges WHERE src = ?", (record.source,))
                conn.executemany("INSERT OR IGNORE INTO edges VALUES (?, ?, ?)",
                                 [(record.source, target, kind) for target, kind in links])

    def remove(self, source: str) -> None:
        with self.connect() as conn:
            conn.execute("DELETE FROM files WHERE source = ?", (source,))
            conn.execute("DELETE FROM note_keys WHERE source = ?", (source,))
            conn.execute("DELETE FROM edges WHERE src = ?", (source,))

    def edge_counts(self) -> tuple[int, int]:
        """(edges whose target is an ingested note, edges pointing at no ingested note)."""
        if not self.exists():
            return 0, 0
        with self.connect() as conn:
            total = conn.execute("SELECT COUNT(*) FROM edges").fetchone()[0]
            resolved = conn.execute(
                "SELECT COUNT(*) FROM edges e WHERE EXISTS "
                "(SELECT 1 FROM note_keys k WHERE k.key = e.target AND k.source != e.src)").fetchone()[0]
        return resolved, total - resolved

    def neighbours(self, seeds: list[str], hops: int = 1) -> list[Neighbour]:
        """Notes linked to the seed notes (either direction), breadth first, up to ``hops``."""
        if not seeds or not self.exists():
            return []
        found: dict[str, Neighbour] = {}
        with self.connect() as conn:
            notes = dict(conn.execute("SELECT source, note FROM files"))
            frontier = [Neighbour(source=s, note=notes.get(s, Path(s).name), path=[notes.get(s, s)],
                                  kinds=[], hops=0) for s in seeds if s in notes]
            visited = {n.source for n in frontier}
            for _ in range(hops):
                next_frontier: list[Neighbour] = []
                for node in frontier:
                    for other, kind in self._linked(conn, node.source):
                        if other in visited or other not in notes:
                            continue
                        visited.add(other)
                        hop = Neighbour(source=other, note=notes[other], path=[*node.path, notes[other]],
                                        kinds=[*node.kinds, kind], hops=node.hops + 1)
                        found[other] = hop
                        next_frontier.append(hop)
                frontier = next_frontier
        return list(found.values())

    @staticmethod
    def _linked(conn: sqlite3.Connection, source: str) -> list[tuple[str, str]]:
        outgoing = conn.execute(
            "SELECT k.source, e.kind FROM edges e JOIN note_keys k ON k.key = e.target "
            "WHERE e.src = ? ORDER BY k.source", (source,)).fetchall()
        incoming = conn.execute(
            "SELECT e.src, e.kind FROM edges e JOIN note_keys k ON k.key = e.target "
            "WHERE k.source = ? ORDER BY e.src", (source,)).fetchall()
        seen: dict[str, str] = {}
        for other, kind in [*outgoing, *incoming]:
            if other != source:
                seen.setdefault(other, kind)
        return list(seen.items())
