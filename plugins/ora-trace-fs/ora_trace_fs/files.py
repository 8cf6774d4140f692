"""Disk primitives: sanitised names, atomic file writes, single-write JSONL appends."""

from __future__ import annotations

import os
import re
import stat
import sys
import threading
from pathlib import Path
from typing import Any, TypeVar

P = TypeVar("P", str, Path)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_component(raw: str, default: str = "default") -> str:
    """One path component: no separators, no traversal, no control or odd characters."""
    cleaned = _UNSAFE.sub("-", str(raw)).strip(".-_")
    cleaned = re.sub(r"\.{2,}", ".", cleaned)[:80]
    return cleaned or default


def inside(root: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def make_dir_inside(root: Path, path: Path) -> None:
    """``mkdir -p`` of ``path`` = ``root / <component> / <component>`` (each from
    ``safe_component``: no separator, no ``..``), refusing one that resolves outside ``root``.

    With safe components, ``path`` can leave ``root`` only through a symbolic link at one of
    the two levels below it, so those two are checked with one ``lstat`` each (the turn
    directory not at all when this call created it), and ``inside`` (a ``resolve`` of every
    component) runs only when one is a link: a turn costs two or three system calls here."""
    parent = path.parent
    if _is_link(parent) and not inside(root, path):
        raise PermissionError(f"{path} is outside the trace root {root}")
    try:
        os.mkdir(path)
        return  # created here: a real directory, in a parent just checked
    except FileNotFoundError:
        path.mkdir(parents=True, exist_ok=True)  # the first turn under this root or conversation
        if _is_link(parent) and not inside(root, path):  # created concurrently as a link
            raise PermissionError(f"{path} is outside the trace root {root}") from None
        return
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    if _is_link(path) and not inside(root, path):
        raise PermissionError(f"{path} is outside the trace root {root}")


def atomic_write(path: Path, data: bytes, *, fsync: bool) -> None:
    """Write ``data`` to a temporary file in the same directory, then ``os.replace`` it: a
    reader (or a crash) sees the old file or the whole new one, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    except BaseException as exc:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError as cleanup:  # the original error is what matters; name both
            exc.add_note(f"and the temporary file {tmp} could not be removed: {cleanup}")
        raise
    os.close(fd)
    os.replace(tmp, path)


def _syncfs() -> Any:
    """libc's ``syncfs(fd)`` (Linux), or None where it is not available."""
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_SYNCFS: Any = _syncfs() if sys.platform.startswith("linux") else None


SYNCFS_AVAILABLE = _SYNCFS is not None


def sync_dir_filesystem(path: Path) -> bool:
    """``sync_filesystem`` through a directory: its entries, and every file written under it."""
    if _SYNCFS is None:
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        return sync_filesystem(fd)
    finally:
        os.close(fd)


def sync_filesystem(fd: int) -> bool:
    """Flush the whole file system holding ``fd`` to the device in one call (one journal commit
    instead of one per file). False where ``syncfs`` is unavailable: the caller fsyncs per file."""
    if _SYNCFS is None:
        return False
    if _SYNCFS(fd) != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"syncfs failed: {os.strerror(err)}")
    return True


# Files are opened and renamed relative to an open descriptor of their directory where the
# platform allows it: the kernel then walks no path per system call (~10% of the writes' cost).
# (``os.rename`` is ``rename(2)``/``renameat(2)``: on POSIX it replaces the target atomically,
# as ``os.replace`` does; ``os.replace`` is not listed in ``os.supports_dir_fd``.)
_DIR_FD = (os.name == "posix" and os.open in os.supports_dir_fd and os.rename in os.supports_dir_fd
           and os.unlink in os.supports_dir_fd)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


def write_files(items: list[tuple[P, bytes]], *, fsync: bool) -> list[tuple[P, BaseException]]:
    """``atomic_write`` for several files at once, with one durability barrier for all of them:
    every temporary file is written, then (``fsync``) flushed to the device (one ``syncfs``, or
    one ``fsync`` each), then renamed over its target. A reader or a crash sees each file old or
    whole, as with ``atomic_write``. Returns the files that could not be written, with why.
    Paths may be strings (the writer's hot path: no ``Path`` objects) or ``Path``."""
    failed: list[tuple[P, BaseException]] = []
    pending: list[tuple[P, int | None, str, str, int]] = []  # path, dir fd, tmp, name, fd
    suffix = f".{os.getpid()}.{threading.get_ident()}.tmp"
    dirs: dict[str, int | OSError] = {}
    try:
        for path, data in items:
            head, name = os.path.split(path)
            dir_fd: int | None = None
            if _DIR_FD:
                opened = dirs.get(head)
                if opened is None:
                    try:
                        opened = os.open(head or ".", os.O_RDONLY | _O_DIRECTORY)
                    except OSError as exc:
                        opened = exc
                    dirs[head] = opened
                if isinstance(opened, OSError):
                    failed.append((path, opened))
                    continue
                dir_fd, tmp = opened, f".{name}{suffix}"
            else:
                tmp, name = os.path.join(head, f".{name}{suffix}"), os.fspath(path)
            try:
                fd = os.open(tmp, _CREATE, 0o644, dir_fd=dir_fd)
            except OSError as exc:
                failed.append((path, exc))
                continue
            try:
                written = os.write(fd, data)
                if written < len(data):  # a short write: the rest, piece by piece
                    view = memoryview(data)[written:]
                    while view:
                        view = view[os.write(fd, view):]
            except OSError as exc:
                _discard(fd, dir_fd, tmp, head, exc)
                failed.append((path, exc))
                continue
            pending.append((path, dir_fd, tmp, name, fd))
        if fsync and pending:
            try:
                synced = sync_filesystem(pending[0][4])
            except OSError as exc:  # not known to be on the device: none of them is written
                for path, dir_fd, tmp, _, fd in pending:
                    _discard(fd, dir_fd, tmp, os.path.dirname(path), exc)
                    failed.append((path, exc))
                return failed
            if not synced:
                kept = []
                for entry in pending:
                    try:
                        os.fsync(entry[4])
                    except OSError as exc:
                        _discard(entry[4], entry[1], entry[2], os.path.dirname(entry[0]), exc)
                        failed.append((entry[0], exc))
                        continue
                    kept.append(entry)
                pending = kept
        for path, dir_fd, tmp, name, fd in pending:
            try:
                os.close(fd)
                if dir_fd is None:
                    os.replace(tmp, name)
                else:
                    os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except OSError as exc:
                failed.append((path, exc))
    finally:
        for opened in dirs.values():
            if not isinstance(opened, OSError):
                os.close(opened)
    return failed


def _discard(fd: int, dir_fd: int | None, tmp: str, head: str, exc: BaseException) -> None:
    os.close(fd)
    try:
        os.unlink(tmp, dir_fd=dir_fd)
    except OSError as cleanup:  # the original error is what matters; name both
        where = os.path.join(head, tmp) if dir_fd is not None else tmp
        exc.add_note(f"and the temporary file {where} could not be removed: {cleanup}")


class AppendLog:
    """An append-only JSONL file: each line goes out in one ``write`` on an O_APPEND fd."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, line: bytes) -> None:
        if not line.endswith(b"\n"):
            line += b"\n"
        written = os.write(self.fd, line)
        if written != len(line):
            raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes")

    def close(self, *, fsync: bool) -> None:
        try:
            if fsync:
                os.fsync(self.fd)
        finally:
            os.close(self.fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
