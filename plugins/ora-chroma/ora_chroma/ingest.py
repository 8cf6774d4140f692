"""``ora vault add`` and ``ora vault sync``: files -> chunks -> vectors -> Chroma.

The vectors come from the embedder the host registers under the configured name (the command
passes ``ctx.embedder()``; ``minilm`` by default).

Idempotent by construction: chunk ids are content hashes, the ids already in Chroma are read
back per file, and only chunks Chroma lacks are embedded. A changed file gets its new chunks
added first and its stale ones deleted after, so it is never missing from the index. Chunks
are embedded in large groups across files (the model is the bottleneck; big batches keep it
busy), and each group's write to Chroma overlaps the next group's embedding.

A file that cannot be used is skipped and named in the report with its kind (``not_utf8`` with
the byte offset, ``malformed_front_matter``, ``unreadable``); ingest goes on. A vault path that
cannot be read at all is a ``VaultError`` before anything is written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ora_core.api import OraError

from .embedding import embed
from .notes import EXTRA_PREFIX, FrontMatterError, NotUtf8Error, ParsedNote, note_key, parse_note
from .store import FileRecord, VaultStore, now_iso

Progress = Callable[[int, int], None]  # (chunks embedded so far, chunks to embed)


class VaultError(OraError):
    """A vault path cannot be used at all (missing, unreadable, wrong kind of file)."""


class SkippedFile(BaseModel):
    path: str
    kind: Literal["malformed_front_matter", "not_utf8", "unreadable", "unreadable_directory"]
    reason: str
    byte_offset: int | None = None  # not_utf8: where the first byte that does not decode sits


class IngestReport(BaseModel):
    """What one ``add`` or ``sync`` did; printed by the CLI, ``--json`` prints this shape."""

    store: str
    collection: str
    files_seen: int = 0
    files_new: int = 0
    files_changed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_total: int = 0
    skipped: list[SkippedFile] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    #: Front-matter keys of the ingested notes that do not travel with their chunks ("<file>: <key>: why";
    #: see ``notes.EXTRA_PREFIX`` for what does).
    front_matter_not_carried: list[str] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def malformed(self) -> int:
        return sum(1 for s in self.skipped if s.kind == "malformed_front_matter")


def scan(paths: Sequence[str | Path], suffixes: Iterable[str]) -> tuple[list[tuple[Path, Path]], list[Path],
                                                                         list[SkippedFile]]:
    """(root, file) pairs to ingest, the directories given as roots, and skipped subfolders.

    Raises ``VaultError`` naming the path when a given path is missing or unreadable."""
    wanted = {s.lower() for s in suffixes}
    found: list[tuple[Path, Path]] = []
    roots: list[Path] = []
    skipped: list[SkippedFile] = []
    for raw in paths:
        path = Path(raw).expanduser()
        try:
            path = path.resolve(strict=True)
        except FileNotFoundError:
            raise VaultError(f"vault path {str(raw)!r} does not exist") from None
        except OSError as exc:
            raise VaultError(f"vault path {str(raw)!r} cannot be resolved: {exc.strerror or exc}") from None
        if path.is_dir():
            try:
                with os.scandir(path):
                    pass
            except OSError as exc:
                raise VaultError(f"cannot read vault directory {str(path)!r}: "
                                 f"{exc.strerror or exc}") from None
            roots.append(path)
            found.extend((path, f) for f in _walk(path, wanted, skipped))
        elif path.is_file():
            if path.suffix.lower() not in wanted:
                raise VaultError(f"{str(path)!r} is not a note: Ora ingests {', '.join(sorted(wanted))} files")
            found.append((path.parent, path))
        else:
            raise VaultError(f"vault path {str(path)!r} is neither a file nor a directory")
    unique: dict[Path, tuple[Path, Path]] = {}
    for root, file in found:
        unique.setdefault(file, (root, file))
    return sorted(unique.values(), key=lambda rf: str(rf[1])), roots, skipped


def _walk(root: Path, suffixes: set[str], skipped: list[SkippedFile]) -> list[Path]:
    files: list[Path] = []

    def on_error(exc: OSError) -> None:
        skipped.append(SkippedFile(path=str(exc.filename), kind="unreadable_directory",
                                   reason=f"cannot read directory: {exc.strerror or exc}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=on_error):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith(".") and Path(name).suffix.lower() in suffixes:
                files.append(Path(dirpath) / name)
    return files


def _metadata(note: ParsedNote, root: Path, heading: str, index: int, ingested_at: str) -> dict[str, Any]:
    return {
        "source": str(note.path),
        "root": str(root),
        "note": note.note,
        "title": note.title,
        "heading": heading,
        "type": note.meta.type,
        "source_type": note.meta.source_type,
        "approved": bool(note.meta.approved),
        "tags": "," + ",".join(note.meta.tags) + "," if note.meta.tags else "",
        "chunk_index": index,
        "ingested_at": ingested_at,
        "stream": "concept",
        **{EXTRA_PREFIX + key: value for key, value in note.extras.items()},
    }


class Ingestor:
    """Writes notes into ``store``, embedding them with ``embedder`` (an ``ora_core.api.Embedder``,
    the host's; see ``ora_chroma.embedding.embedder_of``)."""

    def __init__(self, store: VaultStore, embedder: Any, progress: Progress | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = store.settings
        self.progress = progress

    @property
    def collection(self) -> Any:
        return self.store.vault

    # --- public --------------------------------------------------------------------------

    def add(self, paths: Sequence[str | Path]) -> IngestReport:
        started = time.perf_counter()
        targets, roots, skipped = scan(paths, self.settings.suffixes)
        report = self._report()
        report.skipped.extend(skipped)
        for root in roots:
            self.store.manifest.add_root(root)
        self._ingest(targets, report)
        report.chunks_total = self.collection.count()
        report.seconds = time.perf_counter() - started
        return report

    def sync(self) -> IngestReport:
        """Re-ingest changed and new files under the recorded roots and files; remove the chunks
        of files that no longer exist."""
        started = time.perf_counter()
        report = self._report()
        manifest = self.store.manifest
        targets: list[tuple[Path, Path]] = []
        dir_roots: list[Path] = []
        for root in manifest.roots():
            if not root.exists():
                continue  # its files are gone: removed below
            found, roots, skipped = scan([root], self.settings.suffixes)
            targets.extend(found)
            dir_roots.extend(roots)
            report.skipped.extend(skipped)
        on_disk = {str(f) for _, f in targets}
        gone: list[str] = []
        for record in manifest.files():
            if record.source in on_disk:
                continue
            under_root = any(Path(record.source).is_relative_to(r) for r in dir_roots)
            if not under_root and Path(record.source).is_file():
                targets.append((Path(record.root), Path(record.source)))
            else:
                gone.append(record.source)
        known = {r.source for r in manifest.files()}
        for source in self._sources_in_chroma():
            if source not in known and source not in on_disk and not Path(source).is_file():
                gone.append(source)  # chunks left by an interrupted ingest of a deleted file
        self._ingest(targets, report)
        for source in sorted(set(gone)):
            report.chunks_removed += self._remove_source(source)
            report.files_removed += 1
            report.removed.append(source)
        report.chunks_total = self.collection.count()
        report.seconds = time.perf_counter() - started
        return report

    # --- internals ------------------------------------------------------------------------

    def _report(self) -> IngestReport:
        return IngestReport(store=self.store.location.label, collection=self.settings.collection)

    def _parse(self, targets: list[tuple[Path, Path]], report: IngestReport) -> list[tuple[Path, ParsedNote]]:
        parsed: list[tuple[Path, ParsedNote]] = []
        for root, file in targets:
            report.files_seen += 1
            try:
                note = parse_note(file, root, chunk_words=self.settings.chunk_words,
                                  overlap_words=self.settings.overlap_words)
            except NotUtf8Error as exc:
                report.skipped.append(SkippedFile(path=str(file), kind="not_utf8", reason=str(exc),
                                                  byte_offset=exc.offset))
                continue
            except FrontMatterError as exc:
                report.skipped.append(SkippedFile(path=str(file), kind="malformed_front_matter", reason=str(exc)))
                continue
            except OSError as exc:
                report.skipped.append(SkippedFile(path=str(file), kind="unreadable",
                                                  reason=f"{file}: {exc.strerror or exc}"))
                continue
            parsed.append((root, note))
            report.front_matter_not_carried.extend(f"{note.path}: {why}" for why in note.extras_left_out)
        return parsed

    def _existing_ids(self, sources: list[str]) -> dict[str, set[str]]:
        existing: dict[str, set[str]] = {s: set() for s in sources}
        step = 200
        for i in range(0, len(sources), step):
            part = sources[i:i + step]
            where = {"source": part[0]} if len(part) == 1 else {"source": {"$in": part}}
            got = self.collection.get(where=where, include=["metadatas"])
            for cid, meta in zip(got["ids"], got["metadatas"] or [], strict=False):
                existing.setdefault(str((meta or {}).get("source", "")), set()).add(cid)
        return existing

    def _ingest(self, targets: list[tuple[Path, Path]], report: IngestReport) -> None:
        parsed = self._parse(targets, report)
        if not parsed:
            return
        existing = self._existing_ids([str(n.path) for _, n in parsed])
        stamp = now_iso()
        known = {r.source: r for r in self.store.manifest.files()}
        pending: list[tuple[str, str, dict[str, Any]]] = []
        stale: list[str] = []
        records: list[tuple[FileRecord, list[tuple[str, str]]]] = []
        for root, note in parsed:
            have = existing.get(str(note.path), set())
            want = {c.id for c in note.chunks}
            new_chunks = [c for c in note.chunks if c.id not in have]
            old = have - want
            if not have:
                report.files_new += 1
            elif new_chunks or old:
                report.files_changed += 1
            else:
                report.files_unchanged += 1
            pending.extend((c.id, c.text, _metadata(note, root, c.heading, c.index, stamp)) for c in new_chunks)
            stale.extend(sorted(old))
            previous = known.get(str(note.path)) if not (new_chunks or old) else None
            records.append((FileRecord(
                source=str(note.path), root=str(root), note=note.note, title=note.title,
                type=note.meta.type, source_type=note.meta.source_type, approved=note.meta.approved,
                file_hash=note.file_hash, meta_hash=note.meta_hash, chunk_ids=[c.id for c in note.chunks],
                ingested_at=previous.ingested_at if previous else stamp,
                keys=sorted({note_key(note.path.stem), note_key(note.title)})), note.links))
        self._write(pending)
        report.chunks_added += len(pending)
        if stale:
            for i in range(0, len(stale), 5000):
                self.collection.delete(ids=stale[i:i + 5000])
            report.chunks_removed += len(stale)
        self.store.manifest.put_many(records)

    def _write(self, pending: list[tuple[str, str, dict[str, Any]]]) -> None:
        total = len(pending)
        if not total:
            return
        group = min(self.settings.group_size, self.store.client.get_max_batch_size())
        done = 0
        if self.progress:
            self.progress(0, total)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ora-vault-write") as pool:
            writing: Future[None] | None = None
            for start in range(0, total, group):
                part = pending[start:start + group]
                vectors = embed(self.embedder, [text for _, text, _ in part], self.settings.batch_size)
                if writing is not None:
                    writing.result()  # a failed write raises here, before more work is done
                writing = pool.submit(self.collection.add, ids=[i for i, _, _ in part], embeddings=vectors,
                                      documents=[t for _, t, _ in part], metadatas=[m for _, _, m in part])
                done += len(part)
                if self.progress:
                    self.progress(done, total)
            if writing is not None:
                writing.result()

    def _sources_in_chroma(self) -> set[str]:
        sources: set[str] = set()
        offset, page = 0, 5000
        while True:
            got = self.collection.get(include=["metadatas"], limit=page, offset=offset)
            metas = got["metadatas"] or []
            sources.update(str((m or {}).get("source", "")) for m in metas)
            if len(got["ids"]) < page:
                break
            offset += page
        sources.discard("")
        return sources

    def _remove_source(self, source: str) -> int:
        got = self.collection.get(where={"source": source}, include=[])
        if got["ids"]:
            self.collection.delete(ids=got["ids"])
        self.store.manifest.remove(source)
        return len(got["ids"])


def vault_stats(store: VaultStore) -> dict[str, Any]:
    """What ``ora vault stats`` shows: counts by type and source type, files, links, roots."""
    col = store.vault
    total = col.count()
    by_type: dict[str, int] = {}
    by_source_type: dict[str, int] = {}
    approved = 0
    offset, page = 0, 5000
    while offset < total:
        got = col.get(include=["metadatas"], limit=page, offset=offset)
        for meta in got["metadatas"] or []:
            meta = meta or {}
            by_type[str(meta.get("type", ""))] = by_type.get(str(meta.get("type", "")), 0) + 1
            st = str(meta.get("source_type", ""))
            by_source_type[st] = by_source_type.get(st, 0) + 1
            approved += 1 if meta.get("approved") else 0
        if not got["ids"]:
            break
        offset += page
    files = store.manifest.files()
    resolved, dangling = store.manifest.edge_counts()
    return {
        "store": store.location.label,
        "mode": "server" if store.location.server_url else "embedded",
        "collection": store.settings.collection,
        "chunks": total,
        "files": len(files),
        "approved_chunks": approved,
        "by_type": dict(sorted(by_type.items())),
        "by_source_type": dict(sorted(by_source_type.items())),
        "links": resolved,
        "dangling_links": dangling,
        "roots": [str(r) for r in store.manifest.roots()],
        "last_ingest": max((f.ingested_at for f in files), default=None),
        "conversation_chunks": store.conversations.count(),
    }
