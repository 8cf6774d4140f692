"""The live export: a trace sink that turns each turn's events into spans and sends them to an
OpenTelemetry collector over OTLP/HTTP.

Off unless ``[plugins.otel]`` turns it on: then ``open_turn`` reads the options once (cached by the
kernel) and returns, and ``handle`` is one dictionary look-up per event. On, the pipeline's thread
pays one ``deque.append`` per event (and an ``Event.set`` when a step or a call ends): the spans are
built on the sink's builder thread and at the turn's close (``close_turn``, which the kernel runs on
a worker thread), and sent by the batch span processor's thread every ``export_interval_s``.

An export that fails is never silent and never breaks the turn:

- while the turn runs (before its ``turn_finished`` event): a contingency ``otel-export-failed`` of
  the turn (step ``turn``, severity ``warning``), so it is in the result, in the forensic trace and
  in the turn's own span;
- once that is known before the turn's close returns, the close returns it as an error too: the
  kernel names the sink on stderr and marks the turn's tracing degraded;
- after the turn has returned: one line on the turn's stderr naming the turn, the collector and the
  reason, with the command that replays it;
- every time: a line in ``<trace root>/otel-export-failures.jsonl`` (``failures``), which
  ``ora trace export --otlp URL --failed`` reads to send the turns again from disk.

Memory stays bounded while a collector is down: at most ``max_queue_spans`` spans wait (past it a
span is dropped and named like a failed export), a turn's state is let go once its spans are out,
and each export gives up after ``timeout_s``. At exit the queued spans get ``exit_timeout_s``.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from . import failures
from .ids import trace_id_for
from .options import TABLE, OtelOptions

if TYPE_CHECKING:  # the OpenTelemetry SDK is imported when the export is on, never to load the plugin
    from .export import ExportPipeline
    from .spans import TurnSpans

CONTINGENCY = "otel-export-failed"
CONTINGENCY_STEP = "turn"
#: Events after which there are spans to build (a step or a call ended).
_WAKE_KINDS = frozenset({"step_finished", "model_call", "retrieval"})
BUILD_IDLE_S = 1.0  # the builder thread looks at open turns at least this often


@dataclass
class _Turn:
    info: Any
    ctx: Any
    options: OtelOptions
    pipeline: ExportPipeline
    trace_root: Path | None
    stderr: IO[str]
    events: deque[Any] = field(default_factory=deque)
    spans: TurnSpans | None = None
    running: bool = True  # until its turn_finished event
    closed: bool = False  # its close_turn has returned
    pending: int = 0  # spans ended, not yet exported (or dropped)
    lost: dict[str, int] = field(default_factory=dict)  # why -> spans not exported, known before its close
    recorded: set[str] = field(default_factory=set)  # the reasons already in otel-export-failures.jsonl
    told: bool = False  # the contingency was recorded
    late: int = 0  # our contingencies that arrived after turn_finished
    errors: list[str] = field(default_factory=list)
    broken: bool = False  # building its spans raised: no more spans for it


class OtelSink:
    """The ``otel`` trace sink (see the module's docstring)."""

    name = "otel"

    def __init__(self, *, exporter_factory: Any = None) -> None:
        #: ``exporter_factory(url, options)``: what sends the spans (default: the OTLP/HTTP exporter).
        self._exporter_factory = exporter_factory
        self._turns: dict[str, _Turn] = {}  # open turns
        self._by_trace: dict[int, _Turn] = {}  # turns with spans not yet out, open or closed
        self._pipelines: dict[str, ExportPipeline] = {}
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._builder: threading.Thread | None = None
        self._exit_registered = False

    # --- the sink protocol ------------------------------------------------------------------------

    def open_turn(self, info: Any, ctx: Any) -> None:
        options = OtelOptions.of(ctx, TABLE)
        if not options.active:
            return
        trace_config = getattr(getattr(ctx, "config", None), "trace", None)
        root = Path(trace_config.resolved_root()) if trace_config is not None else None
        with self._lock:
            turn = _Turn(info=info, ctx=ctx, options=options, pipeline=self._pipeline(options), trace_root=root,
                         stderr=getattr(ctx, "stderr", None) or sys.stderr)
            self._turns[info.turn_id] = turn
            self._by_trace[trace_id_for(info.turn_id)] = turn
            if self._builder is None:
                self._builder = threading.Thread(target=self._build_loop, name="ora-otel-spans", daemon=True)
                self._builder.start()

    def handle(self, event: Any) -> None:
        turn = self._turns.get(event.turn_id)
        if turn is None:
            return
        turn.events.append(event)
        kind = event.kind
        if kind in _WAKE_KINDS:
            self._wake.set()
        elif kind == "turn_finished":
            turn.running = False
        elif kind == "contingency" and not turn.running and event.data.get("name") == CONTINGENCY:
            turn.late += 1

    def close_turn(self, info: Any) -> dict[str, Any] | None:
        with self._lock:
            turn = self._turns.pop(info.turn_id, None)
            if turn is None:
                return None
            self._drain(turn)
            if turn.spans is not None and not turn.spans.finished and not turn.broken:
                self._guarded(turn, turn.spans.finish)
            turn.closed = True
            turn.ctx = None  # nothing of the turn is needed once it has returned, but its name
            if turn.pending <= 0:
                self._by_trace.pop(trace_id_for(info.turn_id), None)
            errors = list(turn.errors) + [f"{CONTINGENCY}: {count} span(s) not exported to {turn.pipeline.url}: {why}"
                                          for why, count in turn.lost.items()]
        return {"errors": errors} if errors else None

    # --- for applications and tests ---------------------------------------------------------------

    @property
    def exporting(self) -> bool:
        """A configuration has turned the export on in this process (an exporter exists)."""
        return bool(self._pipelines)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Build what the open turns have so far, then export everything queued; False when the
        export took longer than ``timeout_s``."""
        with self._lock:
            for turn in list(self._turns.values()):
                self._drain(turn)
            pipelines = list(self._pipelines.values())
        return all(p.flush(timeout_s) for p in pipelines)

    def shutdown(self) -> None:
        """Let go of the exporters (their threads and connections); the sink exports nothing after."""
        with self._lock:
            pipelines = list(self._pipelines.values())
            self._pipelines.clear()
        for pipeline in pipelines:
            pipeline.provider.shutdown()

    # --- building ---------------------------------------------------------------------------------

    def _pipeline(self, options: OtelOptions) -> ExportPipeline:
        key = options.model_dump_json(exclude={"capture_content", "max_content_chars"})
        pipeline = self._pipelines.get(key)
        if pipeline is None:
            from .export import ExportPipeline

            exporter = self._exporter_factory(options.traces_url, options) if self._exporter_factory else None
            pipeline = ExportPipeline(options, self._exported, exporter=exporter, on_end=self._ended)
            self._pipelines[key] = pipeline
            if not self._exit_registered:
                self._exit_registered = True
                atexit.register(self._at_exit)
        return pipeline

    def _build_loop(self) -> None:
        while True:
            self._wake.wait(BUILD_IDLE_S)
            self._wake.clear()
            with self._lock:
                for turn in list(self._turns.values()):
                    self._drain(turn)

    def _drain(self, turn: _Turn) -> None:
        """Feed the turn's queued events to its span builder (under ``_lock``)."""
        if turn.spans is None and not turn.broken:
            self._guarded(turn, self._start_spans, turn)
        events = turn.events
        while events and not turn.broken:
            event = events.popleft()
            self._guarded(turn, turn.spans.feed, event)  # type: ignore[union-attr]
        if turn.broken:
            events.clear()

    @staticmethod
    def _start_spans(turn: _Turn) -> None:
        from .spans import ContentPolicy, TurnSpans

        info = turn.info
        turn.spans = TurnSpans(turn.pipeline.tracer, turn.pipeline.ids, turn_id=info.turn_id,
                               conversation_id=info.conversation_id, started_at=info.started_at, prompt=info.prompt,
                               content=ContentPolicy(turn.options.capture_content, turn.options.max_content_chars))

    def _guarded(self, turn: _Turn, work: Any, *args: Any) -> None:
        try:
            work(*args)
        except Exception as exc:  # noqa: BLE001 - our own bug must not stop other turns: named, turn degraded
            turn.broken = True
            what = f"building the turn's spans failed ({type(exc).__name__}: {exc}); the rest of it is not exported"
            turn.errors.append(what)
            if turn.closed:
                print(f"ora: otel: turn {turn.info.turn_id}: {what}", file=turn.stderr)

    def _ended(self, span: Any) -> None:
        turn = self._by_trace.get(span.context.trace_id)
        if turn is not None:
            with self._lock:
                turn.pending += 1

    # --- what became of the spans -----------------------------------------------------------------

    def _exported(self, spans: Any, reason: str | None) -> None:
        counts = Counter(span.context.trace_id for span in spans)
        hit: list[tuple[_Turn | None, int, int]] = []
        with self._lock:
            for trace_id, count in counts.items():
                turn = self._by_trace.get(trace_id)
                if turn is not None:
                    turn.pending -= count
                    if turn.closed and turn.pending <= 0:
                        self._by_trace.pop(trace_id, None)
                hit.append((turn, trace_id, count))
        if reason is not None:
            self._report(hit, reason)

    def _report(self, hit: list[tuple[_Turn | None, int, int]], reason: str, *, at_exit: bool = False) -> None:
        by_root: dict[Path | None, list[failures.FailedTurn]] = {}
        url, stderr = "", sys.stderr
        for turn, trace_id, count in hit:
            if turn is None:
                print(f"ora: otel: {count} span(s) of trace {trace_id:032x} were not exported ({reason})",
                      file=sys.stderr)
                continue
            url, stderr = turn.pipeline.url, turn.stderr
            how = self._tell(turn, count, reason, at_exit=at_exit)
            with self._lock:
                first = reason not in turn.recorded
                turn.recorded.add(reason)
            if first:  # the turn is listed for replay once per reason (a dead collector fails every batch)
                by_root.setdefault(turn.trace_root, []).append(failures.FailedTurn(
                    turn_id=turn.info.turn_id, conversation_id=turn.info.conversation_id, spans=count, reported=how))
        for root, turns in by_root.items():
            self._record(root, failures.FailureRecord(endpoint=url, reason=reason, turns=turns), stderr)

    def _tell(self, turn: _Turn, count: int, reason: str, *, at_exit: bool = False) -> str:
        """Tell the turn (a contingency, its close's errors) or, once it has returned, its stderr."""
        url = turn.pipeline.url
        replay = f"ora trace export --otlp {turn.options.endpoint or url} {turn.info.turn_id}"
        detail = (f"{count} span(s) of this turn were not exported to {url}: {reason}. The trace on disk is "
                  f"complete; replay it with `{replay}`")
        with self._lock:
            ctx = turn.ctx if turn.running and not turn.told else None
            if ctx is not None:
                turn.told = True
            closed = turn.closed
            if not closed:
                turn.lost[reason] = turn.lost.get(reason, 0) + count
        if ctx is not None:
            late = turn.late
            ctx.contingency(CONTINGENCY, CONTINGENCY_STEP, detail, severity="warning", endpoint=url, spans=count)
            if turn.late == late:
                return "contingency"
        if not closed:
            return "close"
        print(f"ora: otel: turn {turn.info.turn_id}: {count} span(s) not exported to {url} ({reason}); "
              f"replay with `{replay}`", file=turn.stderr)
        return "exit" if at_exit else "stderr"

    @staticmethod
    def _record(root: Path | None, record: failures.FailureRecord, stderr: IO[str]) -> None:
        turns = record.turns
        if root is None:
            print(f"ora: otel: no trace root to record the failed export of {', '.join(t.turn_id for t in turns)} in",
                  file=stderr)
            return
        try:
            failures.append(root, record)
        except OSError as exc:
            print(f"ora: otel: cannot record the failed export in {failures.log_path(root)} "
                  f"({type(exc).__name__}: {exc}); turns not exported: {', '.join(t.turn_id for t in turns)}",
                  file=stderr)

    def _at_exit(self) -> None:
        with self._lock:
            pipelines = list(self._pipelines.values())
        for pipeline in pipelines:
            if pipeline.flush(pipeline.options.exit_timeout_s):
                continue
            with self._lock:
                left = [(t, trace_id_for(t.info.turn_id), t.pending) for t in self._by_trace.values()
                        if t.pipeline is pipeline and t.pending > 0]
            reason = (f"still waiting for {pipeline.url} when the process exited "
                      f"({pipeline.options.exit_timeout_s:g} s, exit_timeout_s)")
            for turn, _, _ in left:
                turn.closed, turn.running = True, False
            self._report(left, reason, at_exit=True)
