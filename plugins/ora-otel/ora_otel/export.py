"""Getting spans to the collector: the OTLP/HTTP exporter behind a batch span processor, and every
way that can fail reported by name.

- ``ReportingExporter`` wraps the SDK's ``OTLPSpanExporter`` and tells its listener, after each
  export, which spans went and, when they did not, why: the exporter only logs its reasons, so the
  log records it writes while exporting are caught on the exporting thread and become the reason
  (they are not printed a second time; a record logged outside one of our exports is printed on
  stderr as Python's last-resort handler would).
- ``BoundedProcessor`` sits in front of the SDK's ``BatchSpanProcessor``: at most ``max_queue_spans``
  spans wait for the collector; past that a span is dropped *by us* and named (its turn is known),
  instead of the SDK's queue silently pushing out the oldest.
- ``ExportPipeline``: one tracer provider (never the global one: an application's own OpenTelemetry
  setup is left alone) with the two above, deterministic ids (``spans.TurnIds``), the schema URL of
  the conventions followed, and an exit that waits at most ``exit_timeout_s`` for what is queued.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from . import conventions as c
from .options import OtelOptions
from .spans import TurnIds

#: The loggers the OTLP exporter writes its reasons to (the HTTP client logs through the exporter's).
EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp",)
MAX_REASON_CHARS = 600

#: ``listener(spans, reason)``: ``reason`` is None when the spans reached the collector.
ExportListener = Callable[[Sequence[ReadableSpan], "str | None"], None]


class _ExportLog(logging.Handler):
    """Collects, while one of our exports runs on this thread, what the exporter logs (its verdicts
    and the errors it retried on) and what each of its requests met (``note``)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self._local = threading.local()

    @contextmanager
    def capture(self) -> Iterator[list[tuple[str, str]]]:
        lines: list[tuple[str, str]] = []
        previous = getattr(self._local, "lines", None)
        self._local.lines = lines
        try:
            yield lines
        finally:
            self._local.lines = previous

    def note(self, cause: str) -> None:
        lines = getattr(self._local, "lines", None)
        if lines is not None:
            lines.append(("cause", cause))

    def emit(self, record: logging.LogRecord) -> None:
        lines = getattr(self._local, "lines", None)
        if lines is not None:
            lines.append(("log", record.getMessage()))
        elif record.levelno >= logging.WARNING and not _other_handlers(record.name):
            # not ours, and nothing else would show it: shown as it would be without this handler
            last_resort = logging.lastResort
            if last_resort is not None:
                last_resort.handle(record)


def _other_handlers(name: str) -> bool:
    """A handler besides ours would take a record of logger ``name`` (the test ``logging`` makes before
    falling back to its last-resort handler)."""
    logger: logging.Logger | None = logging.getLogger(name)
    while logger is not None:
        if any(h is not _LOG for h in logger.handlers):
            return True
        logger = logger.parent if logger.propagate else None
    return False


_LOG = _ExportLog()
_LOG_LOCK = threading.Lock()


def _install_log() -> None:
    with _LOG_LOCK:
        for name in EXPORTER_LOGGERS:
            logger = logging.getLogger(name)
            if _LOG not in logger.handlers:
                logger.addHandler(_LOG)


_TRANSIENT = re.compile(
    r"^Transient error (?P<cause>.*) encountered while exporting \w+ batch, retrying in [\d.]+s\.?$", re.S)


