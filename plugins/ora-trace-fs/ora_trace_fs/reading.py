"""Reading traces back: listing turns, finding one, aggregating step health over many."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .liveness import turn_liveness

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class TraceReadError(ValueError):
    """A trace (or an argument naming one) cannot be read; the message says which and why."""


@dataclass
class TurnSummary:
    path: Path
    turn_id: str
    conversation_id: str
    started_at: datetime | None
    doc: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    status: str = ""  # turn.json's status, or for a turn still open: running | interrupted | incomplete
    status_why: str = ""  # why an open turn has that status

    def as_row(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "conversation_id": self.conversation_id,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "status": self.status or self.doc.get("status", "unreadable" if self.error else "?"),
            "status_why": self.status_why or None,
            "mode": self.doc.get("mode"),
            "gear": self.doc.get("gear"),
            "contingencies": len(self.doc.get("contingencies") or []),
            "prompt": self.doc.get("prompt", ""),
            "path": str(self.path),
            "error": self.error,
        }


def parse_since(value: str | None, now: datetime | None = None) -> datetime | None:
    """``7d``, ``12h``, ``30m``, ``2w`` ago, or an ISO date/time (UTC if no zone)."""
    if not value:
        return None
    now = now or datetime.now(timezone.utc)
    m = _RELATIVE.match(value.strip())
    if m:
        return now - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise TraceReadError(
            f"--since {value!r}: expected a duration like 7d, 12h, 30m, 2w or an ISO date like 2026-05-15"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _turn_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return [d for conv in root.iterdir() if conv.is_dir() for d in conv.iterdir()
            if d.is_dir() and (d / "turn.json").exists()]


def load_json(path: Path) -> dict[str, Any]:
    """A trace's JSON file; ``TraceReadError`` naming the file and why it cannot be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TraceReadError(f"{path}: {type(exc).__name__}: {exc}") from exc


def list_turns(root: Path, *, conversation: str | None = None, since: datetime | None = None) -> list[TurnSummary]:
    """Every traced turn under ``root``, newest first. Unreadable ones are listed with the error."""
    turns = []
    for d in _turn_dirs(root):
        if conversation and d.parent.name != conversation:
            continue
        summary = TurnSummary(path=d, turn_id=d.name, conversation_id=d.parent.name, started_at=None)
        try:
            summary.doc = load_json(d / "turn.json")
            summary.started_at = datetime.fromisoformat(summary.doc["started_at"])
        except (TraceReadError, KeyError, ValueError) as exc:
            summary.error = str(exc)
        if since and summary.started_at and summary.started_at < since:
            continue
        if summary.doc.get("status") == "running":
            summary.status, summary.status_why = open_turn_status(d, summary.doc)
            if summary.status == "closed":  # it closed while we looked
                summary.doc = load_json(d / "turn.json")
                summary.status, summary.status_why = "", ""
        turns.append(summary)
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(turns, key=lambda t: (t.started_at or epoch, t.turn_id), reverse=True)


#: What ``ora trace ls``, ``trace show`` and ``ora health`` call a turn still open whose liveness
#: cannot be told (a trace written before the lock file existed): never guessed from its age.
UNKNOWN_OPEN = "incomplete"


def open_turn_status(path: Path, doc: dict[str, Any]) -> tuple[str, str]:
    """The status of a turn whose ``turn.json`` says ``running``: ``running`` (its process holds
    the turn's lock), ``interrupted`` (its process died before closing it), ``incomplete``
    (cannot be told), or ``closed`` (its closing ``turn.json`` landed while we looked); and why."""
    report = turn_liveness(path, doc)
    if report.state == "running":
        return "running", report.why
    try:
        if load_json(path / "turn.json").get("status") != "running":
            return "closed", ""
    except TraceReadError as exc:
        return UNKNOWN_OPEN, str(exc)
    return ("interrupted" if report.state == "interrupted" else UNKNOWN_OPEN), report.why


def find_turn(root: Path, ref: str | None) -> Path:
    """A turn directory from a path, a turn id, a unique prefix of one, or (None) the latest."""
    if ref:
        as_path = Path(ref).expanduser()
        if as_path.is_dir() and (as_path / "turn.json").exists():
            return as_path
    turns = list_turns(root)
    if not turns:
        raise TraceReadError(f"no traced turns under {root}")
    if not ref:
        return turns[0].path
    matches = [t for t in turns if t.turn_id == ref] or [t for t in turns if t.turn_id.startswith(ref)]
    if not matches:
        raise TraceReadError(f"no turn {ref!r} under {root} (try `ora trace ls`)")
    if len(matches) > 1:
        ids = ", ".join(t.turn_id for t in matches[:5])
        raise TraceReadError(f"{ref!r} matches {len(matches)} turns ({ids}...); give more of the id")
    return matches[0].path


def load_turn(path: Path) -> dict[str, Any]:
    """turn.json, step-health.json and every step document of one turn directory, with the turn's
    status (for a turn still open: ``running``, ``interrupted`` or ``incomplete``, and why)."""
    turn = load_json(path / "turn.json")
    status, why = str(turn.get("status") or "?"), ""
    if status == "running":
        status, why = open_turn_status(path, turn)
        if status == "closed":  # it closed while we looked
            turn = load_json(path / "turn.json")
            status, why = str(turn.get("status") or "?"), ""
    health = load_json(path / "step-health.json") if (path / "step-health.json").exists() else None
    steps = []
    for f in sorted(path.glob("[0-9]*-*.json")):
        doc = load_json(f)
        md = f.with_suffix(".md")
        steps.append({"file": f.name, "doc": doc, "markdown": md.read_text(encoding="utf-8") if md.exists() else None})
    logs = {}
    for name in ("rag-failures.jsonl", "supplemental-rag.jsonl", "contingencies.jsonl", "oversight-queue.jsonl"):
        p = path / name
        logs[name] = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()] \
            if p.exists() else None
    return {"path": str(path), "status": status, "status_why": why, "turn": turn, "step_health": health,
            "steps": steps, "logs": logs}


def aggregate_health(root: Path, *, since: datetime | None = None, rebuild_index: bool = False) -> dict[str, Any]:
    """Step health over every turn under ``root`` (since a time), from the index beside the traces
    (``index``; turns missing from it are read from their files and added, and the report says
    so): per step runs, pass, fail, broken, skipped, degraded share, latency, the most frequent
    contingencies; turns still open counted apart as running, interrupted or incomplete."""
    from .health import HealthAggregate
    from .index import scan

    aggregate = HealthAggregate()
    found = scan(root, aggregate.add, since=since, rebuild=rebuild_index, liveness=open_turn_status)
    for open_turn in found.open_turns:
        aggregate.add_open(open_turn)
    return aggregate.report(root=root, since=since, scan=found)
