"""The trace API: a turn context that emits typed events to every registered trace sink.

The kernel owns the API, not the storage: the on-disk forensic sink is a plugin. A sink that
raises is isolated: reported once on stderr per sink and turn, marked in the result as
``tracing_degraded``, and the run goes on (seed 000 §4.3: a trace that crashes the system it
instruments is worse than no trace at all).

No sink sees a secret: the turn's ``Redactor`` (``kernel/redaction.py``, built from the configuration)
replaces every configured secret in each event's data before the fan-out, and in the ``TurnInfo``
the sinks are opened with. A turn whose configuration holds no secret pays nothing for it.
"""

from __future__ import annotations

import re
import sys
import threading
import uuid
from asyncio import CancelledError as _CANCELLED
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any, get_args

from ora_core.kernel.components import ComponentRegistry, TraceSink
from ora_core.kernel.models import (
    Contingency,
    EventKind,
    ModelCallRecord,
    Severity,
    Signal,
    StepHealth,
    TraceEvent,
    TurnInfo,
    TurnResult,
    assembled,
)
from ora_core.kernel.redaction import Redactor, scrub_shapes
from ora_core.kernel.stash import Stash

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pydantic import BaseModel

    from ora_core.kernel.config import OraConfig
    from ora_core.kernel.models import ModelReply, ModelRequest, VerificationCall

_SAFE_ID = re.compile(r"[^A-Za-z0-9._-]+")
_EVENT_KINDS = frozenset(get_args(EventKind))
#: The fields of events that are error text (what a retriever, a backend or a plugin said): credential
#: shapes are scrubbed out of them too, not only the configuration's secrets (rare events, one field).
_ERROR_TEXT_FIELDS = {"contingency": "detail", "rag_failure": "message"}


def _built_event(kind: str, turn_id: str, conversation_id: str, seq: int, at: datetime, step: str,
                 step_index: int | None, data: dict[str, Any]) -> TraceEvent:
    """A ``TraceEvent`` from parts already checked, every field given: what ``model_construct``
    does for a model without defaults to fill, extras or private attributes, at a third of its
    cost (it is paid ~50 times per Gear-4 turn). ``tests/test_trace_emit.py`` pins that it equals the
    validated event."""
    return assembled(TraceEvent, {"kind": kind, "turn_id": turn_id, "conversation_id": conversation_id,
                                  "seq": seq, "at": at, "step": step, "step_index": step_index, "data": data})


def sanitize_id(raw: str, default: str = "default") -> str:
    """A conversation id safe as one directory name: no separators, no traversal, no odd bytes."""
    cleaned = _SAFE_ID.sub("-", raw).strip(".-_")
    cleaned = re.sub(r"\.{2,}", ".", cleaned)[:80]
    return cleaned or default


def new_turn_id(now: datetime | None = None) -> str:
    """A new turn id: the UTC time to the microsecond and 48 random bits (``20261127T193616.123456Z-
    a1b2c3d4e5f6``), so turns of several processes writing into one trace root never collide."""
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S.%fZ") + "-" + uuid.uuid4().hex[:12]


_TURN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}")


def check_turn_id(turn_id: str) -> str:
    """``turn_id`` if it can name a trace directory as it is (letters, digits, ``.``, ``_``, ``-``;
    at most 120 characters, no leading punctuation), else a ``UsageError`` saying what is wrong."""
    from ora_core.kernel.errors import UsageError

    if not isinstance(turn_id, str) or not _TURN_ID.fullmatch(turn_id) or ".." in turn_id:
        raise UsageError(f"turn_id {turn_id!r} cannot name a trace: use 1-120 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit (Ora.new_turn_id() makes one)")
    return turn_id


