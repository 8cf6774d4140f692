"""The turns a worker runs: each one a task of its own, its typed events kept in order (ids from 1)
for the events stream and appended, as they happen, to the turn's event journal under the trace root
(``<trace_root>/.ora-serve/events/<trace_id>.jsonl``), so any worker can replay or follow it.

``TurnBoard`` admits turns up to ``max_turns`` (past it: 429 with ``Retry-After``), cancels a turn by
name with a reason (``client-disconnected``, ``shutdown``), and on shutdown names the turns in flight,
gives them ``shutdown_grace_s`` to finish, then cancels the rest: their traces close ``halted`` with
the interruption (``ora_core.api.TurnInterrupted``), never ``running``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ora_core.api import OraError, TurnFinished, TurnInterrupted

from .shapes import RequestError

log = logging.getLogger("ora.serve")
TURN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}")
JOURNAL_DIR = Path(".ora-serve") / "events"
END_EVENTS = ("turn_finished", "error")


def valid_turn_id(turn_id: str) -> bool:
    return bool(TURN_ID.fullmatch(turn_id)) and ".." not in turn_id


class TurnRun:
    """One turn in flight: its task, its events so far, how it ended."""

    def __init__(self, turn_id: str, journal: Path | None) -> None:
        self.turn_id = turn_id
        self.started = time.monotonic()
        self.task: asyncio.Task[None] | None = None
        self.events: list[dict[str, Any]] = []
        self.step = ""
        self.result: Any = None  # the TurnResult (an interrupted turn's too)
        self.error: BaseException | None = None  # an error that stopped the turn (ConfigError, BackendError...)
        self.done = asyncio.Event()
        self._signal = asyncio.Event()
        self.journal_path = journal
        self._journal: Any = None
        self._flush_pending = False
        self.journal_error: str | None = None

    # --- events ----------------------------------------------------------------------------------

    def add(self, kind: str, data: dict[str, Any]) -> None:
        entry = {"id": len(self.events) + 1, "event": kind, "data": data}
        self.events.append(entry)
        if kind == "step_started":
            self.step = str(data.get("step") or "")
        self._write(entry)
        signal, self._signal = self._signal, asyncio.Event()
        signal.set()

    def open_journal(self) -> None:
        """Create the turn's journal as the turn starts (empty): from then on any worker knows the turn."""
        if self.journal_path is None or self.journal_error is not None or self._journal is not None:
            return
        try:
            self.journal_path.parent.mkdir(parents=True, exist_ok=True)
            self._journal = self.journal_path.open("a", encoding="utf-8")
        except OSError as exc:
            self.journal_error = f"{self.journal_path}: {exc.strerror or exc}"
            log.warning("ora serve: turn %s: its event journal cannot be created (%s); its events stream "
                        "from this worker only while it runs", self.turn_id, self.journal_error)

    def _write(self, entry: dict[str, Any]) -> None:
        if self.journal_path is None or self.journal_error is not None:
            return
        try:
            if self._journal is None:
                self.open_journal()
                if self._journal is None:
                    return
            self._journal.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")
            if entry["event"] in END_EVENTS:
                self._journal.flush()
            elif not self._flush_pending:  # one flush for the events of one loop iteration (a burst)
                self._flush_pending = True
                asyncio.get_running_loop().call_soon(self._flush)
        except OSError as exc:
            self.journal_error = f"{self.journal_path}: {exc.strerror or exc}"
            log.warning("ora serve: turn %s: its event journal cannot be written (%s); its events stream "
                        "from this worker only while it runs", self.turn_id, self.journal_error)

    def _flush(self) -> None:
        self._flush_pending = False
        if self._journal is None or self.journal_error is not None or self._journal.closed:
            return
        try:
            self._journal.flush()
        except OSError as exc:
            self.journal_error = f"{self.journal_path}: {exc.strerror or exc}"
            log.warning("ora serve: turn %s: its event journal cannot be written (%s); its events stream "
                        "from this worker only while it runs", self.turn_id, self.journal_error)

    def close_journal(self) -> None:
        if self._journal is not None:
            try:
                self._journal.close()
            except OSError as exc:
                self.journal_error = f"{self.journal_path}: {exc.strerror or exc}"
                log.warning("ora serve: turn %s: closing its event journal failed (%s)", self.turn_id,
                            self.journal_error)

    async def follow(self, after: int = 0) -> AsyncIterator[dict[str, Any]]:
        """Every event with an id above ``after``, then each new one as it comes, until the last."""
        i = max(after, 0)
        while True:
            signal = self._signal
            while i < len(self.events):
                yield self.events[i]
                i += 1
            if self.done.is_set() and i >= len(self.events):
                return
            await signal.wait()

    def cancel(self, reason: str) -> bool:
        if self.task is None or self.task.done():
            return False
        return self.task.cancel(reason)


