"""One turn through the pipeline: the kernel's orchestration of the turn sequence.

    Stage 0 bypass (raw prompt) -> Phase A cleanup -> pre-routing (Stage 1 signals, Stage 2
    dispatch) -> mode loading -> context assembly -> the gear the mode asks for.

It reaches detectors, retrievers, backends, verifiers and sinks only through the plugin
registry, and every boundary is a traced step. A bypass goes straight to Gear 1 with the
``simple`` mode; a pending clarification stops the turn with ``needs_clarification`` unless
best-guess is on. A gear-1 mode chosen by pre-routing (``direct``, ``simple``) runs Gear 1 with the
routing reason, recorded as ``verification: not-applicable``. Analytical modes run the gear
their mode asks for (``gears.analyst``: 2, ``gears.sequential``: 3, ``gears.cascade``: 4, ``factcheck``: 5) after
the context package passes its deterministic assertions (``context-assertions``). A step that halts (``StepHalted``: a
probabilistic step out of retries, or a deterministic assertion) ends the turn ``halted`` with
the full diagnostic.

``inject`` names a registered fault injector (``ora run --inject``); an unknown name is a
``ConfigError`` listing the known ones, raised before the turn opens.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any

from ora_core.engine import faults
from ora_core.engine.bounded import call_in_thread
from ora_core.engine.context import assemble_context
from ora_core.engine.factcheck import run_gear5
from ora_core.engine.gears.analyst import run_gear2
from ora_core.engine.gears.cascade import run_gear4
from ora_core.engine.gears.direct import DIRECT_TASK, run_direct
from ora_core.engine.gears.sequential import run_gear3
from ora_core.engine.history import HISTORY, note_history
from ora_core.engine.phase_a import run_phase_a
from ora_core.engine.reliability import Assertion, StepHalted, run_deterministic_step
from ora_core.engine.routing import BYPASS_CATEGORY, ROUTING_WARMUP, run_routing, warm_examples
from ora_core.engine.runtime import Runtime
from ora_core.engine.stage0 import run_stage0
from ora_core.engine.turn_state import GearContext
from ora_core.engine.warmup import WARMUP, WARMUP_JOIN_S, start_warmup
from ora_core.kernel.components import ComponentContext
from ora_core.kernel.config import OraConfig
from ora_core.kernel.ctx_data import MODES
from ora_core.kernel.errors import ModeError, OraError
from ora_core.kernel.models import (
    ClarificationAnswer,
    ContextPackage,
    ConversationMessage,
    FaultPoint,
    Interruption,
    TraceEvent,
    TurnInfo,
    TurnResult,
)
from ora_core.kernel.modes import STREAMS, Mode, ModeLibrary
from ora_core.kernel.trace import TurnContext

__all__ = ["DIRECT_TASK", "TurnInterrupted", "run_turn", "run_turn_async"]


class TurnInterrupted(asyncio.CancelledError):
    """A turn was cancelled from outside (its task cancelled, e.g. ``task.cancel("client-disconnected")``)
    and has been closed: every model call, retrieval and verifier it was awaiting was cancelled with
    it, and its trace records it ``halted`` with ``result.interruption`` (the reason: the cancel
    message, ``cancelled`` without one; the step it was in). A ``CancelledError``, so cancellation
    goes on up as asyncio expects; ``result`` is the closed turn's ``TurnResult`` (its trace path)."""

    def __init__(self, reason: str, result: TurnResult) -> None:
        super().__init__(reason)
        self.reason = reason
        self.result = result


def cancel_reason(exc: BaseException) -> str:
    """The reason a ``CancelledError`` carries (its cancel message), ``cancelled`` without one."""
    return str(exc.args[0]) if exc.args and exc.args[0] else "cancelled"


