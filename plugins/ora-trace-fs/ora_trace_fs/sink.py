"""The trace sink: events go onto a queue on the call path; one writer thread does the disk.

``handle`` costs a dictionary look-up and a queue put. The writer thread turns events into
files; ``close_turn`` waits until every event of its turn is on disk (and, with ``fsync``, on
the device), so the trace is complete when the turn returns. Every file is written atomically,
every JSONL line in one write, so a crash at any moment leaves only whole files and whole lines.

The writer works in batches (what arrived until the pipeline went quiet, or a turn closed):
the batch's files, of every turn in it, are staged, written once each (a step file started and
finished in one batch is written once) and, with ``fsync``, made durable behind one barrier
before they are renamed into place (``files.write_files``: one ``syncfs`` on Linux instead of
one fsync per file); a closing turn's logs and renames get one more barrier.

A write that fails is printed on stderr as it happens, and the errors are returned by
``close_turn`` so the kernel marks the turn's tracing as degraded. The run never breaks.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from .files import SYNCFS_AVAILABLE, AppendLog, fsync_dir, inside, safe_component, sync_dir_filesystem, write_files
from .pretty import dumps_pretty
from .render import render_step_markdown

JSONL_BY_KIND = {
    "rag_failure": "rag-failures.jsonl",
    "supplement": "supplemental-rag.jsonl",
    "contingency": "contingencies.jsonl",
    "oversight": "oversight-queue.jsonl",
}
MAX_STDERR_LINES = 5
QUIET_S = 0.004  # the writer waits for this much quiet from the pipeline before writing


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)


class TurnWriter:
    """Everything the writer thread knows about one turn, and the files it writes."""

    def __init__(self, info: Any, ctx: Any, *, fsync: bool, close_timeout_s: float = 30.0) -> None:
        self.info = info
        self.fsync = fsync
        self.close_timeout_s = close_timeout_s
        self.stderr: IO[str] = getattr(ctx, "stderr", None) or sys.stderr
        self.secrets = [s for s in getattr(ctx, "secrets", ()) if s]
        self._trace_config = ctx.config.trace  # the directory is resolved on the writer thread
        self.root = Path()
        self.dir = Path()
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
        self.done = threading.Event()
        self.started = time.perf_counter()

    # --- errors and redaction ----------------------------------------------------------------

    def error(self, what: str, exc: BaseException) -> None:
        message = f"{what}: {type(exc).__name__}: {exc}"
        self.errors.append(message)
        if len(self.errors) <= MAX_STDERR_LINES:
            print(f"ora: trace-fs: {message} (turn {self.info.turn_id}; the run goes on)", file=self.stderr)
        elif len(self.errors) == MAX_STDERR_LINES + 1:
            print("ora: trace-fs: more trace write errors for this turn; see turn.json", file=self.stderr)

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[REDACTED]")
            escaped = json.dumps(secret)[1:-1]
            if escaped != secret:
                text = text.replace(escaped, "[REDACTED]")
        return text

    def _json(self, obj: Any, *, pretty: bool) -> bytes:
        # Step documents are compact: json's C encoder only runs without ``indent``, and the
        # writer thread shares the GIL with the model-call path. turn.json and
        # step-health.json are small and indented for people (``pretty.dumps_pretty``: the
        # text of ``json.dumps(indent=2)``, built faster).
        text = dumps_pretty(obj) if pretty else json.dumps(obj, ensure_ascii=False, default=str)
        return self.redact(text).encode("utf-8")

    def write_json(self, name: str, obj: Any, *, pretty: bool = False) -> None:
        """Stage ``obj`` as ``name``; it is encoded and written when the batch is flushed."""
        if self.usable:
            self.staged[name] = lambda: self._json(obj, pretty=pretty)

    def write_text(self, name: str, text: str | Callable[[], str]) -> None:
        """Stage ``text`` (or a function rendering it at flush time) as ``name``."""
        if self.usable:
            self.staged[name] = lambda: self.redact(text() if callable(text) else text).encode("utf-8")

    def take_staged(self) -> list[tuple[Path, bytes]]:
        """The staged files, encoded (a value that cannot be encoded is a named write error)."""
        staged, self.staged = self.staged, {}
        if not self.usable:
            return []
        items = []
        for name, make in staged.items():
            try:
                items.append((self.dir / name, make()))
            except (ValueError, TypeError) as exc:
                self.error(f"cannot write {self.dir / name}", exc)
        return items

    def flush(self) -> None:
        """Write every staged file (atomically, one durability barrier for all with ``fsync``)."""
        for path, exc in write_files(self.take_staged(), fsync=self.fsync):
            self.error(f"cannot write {path}", exc)

    def append(self, name: str, record: dict[str, Any]) -> None:
        if not self.usable:
            return
        try:
            log = self.logs.get(name)
            if log is None:
                log = self.logs[name] = AppendLog(self.dir / name)
            line = self.redact(json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":")))
            log.append(line.encode("utf-8") + b"\n")
        except (OSError, ValueError, TypeError) as exc:
            self.error(f"cannot append to {self.dir / name}", exc)

    # --- events ------------------------------------------------------------------------------

    def open(self) -> None:
        try:
            self.root = Path(self._trace_config.resolved_root()).expanduser()
            self.dir = (self.root / safe_component(self.info.conversation_id)
                        / safe_component(self.info.turn_id, "turn"))
            if not inside(self.root, self.dir):
                raise PermissionError(f"{self.dir} is outside the trace root {self.root}")
            self.dir.mkdir(parents=True, exist_ok=True)
            self.usable = True
        except OSError as exc:
            self.error(f"cannot create the trace directory {self.dir}", exc)
            return
        for name in JSONL_BY_KIND.values():
            self.append_touch(name)
        self.write_json("turn.json", self.turn_document(status="running"), pretty=True)

    def append_touch(self, name: str) -> None:
        try:
            self.logs[name] = AppendLog(self.dir / name)
        except OSError as exc:
            self.error(f"cannot create {self.dir / name}", exc)

    def handle(self, event: Any) -> None:
        kind = event.kind
        data = event.data
        record = {"seq": event.seq, "at": event.at.isoformat(), "kind": kind, "step": event.step, **data}
        if kind in JSONL_BY_KIND:
            self.append(JSONL_BY_KIND[kind], record)
        if kind == "step_started":
            self.steps[event.step] = {
                "step": event.step, "index": event.step_index, "status": "running",
                "started_at": event.at.isoformat(), "input": data.get("input", {}), "events": [],
            }
            self.write_json(self.step_file(event.step, event.step_index, "json"), self.steps[event.step])
        elif kind == "step_finished":
            doc = self.steps.pop(event.step, None) or {"step": event.step, "index": event.step_index,
                                                        "input": {}, "events": []}
            doc.update(status="finished", finished_at=event.at.isoformat(),
                       output=data.get("output", {}), health=data.get("health", {}))
            self.timings[event.step] = (data.get("health") or {}).get("latency_s", 0.0)
            json_name = self.step_file(event.step, event.step_index, "json")
            self.write_json(json_name, doc)
            self.write_text(self.step_file(event.step, event.step_index, "md"), lambda: render_step_markdown(doc))
            if json_name not in self.step_files:
                self.step_files.append(json_name)
        elif kind == "turn_finished":
            self.finish(event, data)
        elif kind not in ("turn_started",):
            target = self.steps.get(event.step)
            (target["events"] if target is not None else self.turn_events).append(record)

    def step_file(self, step: str, index: int | None, ext: str) -> str:
        return f"{(index or 0):02d}-{safe_component(step, 'step')}.{ext}"

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
        if result is not None:
            calls = result.get("runtime_role_models") or []
            ledger = []
            for call in calls:
                entry = {_camel(k): v for k, v in call.items()}
                entry["mismatch"] = bool(call.get("effective_model")) and (
                    call.get("effective_provider") != call.get("planned_provider")
                    or call.get("effective_model") != call.get("planned_model"))
                ledger.append(entry)
            doc.update(
                mode=result.get("mode"), gear=result.get("gear"), answer=result.get("answer"),
                question=result.get("question"), diagnostic=result.get("diagnostic"),
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

    def close(self) -> None:
        """Flush, close the logs, make everything durable (``fsync``), and mark the turn done.
        The writer thread does the same for all the turns closing in one batch at once."""
        try:
            self.flush()
            self.close_logs()
            self.sync(syncfs=SYNCFS_AVAILABLE)
        finally:
            self.done.set()

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
    """Registered as trace sink ``trace-fs``. One writer thread per sink, shared by turns."""

    name = "trace-fs"

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[TurnWriter, str, Any]] = queue.SimpleQueue()
        self._turns: dict[str, TurnWriter] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()  # a closing turn cuts the writer's quiet wait short

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="ora-trace-fs-writer", daemon=True)
                self._thread.start()
                atexit.register(self._drain_at_exit)

    def _run(self) -> None:
        while True:
            batch = self._open_eagerly([self._queue.get()])
            # Write when the producer is quiet (no new event for QUIET_S: the pipeline is
            # waiting on a model, or done) or a turn is closing. Sleeping instead of waiting on
            # the queue means a put does not wake this thread, so the pipeline does not hand
            # the GIL over per event: the disk work stays off the model-call path. Crash
            # safety is unchanged: every file is atomic, every JSONL line one write.
            while batch[-1][1] != "close":
                self._wake.wait(QUIET_S)
                self._wake.clear()
                more = self._open_eagerly(self._take_all())
                if not more:
                    break
                batch += more
                if any(op == "close" for _, op, _ in more):
                    break
            writers: dict[int, TurnWriter] = {}
            closing: list[TurnWriter] = []
            for writer, op, payload in batch:
                writers[id(writer)] = writer
                if op == "close":
                    closing.append(writer)
                else:
                    self._process(writer, op, payload)
            self._end_batch(list(writers.values()), closing)

    def _open_eagerly(self, items: list[tuple[TurnWriter, str, Any]]) -> list[tuple[TurnWriter, str, Any]]:
        """Open the turns among ``items`` at once (their directory and logs: system calls that
        overlap the pipeline's own work) and return ``items`` with each open marked done: the
        turn joins the batch (its files are written at its end) without being opened twice."""
        out = []
        for writer, op, payload in items:
            if op == "open":
                self._process(writer, op, payload)
                op = "opened"
            out.append((writer, op, payload))
        return out

    def _end_batch(self, writers: list[TurnWriter], closing: list[TurnWriter]) -> None:
        """Write the batch's staged files of every turn behind one durability barrier, then
        close the closing turns (one more barrier for their renames and logs) and release them."""
        try:
            for durable in (True, False):
                items: list[tuple[Path, bytes]] = []
                owner: dict[Path, TurnWriter] = {}
                for writer in writers:
                    if writer.fsync is durable:
                        for path, data in writer.take_staged():
                            items.append((path, data))
                            owner[path] = writer
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
        finally:
            for writer in closing:
                writer.done.set()

    def _take_all(self) -> list[tuple[TurnWriter, str, Any]]:
        items = []
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                return items

    def _process(self, writer: TurnWriter, op: str, payload: Any) -> None:
        try:
            if op == "event":
                writer.handle(payload)
            elif op == "opened":
                return
            elif op == "open":
                writer.open()
            elif op == "close":
                writer.close()
        except Exception as exc:  # noqa: BLE001 - recorded on the turn, reported on stderr
            what = f"{getattr(payload, 'kind', '')} {getattr(payload, 'step', '')}".strip()
            writer.error(f"writer failed on {op} {what}".strip(), exc)
            if op == "close":
                writer.done.set()

    def _drain_at_exit(self) -> None:
        """Turns never closed (a crash in the pipeline): give queued events a moment to land."""
        for writer in list(self._turns.values()):
            self._queue.put((writer, "close", None))
            writer.done.wait(5.0)

    # --- the TraceSink protocol -----------------------------------------------------------------

    def open_turn(self, turn: Any, ctx: Any) -> None:
        options = (getattr(ctx.config, "plugins", {}) or {}).get(self.name, {})
        writer = TurnWriter(turn, ctx, fsync=bool(options.get("fsync", True)),
                            close_timeout_s=float(options.get("close_timeout_s", 30.0)))
        self._turns[turn.turn_id] = writer
        self._ensure_thread()
        self._queue.put((writer, "open", None))

    def handle(self, event: Any) -> None:
        writer = self._turns.get(event.turn_id)
        if writer is None:
            raise KeyError(f"event {event.kind!r} for turn {event.turn_id!r}, which this sink never opened")
        self._queue.put((writer, "event", event))

    def close_turn(self, turn: Any) -> dict[str, Any]:
        writer = self._turns.pop(turn.turn_id)
        self._queue.put((writer, "close", None))
        self._wake.set()
        timeout = writer.close_timeout_s
        if not writer.done.wait(timeout):
            writer.errors.append(f"the trace writer did not finish within {timeout:.0f} s")
        return {"trace_path": str(writer.dir) if writer.usable else None, "errors": list(writer.errors),
                "written_at": datetime.now(timezone.utc).isoformat()}
