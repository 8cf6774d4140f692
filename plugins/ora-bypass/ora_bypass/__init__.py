"""Stage 0 bypass detection on the raw prompt (seed 000, failures #1, #6, #7).

Three detectors, each declaring the layer it reads and what it assumes of that layer's text:

- ``bypass`` (layer ``raw_prompt``, assumes ``unexpanded`` and ``verbatim``): the whole
  vocabulary in one compiled word-boundary matcher. It runs *before* Phase A, because an
  expansion gives any phrase detector more text to false-positive on.
- ``bypass-rescan`` (layer ``cleaned_prompt``, assumes nothing of it): the defensive Stage 1
  re-scan for a bypass-worthy element Phase A legitimately revealed (a misspelled "waht time
  is it" cleaned into "what time is it"); only the categories in ``RESCAN_CATEGORIES``.
- ``clock-claims`` (layer ``model_output``): flags a time, date, weekday or year in a direct
  answer that the system clock reading in ``ctx.data["clock"]`` does not support (failure #5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ora_core import hookimpl
from ora_core.api import lazy_exports

if TYPE_CHECKING:  # imported where it is built: loading the plugin imports no pydantic
    from ora_core.api import Signal

from .vocabulary import RESCAN_CATEGORIES, phrases

# Imported on first use (``ora --help`` loads this plugin without its components).
__getattr__ = lazy_exports(__name__, {"ClockClaimsDetector": "clock"})


class BypassDetector:
    """One compiled matcher over a vocabulary; a signal per matched phrase."""

    kind = "bypass"

    def __init__(self, name: str, layer: str, assumes: frozenset[str],
                 categories: tuple[str, ...] | None = None) -> None:
        from ora_core.api.text import PhraseMatcher

        self.name = name
        self.layer = layer
        self.assumes = assumes
        self.vocabulary = phrases(categories)
        self.matcher = PhraseMatcher(self.vocabulary)

    def detect(self, text: str, ctx: Any = None) -> list[Signal]:
        from ora_core.api import Signal

        signals = []
        for match in self.matcher.finditer(text):
            category, strength = self.vocabulary[match.phrase]
            signals.append(Signal(detector=self.name, kind=self.kind, name=match.phrase,
                                  strength=strength, matched=match.matched, start=match.start,  # type: ignore[arg-type]
                                  end=match.end, data={"category": category}))
        return signals


def bypass_detector() -> BypassDetector:
    return BypassDetector("bypass", "raw_prompt", frozenset({"unexpanded", "verbatim"}))


def rescan_detector() -> BypassDetector:
    return BypassDetector("bypass-rescan", "cleaned_prompt", frozenset(), RESCAN_CATEGORIES)


@hookimpl
def ora_register_detectors(register: Callable[..., None]) -> None:
    register(bypass_detector())
    register(rescan_detector())
    from .clock import ClockClaimsDetector

    register(ClockClaimsDetector())