def _interrupted(turn: TurnContext, exc: asyncio.CancelledError) -> TurnResult:
    """The result of a turn cancelled from outside, its interruption named in the trace."""
    reason = cancel_reason(exc)
    # the steps the cancellation unwound, innermost first (TurnContext.step records them as it passes)
    unwound = list(dict.fromkeys(turn.cancelled_steps))
    step = unwound[0] if unwound else ""
    interruption = Interruption(reason=reason, step=step, steps=unwound[::-1])
    where = f"in step {step!r}" if step else "before its first step"
    message = f"the turn was interrupted ({reason}) {where}; every call it was awaiting was cancelled"
    slug = "".join(c if c.isalnum() else "-" for c in reason.lower()).strip("-")[:60] or "cancelled"
    turn.contingency(f"turn-interrupted-{slug}", step or "turn", message, severity="error",
                     reason=reason, steps=interruption.steps)
    return TurnResult(status="halted", interruption=interruption,
                      diagnostic={"error_class": "TurnInterrupted", "message": message, "reason": reason,
                                  "step": step, "steps": interruption.steps})


async def _close_turn(turn: TurnContext, result: TurnResult, timeout_s: float) -> TurnResult:
    """``turn.close`` (the last event, the sinks' ``close_turn``) on a thread of its own: a sink's
    end-of-turn writing (files, fsync) waits on the disk there, so a slow disk holds up this turn
    only, not every turn of the loop (measured on 50 concurrent Gear-4 turns: wall unchanged,
    1.91 vs 1.93 x ideal over 14 interleaved rounds). A close that does not come back within
    ``timeout_s`` leaves the turn with tracing degraded and the late sinks named
    (``TurnContext.close_overdue``); the daemon thread finishes on its own, on a copy of the
    result, so the caller's result never changes under it and exit never waits for a dead disk.
    A turn whose sinks all say their close does not wait (``TurnContext.close_waits``) closes here,
    on the loop's thread."""
    if not turn.close_waits():  # no sink waits on a disk or network: nothing to keep off the loop
        return turn.close(result)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[TurnResult] = loop.create_future()

    def settle(outcome: TurnResult | BaseException) -> None:
        if done.done():
            return
        if isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)

    def work(copy: TurnResult) -> None:
        outcome: TurnResult | BaseException
        try:
            outcome = turn.close(copy)
        except BaseException as exc:  # noqa: BLE001 - carried to the awaiting turn and raised there
            outcome = exc
        if not loop.is_closed():  # else the turn already returned (overdue) and its loop ended
            loop.call_soon_threadsafe(settle, outcome)

    # A shallow copy is enough: the close reads the result (its turn_finished event dumps it first,
    # before any sink can stall) and sets two top-level fields (trace_path, tracing_degraded) on the
    # copy, never on the caller's object (a deep copy cost ~0.5 ms per turn, 6 % of a Gear-4 turn).
    threading.Thread(target=work, args=(result.model_copy(),), name="ora-turn-close", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(done), timeout_s)
    except TimeoutError:
        turn.close_overdue(timeout_s)
        result.trace_path = None
        result.tracing_degraded = True
        return result