class TurnContext:
    """Everything one turn knows: config, plugins, sinks, and what has happened so far.

    Passed as ``ctx`` to detectors, retrievers and verifiers (a ``ComponentContext``), so they can
    read the configuration and record contingencies without importing anything but ``ora_core``.

    Two places hold what the steps of a turn share: ``data``, the plain dict plugins share (what the
    engine puts there is ``ora_core.kernel.ctx_data``), and ``stash``, the engine's own typed slots
    (``ora_core.kernel.stash``: each ``StashKey`` declared with its type beside the code that owns it).
    """

    def __init__(
        self,
        *,
        prompt: str,
        config: OraConfig,
        config_hash: str,
        sinks: Sequence[TraceSink] = (),
        host: ComponentRegistry | None = None,
        conversation_id: str = "default",
        plugins: dict[str, str] | None = None,
        secrets: Sequence[str] = (),
        stderr: IO[str] | None = None,
        redactor: Redactor | None = None,
        turn_id: str | None = None,
    ) -> None:
        self.started_at = datetime.now(timezone.utc)
        self.turn_id = check_turn_id(turn_id) if turn_id is not None else new_turn_id(self.started_at)
        self.conversation_id = sanitize_id(conversation_id)
        self.prompt = prompt
        self.config = config
        self.config_hash = config_hash
        self.host = host
        #: What replaces secrets in everything this turn hands out (events, errors, the result).
        self.redactor = redactor if redactor is not None else Redactor(s for s in secrets if s)
        self.secrets = tuple(dict.fromkeys([*(s for s in secrets if s), *self.redactor.secrets]))
        self._redact_data = self.redactor.data if self.redactor.active else None
        self.stderr = stderr if stderr is not None else sys.stderr
        self.info = TurnInfo(
            turn_id=self.turn_id,
            conversation_id=self.conversation_id,
            started_at=self.started_at,
            prompt=self.redactor.text(prompt),
            config_hash=config_hash,
            plugins=dict(plugins or {}),
        )
        self._sinks: list[TraceSink] = list(sinks)
        self._failed_sinks: dict[str, str] = {}
        self._closed_sinks: set[str] = set()  # sinks whose close_turn has returned
        self._seq = 0
        self._emit_lock = threading.Lock()  # retrievers run in threads and may record contingencies
        self._step_counter = 0
        #: The steps running now, in the order they started (Gear 4 runs two side by side): what an
        #: interruption names as the step the turn was in.
        self.open_steps: list[str] = []
        #: The steps a cancellation from outside unwound, innermost first (``Interruption.step``).
        self.cancelled_steps: list[str] = []
        self.contingencies: list[Contingency] = []
        self.health: dict[str, StepHealth] = {}
        self.calls: list[ModelCallRecord] = []
        self._call_counter = 0
        self._step_calls: dict[str, int] = {}
        #: ``[trace] calls``: "verbatim" (messages, parameters, raw output in every model_call event) or "ledger"
        self._verbatim_calls = getattr(getattr(config, "trace", None), "calls", "verbatim") != "ledger"
        self.signals: list[Signal] = []
        self.trace_paths: list[str] = []
        #: The scratch space plugins share (``ctx.data``); the keys the engine writes: ``kernel/ctx_data.py``.
        self.data: dict[str, Any] = {}
        #: The engine's state between the steps of this turn, in typed slots (``kernel/stash.py``).
        self.stash = Stash()
        self._detectors: dict[tuple[str, str | None], list[Any]] = {}

    # --- sinks ------------------------------------------------------------------------------

    @property
    def tracing_degraded(self) -> bool:
        return bool(self._failed_sinks)

    @property
    def sink_failures(self) -> dict[str, str]:
        return dict(self._failed_sinks)

    @property
    def listened(self) -> bool:
        """Whether some sink still takes this turn's events (a failed sink takes none). When none
        does, the payloads only a sink reads (a finished step's health dump, the turn's final
        summary) are not built: ~0.4 ms of a Gear-4 turn with the trace off (benchmarks/cascade.py)."""
        failed = self._failed_sinks
        return any(getattr(sink, "name", type(sink).__name__) not in failed for sink in self._sinks)

    def _sink_failed(self, sink: TraceSink, stage: str, exc: BaseException) -> None:
        name = getattr(sink, "name", type(sink).__name__)
        if name in self._failed_sinks:
            return
        message = self.redactor.error_text(f"{stage}: {type(exc).__name__}: {exc}")
        self._failed_sinks[name] = message
        print(f"ora: trace sink {name!r} failed ({message}); the run goes on without it",
              file=self.stderr)

    def _to_sinks(self, method: str, *args: Any) -> list[Any]:
        results = []
        for sink in self._sinks:
            name = getattr(sink, "name", type(sink).__name__)
            if name in self._failed_sinks:
                continue
            try:
                results.append(getattr(sink, method)(*args))
            except Exception as exc:  # noqa: BLE001 - isolation; reported by _sink_failed
                self._sink_failed(sink, method, exc)
        return results

    def close_overdue(self, seconds: float) -> None:
        """The turn's close did not come back within ``seconds`` (a sink stuck on its disk): every
        sink that has not closed (nor failed) is named, tracing is degraded; the close goes on in
        the background."""
        for sink in self._sinks:
            if getattr(sink, "name", type(sink).__name__) in self._closed_sinks:
                continue
            self._sink_failed(sink, "close_turn", TimeoutError(
                f"did not return within {seconds:g} s (trace.close_timeout_s); the turn returned without "
                "waiting for it"))

    def open(self) -> TurnContext:
        self._to_sinks("open_turn", self.info, self)
        self.emit("turn_started", prompt=self.prompt, config_hash=self.config_hash,
                  plugins=self.info.plugins)
        return self

    def redact(self, text: str) -> str:
        """``text`` with every secret of the configuration replaced (``Redactor.text``)."""
        return self.redactor.text(text)

    def embedder(self, name: str | None = None) -> Any:
        """The configured embedder (``[embedding] embedder``), or the one registered as ``name``."""
        return embedder_for(self.host, self.config, name)

    def options(self, table: str) -> BaseModel:
        """``[plugins.<table>]`` validated as the model its plugin declared (``ora_register_options``),
        cached while the table stays the same: ``ora_core.kernel.config.options_for``."""
        from ora_core.kernel.config import options_for

        return options_for(self.host, self.config, table)

    # --- events -----------------------------------------------------------------------------

    def emit(self, kind: EventKind, *, step: str = "", step_index: int | None = None,
             **data: Any) -> TraceEvent:
        # The event is built from checked parts without a pydantic validation pass (the
        # per-event cost on the model-call path); anything unusual takes the validating path
        # and fails there as it always did.
        fast = kind in _EVENT_KINDS and type(step) is str and (step_index is None or type(step_index) is int)
        if self._redact_data is not None:  # only a configuration with secrets pays for the scan
            data = self._redact_data(data)
        said = _ERROR_TEXT_FIELDS.get(kind)
        if said is not None and type(data.get(said)) is str:
            data[said] = scrub_shapes(data[said])
        with self._emit_lock:
            self._seq += 1
            if fast:
                event = _built_event(kind, self.turn_id, self.conversation_id, self._seq,
                                     datetime.now(timezone.utc), step, step_index, data)
            else:
                event = TraceEvent(kind=kind, turn_id=self.turn_id, conversation_id=self.conversation_id,
                                   seq=self._seq, step=step, step_index=step_index, data=data)
            self._to_sinks("handle", event)
        return event

    @contextmanager
    def step(self, name: str, **inputs: Any) -> Iterator[StepRecorder]:
        """Record one step: its input package, its output package, its health."""
        self._step_counter += 1
        recorder = StepRecorder(self, name, self._step_counter)
        self.emit("step_started", step=name, step_index=recorder.index, input=inputs)
        self.open_steps.append(name)
        try:
            yield recorder
        except BaseException as exc:
            recorder.health.verdict = "BROKEN"
            recorder.health.degraded = True
            if isinstance(exc, _CANCELLED):  # the turn was cancelled from outside while this step ran
                reason = str(exc.args[0]) if exc.args and exc.args[0] else "cancelled"
                self.cancelled_steps.append(name)
                recorder.output.setdefault("error", {"error_class": "Interrupted", "reason": reason,
                                                     "message": f"the turn was cancelled ({reason}) in this step"})
            else:
                recorder.output.setdefault("error", {"error_class": type(exc).__name__, "message": str(exc)})
            raise
        finally:
            if name in self.open_steps:
                self.open_steps.remove(name)
            recorder.finish()

    def contingency(self, name: str, step: str, detail: str = "", *,
                    severity: Severity = "warning", **data: Any) -> Contingency:
        """Name a fallback that fired. It lands in the event stream and in step health."""
        record = Contingency(name=name, step=step, detail=detail, severity=severity, data=data)
        self.contingencies.append(record)
        health = self.health.setdefault(step, StepHealth(step=step))
        if name not in health.contingencies:
            health.contingencies.append(name)
        if severity in {"degraded", "error"}:
            health.degraded = True
        self.emit("contingency", step=step, **record.model_dump(mode="json", exclude={"step"}))
        return record

    def detect(self, layer: str, text: str, *, step: str = "", kind: str | None = None,
               exclude_kinds: frozenset[str] = frozenset()) -> list[Signal]:
        """Run every registered detector of ``layer`` over ``text``; signals are traced."""
        if self.host is None:
            return []
        from ora_core.kernel.detection import run_detectors

        key = (layer, kind)
        if key not in self._detectors:  # the registry does not change during a turn
            self._detectors[key] = self.host.detectors(layer=layer, kind=kind)
        found = run_detectors(self.host, layer, text, self, kind=kind, step=step,
                              exclude_kinds=exclude_kinds, detectors=self._detectors[key])
        self.signals.extend(found)
        return found

    def record_call(self, record: ModelCallRecord, step: str = "") -> None:
        """Number the call (in the turn, and within ``step``), keep it in the role ledger, and emit
        it whole (the messages, parameters and raw output included) as a ``model_call`` event."""
        with self._emit_lock:
            self._call_counter += 1
            within = self._step_calls[step] = self._step_calls.get(step, 0) + 1
            number = self._call_counter
        fields = record.__dict__
        fields["call"], fields["step"], fields["step_call"] = number, step, within
        self.calls.append(record)
        if type(record) is ModelCallRecord:
            # Every field is JSON-native already but the messages: its values, the lists and dicts
            # copied, are what ``model_dump(mode="json")`` gives with the excluded fields included
            # (pinned in tests/test_backends_call_path.py).
            data = dict(fields)
            data["fallback_flags"] = list(data["fallback_flags"])
            if data["error"] is not None:
                data["error"] = dict(data["error"])
            del data["step"]  # the event's own field
            if self._verbatim_calls:
                data["messages"] = [{"role": m.role, "content": m.content} for m in data["messages"]]
            else:
                del data["messages"], data["params"], data["output"]
        else:
            data = record.model_dump(mode="json", exclude={"step"})
            if self._verbatim_calls:
                data.update(messages=[m.model_dump(mode="json") for m in record.messages], params=record.params,
                            output=record.output)
        self.emit("model_call", step=step, **data, mismatch=record.mismatch)

    # --- closing ------------------------------------------------------------------------------

    def finalize(self, result: TurnResult) -> TurnResult:
        """Stamp the result with the turn's ids, contingencies, role ledger and signals.

        Idempotent. The runner calls it before the ``ora_turn_finished`` observers, so they see
        a complete result while the sinks are still open to record what the observers do."""
        result.turn_id = self.turn_id
        result.conversation_id = self.conversation_id
        result.contingencies = [c.name for c in self.contingencies]
        result.runtime_role_models = [ledger_entry(c) for c in self.calls]
        result.signals = list(self.signals)
        return result

    def close_waits(self) -> bool:
        """Whether closing this turn may wait on a disk or a network: some open sink has no
        ``close_waits`` (the safe assumption), or its ``close_waits(turn_info)`` says True. The
        runner closes a turn whose close cannot wait on the event loop's thread, sparing the hop
        to a worker thread and back (~0.3 ms; with trace-fs's ``async`` durability, or no sink)."""
        for sink in self._sinks:
            name = getattr(sink, "name", type(sink).__name__)
            if name in self._failed_sinks:
                continue
            probe = getattr(sink, "close_waits", None)
            if probe is None:
                return True
            try:
                if probe(self.info):
                    return True
            except Exception as exc:  # noqa: BLE001 - isolation; reported by _sink_failed
                self._sink_failed(sink, "close_waits", exc)
        return False

    def close(self, result: TurnResult) -> TurnResult:
        """Finish the turn: final event, sinks closed, trace path and degradation recorded.

        A sink's ``close_turn`` may return ``{"trace_path": ..., "errors": [...]}``: errors mean
        some of its writes failed (it said which on stderr), so tracing is degraded."""
        self.finalize(result)
        if self.listened:
            self.emit("turn_finished", result=result.model_dump(mode="json"),
                      step_health=[h.model_dump(mode="json") for h in self.health.values()],
                      contingencies=[c.model_dump(mode="json") for c in self.contingencies],
                      sink_failures=self.sink_failures)
        for sink in self._sinks:
            name = getattr(sink, "name", type(sink).__name__)
            if name in self._failed_sinks:
                continue
            try:
                info = sink.close_turn(self.info)
            except Exception as exc:  # noqa: BLE001 - isolation; reported by _sink_failed
                self._sink_failed(sink, "close_turn", exc)
                continue
            self._closed_sinks.add(name)
            if not isinstance(info, dict):
                continue
            if info.get("trace_path"):
                self.trace_paths.append(str(info["trace_path"]))
            if info.get("errors"):
                errors = [str(e) for e in info["errors"]]
                self._sink_failed(sink, "writes", RuntimeError(
                    f"{len(errors)} write(s) failed, first: {errors[0]}"))
        result.trace_path = self.trace_paths[0] if self.trace_paths else None
        result.tracing_degraded = self.tracing_degraded
        return result


