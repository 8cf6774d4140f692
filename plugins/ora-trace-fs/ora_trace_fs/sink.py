"""The trace sink: events are queued on the call path; the disk work runs when the pipeline
is quiet, on a writer thread, and at the end of the turn.

``handle`` costs a dictionary look-up and a deque append. The writer thread opens a new turn
(its directory and logs) at once, and while the pipeline waits on a model (no event for
``QUIET_S``) it turns the queued events into files. ``close_turn``
writes whatever of its turn is left on the calling thread (after the writer thread, if it is
writing), so that every event of the turn is on disk (and, with ``fsync``, on the device) when
the turn returns: the trace is complete. At zero latency that is all of it, and doing it there
saves handing the turn's data to another core and back. Every file is written atomically, every
JSONL line in one write, so a crash at any moment leaves only whole files and whole lines.

The writing works in batches (what was queued until the pipeline went quiet, or the turn
closed): the batch's files, of every turn in it, are staged, written once each (a step file
started and finished in one batch is written once) and, with ``fsync``, made durable behind
one barrier before they are renamed into place (``files.write_files``: one ``syncfs`` on Linux
instead of one fsync per file); a closing turn's logs and renames get one more barrier. Closes
that wait while another writes (concurrent turns ending together) are committed in one batch by
the first to get to write (group commit): the barriers are shared, and each close still returns
only once its turn's files are written.

``[trace] durability = "async"`` takes the writing off the turn's path: ``close_turn`` hands the
finished turn to the writer thread and returns; the writer commits the files of finished turns
in groups (group commit): what closed while it was writing the previous group, or within
``group_commit_s`` (default 0.05 s) of the group's first close, written behind one durability
barrier (with ``fsync``), each turn's ``turn.json`` renamed last. A crash (SIGKILL, power loss)
loses at most the last group: the turns closed since the last completed commit; every file on
disk is whole. More than ``max_pending_turns`` (default 64) finished turns waiting for the
writer: the closing turn commits its own files, as with ``turn`` (a slow disk slows turns rather
than filling memory). Interpreter exit commits what is left (``atexit``); ``flush()`` commits now.

While a turn is open its directory holds ``.turn.lock``, locked by this process (``liveness``: a
reader tells a running turn from one whose process died). When a turn closes, after its files
(behind their barrier), its line is appended to ``<root>/.ora-index.jsonl`` (``index``: what ``ora
health`` reads) and then its lock is let go.

A write that fails is printed on stderr as it happens, and the errors are returned by
``close_turn`` so the kernel marks the turn's tracing as degraded. The run never breaks. With
``async``, an error found while committing a turn that has already returned is printed on stderr
at once and returned by the next ``close_turn`` (naming the earlier turn), which is then degraded.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from . import index
from .encoding import compact, pretty_bytes, remembering
from .files import (
    SYNCFS_AVAILABLE,
    AppendLog,
    fsync_dir,
    make_dir_inside,
    safe_component,
    sync_dir_filesystem,
    write_files,
)
from .liveness import LOCK_NAME, TurnLock
from .options import TraceFsOptions
from .render import render_step_markdown

JSONL_BY_KIND = {
    "rag_failure": "rag-failures.jsonl",
    "supplement": "supplemental-rag.jsonl",
    "contingency": "contingencies.jsonl",
    "oversight": "oversight-queue.jsonl",
}
MAX_STDERR_LINES = 5
QUIET_S = 0.004  # the writer waits for this much quiet from the pipeline before writing
GROUP_COMMIT_S = 0.05  # async durability: the longest a finished turn waits for its group
MAX_PENDING_TURNS = 64  # async durability: finished turns queued for the writer before closes write themselves


_CAMEL: dict[str, str] = {}


def _camel(key: str) -> str:
    camel = _CAMEL.get(key)
    if camel is None:
        head, *rest = key.split("_")
        camel = _CAMEL[key] = head + "".join(p.title() for p in rest)
    return camel


def _secret_forms(secrets: list[str]) -> list[bytes]:
    """Each secret as it can appear in the UTF-8 files: raw (Markdown, and JSON with
    ``ensure_ascii=False``) and JSON-escaped (ASCII-only and not)."""
    forms: list[bytes] = []
    for secret in secrets:
        for form in (secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]):
            encoded = form.encode("utf-8", "surrogatepass")
            if encoded not in forms:
                forms.append(encoded)
    return forms


class TurnWriter:
    """Everything the writer thread knows about one turn, and the files it writes."""

    def __init__(self, info: Any, ctx: Any, *, fsync: bool, close_timeout_s: float = 30.0,
                 durability: str = "turn") -> None:
        self.info = info
        self.fsync = fsync
        self.close_timeout_s = close_timeout_s
        self.durability = durability
        self.closed_at = 0.0  # async: when close_turn handed the turn to the writer (monotonic)
        self.returns_errors = False  # async: its own close_turn returns its errors (it waited)
        self.stderr: IO[str] = getattr(ctx, "stderr", None) or sys.stderr
        self.secrets = [s for s in getattr(ctx, "secrets", ()) if s]
        self._secret_forms = _secret_forms(self.secrets)
        self._trace_config = ctx.config.trace  # the directory is resolved on the writer thread
        self.root = Path()
        self.dir = Path()
        self._prefix = ""  # str(self.dir) + separator: file paths are plain strings on the hot path
        self._step_names: dict[tuple[str, int | None], str] = {}
        self.errors: list[str] = []
        self.usable = False
        self.logs: dict[str, AppendLog] = {}
        self.steps: dict[str, dict[str, Any]] = {}  # step name -> open step document
        self.step_files: list[str] = []
        self.timings: dict[str, float] = {}
        self.turn_events: list[dict[str, Any]] = []
        # Files to write at the end of the writer's current batch: name -> bytes maker. A file
        # rewritten within a batch (a step file at its start and at its end) is written once,
        # and the batch's files share one durability barrier (``files.write_files``).
        self.staged: dict[str, Callable[[], bytes]] = {}
        self.pending: deque[Any] = deque()  # events queued by the pipeline, not yet handled
        self.opened = False
        # Held while the turn is open: a reader tells a running turn from one whose process died
        # (``liveness``). Let go, with the turn's index line written, once its files are closed.
        self.lock: TurnLock | None = None
        self.streams: set[str] = set()  # the streams its steps worked in (Gear 4: depth, breadth)
        self.coverage_steps: set[str] = set()  # steps whose output named a coverage gap
        self.supplements: list[dict[str, Any]] = []
        self.index_line: bytes | None = None  # built when the turn finishes; appended at its close
        self.committed = False  # turn durability: its close's files are written (by whichever close did it)

    # --- errors and redaction ----------------------------------------------------------------

    def error(self, what: str, exc: BaseException) -> None:
        message = f"{what}: {type(exc).__name__}: {exc}"
        self.errors.append(message)
        if len(self.errors) <= MAX_STDERR_LINES:
            print(f"ora: trace-fs: {message} (turn {self.info.turn_id}; the run goes on)", file=self.stderr)
        elif len(self.errors) == MAX_STDERR_LINES + 1:
            print("ora: trace-fs: more trace write errors for this turn; see turn.json", file=self.stderr)

    def redact(self, data: bytes) -> bytes:
        for form in self._secret_forms:
            data = data.replace(form, b"[REDACTED]")
        return data

    def _json(self, obj: Any, *, pretty: bool) -> bytes:
        # ``encoding``: orjson where it writes what ``json`` would. Step documents are compact;
        # turn.json and step-health.json are indented for people, byte for byte the text of
        # ``json.dumps(indent=2, ensure_ascii=False, default=str)``.
        return self.redact(pretty_bytes(obj) if pretty else compact(obj))

    def write_json(self, name: str, obj: Any, *, pretty: bool = False) -> None:
        """Stage ``obj`` as ``name``; it is encoded and written when the batch is flushed."""
        if self.usable:
            self.staged[name] = lambda: self._json(obj, pretty=pretty)

    def write_text(self, name: str, text: str | Callable[[], str]) -> None:
        """Stage ``text`` (or a function rendering it at flush time) as ``name``."""
        if self.usable:
            self.staged[name] = lambda: self.redact((text() if callable(text) else text).encode("utf-8"))

    def take_staged(self) -> list[tuple[str, bytes]]:
        """The staged files, encoded (a value that cannot be encoded is a named write error).
        ``turn.json`` comes last: renamed after the turn's other files, a ``turn.json`` that says
        the turn finished means they are all there, even after a crash between two renames."""
        staged, self.staged = self.staged, {}
        if not self.usable:
            return []
        last = staged.pop("turn.json", None)
        if last is not None:
            staged["turn.json"] = last
        prefix = self._prefix
        items = []
        with remembering():  # a step's .md follows its .json: its values are not checked twice
            for name, make in staged.items():
                try:
                    items.append((prefix + name, make()))
                except (ValueError, TypeError) as exc:
                    self.error(f"cannot write {prefix}{name}", exc)
        return items

    def append(self, name: str, record: dict[str, Any]) -> None:
        if not self.usable:
            return
        try:
            log = self.logs.get(name)
            if log is None:
                log = self.logs[name] = AppendLog(self._prefix + name)
            log.append(self.redact(compact(record)) + b"\n")
        except (OSError, ValueError, TypeError) as exc:
            self.error(f"cannot append to {self._prefix}{name}", exc)

    # --- events ------------------------------------------------------------------------------

    def locate(self) -> Path:
        """The turn's directory (not created here): ``<root>/<conversation>/<turn id>``."""
        if not self.root.parts:
            self.root = Path(self._trace_config.resolved_root()).expanduser()
            self.dir = (self.root / safe_component(self.info.conversation_id)
                        / safe_component(self.info.turn_id, "turn"))
        return self.dir

    def open(self) -> None:
        try:
            self.locate()
            make_dir_inside(self.root, self.dir)
            self._prefix = os.path.join(self.dir, "")
            self.usable = True
        except OSError as exc:
            self.error(f"cannot create the trace directory {self.dir}", exc)
            return
        try:
            self.lock = TurnLock.acquire(self.dir, self.info.turn_id)
        except OSError as exc:
            self.error(f"cannot create {self._prefix}{LOCK_NAME} (without it an interrupted turn cannot be told "
                       "from a running one)", exc)
        for name in JSONL_BY_KIND.values():
            self.append_touch(name)
        self.write_json("turn.json", self.turn_document(status="running"), pretty=True)

    def append_touch(self, name: str) -> None:
        try:
            self.logs[name] = AppendLog(self._prefix + name)
        except OSError as exc:
            self.error(f"cannot create {self._prefix}{name}", exc)

    def handle(self, event: Any) -> None:
        kind = event.kind
        data = event.data
        if kind == "step_started":
            step = event.step
            doc = self.steps[step] = {
                "step": step, "index": event.step_index, "status": "running",
                "started_at": event.at.isoformat(), "input": data.get("input", {}), "events": [], "calls": [],
            }
            self.write_json(self.step_file(step, event.step_index) + "json", doc)
            self.streams.add(index.step_stream(doc["input"]))
            return
        if kind == "step_finished":
            step = event.step
            doc = self.steps.pop(step, None) or {"step": step, "index": event.step_index, "input": {}, "events": [],
                                                 "calls": []}
            health = data.get("health", {})
            doc.update(status="finished", finished_at=event.at.isoformat(), output=data.get("output", {}),
                       health=health)
            self.timings[step] = (health or {}).get("latency_s", 0.0)
            if index.output_has_coverage_gap(doc["output"]):
                self.coverage_steps.add(step)
            stem = self.step_file(step, event.step_index)
            json_name = stem + "json"
            self.write_json(json_name, doc)
            self.write_text(stem + "md", lambda: render_step_markdown(doc))
            if json_name not in self.step_files:
                self.step_files.append(json_name)
            return
        if kind == "turn_finished":
            self.finish(event, data)
            return
        if kind == "turn_started":
            return
        record = {"seq": event.seq, "at": event.at.isoformat(), "kind": kind, "step": event.step, **data}
        if kind in JSONL_BY_KIND:
            self.append(JSONL_BY_KIND[kind], record)
            if kind == "supplement":
                self.supplements.append(record)
        target = self.steps.get(event.step)
        if target is None:
            self.turn_events.append(record)
        elif kind == "model_call":  # every call verbatim, in the step's own list (docs/trace.md)
            target["calls"].append(record)
        else:
            target["events"].append(record)

    def step_file(self, step: str, index: int | None, ext: str = "") -> str:
        """``NN-<step>.`` + ``ext`` (the sanitised stem is computed once per step)."""
        key = (step, index)
        stem = self._step_names.get(key)
        if stem is None:
            stem = self._step_names[key] = f"{(index or 0):02d}-{safe_component(step, 'step')}."
        return stem + ext

    def turn_document(self, *, status: str, result: dict[str, Any] | None = None,
                      finished_at: str | None = None) -> dict[str, Any]:
        info = self.info
        doc: dict[str, Any] = {
            "turn_id": info.turn_id,
            "conversation_id": info.conversation_id,
            "prompt": info.prompt,
            "started_at": info.started_at.isoformat(),
            "finished_at": finished_at,
            "config_hash": info.config_hash,
            "plugins": dict(info.plugins),
            "status": status,
        }
        if self.lock is not None:
            doc["lock_file"] = LOCK_NAME  # a reader finding it gone while this says running: interrupted
        if result is not None:
            calls = result.get("runtime_role_models") or []
            ledger = []
            for call in calls:
                entry = {_camel(k): v for k, v in call.items()}  # cached per key
                entry["mismatch"] = bool(call.get("effective_model")) and (
                    call.get("effective_provider") != call.get("planned_provider")
                    or call.get("effective_model") != call.get("planned_model"))
                ledger.append(entry)
            doc.update(
                mode=result.get("mode"), gear=result.get("gear"), answer=result.get("answer"),
                question=result.get("question"), diagnostic=result.get("diagnostic"),
                interruption=result.get("interruption"),
                contingencies=result.get("contingencies", []),
                timings={"steps": dict(self.timings)},
                steps=list(self.step_files),
                runtimeRoleModels=ledger,
                runtimeRoleModelsMismatch=any(e["mismatch"] for e in ledger),
                turn_events=self.turn_events,
            )
        doc["trace_write_errors"] = list(self.errors)
        return doc

    def finish(self, event: Any, data: dict[str, Any]) -> None:
        result = data.get("result") or {}
        finished = event.at
        started = self.info.started_at
        health = data.get("step_health") or []
        contingencies = data.get("contingencies") or []
        by_step: dict[str, list[dict[str, Any]]] = {}
        for c in contingencies:
            by_step.setdefault(c.get("step", ""), []).append(
                {k: c.get(k) for k in ("name", "severity", "detail")})
        self.write_json("step-health.json", {
            "turn_id": self.info.turn_id,
            "conversation_id": self.info.conversation_id,
            "started_at": started.isoformat(),
            "status": result.get("status"),
            "mode": result.get("mode"),
            "gear": result.get("gear"),
            "steps": [{**h, "contingency_details": by_step.get(h.get("step", ""), [])} for h in health],
            "contingencies": [c.get("name") for c in contingencies],
            "degraded_steps": [h.get("step") for h in health if h.get("degraded")],
        }, pretty=True)
        doc = self.turn_document(status=result.get("status", "unknown"), result=result,
                                 finished_at=finished.isoformat())
        doc["timings"]["total_s"] = round((finished - started).total_seconds(), 6)
        self.write_json("turn.json", doc, pretty=True)
        try:
            line = index.line_record(turn=doc, health=health, supplements=self.supplements,
                                     coverage_steps=self.coverage_steps, multi_stream=len(self.streams - {""}) > 1,
                                     directory=f"{self.dir.parent.name}/{self.dir.name}")
            self.index_line = self.redact(index.encode(line))
        except (ValueError, TypeError, KeyError) as exc:
            self.error(f"cannot build the turn's line for {self.root / index.INDEX_NAME}", exc)

    def seal(self) -> None:
        """After the turn's closing files are written: its index line, then its lock let go (in
        that order: a turn whose lock is gone is closed, or its process died)."""
        line, self.index_line = self.index_line, None
        if line is not None and self.usable:
            try:
                index.append(self.root, line)
            except OSError as exc:
                self.error(f"cannot add the turn to {self.root / index.INDEX_NAME} (ora health reads it from its "
                           "files instead)", exc)
        lock, self.lock = self.lock, None
        if lock is not None:
            try:
                lock.release()
            except OSError as exc:
                self.error(f"cannot remove {lock.path}", exc)

    def close_logs(self) -> None:
        # With syncfs, one call later makes the logs durable with everything else.
        for name, log in list(self.logs.items()):
            try:
                log.close(fsync=self.fsync and not SYNCFS_AVAILABLE)
            except OSError as exc:
                self.error(f"cannot close {self.dir / name}", exc)
        self.logs.clear()

    def sync(self, *, syncfs: bool) -> None:
        """Make the renames, directories and logs durable: one ``syncfs`` of the file system,
        or (``syncfs`` False) one fsync per directory."""
        if not (self.usable and self.fsync):
            return
        try:
            if not (syncfs and sync_dir_filesystem(self.dir)):
                fsync_dir(self.dir)
                fsync_dir(self.dir.parent)
        except OSError as exc:
            self.error(f"cannot fsync {self.dir}", exc)