async def run_turn_async(runtime: Runtime, prompt: str, *, conversation_id: str | None = None,
                         mode: str | None = None, best_guess: bool | None = None,
                         inject: str | None = None, on_event: Callable[[TraceEvent], None] | None = None,
                         clarification: ClarificationAnswer | None = None, turn_id: str | None = None,
                         history: list[ConversationMessage] | None = None, **options: Any) -> TurnResult:
    """Run one turn. ``on_event`` sees every trace event (``ora run``'s progress lines).
    ``clarification``: the user's answer to the previous turn's question; its choice is the mode
    (forced), and the question, the options and the answer are recorded in this turn's trace.
    ``turn_id``: the id the turn and its trace carry (a new one by default), known before it starts.
    ``history``: the conversation's earlier messages as the caller holds them; the turn's
    ``conversation`` stream is read from them instead of conversation memory (``engine.history``).

    Cancelled from outside, the turn is closed (its trace says ``halted`` with the interruption's
    reason and step, never ``running``) and ``TurnInterrupted`` (a ``CancelledError``) is raised."""
    if clarification is not None:
        mode = clarification.chosen
    injector = faults.resolve_injector(runtime.host, inject) if inject else None
    observers = [EventObserver(on_event)] if on_event is not None else []
    turn = runtime.new_turn(prompt, conversation_id, observers, turn_id=turn_id).open()
    if not runtime.host.components("trace_sink") and runtime.config.trace.enabled:
        turn.contingency("trace-no-sink-installed", "turn",
                         "tracing is enabled but no trace sink plugin is installed", severity="degraded")
    if injector is not None:
        faults.activate(turn, injector)
        turn.contingency(f"fault-injection-{injector.name}", "turn",
                         f"fault injection is on: {getattr(injector, 'description', '') or injector.name}",
                         severity="info", mode=injector.name)
    if history is not None:
        turn.stash[HISTORY] = list(history)
        note_history(turn, conversation_enabled=bool(runtime.config.retrieval.streams.conversation))
    if options:
        turn.emit("note", step="turn", ignored_options=sorted(options))
    if clarification is not None:
        turn.contingency("clarification-answered-by-user", "pre-routing",
                         f"asked {clarification.question!r}; the user chose {clarification.chosen!r}",
                         severity="info", **clarification.model_dump(mode="json"))
    guess = runtime.config.pipeline.best_guess if best_guess is None else best_guess
    crash: Exception | None = None
    interrupted: asyncio.CancelledError | None = None
    try:
        await observe(runtime, turn, "ora_turn_started", turn=turn)
        result = await _sequence(runtime, turn, prompt, forced_mode=mode, best_guess=bool(guess))
    except asyncio.CancelledError as exc:  # cancelled from outside: closed below, then raised on
        interrupted = exc
        result = _interrupted(turn, exc)
    except Exception as exc:  # noqa: BLE001 - the turn is closed and traced, then OraErrors re-raise
        crash = exc
        turn.contingency(f"turn-crashed-{type(exc).__name__}", "turn", str(exc), severity="error")
        stack = "".join(traceback.format_exception(exc))[-4000:]
        result = TurnResult(status="halted", diagnostic={"error_class": type(exc).__name__,
                                                         "message": str(exc), "stack": stack})
    if interrupted is None:
        result = await _finish(runtime, turn, result)
    else:
        # The close runs as a task of its own, shielded: a second cancellation (a shutdown after a
        # disconnect) cannot leave the trace open; this turn stops waiting, the close goes on.
        closing = asyncio.ensure_future(_finish(runtime, turn, result))
        try:
            result = await asyncio.shield(closing)
        except asyncio.CancelledError as again:  # the close goes on, on its own task: said in the result
            result.diagnostic = result.diagnostic or {}
            result.diagnostic["second_cancellation"] = (
                f"cancelled again ({cancel_reason(again)}) while the trace was closing: the close goes on "
                "on a task of its own; this result was returned before it finished (no trace path yet)")
        raise TurnInterrupted(cancel_reason(interrupted), result) from interrupted
    if isinstance(crash, OraError):  # configuration and plugin errors: the CLI names them, exit 1
        raise crash
    return result


async def _finish(runtime: Runtime, turn: TurnContext, result: TurnResult) -> TurnResult:
    """The end of every turn, whichever way it went: the backends' per-turn state closed, warm-up
    threads joined, the result stamped, the ``ora_turn_finished`` observers, the trace closed."""
    try:
        await runtime.pool.aclose(turn)  # a close that fails is named in this turn's trace
    finally:
        warmup = turn.stash.get(WARMUP)
        if warmup is not None:  # never leave a thread mid-import at exit
            if any(t.is_alive() for t in warmup.jobs.values()):  # no thread hop when all are done
                await asyncio.to_thread(warmup.wait, WARMUP_JOIN_S)
            warmup.record(turn)
    turn.finalize(result)
    await observe(runtime, turn, "ora_turn_finished", turn=turn, result=result)
    return await _close_turn(turn, result, runtime.config.trace.close_timeout_s)


