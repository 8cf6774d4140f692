"""The text kit for detector plugins: one compiled word-boundary matcher for a vocabulary of
phrases (seed 000 failure #6: never a substring match), and regexes compiled on first use with
a literal prefilter that rules a text out before the regex engine runs."""

from __future__ import annotations

from ora_core.kits.lazy import LazyPattern, lazy_compile
from ora_core.kits.phrases import PhraseMatch, PhraseMatcher, build_pattern, normalize_phrase
from ora_core.kits.prefilter import required_literal_sets, required_literals

__all__ = [
    "LazyPattern",
    "PhraseMatch",
    "PhraseMatcher",
    "build_pattern",
    "lazy_compile",
    "normalize_phrase",
    "required_literal_sets",
    "required_literals",
]
