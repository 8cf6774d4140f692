"""Reading traces back: listing turns, finding one, aggregating step health over many."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

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

    def as_row(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "conversation_id": self.conversation_id,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "status": self.doc.get("status", "unreadable" if self.error else "?"),
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


def _load_json(path: Path) -> dict[str, Any]:
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
            summary.doc = _load_json(d / "turn.json")
            summary.started_at = datetime.fromisoformat(summary.doc["started_at"])
        except (TraceReadError, KeyError, ValueError) as exc:
            summary.error = str(exc)
        if since and summary.started_at and summary.started_at < since:
            continue
        turns.append(summary)
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(turns, key=lambda t: (t.started_at or epoch, t.turn_id), reverse=True)


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
    """turn.json, step-health.json and every step document of one turn directory."""
    turn = _load_json(path / "turn.json")
    health = _load_json(path / "step-health.json") if (path / "step-health.json").exists() else None
    steps = []
    for f in sorted(path.glob("[0-9]*-*.json")):
        doc = _load_json(f)
        md = f.with_suffix(".md")
        steps.append({"file": f.name, "doc": doc, "markdown": md.read_text(encoding="utf-8") if md.exists() else None})
    logs = {}
    for name in ("rag-failures.jsonl", "supplemental-rag.jsonl", "contingencies.jsonl", "oversight-queue.jsonl"):
        p = path / name
        logs[name] = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()] \
            if p.exists() else None
    return {"path": str(path), "turn": turn, "step_health": health, "steps": steps, "logs": logs}


def aggregate_health(root: Path, *, since: datetime | None = None) -> dict[str, Any]:
    """Step health over every turn under ``root`` (since a time): per step runs, pass, fail,
    broken, skipped, degraded share and the most frequent contingencies."""
    per_step: dict[str, dict[str, Any]] = {}
    statuses: Counter[str] = Counter()
    all_contingencies: Counter[str] = Counter()
    unreadable: list[str] = []
    turns = 0
    for summary in list_turns(root, since=since):
        health_path = summary.path / "step-health.json"
        if not health_path.exists():
            statuses["incomplete"] += 1
            continue
        try:
            health = _load_json(health_path)
        except TraceReadError as exc:
            unreadable.append(str(exc))
            continue
        turns += 1
        statuses[health.get("status") or "?"] += 1
        all_contingencies.update(health.get("contingencies") or [])
        for step in health.get("steps") or []:
            name = step.get("step", "?")
            agg = per_step.setdefault(name, {"runs": 0, "pass": 0, "fail": 0, "broken": 0, "skipped": 0,
                                             "degraded": 0, "_contingencies": Counter()})
            agg["runs"] += 1
            verdict = step.get("verdict", "OK")
            key = {"PASS": "pass", "OK": "pass", "FAIL": "fail", "BROKEN": "broken", "SKIPPED": "skipped",
                   "DEGRADED": "pass"}.get(verdict, "pass")
            agg[key] += 1
            if step.get("degraded") or verdict == "DEGRADED":
                agg["degraded"] += 1
            agg["_contingencies"].update(step.get("contingencies") or [])
    steps = {}
    for name, agg in sorted(per_step.items()):
        counter = agg.pop("_contingencies")
        agg["degraded_pct"] = round(100.0 * agg["degraded"] / agg["runs"], 1) if agg["runs"] else 0.0
        agg["top_contingencies"] = [{"name": n, "count": c} for n, c in counter.most_common(5)]
        steps[name] = agg
    return {
        "root": str(root),
        "since": since.isoformat() if since else None,
        "turns": turns,
        "statuses": dict(statuses),
        "steps": steps,
        "top_contingencies": [{"name": n, "count": c} for n, c in all_contingencies.most_common(10)],
        "unreadable": unreadable,
    }
