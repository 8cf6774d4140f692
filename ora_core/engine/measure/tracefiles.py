"""A small reader of one turn's trace directory, for probes and the bench.

The forensic trace of a turn is ``<root>/<conversation>/<turn id>/`` with ``turn.json``,
``step-health.json``, one ``NN-<step>.json`` (and ``.md``) per step and the JSONL logs. This reader
knows that layout and nothing of the sink that wrote it (plugins never import each other, and
``ora_core`` never imports a plugin). Every read that fails raises ``TraceFileError`` naming the
file and what was wrong with it: a missing file is never an empty one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_STEP_FILE = re.compile(r"^(?P<index>\d+)-(?P<name>.+)\.json$")
JSONL_LOGS = ("contingencies.jsonl", "rag-failures.jsonl", "supplemental-rag.jsonl", "oversight-queue.jsonl")


class TraceFileError(Exception):
    """A trace file is missing, unreadable or malformed; ``path`` names it."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def read_json(path: Path) -> Any:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceFileError(path, "does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFileError(path, f"cannot be read ({type(exc).__name__}: {exc})") from None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise TraceFileError(path, f"is not JSON ({exc})") from None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceFileError(path, "does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFileError(path, f"cannot be read ({type(exc).__name__}: {exc})") from None
    records = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise TraceFileError(path, f"line {number} is not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise TraceFileError(path, f"line {number} is not a JSON object")
        records.append(record)
    return records


class TurnFiles:
    """The files of one traced turn (``path`` is the turn directory)."""

    def __init__(self, path: Path | str, root: Path | str | None = None) -> None:
        self.path = Path(path)
        #: The trace root the turn was written under (``<root>/<conversation>/<turn>``).
        self.root = Path(root) if root is not None else self.path.parent.parent

    def turn(self) -> dict[str, Any]:
        return self._object(self.path / "turn.json")

    def step_health(self) -> dict[str, Any]:
        return self._object(self.path / "step-health.json")

    def step_files(self) -> list[tuple[int, str, Path]]:
        """``(index, step name, path)`` of every step document, in step order."""
        if not self.path.is_dir():
            raise TraceFileError(self.path, "the turn directory does not exist")
        found = []
        for path in self.path.iterdir():
            match = _STEP_FILE.match(path.name)
            if match is not None:
                found.append((int(match.group("index")), match.group("name"), path))
        return sorted(found)

    def steps(self) -> list[str]:
        return [name for _, name, _ in self.step_files()]

    def step_path(self, name: str) -> Path | None:
        """The step document of ``name`` (the last one, if the step ran twice), or None."""
        matches = [path for _, step, path in self.step_files() if step == name]
        return matches[-1] if matches else None

    def step(self, name: str) -> dict[str, Any]:
        path = self.step_path(name)
        if path is None:
            raise TraceFileError(self.path / f"NN-{name}.json",
                                 f"no step file for step {name!r} (steps: {', '.join(self.steps()) or 'none'})")
        return self._object(path)

    def step_docs(self) -> list[tuple[Path, dict[str, Any]]]:
        return [(path, self._object(path)) for _, _, path in self.step_files()]

    def jsonl(self, name: str) -> list[dict[str, Any]]:
        return read_jsonl(self.resolve(name))

    def resolve(self, name: str) -> Path:
        """A file of the turn by name: ``turn.json``, ``step-health.json``, a JSONL log, ``step:<step>``
        (that step's document), or ``root:<relative path>`` (a file of the trace root, such as a log
        a plugin keeps beside the conversations). A name leading out of its directory is refused."""
        if name.startswith("step:"):
            step = name.removeprefix("step:")
            path = self.step_path(step)
            if path is None:
                raise TraceFileError(self.path / f"NN-{step}.json",
                                     f"no step file for step {step!r} (steps: {', '.join(self.steps()) or 'none'})")
            return path
        base, rel = (self.root, name.removeprefix("root:")) if name.startswith("root:") else (self.path, name)
        target = (base / rel).resolve()
        try:
            target.relative_to(base.resolve())
        except ValueError:
            raise TraceFileError(base / rel, "leads out of the trace directory") from None
        return target

    def document(self, name: str) -> Any:
        """The parsed file ``name`` (see ``resolve``): JSON, or a list of records for ``*.jsonl``."""
        path = self.resolve(name)
        return read_jsonl(path) if path.suffix == ".jsonl" else read_json(path)

    @staticmethod
    def _object(path: Path) -> dict[str, Any]:
        doc = read_json(path)
        if not isinstance(doc, dict):
            raise TraceFileError(path, f"holds a {type(doc).__name__}, not a JSON object")
        return doc


def turn_dirs(root: Path | str) -> list[Path]:
    """Every turn directory (one holding ``turn.json``) under a trace root, sorted."""
    base = Path(root)
    if not base.is_dir():
        return []
    return sorted(d for conv in base.iterdir() if conv.is_dir() for d in conv.iterdir()
                  if d.is_dir() and (d / "turn.json").exists())
