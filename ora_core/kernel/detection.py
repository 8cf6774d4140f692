"""Running the detectors of one layer over that layer's text, each isolated.

The pipeline calls ``run_detectors`` (or ``TurnContext.detect``) at every layer boundary:
every registered detector declared on that layer runs, a third party's as much as a
first-party one. Its signals are validated, returned and, inside a turn, emitted as one
``detection`` trace event. A detector that raises, or returns something other than a list of
``Signal``, is named in a ``detector-<name>-failed`` contingency instead of being skipped
silently.

**One analysis per output.** The detectors of a layer read the same text one after another, and
several derive the same things from it (its lower case, its lines, a masking of quoted
material, a sentence split). A detector may take the text analysed once for all of them: it
implements ``detect_analysed(analysis, ctx)`` beside ``detect(text, ctx)``, and the pass hands
it the layer's one ``TextAnalysis`` of the text (``analysis.text`` is the text). The analysis
computes its views on first use and keeps them for the rest of the pass: the generic ones
(``lower``, ``lines``) and any a plugin names (``analysis.view(key, compute)``: ``compute(text)``
runs once per text and key, so detectors sharing a key share the work). A detector with only
``detect(text, ctx)`` is called as always; the signals and their order are what the detectors
return, in the registry's order, whichever method ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ora_core.kernel.components import ComponentContext, ComponentRegistry
from ora_core.kernel.models import Signal

T = TypeVar("T")


class TextAnalysis:
    """One text as every detector of a layer pass sees it, each view computed once.

    Duck-typed on purpose: a plugin's ``detect(text, ctx)`` may build its own stand-in with the
    same attributes (``text``, ``lower``, ``lines``, ``view``) for calls outside a pass."""

    __slots__ = ("_lines", "_lower", "_views", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._lower: str | None = None
        self._lines: list[str] | None = None
        self._views: dict[str, Any] = {}

    @property
    def lower(self) -> str:
        """``text.lower()``."""
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    @property
    def lines(self) -> list[str]:
        """``text.split("\\n")`` (a list shared by the readers: do not change it)."""
        if self._lines is None:
            self._lines = self.text.split("\n")
        return self._lines

    def view(self, key: str, compute: Callable[[str], T]) -> T:
        """``compute(text)``, computed on the first call with ``key`` and kept: name the key after
        your plugin and what it holds (``"health.masked"``); a view must not be changed by its
        readers."""
        views = self._views
        if key in views:
            return views[key]
        value = views[key] = compute(self.text)
        return value


def run_detectors(host: ComponentRegistry, layer: str, text: str, ctx: ComponentContext, *,
                  kind: str | None = None, step: str = "", exclude_kinds: frozenset[str] = frozenset(),
                  detectors: list[Any] | None = None) -> list[Signal]:
    """Signals of every usable detector on ``layer`` (optionally of one ``kind``); ``detectors``:
    that list when the caller already has it (a turn looks it up once per layer and kind)."""
    found: list[Signal] = []
    analysis: TextAnalysis | None = None
    for detector in detectors if detectors is not None else host.detectors(layer=layer, kind=kind):
        if detector.kind in exclude_kinds:
            continue
        try:
            analysed = getattr(detector, "detect_analysed", None)
            if analysed is not None:
                if analysis is None:
                    analysis = TextAnalysis(text)
                signals = analysed(analysis, ctx)
            else:
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
