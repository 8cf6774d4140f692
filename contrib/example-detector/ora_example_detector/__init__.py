"""A worked example of an Ora detector: overclaiming certainty in a model's output.

A model that has nothing to stand on often says so least: "definitely", "it is proven",
"100% certain". This detector flags those phrases in model output so they show up in the
trace beside the evidence the answer was supposed to rest on.

What makes it an Ora detector:

- ``name``: unique across installed plugins (a clash is refused, naming both plugins);
- ``kind``: what it detects, free text (``overclaim`` here);
- ``layer``: the layer whose text it reads, here ``model_output``;
- ``assumes``: the properties of that text it relies on; ``model_output`` provides
  ``model_generated``, so Ora accepts it. Declaring ``unexpanded`` instead would be refused at
  load time, because model output is not the user's unexpanded prompt;
- ``detect(text, ctx) -> list[Signal]``.

Keep the module light: it is imported whenever ``ora`` starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ora_core import hookimpl
from ora_core.api import Signal

#: Phrase -> strength. Multi-word phrases are matched whole, on word boundaries.
PHRASES: dict[str, str] = {
    "definitely": "weak",
    "undoubtedly": "weak",
    "undeniably": "weak",
    "without a doubt": "strong",
    "it is proven": "strong",
    "proven fact": "strong",
    "guaranteed": "strong",
    "100% certain": "strong",
    "absolutely certain": "strong",
}

# One compiled alternation, longest phrases first, so "100% certain" is not read as "certain".
_PATTERN = re.compile(
    r"(?<![\w%])(" + "|".join(re.escape(p) for p in sorted(PHRASES, key=len, reverse=True)) + r")(?![\w%])",
    re.IGNORECASE,
)


class OverclaimDetector:
    name = "example-overclaim"
    kind = "overclaim"
    layer = "model_output"
    assumes = frozenset({"model_generated"})

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        signals = []
        for match in _PATTERN.finditer(text):
            phrase = match.group(1).lower()
            signals.append(Signal(detector=self.name, kind=self.kind, name="overclaim",
                                  strength=PHRASES[phrase], matched=match.group(1),  # type: ignore[arg-type]
                                  start=match.start(1), end=match.end(1)))
        return signals


@hookimpl
def ora_register_detectors(register: Callable[..., None]) -> None:
    register(OverclaimDetector())
