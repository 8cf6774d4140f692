"""The lexical specifics check: figures, dates and quotations a text states that its evidence
does not hold, reported as whole spans ("14 March", "$4.7", "83%").

Deterministic and lexical: a figure counts as present when its digits (and, for a date, its
month) appear in the evidence; a quotation of four words or more when its words appear in that
order. Lines quoted with ``>`` count too (a quotation is a claim about the source). The
``unsupported-specifics`` detector reports these beside the claim-level checks of
``specifics.py`` (names, numbers in context), so the Supplemental RAG compliance patterns see
every unsupported specific.
"""

from __future__ import annotations

import functools
import re

from ora_core.api.text import lazy_compile

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
#: The specifics the lexical check reports (matched case-insensitively).
SPECIFIC_SOURCE = (
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b\.?(?:\s+\d{{4}})?"  # 14 March (2019)
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?"  # March 14(, 2019)
    r"|[$€£]\s?\d[\d,]*(?:\.\d+)?"  # currency
    r"|\b\d+(?:\.\d+)?\s?(?:%|per\s?cent\b)"  # percentages
    r"|\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b"  # 12,500
    r"|\b\d+\.\d+\b"  # decimals
    r"|\b(?:1[5-9]|20)\d\d\b"  # years
)
#: Every match starts with a digit, a currency sign or a month's first letter: the lookahead
#: rules out every other position at once (the same matches, found several times faster than by
#: trying each alternative at every position).
SPECIFIC_STARTS = r"(?=[\d$€£jfmasond])"
_SPECIFIC = lazy_compile(f"{SPECIFIC_STARTS}(?:{SPECIFIC_SOURCE})", re.IGNORECASE)
_QUOTE = lazy_compile(r"\"([^\"\n]{8,400})\"|“([^”\n]{8,400})”")
_WORD = lazy_compile(r"[a-z0-9]+")
_DIGITS = lazy_compile(r"\d+(?:\.\d+)?")
#: Every match of ``_SPECIFIC`` holds a digit: a text without one is not scanned for them.
_ANY_DIGIT = lazy_compile(r"\d")
_ORDINAL = frozenset({"st", "nd", "rd", "th"})


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


@functools.lru_cache(maxsize=16)
def _evidence_index(evidence: str) -> tuple[str, frozenset[str], frozenset[str]]:
    """The evidence normalised (`` word word ``), its words, its numbers: every step of a turn
    checks against the same evidence, indexed once."""
    norm = _norm(evidence)
    return " " + norm + " ", frozenset(norm.split()), frozenset(_DIGITS.findall(evidence.replace(",", "")))


def missing_specifics(text: str, evidence: str) -> list[str]:
    """Specifics ``text`` states that ``evidence`` does not hold: years, day-month dates,
    percentages, decimals, large or currency figures, and quotations of four words or more."""
    have, vocabulary, digits = _evidence_index(evidence)
    missing: list[str] = []
    for match in _SPECIFIC.finditer(text) if _ANY_DIGIT.search(text) is not None else ():
        spec = match.group(0).strip()
        numbers = _DIGITS.findall(spec.replace(",", ""))
        words = [w for w in _WORD.findall(spec.lower()) if not w.isdigit() and w not in _ORDINAL]
        if not all(n in digits for n in numbers) or not all(w in vocabulary for w in words
                                                             if w not in ("per", "cent")):
            missing.append(spec)
    for match in _QUOTE.finditer(text):
        body = (match.group(1) or match.group(2)).strip()
        if len(_WORD.findall(body.lower())) >= 4 and f" {_norm(body)} " not in have:
            missing.append(body)
    return list(dict.fromkeys(missing))
