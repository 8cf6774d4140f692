"""The ``prompt-echo`` detector: an output that parrots the orchestrator's own instructions.

Layer ``model_output``, kind ``unhealthy``. The engine tells the detectors of a step what the
model was given and what it added to the prompt (``ctx.data["material"]``, an
``ora_core.api.StepMaterial``): the negative context of a retry (``retry_phrases``) and the
confidence, quotation and Supplemental RAG instructions (``instructions``) must never come back
in an answer. An eight-word run of those instructions, or a fixed phrase of the retry block,
in the output is a strong signal (the reliability layer regenerates once) — unless the same run
is in the material the model was given (a vault note quoting the protocol, an analysis under
review): then it is material, not an echo. Without a ``material`` (Gear 1's direct answer, a
caller outside the engine) there is nothing to compare against and the detector is silent.
"""

from __future__ import annotations

import threading
from typing import Any

from ora_core.api import Signal
from ora_core.api.text import lazy_compile

from .common import ASSUMES, KIND, LAYER

MATERIAL_KEY = "material"
SHINGLE = 8
_WORDS = lazy_compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def shingles(words: list[str], n: int = SHINGLE) -> set[str]:
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


class PromptEchoDetector:
    name = "prompt-echo"
    kind = KIND
    layer = LAYER
    assumes = ASSUMES

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, ...], tuple[frozenset[str], frozenset[str]]] = {}

    def _control(self, instructions: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
        """Eight-word runs of the instructions and their first words (one pair per distinct
        instruction list, kept)."""
        found = self._cache.get(instructions)
        if found is None:
            runs = frozenset().union(*(shingles(_words(t)) for t in instructions)) if instructions else frozenset()
            found = runs, frozenset(run.split(" ", 1)[0] for run in runs)
            with self._lock:
                if len(self._cache) > 32:
                    self._cache.clear()
                self._cache[instructions] = found
        return found

    def _echoed_runs(self, words: list[str], instructions: tuple[str, ...]) -> list[str]:
        """``sorted(shingles(words) & control)``, building only the runs that start with a word
        some instruction run starts with."""
        control, firsts = self._control(instructions)
        found = set()
        for i in range(len(words) - SHINGLE + 1):
            if words[i] in firsts:
                run = " ".join(words[i:i + SHINGLE])
                if run in control:
                    found.add(run)
        return sorted(found)

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        data = getattr(ctx, "data", None)
        material = data.get(MATERIAL_KEY) if isinstance(data, dict) else None
        if material is None:
            return []
        norm = " " + " ".join(_words(text)) + " "
        words = norm.split()
        hits = [p for p in material.retry_phrases if f" {p} " in norm]
        if len(words) >= SHINGLE:
            hits += self._echoed_runs(words, tuple(material.instructions))
        if not hits:
            return []
        given = " " + " ".join(_words(material.given)) + " "
        echoed = [h for h in hits if f" {h} " not in given][:5]
        if not echoed:
            return []
        return [Signal(detector=self.name, kind=self.kind, name="prompt-echo", strength="strong",
                       matched=echoed[0], data={"echoed": echoed,
                                                "why": "the output repeats instructions the orchestrator added to "
                                                       "its prompt (retry context or protocol text)"})]