def reason_of(lines: list[tuple[str, str]], fallback: str) -> str:
    """What one failed export met, as one reason: the exporter's verdict first, then each cause (what a
    request met, what it retried on) once, without retry delays, so two batches failing alike give the
    same reason."""
    verdicts: dict[str, None] = {}
    noted: dict[str, None] = {}  # what the requests met: the exceptions themselves
    retried: dict[str, None] = {}  # the same, as the exporter's retry warnings say it
    for kind, line in lines:
        line = line.strip()
        match = _TRANSIENT.match(line) if kind == "log" else None
        if kind == "cause":
            noted[line] = None
        elif match:
            retried[match.group("cause")] = None
        elif line:
            verdicts[line] = None
    causes = noted or retried
    text = " ".join(verdicts) or fallback
    if causes:
        text += " Cause: " + "; ".join(causes)
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def witness_session() -> Any:
    """A ``requests.Session`` for the OTLP exporter that notes what each request met: the exporter
    itself gives up with "timeout, max retries or shutdown" and no cause when no retry fits its timeout."""
    import requests

    class WitnessSession(requests.Session):
        def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
            try:
                response = super().request(method, url, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - noted, then the exporter's own handling goes on
                _LOG.note(f"{type(exc).__name__}: {exc}")
                raise
            if response.status_code >= 400:
                body = (response.text or "").strip()[:200]
                status = f"HTTP {response.status_code} {response.reason or ''}".strip()
                _LOG.note(status + (f": {body}" if body else ""))
            return response

    return WitnessSession()


class ReportingExporter(SpanExporter):
    """``inner`` (an ``OTLPSpanExporter``), with each export's outcome handed to ``listener``."""

    def __init__(self, inner: SpanExporter, endpoint: str, listener: ExportListener) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.listener = listener
        _install_log()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with _LOG.capture() as lines:
            try:
                result = self.inner.export(spans)
            except Exception as exc:  # noqa: BLE001 - an exporter bug is a failed export, named below
                lines.append(("log", f"the exporter raised {type(exc).__name__}: {exc}"))
                result = SpanExportResult.FAILURE
        reason = None
        if result is not SpanExportResult.SUCCESS:
            reason = reason_of(lines, f"the export to {self.endpoint} failed (no reason given)")
        self.listener(spans, reason)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class BoundedProcessor(SpanProcessor):
    """``BatchSpanProcessor`` with a limit we keep ourselves: a span past ``limit`` waiting spans goes
    to ``on_drop`` instead of the queue; ``released(n)`` is called as exports take spans off."""

    def __init__(self, batch: BatchSpanProcessor, limit: int, on_drop: Callable[[ReadableSpan], None]) -> None:
        self.batch = batch
        self.limit = limit
        self.on_drop = on_drop
        self.waiting = 0
        self._lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.batch.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            full = self.waiting >= self.limit
            if not full:
                self.waiting += 1
        if full:
            self.on_drop(span)
        else:
            self.batch.on_end(span)

    def released(self, count: int) -> None:
        with self._lock:
            self.waiting = max(0, self.waiting - count)

    def shutdown(self) -> None:
        self.batch.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.batch.force_flush(timeout_millis)


class _Ended(SpanProcessor):
    """Calls ``on_end(span)`` as each span ends (ahead of the export: the sink counts a turn's spans)."""

    def __init__(self, on_end: Callable[[ReadableSpan], None]) -> None:
        self._on_end = on_end

    def on_end(self, span: ReadableSpan) -> None:
        self._on_end(span)


def resource(options: OtelOptions) -> Resource:
    from ora_core import __version__

    return Resource.create({"service.name": options.service_name, "service.version": __version__},
                           schema_url=c.SCHEMA_URL)


def otlp_exporter(url: str, options: OtelOptions) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=url, timeout=options.timeout_s, headers=dict(options.headers) or None,
                            session=witness_session())


def tracer_of(provider: TracerProvider) -> Any:
    from ora_core import __version__

    return provider.get_tracer(c.INSTRUMENTATION, __version__, schema_url=c.SCHEMA_URL)


class ExportPipeline:
    """The live export of one ``[plugins.otel]`` configuration: ``tracer`` makes the spans, the batch
    processor sends them every ``export_interval_s`` from its own thread; ``listener`` hears of every
    export and every dropped span (``reason`` set)."""

    def __init__(self, options: OtelOptions, listener: ExportListener, *, exporter: SpanExporter | None = None,
                 on_end: Callable[[ReadableSpan], None] | None = None) -> None:
        self.options = options
        self.url = options.traces_url
        self.listener = listener
        self.ids = TurnIds()
        self.exporter = ReportingExporter(exporter or otlp_exporter(self.url, options), self.url, self._exported)
        limit = options.max_queue_spans
        batch = BatchSpanProcessor(self.exporter, max_queue_size=limit + options.max_batch_spans,
                                   schedule_delay_millis=options.export_interval_s * 1000,
                                   max_export_batch_size=min(options.max_batch_spans, limit),
                                   export_timeout_millis=options.timeout_s * 1000)
        self.processor = BoundedProcessor(batch, limit, self._dropped)
        self.provider = TracerProvider(resource=resource(options), id_generator=self.ids, sampler=ALWAYS_ON,
                                       shutdown_on_exit=False)
        if on_end is not None:  # hears of each span before the export can take it
            self.provider.add_span_processor(_Ended(on_end))
        self.provider.add_span_processor(self.processor)
        self.tracer = tracer_of(self.provider)

    def _exported(self, spans: Sequence[ReadableSpan], reason: str | None) -> None:
        self.processor.released(len(spans))
        self.listener(spans, reason)

    def _dropped(self, span: ReadableSpan) -> None:
        self.listener([span], f"dropped before export: {self.options.max_queue_spans} spans were already waiting "
                              f"for {self.url} (max_queue_spans); the collector is down or not keeping up")

    def flush(self, timeout_s: float) -> bool:
        """Export what is queued now; False when that took longer than ``timeout_s`` (it goes on in
        the background)."""
        done = threading.Event()

        def run() -> None:
            try:
                self.processor.force_flush()
            finally:
                done.set()

        threading.Thread(target=run, name="ora-otel-flush", daemon=True).start()
        return done.wait(timeout_s)
