"""Turns read back from their directories on disk and exported after the fact
(``ora trace export --otlp URL``), so a collector that was down when they ran loses nothing.

The reader is ours (plugins never import each other): it knows the layout ora-trace-fs writes,
``<root>/<conversation>/<turn id>/`` with ``turn.json`` and ``NN-<step>.json`` (each step's input,
output, health and the events that happened in it, with their ``seq`` and time), and rebuilds the
turn's event stream in order; the live sink's span builder (``spans.TurnSpans``) makes the same span
tree from it, with the original timestamps and, ids being derived from the turn id, the same ids.
Each turn is exported synchronously, in one request, so each one's outcome is known.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

STEP_FILE = re.compile(r"^\d+-.+\.json$")
NOT_STEPS = frozenset({"turn.json", "step-health.json"})
#: Where an event sorts among events of the same microsecond.
_ORDER = {"turn_started": 0, "step_started": 1, "step_finished": 3, "turn_finished": 4}


class ReplayError(Exception):
    """A turn that cannot be read back (the message names the file and why)."""


class StepDocument(BaseModel):
    """``NN-<step>.json``, as far as the export needs it."""

    model_config = ConfigDict(extra="ignore")

    step: str
    index: int | None = None
    status: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    health: dict[str, Any] = Field(default_factory=dict)
    events: list[dict[str, Any]] = Field(default_factory=list)
    calls: list[dict[str, Any]] = Field(default_factory=list)  # the step's model_call events


class TurnDocument(BaseModel):
    """``turn.json``, as far as the export needs it."""

    model_config = ConfigDict(extra="ignore")

    turn_id: str
    conversation_id: str = "default"
    prompt: str = ""
    started_at: datetime
    finished_at: datetime | None = None
    config_hash: str = ""
    status: str = ""
    mode: str | None = None
    gear: int | None = None
    answer: str | None = None
    diagnostic: dict[str, Any] | None = None
    contingencies: list[str] = Field(default_factory=list)
    turn_events: list[dict[str, Any]] = Field(default_factory=list)


@dataclass(frozen=True)
class Event:
    """One event read back: the fields of a ``TraceEvent`` the span builder reads."""

    kind: str
    at: datetime
    step: str = ""
    step_index: int | None = None
    seq: int = 0
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class StoredTurn:
    path: Path
    turn: TurnDocument
    events: list[Event]


def _load(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayError(f"{path}: {type(exc).__name__}: {exc}") from None
    if not isinstance(value, dict):
        raise ReplayError(f"{path}: not a JSON object")
    return value


def _recorded(record: dict[str, Any], where: Path) -> Event:
    """An event as the step files and ``turn_events`` hold it: ``seq``, ``at``, ``kind``, ``step`` and
    the event's data beside them."""
    try:
        at = datetime.fromisoformat(str(record["at"]))
        kind = str(record["kind"])
    except (KeyError, ValueError) as exc:
        raise ReplayError(f"{where}: an event without a valid {exc}") from None
    data = {k: v for k, v in record.items() if k not in {"seq", "at", "kind", "step"}}
    seq = record.get("seq")
    return Event(kind=kind, at=at, step=str(record.get("step") or ""), seq=seq if isinstance(seq, int) else 0,
                 data=data)