def _device(path: Path) -> int | None:
    """The file system of ``path``; None sends that turn to per-directory fsync, whose own
    failure is recorded on the turn (``TurnWriter.sync``)."""
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


class TraceFsSink:
    """Registered as trace sink ``trace-fs``. One writer thread per sink, shared by turns; a
    closing turn writes what is left of itself on its own thread."""

    name = "trace-fs"

    def __init__(self) -> None:
        #: async durability: called on the writer thread after each group commit with the ids of
        #: its turns, in close order (observability; tests use it to see what is committed).
        self.on_commit: Callable[[list[str]], None] | None = None
        self._closed: deque[TurnWriter] = deque()  # async: finished turns waiting for their group
        self._commit_errors: deque[str] = deque()  # async: errors of turns that had returned
        self._turns: dict[str, TurnWriter] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # starting the thread
        self._work = threading.Lock()  # held by whoever writes: the writer thread, or a closing turn
        self._kick = threading.Event()  # wakes the idle writer thread
        self._idle = True
        self._events = 0  # events seen: the writer waits until it stops moving
        self._late: list[TurnWriter] = []  # turns whose close timed out: the writer finishes them
        self._closing: deque[TurnWriter] = deque()  # turn durability: closes waiting to write

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="ora-trace-fs-writer", daemon=True)
                self._thread.start()
                atexit.register(self._drain_at_exit)

    def _run(self) -> None:
        while True:
            self._kick.wait()
            self._kick.clear()
            self._open_new()
            while True:
                # Write when the pipeline is quiet (no new event for QUIET_S: it is waiting on a
                # model). Sleeping instead of waiting on the events means an event does not
                # wake this thread, so the pipeline does not hand the GIL over per event. A
                # group of finished turns (async durability) waits no longer than its window.
                quiet = self._wait_quiet()
                self._write_pending(open_turns=quiet)
                self._idle = True
                if not self._late and not self._closed and not any(
                        writer.pending for writer in list(self._turns.values())):
                    break
                self._idle = False  # events came in while writing, unannounced: go on

    def _wait_quiet(self) -> bool:
        """Sleep until the pipeline is quiet (True) or the oldest finished turn waiting for its
        group has waited ``group_commit_s`` (False: only the finished turns are written then)."""
        while True:
            seen = self._events
            time.sleep(QUIET_S)
            if self._events == seen:
                return True
            closed = self._closed
            if closed and time.monotonic() - closed[0].closed_at >= GROUP_COMMIT_S:
                return False

    def _open_new(self) -> None:
        """Open the turns just started (their directory and logs: system calls, which overlap
        the pipeline's own work) without waiting for quiet."""
        with self._work:
            for writer in list(self._turns.values()):
                if not writer.opened:
                    writer.opened = True
                    self._process(writer, "open", None)

    def _write_pending(self, *, open_turns: bool = True) -> None:
        """Open the open turns not yet opened, handle their queued events and write what that
        staged, behind one durability barrier for all of them; finish the turns whose close
        timed out, and commit the finished turns waiting for their group (async durability).
        ``open_turns`` False: only the finished ones (the pipeline is busy; the others wait)."""
        with self._work:
            late = self._take_late()
            group = self._take_closed()
            batch = ([writer for writer in list(self._turns.values()) if writer.pending or not writer.opened]
                     if open_turns else [])
            batch += late + group
            for writer in batch:
                self._drain(writer)
            if batch:
                self._end_batch(batch, late + group)
            self._committed(group)

    def _drain(self, writer: TurnWriter) -> None:
        """Open ``writer``'s turn if not yet, and handle its queued events, in order."""
        if not writer.opened:
            writer.opened = True
            self._process(writer, "open", None)
        pending = writer.pending
        while pending:  # popleft, never a swap: an event appended meanwhile is not lost
            self._process(writer, "event", pending.popleft())

    def _end_batch(self, writers: list[TurnWriter], closing: list[TurnWriter]) -> None:
        """Write the staged files of every turn in ``writers`` behind one durability barrier,
        then close the ``closing`` turns (one more barrier for their renames and logs)."""
        try:
            for durable in (True, False):
                items: list[tuple[str, bytes]] = []
                owner: dict[str, TurnWriter] = {}
                for writer in writers:
                    if writer.fsync is durable:
                        for path, data in writer.take_staged():
                            items.append((path, data))
                            owner[path] = writer
                if items:
                    for path, exc in write_files(items, fsync=durable):
                        owner[path].error(f"cannot write {path}", exc)
            for writer in closing:
                writer.close_logs()
            synced: set[int] = set()  # one syncfs per file system covers every closing turn on it
            for writer in closing:
                device = _device(writer.dir) if writer.usable and writer.fsync and SYNCFS_AVAILABLE else None
                if device is not None and device in synced:
                    continue
                errors = len(writer.errors)
                writer.sync(syncfs=device is not None)
                if device is not None and len(writer.errors) == errors:
                    synced.add(device)
        except Exception as exc:  # noqa: BLE001 - recorded on every turn of the batch, reported on stderr
            for writer in writers:
                writer.error("writer failed at the end of a batch", exc)
        for writer in closing:
            writer.seal()

    def _process(self, writer: TurnWriter, op: str, payload: Any) -> None:
        try:
            if op == "event":
                writer.handle(payload)
            elif op == "open":
                writer.open()
        except Exception as exc:  # noqa: BLE001 - recorded on the turn, reported on stderr
            what = f"{getattr(payload, 'kind', '')} {getattr(payload, 'step', '')}".strip()
            writer.error(f"writer failed on {op} {what}".strip(), exc)

    def _close(self, writer: TurnWriter, timeout: float) -> None:
        """Write everything of ``writer``'s turn that is not on disk yet, once the writer thread
        (if it is writing) is done; with ``fsync``, durably. Group commit: the close that gets to
        write takes every turn whose close is waiting meanwhile into its batch (one durability
        barrier for all of them); a close whose turn was so committed by another returns as soon
        as that batch is done. Either way its turn's files are on disk when it returns."""
        self._closing.append(writer)
        if not self._work.acquire(timeout=timeout):
            writer.errors.append(f"the trace writer did not finish within {timeout:g} s; "
                                 "it writes this turn's files when it can")
            try:
                self._closing.remove(writer)
            except ValueError:  # taken into the batch of a close still writing: that close finishes it
                return
            self._late.append(writer)
            self._idle = False
            self._kick.set()
            return
        try:
            if writer.committed:
                return  # a close that held the lock before this one wrote this turn with its own
            group = []
            while self._closing:  # popleft, never a swap: a close arriving meanwhile waits for the next
                group.append(self._closing.popleft())
            for member in group:
                self._drain(member)
            self._end_batch(group, group)
            for member in group:
                member.committed = True
        finally:
            self._work.release()

    def _drain_at_exit(self) -> None:
        """Finished turns waiting for their group (async durability) are committed; turns never
        closed (a crash in the pipeline), or whose close timed out: write what they have, if the
        writer thread lets go within 5 s."""
        if not self.flush(5.0):
            print(f"ora: trace-fs: the writer did not let go within 5 s at exit; {len(self._closed)} finished "
                  "turn(s) were not committed", file=sys.stderr)
        late = self._take_late()
        for writer in late + [w for w in (self._turns.pop(t, None) for t in list(self._turns)) if w]:
            self._close(writer, 5.0)

    def _take_late(self) -> list[TurnWriter]:
        late = []
        while self._late:  # pop, never a swap: a turn added meanwhile is not lost
            late.append(self._late.pop())
        return late

    def _take_closed(self) -> list[TurnWriter]:
        group = []
        closed = self._closed
        while closed:  # popleft, never a swap: a turn closed meanwhile goes to the next group
            group.append(closed.popleft())
        return group

    def _committed(self, group: list[TurnWriter]) -> None:
        """After a group commit: the errors of its turns (returned already) are kept for the next
        ``close_turn``; ``on_commit`` hears the ids."""
        if not group:
            return
        for writer in group:
            if writer.returns_errors:
                continue
            for message in writer.errors:
                self._commit_errors.append(f"turn {writer.info.turn_id} (committed after it returned): {message}")
        listener = self.on_commit
        if listener is not None:
            try:
                listener([writer.info.turn_id for writer in group])
            except Exception as exc:  # noqa: BLE001 - a listener's failure is named, never fatal to the writer
                print(f"ora: trace-fs: on_commit listener failed: {type(exc).__name__}: {exc}", file=sys.stderr)

    def flush(self, timeout: float = 30.0) -> bool:
        """Commit every finished turn still waiting for its group (async durability) now, on
        this thread; False when the writer thread did not let go within ``timeout``."""
        if not self._work.acquire(timeout=timeout):
            return False
        try:
            group = self._take_closed()
            for writer in group:
                self._drain(writer)
            if group:
                self._end_batch(group, group)
            self._committed(group)
        finally:
            self._work.release()
        return True

    # --- the TraceSink protocol -----------------------------------------------------------------

    def open_turn(self, turn: Any, ctx: Any) -> None:
        options = TraceFsOptions.of(ctx, self.name)  # [plugins.trace-fs], declared in options.py
        durability = getattr(getattr(ctx.config, "trace", None), "durability", "turn")
        writer = TurnWriter(turn, ctx, fsync=options.fsync, close_timeout_s=options.close_timeout_s,
                            durability="async" if durability == "async" else "turn")
        self._ensure_thread()
        self._turns[turn.turn_id] = writer

    def handle(self, event: Any) -> None:
        writer = self._turns.get(event.turn_id)
        if writer is None:
            raise KeyError(f"event {event.kind!r} for turn {event.turn_id!r}, which this sink never opened")
        writer.pending.append(event)
        self._events += 1
        if self._idle:
            self._idle = False
            self._kick.set()

    def close_waits(self, turn: Any) -> bool:
        """False when ``close_turn`` only hands the turn to the writer (``async`` durability, the
        writer not ``MAX_PENDING_TURNS`` behind): the kernel may then close on the loop's thread."""
        writer = self._turns.get(turn.turn_id)
        return writer is None or writer.durability != "async" or len(self._closed) >= MAX_PENDING_TURNS

    def close_turn(self, turn: Any) -> dict[str, Any]:
        writer = self._turns.pop(turn.turn_id)
        earlier = self._take_commit_errors()
        if writer.durability == "async":
            # The writer commits this turn with its group; its directory is where it will be.
            # (An open that fails on the writer thread is an error reported with the commit.)
            writer.closed_at = time.monotonic()
            path = str(writer.locate())
            if len(self._closed) < MAX_PENDING_TURNS:
                self._closed.append(writer)
                if self._idle:
                    self._idle = False
                    self._kick.set()
                return {"trace_path": path, "errors": earlier + list(writer.errors), "committed": False}
            # The writer is behind: this close commits the waiting turns and itself, in order.
            writer.returns_errors = True
            self._closed.append(writer)
            if not self.flush(writer.close_timeout_s):
                writer.errors.append(f"the trace writer did not finish within {writer.close_timeout_s:g} s; "
                                     "it commits this turn's files when it can")
                writer.returns_errors = False  # what its late commit finds goes to a later close
            return {"trace_path": str(writer.dir) if writer.usable else None,
                    "errors": earlier + list(writer.errors), "written_at": datetime.now(timezone.utc).isoformat()}
        self._close(writer, writer.close_timeout_s)
        return {"trace_path": str(writer.dir) if writer.usable else None, "errors": earlier + list(writer.errors),
                "written_at": datetime.now(timezone.utc).isoformat()}

    def _take_commit_errors(self) -> list[str]:
        errors = []
        while self._commit_errors:
            errors.append(self._commit_errors.popleft())
        return errors
