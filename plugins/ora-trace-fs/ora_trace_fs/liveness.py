"""Is the process that writes a turn still alive? The turn's lock file says.

While a turn is open, its directory holds ``.turn.lock``: the writing process holds an exclusive
``flock`` on it (the kernel drops the lock the moment the process dies, however it dies: SIGKILL,
OOM, power loss), and its content names the process (pid, the process's start time in clock
ticks since boot from ``/proc/<pid>/stat``, the boot id, the host). The file is created under a
temporary name, locked, then renamed into place, so a reader never sees it unlocked while its
turn is alive; it is removed only after the turn's closing ``turn.json`` is on disk.

A reader finds a turn whose ``turn.json`` still says ``running`` and asks ``turn_liveness``:

- the lock is held → ``running``;
- the lock is free, or the lock file is gone while ``turn.json`` (which names it) still says
  running → ``interrupted``: the process died before it closed the turn;
- ``flock`` cannot be used on this file system → the pid *and* its start time (and the boot id)
  must match a live process for ``running``: a pid reused by another process has another start
  time, so it never makes a dead turn look alive; written on another host → ``unknown``;
- a ``turn.json`` written before this scheme (it names no lock file) → ``unknown``, said so,
  never guessed from the turn's age.

Locks are per open file description: a reader in the very process that writes the turn still
sees the lock held. The descriptor is opened ``O_CLOEXEC``, so programs the writer starts do not
inherit the lock (a child that forks without ``exec`` would, and keep the turn ``running``
until it exits too).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows: liveness falls back on pid + start time
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".turn.lock"

Liveness = Literal["running", "interrupted", "unknown"]


def process_start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of ``/proc/<pid>/stat``); None
    when there is no such process or no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces and ")".
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return int(fields[19])  # field 22 overall: the 20th after the name and the state
    except (IndexError, ValueError):
        return None


def boot_id() -> str:
    """This boot's id (Linux); "" elsewhere. Start ticks count from boot: a pid and start time
    seen in another boot name another process."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


_SELF: dict[int, dict[str, Any]] = {}


def this_process() -> dict[str, Any]:
    """This process as a lock file names it (read once per process: a forked child reads its own)."""
    pid = os.getpid()
    me = _SELF.get(pid)
    if me is None:
        me = _SELF[pid] = {"pid": pid, "start_ticks": process_start_ticks(pid), "boot_id": boot_id(),
                           "host": socket.gethostname()}
    return me


def process_alive(pid: int, start_ticks: int | None, boot: str = "") -> bool | None:
    """Is the process that recorded (``pid``, ``start_ticks``, ``boot``) still running? None
    when this machine cannot say (no ``/proc``: a pid alone could be anyone's)."""
    if boot and boot_id() and boot != boot_id():
        return False  # another boot: every process of that one is gone
    now = process_start_ticks(pid)
    if now is None:
        if not Path("/proc/self/stat").exists():
            return None
        return False  # no such process
    return start_ticks is not None and now == start_ticks


class TurnLock:
    """The writer's side: created, locked and renamed into place in the turn directory when the
    turn opens; released (removed, then unlocked) once the turn's closing files are written."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    def acquire(cls, directory: Path, turn_id: str) -> TurnLock:
        """Raises ``OSError`` when the file cannot be written; a file system without ``flock``
        keeps the file (pid and start time) without the lock."""
        path = directory / LOCK_NAME
        tmp = directory / f".{LOCK_NAME}.{os.getpid()}.{threading.get_ident()}.tmp"
        record = {**this_process(), "turn_id": turn_id}
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            locked = _lock_exclusive(fd)
            os.write(fd, json.dumps({**record, "flock": locked}).encode("utf-8") + b"\n")
            os.replace(tmp, path)
        except BaseException as exc:
            os.close(fd)
            try:
                os.unlink(tmp)
            except OSError as cleanup:  # the original error is what matters; name both
                exc.add_note(f"and the temporary file {tmp} could not be removed: {cleanup}")
            raise
        if not locked:  # the file alone (pid and start time) speaks for the process
            os.close(fd)
            return cls(path, None)
        return cls(path, fd)

    def release(self) -> None:
        """Remove the file, then let go of the lock (a reader that finds the file free after
        this finds the turn's closing ``turn.json`` too). Raises ``OSError``; the descriptor is
        closed either way."""
        fd, self.fd = self.fd, None
        try:
            if os.path.lexists(self.path):  # removed by someone else: the lock itself still goes below
                os.unlink(self.path)
        finally:
            if fd is not None:
                os.close(fd)


def _lock_held(fd: int) -> bool | None:
    """True when another open file holds an exclusive ``flock`` on the file; None where the file
    system (or platform) has no ``flock``: the caller decides by pid and start time."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _lock_exclusive(fd: int) -> bool:
    """An exclusive ``flock`` on ``fd``; False where the file system (or platform) has none."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class LivenessReport:
    state: Liveness
    why: str
    pid: int | None = None


def turn_liveness(directory: Path, turn_doc: dict[str, Any]) -> LivenessReport:
    """Whether the process writing a turn whose ``turn.json`` says ``running`` is alive."""
    path = directory / LOCK_NAME
    named = turn_doc.get("lock_file") == LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if named:
            return LivenessReport("interrupted", "its lock file is gone and turn.json never recorded a close")
        return LivenessReport("unknown", "written before interrupted-turn detection (no lock file): "
                                         "whether its process is alive cannot be told")
    except OSError as exc:
        return LivenessReport("unknown", f"the lock file cannot be opened: {type(exc).__name__}: {exc}")
    try:
        try:
            record = json.loads(os.read(fd, 4096) or b"{}")
            if not isinstance(record, dict):
                raise ValueError(f"a JSON {type(record).__name__}, not an object")
        except ValueError as exc:
            record = {}
            unreadable = f"its lock file is unreadable ({exc}); "
        else:
            unreadable = ""
        pid = record.get("pid") if isinstance(record.get("pid"), int) else None
        held = _lock_held(fd) if record.get("flock", True) else None
        if held:
            return LivenessReport("running", "its process holds the turn's lock", pid)
        if held is False:
            return LivenessReport("interrupted", unreadable + "no process holds the turn's lock: the process "
                                  f"that wrote it{f' (pid {pid})' if pid else ''} died before closing it", pid)
    finally:
        os.close(fd)
    if pid is None:
        return LivenessReport("unknown", unreadable + "the lock file names no process")
    if record.get("host") and record["host"] != socket.gethostname():
        return LivenessReport("unknown", f"written on host {record['host']!r}: its process can be checked only "
                                         "there", pid)
    alive = process_alive(pid, record.get("start_ticks"), str(record.get("boot_id") or ""))
    if alive is None:
        return LivenessReport("unknown", f"pid {pid}: this system cannot tell a process's start time", pid)
    if alive:
        return LivenessReport("running", f"pid {pid} is alive with the start time it recorded", pid)
    return LivenessReport("interrupted", f"pid {pid} with the start time it recorded is gone (the pid is "
                                         "absent or now another process's)", pid)