def read_turn(path: Path) -> StoredTurn:
    """The turn in directory ``path`` and its events in the order they happened; ``ReplayError``
    naming the file when one cannot be read."""
    try:
        turn = TurnDocument.model_validate(_load(path / "turn.json"))
    except ValidationError as exc:
        raise ReplayError(f"{path / 'turn.json'}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    events = [Event("turn_started", turn.started_at, data={"config_hash": turn.config_hash})]
    for file in sorted(p for p in path.iterdir() if STEP_FILE.match(p.name) and p.name not in NOT_STEPS):
        try:
            doc = StepDocument.model_validate(_load(file))
        except ValidationError as exc:
            raise ReplayError(f"{file}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
        if doc.started_at is None:
            raise ReplayError(f"{file}: the step has no started_at")
        events.append(Event("step_started", doc.started_at, doc.step, doc.index, data={"input": doc.input}))
        events += [_recorded(record, file) for record in [*doc.events, *doc.calls] if isinstance(record, dict)]
        if doc.status == "finished" and doc.finished_at is not None:
            events.append(Event("step_finished", doc.finished_at, doc.step, doc.index,
                                data={"output": doc.output, "health": doc.health}))
    events += [_recorded(record, path / "turn.json") for record in turn.turn_events if isinstance(record, dict)]
    if turn.finished_at is not None and turn.status not in {"", "running"}:
        events.append(Event("turn_finished", turn.finished_at, data={"result": {
            "status": turn.status, "mode": turn.mode, "gear": turn.gear, "answer": turn.answer,
            "diagnostic": turn.diagnostic, "contingencies": turn.contingencies}}))
    events.sort(key=lambda e: (e.at, _ORDER.get(e.kind, 2), e.seq))
    return StoredTurn(path=path, turn=turn, events=events)


def turn_directories(root: Path) -> list[Path]:
    """Every turn directory under ``root`` (``<conversation>/<turn id>/turn.json``), oldest first (a
    turn id starts with its UTC time)."""
    if not root.is_dir():
        return []
    found = [d for conv in root.iterdir() if conv.is_dir() for d in conv.iterdir()
             if d.is_dir() and (d / "turn.json").is_file()]
    return sorted(found, key=lambda d: (d.name, d.parent.name))


def resolve_turns(root: Path, refs: Sequence[str]) -> tuple[list[Path], list[str]]:
    """The directories ``refs`` name (a directory, a turn id, or a unique prefix of one) and, for each
    ref that names none or several, why."""
    every = turn_directories(root)
    found: list[Path] = []
    problems: list[str] = []
    for ref in refs:
        as_path = Path(ref).expanduser()
        if as_path.is_dir() and (as_path / "turn.json").is_file():
            found.append(as_path)
            continue
        matches = [d for d in every if d.name == ref] or [d for d in every if d.name.startswith(ref)]
        if not matches:
            problems.append(f"{ref}: no such turn under {root}")
        elif len(matches) > 1:
            problems.append(f"{ref}: matches {len(matches)} turns ({', '.join(d.name for d in matches[:4])}"
                            f"{', ...' if len(matches) > 4 else ''}); give more of the id")
        else:
            found.append(matches[0])
    return list(dict.fromkeys(found)), problems


@dataclass
class Outcome:
    """What became of one turn: exported (``spans`` sent) or not (``reason``)."""

    path: Path
    turn_id: str
    spans: int = 0
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


def export_turns(paths: Iterable[Path], options: Any, *, exporter: Any = None,
                 progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Export each turn of ``paths`` to ``options.traces_url``, one request per turn, in order."""
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    from .export import ReportingExporter, otlp_exporter, resource, tracer_of
    from .spans import ContentPolicy, TurnIds, TurnSpans

    ended: list[Any] = []

    class Collect(SpanProcessor):
        def on_end(self, span: Any) -> None:
            ended.append(span)

    ids = TurnIds()
    provider = TracerProvider(resource=resource(options), id_generator=ids, sampler=ALWAYS_ON, shutdown_on_exit=False)
    provider.add_span_processor(Collect())
    tracer = tracer_of(provider)
    heard: list[str | None] = []
    sender = ReportingExporter(exporter or otlp_exporter(options.traces_url, options), options.traces_url,
                               lambda spans, reason: heard.append(reason))
    content = ContentPolicy(options.capture_content, options.max_content_chars)
    outcomes: list[Outcome] = []
    try:
        for path in paths:
            outcome = Outcome(path=path, turn_id=path.name)
            try:
                stored = read_turn(path)
            except ReplayError as exc:
                outcome.reason = f"cannot be read: {exc}"
            else:
                outcome.turn_id = stored.turn.turn_id
                ended.clear()
                spans = TurnSpans(tracer, ids, turn_id=stored.turn.turn_id, conversation_id=stored.turn.conversation_id,
                                  started_at=stored.turn.started_at, prompt=stored.turn.prompt, content=content,
                                  replayed=True)
                for event in stored.events:
                    spans.feed(event)
                spans.finish("the turn on disk never finished (interrupted, or still running)")
                heard.clear()
                sender.export(list(ended))
                outcome.spans = len(ended)
                outcome.reason = heard[-1] if heard else "the exporter reported nothing"
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    finally:
        sender.shutdown()
        provider.shutdown()
    return outcomes
