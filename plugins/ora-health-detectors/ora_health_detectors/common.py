"""What the unhealthy-output detectors share: quoted-material masking, sentences, settings.

The detectors run in the kernel's one analysis of each output (``detect_analysed(analysis,
ctx)``, see ``ora_core.kernel.detection``): the masking, its sentence split and its word count
are views of that analysis (``masked``, ``masked_sentences``, ``masked_words``), computed once per
output for all four. Called directly (``detect(text, ctx)``), a detector analyses the text on its
own (``Analysis``: the same views, for that one call).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import islice
from typing import Any, TypeVar

from ora_core.api import lazy_compile

from .options import DEFAULT_MIN_WORDS as DEFAULT_MIN_WORDS  # re-exported: it lived here
from .options import TABLE as CONFIG_TABLE
from .options import HealthDetectorsOptions

LAYER = "model_output"
KIND = "unhealthy"
ASSUMES = frozenset({"model_generated"})

#: ``[plugins.health-detectors]`` (``CONFIG_TABLE``, ``options.HealthDetectorsOptions``) in ora.toml; a
#: step can override ``min_words`` for one call through ``ctx.data["expected_min_words"]``.
MIN_WORDS_KEY = "expected_min_words"

_FENCE = lazy_compile(r"^\s*(```|~~~)")
_WORD = lazy_compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_SENTENCE = lazy_compile(r"[^.!?\n]+(?:[.!?]+|$)", re.MULTILINE)
#: The authorised alternatives to confabulating (seed 000 §5.2): never unhealthy in themselves.
AUTHORISED_BLOCK = lazy_compile(r"^\s*#{1,6}\s*(?:COVERAGE GAP|SUPPLEMENTAL RAG REQUEST)\b",
                              re.IGNORECASE | re.MULTILINE)


T = TypeVar("T")


class Analysis:
    """A text and its views, each computed once: the kernel's ``TextAnalysis`` protocol
    (``text``, ``lower``, ``view(key, compute)``), for a detector called outside a layer pass."""

    __slots__ = ("_views", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._views: dict[str, Any] = {}

    @property
    def lower(self) -> str:
        return self.view("lower", str.lower)

    def view(self, key: str, compute: Callable[[str], T]) -> T:
        views = self._views
        if key in views:
            return views[key]
        value = views[key] = compute(self.text)
        return value


def masked(analysis: Any) -> tuple[str, tuple[bool, ...]]:
    """The text with fenced blocks and ``>`` quote lines blanked, and per line whether it was in
    a fence (``mask_quoted``), once per output."""
    return analysis.view("health.masked", _mask_quoted)


def masked_sentences(analysis: Any) -> tuple[tuple[int, int, str], ...]:
    """``sentences`` of the masked text, once per output."""
    return analysis.view("health.masked_sentences", lambda _text: sentences(masked(analysis)[0]))


def masked_words(analysis: Any) -> int:
    """``word_count`` of the masked text, once per output."""
    return analysis.view("health.masked_words", lambda _text: word_count(masked(analysis)[0]))


#: The characters ``re.IGNORECASE`` matches with an ASCII letter that ``str.lower`` does not turn
#: into it (dotted and dotless i, long s): a text holding one is never ruled out by literals.
_ODD_FOLDS = ("\u0130", "\u0131", "\u017f")


def _plain_case(text: str) -> bool:
    return text.isascii() or not any(c in text for c in _ODD_FOLDS)


def _lower_straight(text: str) -> str:
    return text.lower().replace("\u2019", "'")  # as masking straightens curly apostrophes


def lacks_all(analysis: Any, literals: tuple[str, ...]) -> bool:
    """True when the text holds none of ``literals`` (lower case, straight apostrophes): then no
    match of a case-insensitive pattern that needs one of them is in it, nor in its masking
    (masking blanks whole lines, which creates no literal, and straightens apostrophes, which the
    check does too). A text holding a character IGNORECASE folds onto an ASCII letter otherwise
    (``ſ`` matches ``s``) is never ruled out. Ruling a text out saves its masking and the scans."""
    if not analysis.view("health.plain_case", _plain_case):
        return False
    lower = analysis.view("health.lower_straight", _lower_straight)
    for literal in literals:  # noqa: SIM110 - a plain loop: any() over a generator costs more here
        if literal in lower:
            return False
    return True


def mask_quoted(text: str) -> tuple[str, tuple[bool, ...]]:
    """``text`` with fenced blocks and ``>`` quote lines blanked (same length, same offsets),
    and for each line whether it was inside a fence."""
    return _mask_quoted(text)


def _mask_quoted(text: str) -> tuple[str, tuple[bool, ...]]:
    text = text.replace("’", "'")  # curly apostrophes; same length, offsets hold
    out: list[str] = []
    fenced: list[bool] = []
    fence: str | None = None
    for line in text.split("\n"):
        opener = _FENCE.match(line)
        if fence is not None or opener:
            out.append(" " * len(line))
            fenced.append(True)
            if fence is None:
                fence = opener.group(1) if opener else None
            elif opener and opener.group(1) == fence:
                fence = None
            continue
        fenced.append(False)
        out.append(" " * len(line) if line.lstrip().startswith(">") else line)
    return "\n".join(out), tuple(fenced)


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def has_words(text: str, minimum: int) -> bool:
    """``word_count(text) >= minimum``, stopping at the ``minimum``-th word."""
    if minimum <= 0:
        return True
    return next(islice(_WORD.finditer(text), minimum - 1, None), None) is not None


def sentences(text: str) -> tuple[tuple[int, int, str], ...]:
    """``(start, end, sentence)`` for each sentence of ``text`` (a line break ends one too)."""
    found = []
    for m in _SENTENCE.finditer(text):
        sentence = m.group(0).strip()
        if sentence:
            found.append((m.start(), m.end(), sentence))
    return tuple(found)


def plugin_settings(ctx: Any) -> HealthDetectorsOptions:
    """This plugin's ``[plugins.health-detectors]`` table as its declared ``HealthDetectorsOptions``
    (validated once per table content), from an ``OraConfig`` or a ``ResolvedConfig`` on
    ``ctx.config``; the defaults when there is none."""
    return HealthDetectorsOptions.of(ctx, CONFIG_TABLE)


def ctx_data(ctx: Any) -> dict[str, Any]:
    data = getattr(ctx, "data", None)
    return data if isinstance(data, dict) else {}