async def _sequence(runtime: Runtime, turn: TurnContext, prompt: str, *, forced_mode: str | None,
                    best_guess: bool) -> TurnResult:
    library = runtime.modes
    MODES.put(turn.data, library)
    if not forced_mode:
        bypass = run_stage0(turn, prompt)
        if bypass.bypass:
            return await run_direct(runtime, turn, prompt, _load_mode(turn, library, "simple"),
                                    category=bypass.category, reason=f"Stage 0 bypass: {bypass.reason}")
    if not library.modes:
        where = ", ".join(d for _, d in library.sources) or "no mode pack is installed"
        detail = f"no mode is loaded ({where}); pre-routing cannot run, a direct answer ran instead"
        turn.contingency("modes-none-loaded-ran-gear-1", "mode-load", detail, severity="degraded")
        print(f"ora: {detail}", file=turn.stderr)
        return await run_direct(runtime, turn, prompt, None, mode_name="simple")
    if runtime.config.pipeline.warmup:
        turn.stash[WARMUP] = warmup = start_warmup(runtime, turn)
        if not forced_mode:  # pre-routing's example vectors, embedded while Phase A runs
            thread = warm_examples(turn, library, warmup.results)
            if thread is not None:
                warmup.jobs[ROUTING_WARMUP] = thread
    phase_a = await run_phase_a(turn, runtime.pool, prompt)
    routing = run_routing(turn, library, phase_a.cleaned_prompt, forced_mode=forced_mode,
                          best_guess=best_guess)
    if routing.pending_clarification:
        return TurnResult(status="needs_clarification", question=routing.pending_clarification,
                          options=list(routing.clarification_options))
    assert routing.mode is not None
    mode = _load_mode(turn, library, routing.mode)
    if mode is None or mode.gear == 1:
        category = turn.stash.get(BYPASS_CATEGORY) if routing.classification_confidence == "bypass" else None
        if mode is None and routing.mode != "simple":
            turn.contingency(f"mode-{routing.mode}-missing-ran-gear-1", "turn",
                             f"mode {routing.mode!r} could not be loaded; a direct answer ran instead",
                             severity="degraded")
        return await run_direct(runtime, turn, prompt, mode, category=category,
                                mode_name=mode.name if mode is not None else routing.mode,
                                reason=f"pre-routing ({routing.classification_confidence}): {routing.reasoning}")
    package = await assemble_context(runtime, turn, mode, phase_a.cleaned_prompt,
                                     phase_a.inferred_items, mode.gear)
    gc = GearContext(runtime=runtime, turn=turn, mode=mode, package=package, gear=mode.gear)
    try:
        package = faults.inject(turn, FaultPoint(site="package", step="context-assembly", purpose="context",
                                                 step_kind="deterministic", gear=mode.gear), package)
        gc.package = check_context(turn, runtime.config, package)
        return await GEARS[mode.gear](gc)
    except StepHalted as halt:
        return TurnResult(status="halted", mode=mode.name, gear=gc.gear, diagnostic=halt.diagnostic,
                          verdicts=dict(gc.verdicts))


GEARS = {2: run_gear2, 3: run_gear3, 4: run_gear4, 5: run_gear5}
CONTEXT_CHECK = "context-assertions"


def check_context(turn: TurnContext, config: OraConfig, package: ContextPackage) -> ContextPackage:
    """Deterministic assertions on Step 2's package (never retried, never judged): every enabled
    stream is accounted for (retrieved, diagnosed, failed by name, or named missing), every chunk
    carries a source, and the prompt is not empty."""
    enabled = [s for s in STREAMS if getattr(config.retrieval.streams, s, False)]

    def coverage(p: ContextPackage) -> str | None:
        lost = [s for s in enabled if s not in p.retrievals and s not in p.missing_streams]
        return (f"enabled stream(s) {', '.join(lost)} are neither retrieved, diagnosed, failed by name nor "
                "named missing: their context vanished silently") if lost else None

    def provenance(p: ContextPackage) -> str | None:
        bare = [c.id for c in p.chunks() if not c.provenance.source]
        return f"chunk(s) without a source: {', '.join(bare[:5])}" if bare else None

    def prompt(p: ContextPackage) -> str | None:
        return None if p.cleaned_prompt.strip() else "the cleaned prompt is empty"

    return run_deterministic_step(turn, CONTEXT_CHECK, package,
                                  [Assertion("stream-coverage", coverage), Assertion("chunk-provenance", provenance),
                                   Assertion("prompt-present", prompt)],
                                  streams_enabled=enabled, streams_present=sorted(package.retrievals),
                                  streams_missing=package.missing_streams)