_NOT_IN_LEDGER: dict[str, Any] = {"messages": [], "params": {}, "output": None}


def ledger_entry(record: ModelCallRecord) -> ModelCallRecord:
    """``record`` as the result's role ledger holds it: without the call verbatim (the messages, the
    parameters, the raw output stay in the trace's step files), so a result dumped to JSON and read back
    is the same result."""
    if type(record) is ModelCallRecord:
        return assembled(ModelCallRecord, {**record.__dict__, **_NOT_IN_LEDGER})
    return record.model_copy(update=_NOT_IN_LEDGER)


def embedder_for(host: ComponentRegistry | None, config: OraConfig | None, name: str | None = None) -> Any:
    """The embedder registered as ``name`` (default: ``config.embedding.embedder``); a name no
    plugin registers is a ``PluginError`` listing the registered ones."""
    from ora_core.kernel.errors import PluginError

    wanted = name or getattr(getattr(config, "embedding", None), "embedder", None) or "minilm"
    if host is None:
        raise PluginError(f"embedder {wanted!r} is configured, but there is no plugin host to find it in")
    registered = host.components("embedder")
    if wanted not in registered:
        known = ", ".join(sorted(registered)) or "none (install ora-minilm)"
        raise PluginError(f"embedding.embedder names {wanted!r}, which no plugin registers "
                          f"(registered embedders: {known})")
    return registered[wanted]


