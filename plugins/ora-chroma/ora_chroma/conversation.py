"""Conversation memory: each finished turn's exchange is indexed for later turns.

Seed 000, failure #12: ``try: collection.add(...) except: pass`` made conversation memory
silently un-retrievable. Here a failure to index never breaks the turn, and it is never
silent: one line in ``<trace root>/conversation-indexing-failures.jsonl`` (time, conversation
id, turn id, chunk id, error class and message), a contingency on the turn, and a warning on
stderr. When the log itself cannot be written, stderr carries the same record, and so does the
turn's contingency (``log_written: false``, ``log_error``, ``record``): it is never on stderr only.

The exchange is embedded by the turn's configured embedder (``turn.embedder()``): an
``embedding.embedder`` no plugin registers is such a failure, recorded with the registered names.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .embedding import embed, embedder_of
from .notes import chunk_section
from .retrievers import store_for
from .settings import load_settings, store_location

FAILURE_LOG = "conversation-indexing-failures.jsonl"
CONTINGENCY = "conversation-indexing-failed"
STEP = "conversation-memory"


class IndexingFailure(BaseModel):
    at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    tag: str = "conversation-indexing-failure"
    conversation_id: str
    turn_id: str
    chunk_id: str
    chunk_ids: list[str]
    chunk_path: str
    store: str
    error_class: str
    error_message: str


def exchange_text(prompt: str, result: Any) -> str:
    reply = getattr(result, "answer", "") or ""
    if not reply and getattr(result, "status", "") == "needs_clarification":
        reply = f"(asked for clarification) {getattr(result, 'question', '') or ''}".strip()
    if not reply:
        return ""
    return f"User: {prompt.strip()}\n\nAssistant: {reply.strip()}"


def chunk_ids(conversation_id: str, turn_id: str, count: int) -> list[str]:
    return [hashlib.sha256(f"{conversation_id}\0{turn_id}\0{i}".encode()).hexdigest()[:32]
            for i in range(count)]


def index_turn(turn: Any, result: Any) -> list[str]:
    """Index one exchange; return the chunk ids written (empty when there was nothing to index
    or indexing failed, in which case the failure is recorded)."""
    config = turn.config
    if not config.retrieval.streams.conversation:
        return []
    text = exchange_text(turn.prompt, result)
    redact = getattr(turn, "redact", None)
    if callable(redact):
        text = redact(text)
    if not text:
        return []
    conversation_id = turn.conversation_id
    turn_id = turn.turn_id
    ids: list[str] = []
    try:
        settings = load_settings(config)
        pieces = chunk_section(text, settings.chunk_words * 2, settings.overlap_words)
        ids = chunk_ids(conversation_id, turn_id, len(pieces))
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        metas = [{
            "source": f"conversation:{conversation_id}/{turn_id}",
            "conversation_id": conversation_id,
            "turn_id": turn_id,
            "title": f"conversation {conversation_id}",
            "heading": f"turn {turn_id}",
            "type": "chat",
            "source_type": "conversation",
            "approved": False,
            "chunk_index": i,
            "status": str(getattr(result, "status", "")),
            "mode": str(getattr(result, "mode", "") or ""),
            "ingested_at": stamp,
            "stream": "conversation",
        } for i in range(len(pieces))]
        store = store_for(config)
        vectors = embed(embedder_of(turn), pieces, settings.batch_size)  # the host's configured embedder
        store.conversations.upsert(ids=ids, embeddings=vectors, documents=pieces, metadatas=metas)
    except Exception as exc:  # noqa: BLE001 - recorded by name below; the turn goes on
        record_failure(turn, result, ids or chunk_ids(conversation_id, turn_id, 1), exc)
        return []
    return ids


def failure_log_path(config: Any) -> Path:
    return Path(config.trace.resolved_root()) / FAILURE_LOG


def record_failure(turn: Any, result: Any, ids: list[str], exc: BaseException) -> IndexingFailure:
    config = turn.config
    try:
        where = store_location(config).label
    except Exception as loc_exc:  # noqa: BLE001 - a bad location is itself the error being recorded
        where = f"(unresolvable: {loc_exc})"
    failure = IndexingFailure(
        conversation_id=turn.conversation_id, turn_id=turn.turn_id, chunk_id=ids[0], chunk_ids=ids,
        chunk_path=f"conversation:{turn.conversation_id}/{turn.turn_id}", store=where,
        error_class=type(exc).__name__, error_message=str(exc)[:2000])
    line = json.dumps(failure.model_dump(mode="json"), sort_keys=True) + "\n"
    stderr = getattr(turn, "stderr", None) or sys.stderr
    log = failure_log_path(config)
    logged = log_error = ""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))  # one write per line: never interleaved
        finally:
            os.close(fd)
        logged = f"; recorded in {log}"
    except OSError as log_exc:
        log_error = f"{type(log_exc).__name__}: {log_exc}"
        print(f"ora: WARNING: cannot write {log} ({log_error}); "
              f"the failure record follows: {line.strip()}", file=stderr)
    print(f"ora: WARNING: conversation memory: turn {turn.turn_id} of conversation "
          f"{turn.conversation_id!r} was not indexed ({failure.error_class}: {failure.error_message})"
          f"{logged}", file=stderr)
    contingency = getattr(turn, "contingency", None)
    if callable(contingency):
        # The log line that could not be written is in the turn's trace instead (its record, and why).
        detail = f"{failure.error_class}: {failure.error_message}" + (
            f"; and {log} cannot be written ({log_error}): the failure record is here" if log_error else "")
        contingency(CONTINGENCY, STEP, detail, severity="warning", chunk_id=failure.chunk_id, log=str(log),
                    log_written=not log_error, **({"log_error": log_error,
                                                   "record": failure.model_dump(mode="json")} if log_error else {}))
    names = getattr(result, "contingencies", None)
    if isinstance(names, list) and CONTINGENCY not in names:
        names.append(CONTINGENCY)  # the turn has closed: the result is where the caller sees it
    return failure
