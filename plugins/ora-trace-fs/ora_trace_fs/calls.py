"""A turn's model calls as its step files keep them (``calls`` of each ``NN-<step>.json``), for
``ora trace calls`` and ``ora trace replay``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .reading import TraceReadError, find_turn, load_turn


class CallLookupError(ValueError):
    """A turn, step or call that does not exist; the message names what there is instead."""


def turn_calls(root: Path, turn: str | None, step: str | None = None) -> tuple[Path, list[dict[str, Any]]]:
    """The turn's directory and its calls in the order they were made (only ``step``'s, if given)."""
    try:
        path = find_turn(root, turn)
        data = load_turn(path)
    except TraceReadError as exc:
        raise CallLookupError(str(exc)) from None
    docs = [s["doc"] for s in data["steps"] if isinstance(s.get("doc"), dict)]
    if step is not None:
        names = [str(d.get("step")) for d in docs]
        if step not in names:
            raise CallLookupError(f"turn {path.name} has no step {step!r} (its steps: {', '.join(names) or 'none'})")
        docs = [d for d in docs if d.get("step") == step]
    calls = [{**c, "step": c.get("step") or d.get("step")} for d in docs for c in d.get("calls") or []
             if isinstance(c, dict)]
    return path, sorted(calls, key=lambda c: (c.get("call") or 0, c.get("seq") or 0))


def find_call(root: Path, turn: str | None, step: str, number: int) -> tuple[Path, dict[str, Any]]:
    """Call ``number`` (within its step, as ``ora trace calls`` numbers it) of ``step``."""
    path, calls = turn_calls(root, turn, step)
    for call in calls:
        if call.get("step_call") == number:
            return path, call
    have = ", ".join(str(c.get("step_call")) for c in calls) or "none"
    raise CallLookupError(f"step {step!r} of turn {path.name} has no call {number} (its calls: {have})")
