"""Stage 1 mode signals on Phase A's cleaned prompt.

The vocabulary is not in this plugin: it is every loaded mode's ``signals`` front matter
(``strong`` and ``weak`` phrases), compiled into one word-boundary matcher and rebuilt only
when the set of modes changes. The modes come from ``ctx.data["modes"]`` (the kernel puts the
turn's ``ModeLibrary`` there) or, outside a turn, are loaded from ``ctx.host``/``ctx.config``.

Layer ``cleaned_prompt``; it assumes nothing of that layer: mode vocabulary is meant to be read
on the expanded operational notation (seed 000 §6b), unlike the bypass vocabulary.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ora_core import hookimpl

if TYPE_CHECKING:  # imported where it is built: loading the plugin imports no pydantic
    from ora_core.api import Signal


class ModeSignalDetector:
    name = "mode-signals"
    kind = "mode_signal"
    layer = "cleaned_prompt"
    assumes: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[tuple[str, str, str], ...] | None = None
        self._matcher: Any = None
        self._owners: dict[str, list[tuple[str, str]]] = {}
        #: the modes' phrases as written, and what they compiled to: the same modes on the next
        #: turn skip normalizing and sorting every phrase (~0.2 ms a turn)
        self._raw: tuple[Any, tuple[Any, dict[str, list[tuple[str, str]]]]] | None = None

    def _compiled(self, modes: Any) -> tuple[Any, dict[str, list[tuple[str, str]]]]:
        raw = tuple((mode.name, tuple(mode.signals.strong), tuple(mode.signals.weak)) for mode in modes)
        last = self._raw
        if last is not None and last[0] == raw:
            return last[1]
        compiled = self._compile(modes)
        self._raw = (raw, compiled)  # one tuple, replaced whole: a thread sees the old pair or the new
        return compiled

    def _compile(self, modes: Any) -> tuple[Any, dict[str, list[tuple[str, str]]]]:
        from ora_core.api.text import PhraseMatcher, normalize_phrase

        entries = []
        for mode in modes:
            entries += [(mode.name, "strong", normalize_phrase(p)) for p in mode.signals.strong]
            entries += [(mode.name, "weak", normalize_phrase(p)) for p in mode.signals.weak]
        key = tuple(sorted(entries))
        with self._lock:
            if key != self._key:
                owners: dict[str, list[tuple[str, str]]] = {}
                for mode_name, strength, phrase in key:
                    owners.setdefault(phrase, []).append((mode_name, strength))
                self._matcher = PhraseMatcher(owners)
                self._owners = owners
                self._key = key
            return self._matcher, self._owners

    def detect(self, text: str, ctx: Any = None) -> list[Signal]:
        from ora_core.api import Signal

        modes = _modes(ctx)
        matcher, owners = self._compiled(modes)
        signals = []
        for match in matcher.finditer(text):
            for mode_name, strength in owners[match.phrase]:
                signals.append(Signal(detector=self.name, kind=self.kind, name=match.phrase,
                                      strength=strength, matched=match.matched,  # type: ignore[arg-type]
                                      start=match.start, end=match.end, mode=mode_name))
        return signals


def _modes(ctx: Any) -> Any:
    data = getattr(ctx, "data", None)
    if data is not None and data.get("modes") is not None:
        return list(data["modes"])
    from ora_core.api import load_modes

    library = load_modes(getattr(ctx, "host", None), getattr(ctx, "config", None))
    if data is not None:
        data["modes"] = library
    return list(library)


@hookimpl
def ora_register_detectors(register: Callable[..., None]) -> None:
    from ora_signals.shapes import RequestShapeDetector

    register(ModeSignalDetector())
    register(RequestShapeDetector())
