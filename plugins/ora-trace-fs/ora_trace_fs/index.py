"""The index beside the traces: ``<root>/.ora-index.jsonl``, one line per closed turn.

The sink appends a turn's line when it closes the turn, after the turn's files are written (one
``write`` on an ``O_APPEND`` descriptor: whole lines, even from concurrent processes), so
``ora health`` and its dashboard read 10,000 turns from one file instead of every step file.

The index is derived data: it can always be rebuilt from the turn directories, and it is checked
against them on every read (one directory listing, no file read): a closed turn missing from the
index (written by an older version, a crash between the turn's files and its line, traces copied
in, a deleted index) is read from its files and its line appended; a line whose turn directory
is gone is left out; an unreadable line is named. Each of those is said (``IndexScan.notes``:
on stderr and on the dashboard), never silently absorbed. Turns still open have no line: they
are reported from their ``turn.json`` and lock (``running`` or ``interrupted``).

``IndexLine`` is the line's shape (pydantic): the sink writes it and the readers validate it.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .encoding import compact

INDEX_NAME = ".ora-index.jsonl"
PROMPT_CHARS = 200
LOG_NAMES = ("rag-failures.jsonl", "supplemental-rag.jsonl", "contingencies.jsonl", "oversight-queue.jsonl")

# The engine's own test for a coverage-gap block (ora_core.engine.supplement.has_coverage_gap):
# a "COVERAGE GAP" heading (Markdown or bold) or a "COVERAGE GAP:" line.
_GAP = re.compile(r"^\s{0,3}(?:#{1,6}\s*|\*\*\s*)COVERAGE GAP\b|COVERAGE GAP:", re.IGNORECASE | re.MULTILINE)


def has_coverage_gap(text: str) -> bool:
    return bool(_GAP.search(text))


def output_has_coverage_gap(output: Any) -> bool:
    """A step's output text (``text`` or ``answer``) names a coverage gap."""
    if not isinstance(output, dict):
        return False
    return any(isinstance(output.get(k), str) and has_coverage_gap(output[k]) for k in ("text", "answer"))


