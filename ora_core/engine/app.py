"""``Ora``: the application API. ``ora run`` is one client of it; a server would be another.

    from ora_core.api import Ora

    ora = Ora.open()                       # plugins and configuration, exactly as `ora` loads them
    result = ora.run("Why did the Roman Empire fall?")
    print(result.status, result.answer, result.trace_path)

    async for event in ora.stream("Compare PostgreSQL and MySQL for a small web app."):
        print(event.type, event.step)      # StepStarted, StepFinished, VerdictReached, ...
        # the last event is TurnFinished, carrying the TurnResult

Overrides given to ``Ora.open`` apply over the configuration file and the environment, as nested
tables (``trace={"root": "/tmp/traces"}``) or dotted / double-underscore keys
(``**{"pipeline.best_guess": True}``, ``pipeline__best_guess=True``).

What ``run``/``arun``/``stream`` hand back carries no secret of the configuration: the result (its
diagnostic also scrubbed of credential shapes) and an ``OraError`` raised out of a turn pass the
runtime's ``Redactor``; the events are the trace's, redacted before any listener sees them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ora_core.engine.backends import BackendPool
from ora_core.engine.events import TurnFinished, from_trace
from ora_core.engine.routing import JUST_ANSWER_MODE
from ora_core.engine.runner import TurnInterrupted, cancel_reason, run_turn_async
from ora_core.engine.runtime import Runtime
from ora_core.kernel.config import ResolvedConfig, check_options, deep_merge, load_config
from ora_core.kernel.errors import OraError, UsageError
from ora_core.kernel.models import ClarificationAnswer, ConversationMessage, TurnResult
from ora_core.kernel.plugins import PluginHost
from ora_core.kernel.redaction import Redactor, redact_exception
from ora_core.kernel.trace import check_turn_id, new_turn_id


def nest_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``{"trace.root": x, "pipeline__retries": 1, "retrieval": {"k": 2}}`` as nested tables."""
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = [p for p in key.replace("__", ".").split(".") if p]
        if not parts:
            raise UsageError(f"configuration override {key!r} names no field")
        node: dict[str, Any] = {}
        leaf = node
        for part in parts[:-1]:
            leaf = leaf.setdefault(part, {})
        leaf[parts[-1]] = value
        nested = deep_merge(nested, node)
    return nested


JUST_ANSWER = "just answer"


def check_history(history: Sequence[ConversationMessage | Mapping[str, Any]] | None,
                  ) -> list[ConversationMessage] | None:
    """``history`` as ``ConversationMessage``s; a ``UsageError`` naming the entry that is not one."""
    if history is None:
        return None
    if isinstance(history, (str, bytes, Mapping)):
        raise UsageError(f"history: a sequence of messages is expected, got {type(history).__name__}")
    messages = []
    for i, entry in enumerate(history):
        try:
            messages.append(entry if isinstance(entry, ConversationMessage)
                            else ConversationMessage.model_validate(entry))
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "(the entry)"
            raise UsageError(f"history[{i}].{where}: {problem['msg']}") from None
    return messages


def answer_clarification(result: TurnResult, choice: str) -> ClarificationAnswer:
    """The answer to ``result``'s pending clarification: ``choice`` is one of ``result.options`` (a
    mode name), its 1-based number, or "just answer" (a direct reply: the ``simple`` mode). Anything
    else is a ``UsageError`` listing what may be chosen."""
    if result.status != "needs_clarification" or not result.question:
        raise UsageError("this turn asked no question to answer")
    offered = list(result.options)
    picked = choice.strip().lower()
    if picked in (JUST_ANSWER, "just", "answer", str(len(offered) + 1)):
        chosen = JUST_ANSWER_MODE
    elif picked.isdigit() and 1 <= int(picked) <= len(offered):
        chosen = offered[int(picked) - 1]
    elif picked in offered:
        chosen = picked
    else:
        choices = ", ".join([*(f"{i} ({m})" for i, m in enumerate(offered, 1)), f"{len(offered) + 1} ({JUST_ANSWER})"])
        raise UsageError(f"{choice!r} is not one of the options: {choices}")
    return ClarificationAnswer(question=result.question, options=offered, chosen=chosen,
                               asked_in_turn=result.turn_id)


def check_prompt(prompt: Any) -> str:
    """A prompt worth a model call: a non-empty string (refused before anything runs)."""
    if not isinstance(prompt, str):
        raise UsageError(f"the prompt must be text, not {type(prompt).__name__}")
    if not prompt.strip():
        raise UsageError("the prompt is empty: there is nothing to answer")
    return prompt


