"""What the unhealthy-output detectors share: quoted-material masking, sentences, settings."""

from __future__ import annotations

import re
from itertools import islice
from typing import Any

from ora_core.api import lazy_compile

LAYER = "model_output"
KIND = "unhealthy"
ASSUMES = frozenset({"model_generated"})

#: ``[plugins.health-detectors]`` in ora.toml; a step can override ``min_words`` for one call
#: through ``ctx.data["expected_min_words"]``.
CONFIG_TABLE = "health-detectors"
MIN_WORDS_KEY = "expected_min_words"
DEFAULT_MIN_WORDS = 40

_FENCE = lazy_compile(r"^\s*(```|~~~)")
_WORD = lazy_compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_SENTENCE = lazy_compile(r"[^.!?\n]+(?:[.!?]+|$)", re.MULTILINE)
#: The authorised alternatives to confabulating (seed 000 §5.2): never unhealthy in themselves.
AUTHORISED_BLOCK = lazy_compile(r"^\s*#{1,6}\s*(?:COVERAGE GAP|SUPPLEMENTAL RAG REQUEST)\b",
                              re.IGNORECASE | re.MULTILINE)


#: The four detectors read the same output one after another: the last masking and sentence
#: split are kept (one entry each, replaced whole, so threads never see a half-written one).
_last_mask: tuple[str, tuple[str, tuple[bool, ...]]] | None = None
_last_sentences: tuple[str, tuple[tuple[int, int, str], ...]] | None = None


def mask_quoted(text: str) -> tuple[str, tuple[bool, ...]]:
    """``text`` with fenced blocks and ``>`` quote lines blanked (same length, same offsets),
    and for each line whether it was inside a fence."""
    global _last_mask
    last = _last_mask
    if last is not None and last[0] == text:
        return last[1]
    result = _mask_quoted(text)
    _last_mask = (text, result)
    return result


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
    global _last_sentences
    last = _last_sentences
    if last is not None and last[0] == text:
        return last[1]
    found = tuple((m.start(), m.end(), m.group(0).strip()) for m in _SENTENCE.finditer(text) if m.group(0).strip())
    _last_sentences = (text, found)
    return found


def plugin_settings(ctx: Any) -> dict[str, Any]:
    """This plugin's ``[plugins.health-detectors]`` table, from an ``OraConfig`` or a
    ``ResolvedConfig`` on ``ctx.config``; empty when there is none."""
    config = getattr(ctx, "config", None)
    config = getattr(config, "config", config)
    plugins = getattr(config, "plugins", None)
    if isinstance(plugins, dict):
        table = plugins.get(CONFIG_TABLE)
        if isinstance(table, dict):
            return table
    return {}


def ctx_data(ctx: Any) -> dict[str, Any]:
    data = getattr(ctx, "data", None)
    return data if isinstance(data, dict) else {}