class EventObserver:
    """An in-process listener on the turn's events (not a trace sink: it stores nothing)."""

    name = "event-observer"

    def __init__(self, callback: Callable[[TraceEvent], None]) -> None:
        self.callback = callback

    def open_turn(self, info: TurnInfo, ctx: ComponentContext) -> None:
        return None

    def handle(self, event: TraceEvent) -> None:
        self.callback(event)

    def close_turn(self, info: TurnInfo) -> None:
        return None


def _load_mode(turn: TurnContext, library: ModeLibrary, name: str) -> Mode | None:
    """The mode, or None; a missing mode or an empty required section is a named failure
    (trace + stderr), never an empty string handed to a model (seed 000, #3 and #8)."""
    try:
        mode = library.get(name)
    except ModeError as exc:
        turn.contingency(f"mode-{name}-missing", "mode-load", str(exc), severity="degraded", mode=name)
        print(f"ora: {exc}", file=turn.stderr)
        return None
    empty = mode.empty_sections
    if empty:
        detail = f"mode {name!r} ({mode.path}) has empty or missing section(s): {', '.join(empty)}"
        turn.contingency(f"mode-{name}-section-empty", "mode-load", detail, severity="degraded",
                         mode=name, sections=empty)
        print(f"ora: {detail}", file=turn.stderr)
    return mode


def run_turn(runtime: Runtime, prompt: str, **options: Any) -> TurnResult:
    return asyncio.run(run_turn_async(runtime, prompt, **options))


async def observe(runtime: Runtime, recorder: TurnContext, hook_name: str, **kwargs: Any) -> None:
    """Each plugin's observer of ``hook_name``, in pluggy's order, on a thread of its own (off the
    event loop, which other turns share) and bounded by ``[pipeline] observer_timeout_s``: one that
    raises is named (``observer-<plugin>-failed``), one that does not return in time too
    (``observer-<plugin>-timed-out``; it finishes in the background), and the turn goes on."""
    host = runtime.host
    timeout_s = runtime.config.pipeline.observer_timeout_s
    on_error = _observer_error(recorder)
    for impl in host.call_order(hook_name):
        try:
            await call_in_thread(partial(host.call_plugin, impl.plugin, hook_name, **kwargs), timeout_s=timeout_s,
                                 name=f"ora-observer-{impl.plugin_name}")
        except TimeoutError:
            detail = (f"{hook_name} of plugin {impl.plugin_name!r} did not return within {timeout_s:g} s "
                      "([pipeline] observer_timeout_s); the turn went on without waiting for it")
            recorder.contingency(f"observer-{impl.plugin_name}-timed-out", "turn", detail, severity="warning",
                                 hook=hook_name)
            print(f"ora: {detail}", file=recorder.stderr)
        except Exception as exc:  # noqa: BLE001 - named by on_error; the turn goes on
            on_error(impl.plugin_name, exc)


def _observer_error(turn: TurnContext) -> Callable[[str, BaseException], None]:
    def on_error(plugin: str, exc: BaseException) -> None:
        turn.contingency(f"observer-{plugin}-failed", "turn", f"{type(exc).__name__}: {exc}",
                         severity="warning")
        print(f"ora: plugin {plugin!r} failed in a turn observer: {type(exc).__name__}: {exc}",
              file=turn.stderr)

    return on_error