class Ora:
    """Loaded plugins plus a resolved configuration: run turns on them.

    Build one with ``Ora.open()`` (as the CLI does) or, embedding Ora with plugins of your own,
    ``Ora(host=..., config=...)`` from a ``PluginHost`` and a ``ResolvedConfig``. Either checks the
    plugin tables and backend options against the models the plugins declare (a ``ConfigError`` on
    any error); ``options_warnings`` keeps the tables passed on unchecked.

    ``pool``: a ``BackendPool`` (``ora.pool`` of another ``Ora``) shared by several instances whose
    configurations differ outside ``[backends]`` and ``[roles]``: one tokens-per-minute budget and
    one set of built backends across all their turns (see ``Runtime``; a pool that does not fit is
    a ``ConfigError``).
    """

    def __init__(self, *, host: PluginHost, config: ResolvedConfig, stderr: Any = None,
                 pool: BackendPool | None = None) -> None:
        # Plugin tables and backend options against the models the plugins declare: every error at
        # once, as a ConfigError naming the source, the table and the key, before anything runs.
        self.options_warnings = check_options(config, host)
        self.runtime = Runtime(host=host, resolved=config, stderr=stderr, pool=pool)

    @classmethod
    def open(cls, config: str | Path | None = None, *, host: PluginHost | None = None, stderr: Any = None,
             pool: BackendPool | None = None, **overrides: Any) -> Ora:
        """Load the plugins (the ``ora`` entry points, failures isolated and recorded) and the
        configuration (``config``, else ``$ORA_CONFIG``, ``./ora.toml``, the user config dir, over the
        bundled default), with ``overrides`` applied last. Raises ``ConfigError`` on a malformed one,
        and on a plugin table or backend ``options`` that its plugin's declared model refuses."""
        if host is None:
            host = PluginHost()
            host.load_entrypoints()
        resolved = load_config(config, overrides=nest_overrides(overrides) if overrides else None)
        return cls(host=host, config=resolved, stderr=stderr, pool=pool)

    @property
    def host(self) -> PluginHost:
        return self.runtime.host

    @property
    def config(self) -> ResolvedConfig:
        return self.runtime.resolved

    @property
    def pool(self) -> BackendPool:
        """The backend pool this instance's turns call (to share with another ``Ora(pool=...)``)."""
        return self.runtime.pool

    async def areplay_call(self, record: Any, *, backend: str | None = None) -> Any:
        """Re-send one recorded model call (a step file's ``calls`` entry, or a ``ModelCallRecord``)
        to ``backend``, by default the backend the configuration names for the call's role: a
        ``ReplayResult`` with the recorded output beside the new one (``ora trace replay``). A
        backend failure is the result's ``error``; a record without messages or a backend that is not
        configured is a ``UsageError``. The result carries no secret of the configuration."""
        from ora_core.engine.replay import replay_call

        result = await replay_call(self.runtime.pool, record, backend)
        return self.runtime.redactor.model(result) if self.runtime.redactor.active else result

    def replay_call(self, record: Any, *, backend: str | None = None) -> Any:
        """``areplay_call`` on a new event loop (from synchronous code)."""
        return asyncio.run(self.areplay_call(record, backend=backend))

    async def arun(self, prompt: str, *, mode: str | None = None, best_guess: bool | None = None,
                   inject: str | None = None, conversation_id: str | None = None,
                   on_event: Callable[[Any], None] | None = None,
                   clarification: ClarificationAnswer | None = None, turn_id: str | None = None,
                   history: Sequence[ConversationMessage | Mapping[str, Any]] | None = None) -> TurnResult:
        """Run one turn. ``on_event`` sees each typed event (``TurnEvent``) as it happens, from
        whichever thread emitted it; ``stream`` is the async-iterator form. ``clarification``
        answers a previous turn's ``needs_clarification`` (``answer_clarification`` builds it).
        ``turn_id`` is the id the turn and its trace will carry (``Ora.new_turn_id()``; a new one by
        default): known before the turn's first event. ``history``: the conversation's earlier messages
        as the caller holds them (``ConversationMessage`` or ``{"role", "content"}``, oldest first); the
        turn's ``conversation`` stream is read from them instead of conversation memory.

        Cancelling the task that awaits it (``task.cancel("client-disconnected")``: the message is the
        reason) cancels every model call, retrieval and verifier the turn is awaiting, closes its trace
        as ``halted`` with ``result.interruption`` (reason and step), and raises ``TurnInterrupted``
        (a ``CancelledError`` carrying that result)."""
        check_prompt(prompt)
        if turn_id is not None:
            check_turn_id(turn_id)
        messages = check_history(history)
        observer = None
        if on_event is not None:
            def observer(trace_event: Any) -> None:
                for event in from_trace(trace_event):
                    on_event(event)
        redactor = self.runtime.redactor
        try:
            result = await run_turn_async(self.runtime, prompt, conversation_id=conversation_id, mode=mode,
                                          best_guess=best_guess, inject=inject, on_event=observer,
                                          clarification=clarification, turn_id=turn_id, history=messages)
        except TurnInterrupted as exc:
            exc.result = redact_result(exc.result, redactor)
            raise
        except OraError as exc:
            redact_exception(exc, redactor)
            raise
        return redact_result(result, redactor)

    def run(self, prompt: str, **options: Any) -> TurnResult:
        """``arun`` on a new event loop (from synchronous code; inside a loop, await ``arun``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(prompt, **options))
        raise UsageError("Ora.run was called inside a running event loop: use 'await ora.arun(...)' "
                         "or 'async for event in ora.stream(...)' there")

    async def stream(self, prompt: str, *, mode: str | None = None, best_guess: bool | None = None,
                     inject: str | None = None, conversation_id: str | None = None,
                     clarification: ClarificationAnswer | None = None,
                     turn_id: str | None = None,
                     history: Sequence[ConversationMessage | Mapping[str, Any]] | None = None) -> AsyncIterator[Any]:
        """Yield the turn's typed events as they happen; the last is ``TurnFinished`` (with the result).

        An error that stops the turn from running at all (``UsageError``, ``ConfigError``) is raised
        from the iteration, after any events already yielded. The turn is interrupted when its
        consumer is: cancelled while waiting for the next event (the cancel message is the reason:
        the iteration waits for the turn's trace to close, then raises ``TurnInterrupted``), or
        closing the iteration early (``aclose()``: reason ``consumer-closed``, the trace closed before
        ``aclose()`` returns)."""
        check_prompt(prompt)
        if turn_id is not None:
            check_turn_id(turn_id)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        done = object()

        loop_thread = threading.get_ident()

        def push(event: Any) -> None:
            if threading.get_ident() == loop_thread:  # most events: no wake-up write through the self-pipe
                queue.put_nowait(event)
            else:  # a retriever's or a close thread's event
                loop.call_soon_threadsafe(queue.put_nowait, event)

        async def turn() -> TurnResult:
            try:
                return await self.arun(prompt, mode=mode, best_guess=best_guess, inject=inject,
                                       conversation_id=conversation_id, on_event=push, clarification=clarification,
                                       turn_id=turn_id, history=history)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, done)

        task = asyncio.ensure_future(turn())
        finished = False
        try:
            while True:
                try:
                    item = await queue.get()
                except asyncio.CancelledError as exc:  # the consumer was cancelled: so is the turn
                    await _interrupt(task, cancel_reason(exc))
                    raise  # the turn had ended already: the consumer's own cancellation goes on
                if item is done:
                    break
                yield item
            result = await task
            finished = True
        finally:
            if not finished and not task.done():  # the consumer left early (aclose, break, an error)
                await _interrupt(task, "consumer-closed", raise_interrupted=False)
        # a close thread may still deliver events scheduled before it returned: drain them first
        while not queue.empty():
            item = queue.get_nowait()
            if item is not done:
                yield item
        yield TurnFinished(turn_id=result.turn_id, at=_now(), result=result)

    @staticmethod
    def new_turn_id() -> str:
        """A new turn id (UTC time and 48 random bits), to give ``arun``/``stream`` as ``turn_id`` when
        the id must be known before the turn starts (a server's first chunk, a log line)."""
        return new_turn_id()

    @property
    def modes(self) -> Any:
        """The ``ModeLibrary`` turns route over (every registered mode pack, loaded once)."""
        return self.runtime.modes

    def backends(self) -> list[dict[str, Any]]:
        """One row per configured backend, as ``ora models list --json`` prints it: type, model,
        family, the roles it serves, fallbacks, the plugin that registers its type, ``base_url``
        with credentials masked."""
        from ora_core.engine.backend_report import backend_rows

        return backend_rows(self.config.config, self.host)

    async def check_backends(self, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Probe each backend (default: every configured one) as ``ora models list --check`` does:
        ``{name: {"reachable": True|False|None, ...}}``, a failure described by its kind, never
        raised; no secret of the configuration in any answer."""
        from ora_core.engine.backend_report import check_backends

        wanted = list(self.config.config.backends) if names is None else names
        return await check_backends(self.config.config, self.host, wanted, self.runtime.redactor)


async def _interrupt(task: asyncio.Future[TurnResult], reason: str, *, raise_interrupted: bool = True) -> None:
    """Cancel the turn running as ``task`` with ``reason`` and wait until its trace is closed; then
    raise the turn's ``TurnInterrupted`` (a ``CancelledError``: a cancelled consumer stays cancelled)
    unless ``raise_interrupted`` is off. A turn that had already finished is left as it ended."""
    task.cancel(reason)
    await asyncio.wait({task})  # cancelled again meanwhile: that propagates; the turn closes on its own
    try:
        task.result()
    except TurnInterrupted:
        if raise_interrupted:
            raise


def redact_result(result: TurnResult, redactor: Redactor) -> TurnResult:
    """``result`` with the configuration's secrets replaced in every text it carries and credential
    shapes scrubbed out of its diagnostic (error text); the same object when there is nothing to
    replace."""
    if not redactor.active:
        if result.diagnostic:
            diagnostic = redactor.error_data(result.diagnostic)
            if diagnostic is not result.diagnostic:
                result = result.model_copy(update={"diagnostic": diagnostic})
        return result
    return redactor.model(result, errors=("diagnostic",))


def _now() -> Any:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)
