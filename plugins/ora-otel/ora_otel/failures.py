"""``<trace root>/otel-export-failures.jsonl``: every export that failed, and every replay that made
up for one, so ``ora trace export --otlp URL --failed`` knows which turns a collector never got.

Append-only, one JSON line per record, each written with one ``write`` on a file opened for
appending (lines of two processes never interleave). The forensic trace on disk is complete either
way: this file only says which turns are missing *at the collector*.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

FILE_NAME = "otel-export-failures.jsonl"


class FailedTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    turn_id: str
    conversation_id: str = ""
    spans: int = 0
    #: How the turn was told: ``contingency`` (while it ran), ``close`` (its close returned the error:
    #: tracing degraded), ``stderr`` (after it had returned), ``exit`` (still queued when the process exited).
    reported: str = ""


class FailureRecord(BaseModel):
    """One line: an export that failed (``failed``), or a replay that delivered turns (``replayed``)."""

    model_config = ConfigDict(extra="ignore")

    kind: Literal["failed", "replayed"] = "failed"
    at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    endpoint: str
    reason: str = ""
    turns: list[FailedTurn] = Field(default_factory=list)


def log_path(root: Path) -> Path:
    return Path(root) / FILE_NAME


def append(root: Path, record: FailureRecord) -> Path:
    """Append ``record`` under ``root`` (created if missing); ``OSError`` when it cannot be written."""
    path = log_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (record.model_dump_json() + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written != len(data):
        raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
    return path


def unreplayed(root: Path) -> tuple[list[str], list[str]]:
    """The turn ids whose export failed and no replay has delivered since, oldest failure first; and
    the problems met reading the file (a line that is not a record is named, never skipped silently)."""
    path = log_path(root)
    if not path.exists():
        return [], []
    pending: dict[str, None] = {}
    problems: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = FailureRecord.model_validate(json.loads(line))
        except (ValueError, ValidationError) as exc:
            problems.append(f"{path}:{number}: not a record ({type(exc).__name__}); line ignored")
            continue
        for turn in record.turns:
            if record.kind == "failed":
                pending[turn.turn_id] = None
            else:
                pending.pop(turn.turn_id, None)
    return list(pending), problems
