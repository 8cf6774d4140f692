"""Running the detectors of one layer over that layer's text, each isolated.

The pipeline calls ``run_detectors`` (or ``TurnContext.detect``) at every layer boundary:
every registered detector declared on that layer runs, a third party's as much as a
first-party one. Its signals are validated, returned and, inside a turn, emitted as one
``detection`` trace event. A detector that raises, or returns something other than a list of
``Signal``, is named in a ``detector-<name>-failed`` contingency instead of being skipped
silently.
"""

from __future__ import annotations

from typing import Any

from ora_core.kernel.models import Signal


def run_detectors(host: Any, layer: str, text: str, ctx: Any, *, kind: str | None = None,
                  step: str = "", exclude_kinds: frozenset[str] = frozenset(),
                  detectors: list[Any] | None = None) -> list[Signal]:
    """Signals of every usable detector on ``layer`` (optionally of one ``kind``); ``detectors``:
    that list when the caller already has it (a turn looks it up once per layer and kind)."""
    found: list[Signal] = []
    for detector in detectors if detectors is not None else host.detectors(layer=layer, kind=kind):
        if detector.kind in exclude_kinds:
            continue
        try:
            signals = detector.detect(text, ctx)
            if not isinstance(signals, list | tuple):
                raise TypeError(f"detect() returned {type(signals).__name__}, not a list of Signal")
            found.extend(s if isinstance(s, Signal) else Signal.model_validate(s) for s in signals)
        except Exception as exc:  # noqa: BLE001 - named below, never skipped silently
            ctx.contingency(f"detector-{detector.name}-failed", step or layer,
                            f"{type(exc).__name__}: {exc}", severity="degraded",
                            detector=detector.name, layer=layer)
    if found and hasattr(ctx, "emit"):
        ctx.emit("detection", step=step, layer=layer, text_chars=len(text),
                 signals=[s.model_dump(mode="json") for s in found])
    return found