class TurnBoard:
    """The turns of this worker."""

    def __init__(self, ora: Any, *, max_turns: int, shutdown_grace_s: float, journal_root: Path | None) -> None:
        self.ora = ora
        self.max_turns = max_turns
        self.shutdown_grace_s = shutdown_grace_s
        self.journal_root = journal_root
        self.in_flight: dict[str, TurnRun] = {}
        self.durations: deque[float] = deque(maxlen=50)
        self.shutting_down = False
        self.served = 0
        self.refused_busy = 0
        self.journal_failures = 0

    def journal_for(self, turn_id: str) -> Path | None:
        return self.journal_root / f"{turn_id}.jsonl" if self.journal_root is not None else None

    def retry_after_s(self) -> int:
        """Seconds until a slot is likely free: the median duration of recent turns, at least 1."""
        if not self.durations:
            return 1
        return max(1, math.ceil(statistics.median(self.durations)))

    def admit(self) -> None:
        if self.shutting_down:
            raise RequestError(503, "the server is shutting down: it takes no new turn", type="server_error",
                               code="shutting_down", headers={"Retry-After": "5"})
        if len(self.in_flight) >= self.max_turns:
            self.refused_busy += 1
            wait = self.retry_after_s()
            raise RequestError(429, f"this worker runs {len(self.in_flight)} turn(s), its limit (--max-turns "
                                    f"{self.max_turns}); retry in {wait} s", type="rate_limit_error",
                               code="too_many_turns", headers={"Retry-After": str(wait)})

    def start(self, turn_id: str, prompt: str, **options: Any) -> TurnRun:
        run = TurnRun(turn_id, self.journal_for(turn_id))
        run.open_journal()
        self.in_flight[turn_id] = run
        run.task = asyncio.ensure_future(self._drive(run, prompt, options))
        return run

    async def _drive(self, run: TurnRun, prompt: str, options: dict[str, Any]) -> None:
        try:
            async for event in self.ora.stream(prompt, turn_id=run.turn_id, **options):
                run.add(event.type, event.model_dump(mode="json"))
                if event.type == "turn_finished":
                    run.result = event.result
        except TurnInterrupted as exc:  # cancelled by name (a disconnect, a shutdown): its trace is closed
            run.result = exc.result
            finished = TurnFinished(turn_id=run.turn_id, at=datetime.now(timezone.utc), result=exc.result)
            run.add("turn_finished", finished.model_dump(mode="json"))
        except asyncio.CancelledError as exc:  # cancelled before the turn had opened: nothing was traced
            run.error = exc
            run.add("error", {"error": {"message": f"the turn was cancelled ({exc.args[0] if exc.args else ''}) "
                                                   "before it started", "type": "cancelled"}})
        except OraError as exc:  # the turn could not run (configuration, plugin, backend): already redacted
            run.error = exc
            run.add("error", {"error": {"message": str(exc), "type": type(exc).__name__}})
        except Exception as exc:  # noqa: BLE001 - a fault of the server or a plugin: named, logged, answered 500
            run.error = exc
            log.exception("ora serve: turn %s failed with %s", run.turn_id, type(exc).__name__)
            run.add("error", {"error": {"message": f"{type(exc).__name__}: {exc}", "type": "server_error"}})
        finally:
            if run.journal_error is not None:
                self.journal_failures += 1
            run.close_journal()
            self.durations.append(time.monotonic() - run.started)
            self.in_flight.pop(run.turn_id, None)
            self.served += 1
            run.done.set()
            run._signal.set()

    # --- shutdown --------------------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """SIGTERM: take no new turn, name the turns in flight, cancel those still running after
        ``shutdown_grace_s``."""
        if self.shutting_down:
            return
        self.shutting_down = True
        names = ", ".join(f"{r.turn_id} (step {r.step or '-'})" for r in self.in_flight.values()) or "none"
        log.info("ora serve: worker %d shutting down; turns in flight: %s; %g s to finish before they are "
                 "cancelled", os.getpid(), names, self.shutdown_grace_s)
        asyncio.get_running_loop().call_later(self.shutdown_grace_s, self.cancel_all, "shutdown")

    def cancel_all(self, reason: str) -> list[TurnRun]:
        runs = list(self.in_flight.values())
        for run in runs:
            if run.cancel(reason):
                log.info("ora serve: cancelling turn %s in step %s (%s)", run.turn_id, run.step or "-", reason)
        return runs

    async def close(self) -> None:
        """The lifespan's end: cancel what still runs (reason ``shutdown``) and wait for the traces."""
        self.shutting_down = True
        runs = self.cancel_all("shutdown")
        for run in runs:
            await run.done.wait()
            result = run.result
            log.info("ora serve: turn %s closed: %s%s, trace %s", run.turn_id,
                     getattr(result, "status", "error"),
                     f" ({result.interruption.reason} in {result.interruption.step or '-'})"
                     if getattr(result, "interruption", None) else "",
                     getattr(result, "trace_path", None))


async def follow_journal(path: Path, after: int, idle_timeout_s: float) -> AsyncIterator[dict[str, Any]]:
    """The events stored in a turn's journal (another worker's turn, or one already finished) with an id
    above ``after``; while the last one is not the turn's end, the new ones as the journal grows; an
    ``error`` event when it stops growing for ``idle_timeout_s`` (its worker has likely died)."""
    offset = 0
    pending = ""
    last_growth = time.monotonic()
    while True:
        try:
            with path.open("r", encoding="utf-8") as handle:
                handle.seek(offset)
                chunk = handle.read()
                offset = handle.tell()
        except OSError as exc:
            yield {"id": after + 1, "event": "error",
                   "data": {"error": {"message": f"the turn's event journal cannot be read: {exc.strerror or exc}",
                                      "type": "journal_unreadable"}}}
            return
        if chunk:
            last_growth = time.monotonic()
        pending += chunk
        *lines, pending = pending.split("\n")
        for line in lines:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                yield {"id": after + 1, "event": "error",
                       "data": {"error": {"message": f"{path.name}: a line is not JSON", "type": "journal_corrupt"}}}
                return
            if int(entry.get("id", 0)) > after:
                after = int(entry["id"])
                yield entry
            if entry.get("event") in END_EVENTS:
                return
        if time.monotonic() - last_growth > idle_timeout_s:
            yield {"id": after + 1, "event": "error",
                   "data": {"error": {"message": f"the turn's event journal has not grown for {idle_timeout_s:g} s "
                                                 "and holds no turn_finished: the worker running it has likely "
                                                 "stopped", "type": "journal_stalled"}}}
            return
        await asyncio.sleep(0.05)
