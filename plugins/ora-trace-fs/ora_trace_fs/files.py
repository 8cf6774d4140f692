"""Disk primitives: sanitised names, atomic file writes, single-write JSONL appends."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

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