class CallContext:
    """A turn as one component call sees it: the turn's own ``config``, ``host``, ``data``,
    ``stash``, ``prompt``, ids, ``stderr``, ``secrets`` and ``redactor``, its ``contingency``, ``emit``,
    ``detect``, ``embedder``, ``options`` and ``redact`` (``turn`` is the whole ``TurnContext``),
    plus what this call is serving (``verification``) and ``await ctx.ask_model(request)``, the
    engine running a model step for the component under the turn's rules. Built per call, so two
    verifications running side by side (Gear 4's streams) never see each other's."""

    def __init__(self, turn: TurnContext, *, verification: VerificationCall | None = None,
                 gateway: Callable[[ModelRequest, CallContext], Awaitable[ModelReply]] | None = None) -> None:
        self._turn = turn
        self.verification = verification
        self._gateway = gateway

    @property
    def turn(self) -> TurnContext:
        return self._turn

    # --- the turn's own, by name (no attribute is looked up on the turn by a fallback) -----------

    @property
    def config(self) -> OraConfig:
        return self._turn.config

    @property
    def host(self) -> ComponentRegistry | None:
        return self._turn.host

    @property
    def data(self) -> dict[str, Any]:
        return self._turn.data

    @property
    def stash(self) -> Stash:
        return self._turn.stash

    @property
    def prompt(self) -> str:
        return self._turn.prompt

    @property
    def turn_id(self) -> str:
        return self._turn.turn_id

    @property
    def conversation_id(self) -> str:
        return self._turn.conversation_id

    @property
    def stderr(self) -> IO[str]:
        return self._turn.stderr

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._turn.secrets

    @property
    def redactor(self) -> Redactor:
        return self._turn.redactor

    @property
    def contingencies(self) -> list[Contingency]:
        return self._turn.contingencies

    def contingency(self, name: str, step: str, detail: str = "", *,
                    severity: Severity = "warning", **data: Any) -> Contingency:
        return self._turn.contingency(name, step, detail, severity=severity, **data)

    def emit(self, kind: EventKind, *, step: str = "", step_index: int | None = None, **data: Any) -> TraceEvent:
        return self._turn.emit(kind, step=step, step_index=step_index, **data)

    def detect(self, layer: str, text: str, *, step: str = "", kind: str | None = None,
               exclude_kinds: frozenset[str] = frozenset()) -> list[Signal]:
        return self._turn.detect(layer, text, step=step, kind=kind, exclude_kinds=exclude_kinds)

    def embedder(self, name: str | None = None) -> Any:
        return self._turn.embedder(name)

    def options(self, table: str) -> BaseModel:
        return self._turn.options(table)

    def redact(self, text: str) -> str:
        return self._turn.redact(text)

    async def ask_model(self, request: ModelRequest) -> ModelReply:
        """Run ``request`` (a ``ModelRequest``) as a model step of this turn; a ``ModelReply``.

        Raises ``BackendError`` when every backend of the role failed, and ``PluginError`` when
        nothing can run model steps here (outside a turn's engine)."""
        if self._gateway is None:
            from ora_core.kernel.errors import PluginError

            raise PluginError("no model gateway here: ask_model runs only inside a turn's engine")
        return await self._gateway(request, self)