class IndexStep(BaseModel):
    """One step of an indexed turn: what its ``step-health.json`` entry says, plus whether its
    output named a coverage gap."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: str
    verdict: str = "OK"
    degraded: bool = False
    latency_s: float = 0.0
    contingencies: list[str] = Field(default_factory=list)
    regenerations: int = 0
    supplements: int = 0
    noncompliance: dict[str, int] = Field(default_factory=dict)
    coverage_gap: bool = False


class IndexLine(BaseModel):
    """One closed turn in ``.ora-index.jsonl``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    turn_id: str
    conversation_id: str
    dir: str  # the turn directory relative to the trace root: ``<conversation>/<turn id>``
    started_at: datetime
    finished_at: datetime | None = None
    status: str
    mode: str | None = None
    gear: int | None = None
    total_s: float | None = None
    prompt: str = ""  # its first PROMPT_CHARS characters
    multi_stream: bool = False  # its steps worked in more than one stream (Gear 4's depth and breadth)
    steps: list[IndexStep] = Field(default_factory=list)
    contingencies: list[str] = Field(default_factory=list)
    supplements: int = 0
    supplements_resolved: int = 0
    coverage_gaps: int = 0  # steps whose output named a coverage gap
    noncompliance: dict[str, int] = Field(default_factory=dict)
    mismatched_roles: list[str] = Field(default_factory=list)
    trace_errors: int = 0
    source: Literal["sink", "rebuilt"] = "sink"

    @field_validator("started_at", "finished_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """A time without a zone (an old or hand-written turn.json) is UTC, as the trace writes it."""
        return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


def step_stream(inputs: Any) -> str:
    """The stream a step works in (``depth``, ``breadth``: Gear 4's parallel streams), from its
    input package's ``stream`` or ``slot``; "" for the pipeline's own steps."""
    if not isinstance(inputs, dict):
        return ""
    return str(inputs.get("stream") or inputs.get("slot") or "")


_STEP_DEFAULTS = {f: IndexStep.model_fields[f].get_default(call_default_factory=True) for f in IndexStep.model_fields}


def line_record(*, turn: dict[str, Any], health: list[dict[str, Any]], supplements: list[dict[str, Any]],
                coverage_steps: set[str], multi_stream: bool, directory: str,
                source: Literal["sink", "rebuilt"] = "sink") -> dict[str, Any]:
    """The index line of a closed turn, as the plain data of an ``IndexLine`` (its defaults left
    out), from its ``turn.json`` document, its step-health entries, its supplement records, the
    steps whose output named a coverage gap and whether its steps worked in more than one stream.
    The sink builds it on a turn's close from what it has in memory (plain data: a validated model
    would cost the close ~4 times more), a rebuild from the files; ``IndexLine`` validates it
    wherever it is read (``tests/test_views.py`` pins that the sink's lines validate)."""
    noncompliance: dict[str, int] = {}
    steps = []
    defaults = _STEP_DEFAULTS
    for h in health:
        entry = {"step": str(h.get("step", "?"))}
        values = (("verdict", str(h.get("verdict") or "OK")), ("degraded", bool(h.get("degraded"))),
                  ("latency_s", float(h.get("latency_s") or 0.0)),
                  ("contingencies", list(h.get("contingencies") or [])),
                  ("regenerations", int(h.get("regenerations") or 0)),
                  ("supplements", int(h.get("supplements") or 0)),
                  ("noncompliance", dict(h.get("noncompliance") or {})),
                  ("coverage_gap", entry["step"] in coverage_steps))
        for key, value in values:
            if value != defaults[key]:
                entry[key] = value
        for pattern, count in entry.get("noncompliance", {}).items():
            noncompliance[pattern] = noncompliance.get(pattern, 0) + int(count)
        steps.append(entry)
    ledger = turn.get("runtimeRoleModels") or []
    record: dict[str, Any] = {
        "turn_id": turn["turn_id"], "conversation_id": turn["conversation_id"], "dir": directory,
        "started_at": turn["started_at"], "finished_at": turn.get("finished_at"), "status": str(turn.get("status")),
        "mode": turn.get("mode"), "gear": turn.get("gear"), "total_s": (turn.get("timings") or {}).get("total_s"),
        "prompt": str(turn.get("prompt") or "")[:PROMPT_CHARS], "multi_stream": multi_stream, "steps": steps,
        "contingencies": list(turn.get("contingencies") or []), "supplements": len(supplements),
        "supplements_resolved": sum(1 for s in supplements if s.get("resolved")),
        "coverage_gaps": len(coverage_steps), "noncompliance": noncompliance,
        "mismatched_roles": sorted({str(e.get("role")) for e in ledger if e.get("mismatch")}),
        "trace_errors": len(turn.get("trace_write_errors") or []), "source": source,
    }
    return {k: v for k, v in record.items() if v or k in ("turn_id", "conversation_id", "dir", "started_at",
                                                          "status")} | {"v": 1}


def build_line(**parts: Any) -> IndexLine:
    """``line_record``, validated."""
    return IndexLine.model_validate(line_record(**parts))


def encode(record: dict[str, Any] | IndexLine) -> bytes:
    """One index line: compact JSON and its newline."""
    if isinstance(record, IndexLine):
        return record.model_dump_json(exclude_defaults=True).encode("utf-8") + b"\n"
    return compact(record) + b"\n"


def append(root: Path, data: bytes) -> None:
    """One whole line, in one write, at the end of the index (raises ``OSError``)."""
    fd = os.open(root / INDEX_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {root / INDEX_NAME}: {written} of {len(data)} bytes")
    finally:
        os.close(fd)


# --- reading ----------------------------------------------------------------------------------------


class IndexReadError(ValueError):
    """A turn's files cannot be read to rebuild its index line; the message says which and why."""


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexReadError(f"{path}: {type(exc).__name__}: {exc}") from exc


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    try:
        return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    except (OSError, ValueError) as exc:
        raise IndexReadError(f"{path}: {type(exc).__name__}: {exc}") from exc


def line_from_files(turn_dir: Path, root: Path, turn: dict[str, Any] | None = None) -> dict[str, Any]:
    """A closed turn's index line, from its files (every step file is read: the slow path the
    index exists to avoid). Raises ``IndexReadError``."""
    turn = turn if turn is not None else _json(turn_dir / "turn.json")
    health_doc = _json(turn_dir / "step-health.json") if (turn_dir / "step-health.json").exists() else {}
    streams: set[str] = set()
    gaps: set[str] = set()
    for f in sorted(turn_dir.glob("[0-9]*-*.json")):
        doc = _json(f)
        streams.add(step_stream(doc.get("input")))
        if output_has_coverage_gap(doc.get("output")):
            gaps.add(str(doc.get("step")))
    streams.discard("")
    try:
        return line_record(turn=turn, health=list(health_doc.get("steps") or []),
                           supplements=_jsonl(turn_dir / "supplemental-rag.jsonl"), coverage_steps=gaps,
                           multi_stream=len(streams) > 1, directory=turn_dir.relative_to(root).as_posix(),
                           source="rebuilt")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise IndexReadError(f"{turn_dir}: cannot index it: {type(exc).__name__}: {exc}") from exc


def turn_dirs(root: Path) -> dict[str, Path]:
    """``<conversation>/<turn id>`` -> directory, for every turn directory holding a ``turn.json``
    (one directory listing per conversation; ``turn.json`` is checked only for names not yet seen)."""
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    with os.scandir(root) as conversations:
        for conv in conversations:
            if not conv.is_dir() or conv.name.startswith("."):
                continue
            with os.scandir(conv.path) as turns:
                for entry in turns:
                    if entry.is_dir() and not entry.name.startswith("."):
                        found[f"{conv.name}/{entry.name}"] = Path(entry.path)
    return found


@dataclass
class OpenTurn:
    """A turn on disk without a closing ``turn.json``: still running, or interrupted."""

    dir: str
    path: Path
    turn: dict[str, Any]
    status: str  # running | interrupted | unknown
    why: str


@dataclass
class IndexScan:
    """What a read of the index found beyond the lines it passed on."""

    root: Path
    index_path: Path
    lines: int = 0  # lines passed on (within ``since``)
    from_index: int = 0
    rebuilt: int = 0
    open_turns: list[OpenTurn] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said on stderr and on the dashboard
    unreadable: list[str] = field(default_factory=list)
    seconds: float = 0.0


def scan(root: Path, consume: Callable[[IndexLine], None], *, since: datetime | None = None,
         rebuild: bool = False, write: bool = True,
         liveness: Callable[[Path, dict[str, Any]], tuple[str, str]] | None = None) -> IndexScan:
    """Pass every closed turn's index line under ``root`` to ``consume`` (one at a time: 10,000
    turns never sit in memory as models) and return what else was found.

    ``rebuild``: ignore the index and read every turn from its files (and, with ``write``, replace
    the index with what was read, atomically). Otherwise the index is read and checked against the
    directories; closed turns missing from it are read from their files and (``write``) appended.
    ``liveness(dir, turn_doc)`` -> (status, why) names the open turns (default: ``unknown``)."""
    began = time.perf_counter()
    index_path = root / INDEX_NAME
    result = IndexScan(root=root, index_path=index_path)
    dirs = turn_dirs(root)
    seen: set[str] = set()

    def give(line: IndexLine) -> None:
        if since is not None and line.started_at < since:
            return
        result.lines += 1
        consume(line)

    exists = index_path.exists()
    if not rebuild and exists:
        bad: list[str] = []
        gone = 0
        for number, raw in _index_lines(index_path, result):
            try:
                line = IndexLine.model_validate_json(raw)
            except ValidationError as exc:
                bad.append(f"line {number}: {exc.errors()[0]['msg']} at {'.'.join(map(str, exc.errors()[0]['loc']))}")
                continue
            if line.dir in seen:
                continue  # the same turn indexed twice (two rebuilds at once): the first line counts
            if line.dir not in dirs:
                gone += 1
                continue
            seen.add(line.dir)
            result.from_index += 1
            give(line)
        if bad:
            result.notes.append(f"{len(bad)} unreadable line(s) in {index_path} left out ({'; '.join(bad[:3])}"
                                f"{'; ...' if len(bad) > 3 else ''}); their turns are read from their files")
        if gone:
            result.notes.append(f"{gone} line(s) of {index_path} name turns no longer on disk: left out")
    elif not rebuild and dirs:
        result.notes.append(f"no index at {index_path}: every turn is read from its files"
                            + (" and the index written" if write else ""))
    added: list[bytes] = []
    for rel, path in sorted(dirs.items()):
        if rel in seen:
            continue
        turn_file = path / "turn.json"
        if not turn_file.exists():
            continue  # a directory the sink has just created: its turn.json follows
        try:
            turn = _json(turn_file)
            if turn.get("status") == "running":
                status, why = liveness(path, turn) if liveness else ("unknown", "liveness not checked")
                if status == "closed":  # it closed while we looked: read it again below
                    turn = _json(turn_file)
                else:
                    started = _started(turn) if since is not None else None
                    if started is None or started >= since:  # an unreadable start is kept, not dropped
                        result.open_turns.append(OpenTurn(dir=rel, path=path, turn=turn, status=status, why=why))
                    continue
            record = line_from_files(path, root, turn)
            line = IndexLine.model_validate(record)
        except IndexReadError as exc:
            result.unreadable.append(str(exc))
            continue
        except ValidationError as exc:
            result.unreadable.append(f"{path}: its turn.json does not make an index line: {exc.errors()[0]['msg']} at "
                                     f"{'.'.join(map(str, exc.errors()[0]['loc']))}")
            continue
        seen.add(rel)
        result.rebuilt += 1
        added.append(encode(record))
        give(line)
    if rebuild and write and dirs:
        _replace_index(root, index_path, added, result)
    elif added and write:
        try:
            with open(index_path, "ab") as f:
                f.write(b"".join(added))
        except OSError as exc:
            result.notes.append(f"cannot add to {index_path}: {type(exc).__name__}: {exc}")
    if added and not rebuild and exists:
        result.notes.append(f"{len(added)} closed turn(s) were not in the index: read from their files"
                            + (f" and added to {index_path}" if write else ""))
    if result.unreadable:
        result.notes.append(f"{len(result.unreadable)} turn(s) could not be read: {result.unreadable[0]}"
                            + (" ..." if len(result.unreadable) > 1 else ""))
    result.seconds = time.perf_counter() - began
    return result


def _started(turn: dict[str, Any]) -> datetime | None:
    try:
        started = datetime.fromisoformat(turn["started_at"])
    except (KeyError, TypeError, ValueError):
        return None
    return started if started.tzinfo else started.replace(tzinfo=timezone.utc)


def _index_lines(path: Path, result: IndexScan) -> Iterator[tuple[int, bytes]]:
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if raw.strip():
                    yield number, raw
    except OSError as exc:
        result.notes.append(f"cannot read {path}: {type(exc).__name__}: {exc}; turns are read from their files")


def _replace_index(root: Path, index_path: Path, lines: list[bytes], result: IndexScan) -> None:
    tmp = root / f".{INDEX_NAME}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(b"".join(lines))
        os.replace(tmp, index_path)
    except OSError as exc:
        result.notes.append(f"cannot write {index_path}: {type(exc).__name__}: {exc}")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        return
    result.notes.append(f"index rebuilt from {len(lines)} turn(s)' files: {index_path}")
