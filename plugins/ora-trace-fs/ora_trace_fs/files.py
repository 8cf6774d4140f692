"""Disk primitives: sanitised names, atomic file writes, single-write JSONL appends."""

from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

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


def write_files(items: list[tuple[Path, bytes]], *, fsync: bool) -> list[tuple[Path, BaseException]]:
    """``atomic_write`` for several files at once, with one durability barrier for all of them:
    every temporary file is written, then (``fsync``) flushed to the device (one ``syncfs``, or
    one ``fsync`` each), then renamed over its target. A reader or a crash sees each file old or
    whole, as with ``atomic_write``. Returns the files that could not be written, with why."""
    failed: list[tuple[Path, BaseException]] = []
    pending: list[tuple[Path, Path, int]] = []
    suffix = f".{os.getpid()}.{threading.get_ident()}.tmp"
    for path, data in items:
        tmp = path.with_name(f".{path.name}{suffix}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            failed.append((path, exc))
            continue
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:
            _discard(fd, tmp, exc)
            failed.append((path, exc))
            continue
        pending.append((path, tmp, fd))
    if fsync and pending:
        try:
            synced = sync_filesystem(pending[0][2])
        except OSError as exc:  # not known to be on the device: none of them is written
            for path, tmp, fd in pending:
                _discard(fd, tmp, exc)
                failed.append((path, exc))
            return failed
        if not synced:
            kept = []
            for path, tmp, fd in pending:
                try:
                    os.fsync(fd)
                except OSError as exc:
                    _discard(fd, tmp, exc)
                    failed.append((path, exc))
                    continue
                kept.append((path, tmp, fd))
            pending = kept
    for path, tmp, fd in pending:
        try:
            os.close(fd)
            os.replace(tmp, path)
        except OSError as exc:
            failed.append((path, exc))
    return failed


def _discard(fd: int, tmp: Path, exc: BaseException) -> None:
    os.close(fd)
    try:
        os.unlink(tmp)
    except OSError as cleanup:  # the original error is what matters; name both
        exc.add_note(f"and the temporary file {tmp} could not be removed: {cleanup}")


class AppendLog:
    """An append-only JSONL file: each line goes out in one ``write`` on an O_APPEND fd."""

    def __init__(self, path: Path) -> None:
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