class StandaloneContext:
    """The ``ctx`` handed to components outside a turn (``ora vault search``, ``ora models
    list --check``, benchmarks): the configuration, and contingencies reported on stderr and
    kept in ``contingencies`` instead of a trace."""

    def __init__(self, config: OraConfig, *, stderr: IO[str] | None = None, host: ComponentRegistry | None = None,
                 secrets: Sequence[str] = (), redactor: Redactor | None = None) -> None:
        self.config = config
        self.host = host
        self.redactor = redactor if redactor is not None else Redactor(s for s in secrets if s)
        self.secrets = tuple(dict.fromkeys([*(s for s in secrets if s), *self.redactor.secrets]))
        self.stderr = stderr if stderr is not None else sys.stderr
        self.contingencies: list[Contingency] = []
        self.data: dict[str, Any] = {}

    def embedder(self, name: str | None = None) -> Any:
        """The configured embedder (``[embedding] embedder``), or the one registered as ``name``."""
        return embedder_for(self.host, self.config, name)

    def options(self, table: str) -> BaseModel:
        """``[plugins.<table>]`` validated as the model its plugin declared, as ``TurnContext.options``."""
        from ora_core.kernel.config import options_for

        return options_for(self.host, self.config, table)

    def contingency(self, name: str, step: str, detail: str = "", *,
                    severity: Severity = "warning", **data: Any) -> Contingency:
        detail, data = self.redactor.error_text(detail), self.redactor.data(data)
        record = Contingency(name=name, step=step, detail=detail, severity=severity, data=data)
        self.contingencies.append(record)
        print(f"ora: {step}: {name}" + (f" ({detail})" if detail else ""), file=self.stderr)
        return record


class StepRecorder:
    """The handle a step writes its output package and health into."""

    def __init__(self, turn: TurnContext, name: str, index: int) -> None:
        self.turn = turn
        self.name = name
        self.index = index
        self.output: dict[str, Any] = {}
        health = turn.health.get(name)
        if health is None:  # (``setdefault`` would build a StepHealth on every step)
            health = turn.health[name] = StepHealth(step=name)
        self.health = health
        self._start = datetime.now(timezone.utc)

    def contingency(self, name: str, detail: str = "", **kw: Any) -> Contingency:
        return self.turn.contingency(name, self.name, detail, **kw)

    def finish(self) -> None:
        self.health.latency_s = (datetime.now(timezone.utc) - self._start).total_seconds()
        if not self.turn.listened:  # the health stays in ``turn.health``; only a sink reads the event
            return
        self.turn.emit("step_finished", step=self.name, step_index=self.index, output=self.output,
                       health=self.health.model_dump(mode="json"))
