"""Finding the entry points of a group, and the cache that saves the scan on every ``ora`` command.

The scan of the installed distributions (~11 ms with ~150 installed: ``benchmarks/entry_points.py``;
every ``ora`` command pays it) can be served from an ``EntryPointCache``: the CLI passes one, other
callers scan. It is keyed by the environment's distributions, so it never serves a stale plugin
set: the interpreter, every ``sys.path`` entry, each directory's modification time, and each
``*.dist-info``/``*.egg-info`` in it with the modification time (in nanoseconds) and size of its
``entry_points.txt`` and of its metadata (name, version). Only the scan is cached: every plugin
module is still imported (by stevedore, ``loading.py``) on every command. Anything else that could
find distributions (a ``sys.meta_path`` finder with ``find_distributions`` other than the standard
path finder) bypasses the cache. A cache that cannot be read or written is rebuilt or skipped,
and said so on stderr; ``ORA_PLUGIN_CACHE`` names the file, or turns the cache off (``off``);
``ORA_DEBUG_HOOKS=1`` also prints how the scan was served.

This cache is ours, not stevedore's (``stevedore/_cache.py``), although stevedore imports the
plugins: stevedore's keeps no distribution name or version (the records, the allow- and block-lists
by distribution and the refusal of a name two distributions publish need them), keys the
environment by modification times packed into 32-bit floats (an ``entry_points.txt`` edited in place
within the same 128-second step is not seen), rebuilds a damaged file without a word and raises on
one holding a JSON list, and lives in a directory of its own that only its private module can move.
``docs/plugins.md`` ("How plugins are found and loaded") has the measurements;
``benchmarks/entry_points.py`` repeats them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from importlib.machinery import PathFinder
from pathlib import Path
from typing import IO, Any, Literal

CacheStatus = Literal["unused", "hit", "miss", "rebuilt", "bypassed", "off"]

CACHE_FORMAT = 1
_INFO_SUFFIXES = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class FoundEntryPoint:
    """One entry point of a group, with the distribution that publishes it."""

    entry_point: metadata.EntryPoint
    distribution: str
    version: str


def scan_entry_points(group: str) -> list[FoundEntryPoint]:
    """Every entry point of ``group`` in the installed distributions (``importlib.metadata``),
    in the order the scan finds them."""
    found = []
    for ep in metadata.entry_points(group=group):
        dist = ep.dist
        found.append(FoundEntryPoint(ep, dist.metadata["Name"] if dist is not None else "",
                                     dist.version if dist is not None else ""))
    return found


def environment_key() -> str | None:
    """A digest of everything ``importlib.metadata`` reads to find distributions and their
    entry points; None when no key can be made (``environment_key_or_why`` says why)."""
    return environment_key_or_why()[0]


def environment_key_or_why() -> tuple[str | None, str]:
    """``(key, "")``, or ``(None, why)``: another finder could find distributions, or a directory
    of ``sys.path`` could not be listed (then nothing is cached)."""
    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) is not None and finder is not PathFinder:
            return None, f"the import finder {type(finder).__name__} can also find distributions"
    parts = [sys.version, sys.prefix, sys.executable]
    for entry in sys.path:
        parts.append(f"path {entry}")
        where = entry or "."
        try:
            st = os.stat(where)
        except OSError:
            parts.append("-")
            continue
        if not os.path.isdir(where):
            parts.append(f"file {st.st_mtime_ns} {st.st_size}")
            continue
        parts.append(f"dir {st.st_mtime_ns}")
        try:
            names = sorted(os.listdir(where))
        except OSError as exc:
            return None, f"cannot list {where} on sys.path ({type(exc).__name__}: {exc})"
        infos = [n for n in names if n.lower().endswith(_INFO_SUFFIXES)]
        if entry.lower().endswith(".egg"):
            infos += [n for n in names if n.lower() == "egg-info"]
        for name in infos:
            parts.append(name)
            # the entry points, and the name and version (METADATA; PKG-INFO in an egg-info)
            metadata_file = "METADATA" if name.lower().endswith(".dist-info") else "PKG-INFO"
            for member in ("entry_points.txt", metadata_file):
                try:
                    st = os.stat(os.path.join(where, name, member))
                    parts.append(f"{st.st_mtime_ns} {st.st_size}")
                except (FileNotFoundError, NotADirectoryError):  # none, or an egg-info that is a file
                    parts.append("-")
                except OSError as exc:
                    return None, f"cannot stat {os.path.join(where, name, member)} ({type(exc).__name__}: {exc})"
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest(), ""


@dataclass
class EntryPointCache:
    """Entry points of a scan, kept in ``path`` under the environment's key (see the module
    docstring). ``status`` says how the last ``entry_points`` call was served: ``hit``, ``miss``
    (the environment changed, or no cache yet), ``rebuilt`` (the file was unreadable or
    malformed), ``bypassed`` (no key could be made), ``off``; ``problem`` names what went wrong
    with the file, if anything (a problem is also written to ``stderr``)."""

    path: Path | None
    stderr: IO[str] | None = None
    status: CacheStatus = "unused"
    problem: str = ""

    @classmethod
    def for_environment(cls, env: Mapping[str, str], stderr: IO[str] | None = None) -> EntryPointCache:
        """The cache file of this interpreter's environment in the user cache directory, or the
        one ``ORA_PLUGIN_CACHE`` names; ``ORA_PLUGIN_CACHE=off`` turns it off."""
        setting = env.get("ORA_PLUGIN_CACHE", "").strip()
        if setting.lower() in {"off", "0", "false", "no"}:
            return cls(None, stderr, status="off")
        if setting:
            return cls(Path(setting).expanduser(), stderr)
        digest = hashlib.sha256(f"{sys.prefix}\0{sys.executable}".encode("utf-8", "surrogateescape")).hexdigest()
        return cls(user_cache_dir(env) / f"entry-points-{digest[:16]}.json", stderr)

    def entry_points(self, group: str) -> list[FoundEntryPoint]:
        if self.path is None:
            self.status = "off"
            return scan_entry_points(group)
        key, why = environment_key_or_why()
        if key is None:  # not a failure (a full scan is what no cache does): named in describe()
            self.status, self.problem = "bypassed", f"no environment key: {why}"
            return scan_entry_points(group)
        stored = self._read()
        if stored is not None and stored.get("key") == key and group in stored["groups"]:
            self.status = "hit"
            return [FoundEntryPoint(metadata.EntryPoint(name=row[0], value=row[1], group=group), row[2], row[3])
                    for row in stored["groups"][group]]
        if self.status != "rebuilt":
            self.status = "miss"
        found = scan_entry_points(group)
        groups = stored["groups"] if stored is not None and stored.get("key") == key else {}
        groups[group] = [[f.entry_point.name, f.entry_point.value, f.distribution, f.version] for f in found]
        self._write({"format": CACHE_FORMAT, "key": key, "groups": groups})
        return found

    def _read(self) -> dict[str, Any] | None:
        """The stored cache, None when there is none; a malformed one is reported and rebuilt."""
        assert self.path is not None
        try:
            raw = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # no cache yet (writing it will say why if it cannot)
            return None
        except OSError as exc:
            self._report("rebuilt", f"cannot read it ({type(exc).__name__}: {exc})")
            return None
        try:
            stored = json.loads(raw)
            problem = cache_shape_problem(stored)
        except ValueError as exc:
            problem = f"not JSON ({exc})"
        if problem:
            self._report("rebuilt", problem)
            return None
        return stored  # cache_shape_problem checked the shape

    def _write(self, data: dict[str, Any]) -> None:
        assert self.path is not None
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data, separators=(",", ":")))
            os.replace(tmp, self.path)
        except OSError as exc:
            self._report(self.status, f"cannot write it ({type(exc).__name__}: {exc}); the next command "
                                      "scans again")
            try:
                if tmp.exists():
                    tmp.unlink()
            except OSError as cleanup:
                self.problem += f"; and its temporary file {tmp} remains: {cleanup}"

    def _report(self, status: CacheStatus, problem: str) -> None:
        self.status = status
        self.problem = problem
        what = "rebuilt from a full scan" if status == "rebuilt" else "the entry points came from a full scan"
        print(f"ora: the plugin entry-point cache {self.path}: {problem}; {what} "
              "(ORA_PLUGIN_CACHE=off turns the cache off)", file=self.stderr or sys.stderr)

    def describe(self) -> str:
        return f"entry points: cache {self.status} ({self.path or 'no file'})" + (
            f": {self.problem}" if self.problem else "")


def user_cache_dir(env: Mapping[str, str]) -> Path:
    """``platformdirs.user_cache_dir("ora")``; on Linux spelled out (the XDG rule platformdirs
    follows there), which saves importing it on every command."""
    if sys.platform.startswith("linux"):
        xdg = env.get("XDG_CACHE_HOME", "").strip()
        return (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "ora"
    from platformdirs import user_cache_dir as platform_cache_dir

    return Path(platform_cache_dir("ora", appauthor=False))


def cache_shape_problem(stored: Any) -> str | None:
    """What is wrong with a cache file's parsed content, None when it has the shape ``entry_points`` reads."""
    if not isinstance(stored, dict) or stored.get("format") != CACHE_FORMAT:
        return f"not a format-{CACHE_FORMAT} cache"
    if not isinstance(stored.get("key"), str) or not isinstance(stored.get("groups"), dict):
        return "no key or groups"
    for group, rows in stored["groups"].items():
        if not isinstance(rows, list) or not all(
                isinstance(row, list) and len(row) == 4 and all(isinstance(v, str) for v in row) for row in rows):
            return f"group {group!r} is malformed"
    return None
