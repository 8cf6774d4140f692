"""Specifics checks: numbers, dates, names and quotations a claim states that the evidence lacks.

A confabulating model rarely invents vague prose; it invents *specifics*: a figure, a year, a
person, a quotation. Each specific of a claim is looked up in the evidence after light
normalisation (``1,000`` = ``1000``; ``three`` = ``3``; ``November 2, 2004`` matches an ISO
``2004-11-02``; a name matches when each of its words occurs in the evidence). Plain Python,
no model: the specifics detector runs this alone.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ora_core.api import lazy_compile

from .text import STOPWORDS, fold, stem, words

SpecificKind = Literal["number", "date", "name", "quotation"]

MONTHS: dict[str, int] = {
    name: i + 1
    for i, names in enumerate([
        ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
        ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
        ("october", "oct"), ("november", "nov"), ("december", "dec"),
    ])
    for name in names
}
_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
_NUMBER_WORDS: dict[str, int] = {
    w: i for i, w in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
         "nineteen", "twenty"])
}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
                      "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
                      "million": 1_000_000, "billion": 1_000_000_000, "dozen": 12,
                      "once": 1, "twice": 2, "single": 1, "double": 2, "triple": 3})
_ORDINAL_WORDS: dict[str, int] = {
    w: i + 1 for i, w in enumerate(
        ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
         "tenth", "eleventh", "twelfth"])
}

_MONTH_ALT = "|".join(sorted(MONTHS, key=len, reverse=True))
#: Dates (matched case-insensitively): "March 14, 2019", "14th of March", "March 2019".
DATE_SOURCE = (
    rf"\b(?P<m1>{_MONTH_ALT})\.?\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y1>\d{{4}}))?\b"
    rf"|\b(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>{_MONTH_ALT})\.?(?:,?\s+(?P<y2>\d{{4}}))?\b"
    rf"|\b(?P<m3>{_MONTH_ALT})\.?,?\s+(?P<y3>\d{{4}})\b"
)
#: Every date starts at a word boundary with a digit or a month's first letter: the lookahead rules
#: out every other position at once (the same matches as ``DATE_SOURCE`` alone, several times faster).
DATE_STARTS = r"\b(?=[\djfmasond])"
_DATE = lazy_compile(f"{DATE_STARTS}(?:{DATE_SOURCE})", re.IGNORECASE)
_ISO_DATE = lazy_compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
#: Every date and number match holds a digit: a claim without one is not scanned for them.
_ANY_DIGIT = lazy_compile(r"\d")
NUMBER_SOURCE = r"(?<![\w.])[-+]?\$?\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th|s)?(?![\w])"
_NUMBER = lazy_compile(r"(?=[-+$\d])" + NUMBER_SOURCE)  # the lookahead: only where a number can start
_QUOTE = lazy_compile(r"\"([^\"\n]{2,200})\"|“([^”\n]{2,200})”")
_NAME = lazy_compile(
    r"(?<![\w'’.-])[A-Z](?:[\w'’\-]|\.(?=\w))*\.?"
    r"(?:\s+(?:(?:of|the|de|del|da|van|von|der|den|la|le|du|and|&)\s+)?[A-Z](?:[\w'’\-]|\.(?=\w))*\.?)*"
)
_NON_ALNUM = lazy_compile(r"[^a-z0-9]+")
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000, "trillion": 10**12,
           "k": 1_000, "m": 1_000_000, "bn": 1_000_000_000}
_SCALE_AFTER = lazy_compile(r"\s*(thousand|million|billion|trillion|bn|k|m)\b", re.IGNORECASE)


class SpecificCheck(BaseModel):
    """One specific of a claim and whether the evidence has it."""

    model_config = ConfigDict(extra="forbid")

    kind: SpecificKind
    text: str
    supported: bool
    missing: list[str] = []


def _normalise_phrase(text: str) -> str:
    return " " + _NON_ALNUM.sub(" ", fold(text).replace("’", "'")).strip() + " "


def normalise_number(token: str) -> str | None:
    """``"1,000"`` -> ``"1000"``, ``"41.30"`` -> ``"41.3"``, ``"2nd"`` -> ``"2"``; else None."""
    cleaned = token.strip().lstrip("+$").replace(",", "")
    cleaned = re.sub(r"(st|nd|rd|th|s)$", "", cleaned)
    if not re.fullmatch(r"-?\d+(?:\.\d+)?", cleaned):
        return None
    sign = "-" if cleaned.startswith("-") else ""
    whole, _, frac = cleaned.lstrip("-").partition(".")
    frac = frac.rstrip("0")
    return sign + (whole.lstrip("0") or "0") + (f".{frac}" if frac else "")


def number_values(text: str, match: re.Match[str]) -> list[str]:
    """The normalised value of a number match, and its scaled value (``1.2 million``)."""
    value = normalise_number(match.group(0))
    if value is None:
        return []
    values = [value]
    scale = _SCALE_AFTER.match(text, match.end())
    if scale:
        scaled = float(value) * _SCALES[scale.group(1).lower()]
        values.append(normalise_number(f"{scaled:.6f}") or value)
    return values


@dataclass
class EvidenceIndex:
    """What the specifics checks look up, built once per evidence package.

    ``text`` is the evidence it was built from (the texts joined by newlines). Word lookups are
    remembered (``has_word``, at most ``MEMO_SIZE`` words): an index shared by the checks of a
    turn (``IndexCache``) answers a word it has seen without scanning the evidence again. The
    memo changes no answer; the index is otherwise read-only once built."""

    phrase: str = " "
    vocab: set[str] = field(default_factory=set)
    numbers: set[str] = field(default_factory=set)
    months: set[int] = field(default_factory=set)
    text: str = ""
    _memo: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(cls, texts: Iterable[str]) -> EvidenceIndex:
        joined = "\n".join(texts)
        index = cls(phrase=_normalise_phrase(joined), text=joined)
        tokens = words(joined)
        tokens += [part for w in tokens if "-" in w for part in w.split("-") if part]  # "twelve-bar"
        for w in tokens:
            index.vocab.add(w)
            index.vocab.add(stem(w))
            if w in MONTHS:
                index.months.add(MONTHS[w])
            if w in _NUMBER_WORDS:
                index.numbers.add(str(_NUMBER_WORDS[w]))
            if w in _ORDINAL_WORDS:
                index.numbers.add(str(_ORDINAL_WORDS[w]))
        for match in _NUMBER.finditer(joined):
            index.numbers.update(number_values(joined, match))
        for year, month, day in _ISO_DATE.findall(joined):
            index.numbers.update({year, str(int(month)), str(int(day))})
            if 1 <= int(month) <= 12:
                index.months.add(int(month))
        return index

    def has_word(self, word: str) -> bool:
        known = self._memo.get(word)
        if known is not None:
            return known
        w = fold(word).replace("’", "'").strip("'.-")
        found = w in self.vocab or stem(w) in self.vocab or _normalise_phrase(w) in self.phrase
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[word] = found
        return found

    def has_phrase(self, text: str) -> bool:
        return _normalise_phrase(text) in self.phrase


#: Words an index remembers the lookup of (then it starts afresh).
MEMO_SIZE = 4096


class IndexCache:
    """The ``EvidenceIndex`` of the last ``size`` evidence packages, by their texts.

    Every step of a turn checks its output against the same evidence (one package of chunks,
    handed to each detection as a new package object holding the same texts), so the index is
    built once per package content, not once per output. The key is the tuple of the texts
    themselves: equal texts give the same index whatever objects hold them, and a package that
    differs by one character is another key. Thread-safe; ``size`` 0 caches nothing."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, ...], EvidenceIndex] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, texts: Iterable[str]) -> EvidenceIndex:
        key = tuple(texts)
        if self.size <= 0:
            return EvidenceIndex.build(key)
        with self._lock:
            index = self._entries.get(key)
            if index is not None:
                self._entries.move_to_end(key)
                return index
        index = EvidenceIndex.build(key)  # outside the lock: two threads may build the same one
        with self._lock:
            self._entries[key] = index
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return index

    def __len__(self) -> int:
        return len(self._entries)


def _date_check(match: re.Match[str], index: EvidenceIndex) -> SpecificCheck:
    month_word = match.group("m1") or match.group("m2") or match.group("m3")
    day = match.group("d1") or match.group("d2")
    year = match.group("y1") or match.group("y2") or match.group("y3")
    missing: list[str] = []
    if MONTHS[fold(month_word)] not in index.months:  # folded: IGNORECASE matched "ſept" as "sept"
        missing.append(month_word)
    for part in (day, year):
        if part and normalise_number(part) not in index.numbers:
            missing.append(part)
    return SpecificCheck(kind="date", text=match.group(0), supported=not missing, missing=missing)


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            chars[i] = " "
    return "".join(chars)


_AFTER_STOP = lazy_compile(r"[.!?:;]\s+|\n\s*")


def _sentence_starts(text: str) -> set[int]:
    starts = {len(text) - len(text.lstrip())}
    for m in _AFTER_STOP.compiled().finditer(text):
        starts.add(m.end())
    return starts


def check_specifics(claim: str, index: EvidenceIndex) -> list[SpecificCheck]:
    """Every number, date, name and quotation in ``claim``, each checked against ``index``."""
    checks: list[SpecificCheck] = []
    spans: list[tuple[int, int]] = []
    for match in _QUOTE.finditer(claim):
        quoted = (match.group(1) or match.group(2)).strip()
        inner = [w for w in words(quoted) if w not in STOPWORDS]
        if len(words(quoted)) >= 2:
            ok = index.has_phrase(quoted)
            missing = [] if ok else [quoted]
        else:
            missing = [w for w in inner if not index.has_word(w)]
            ok = not missing
        checks.append(SpecificCheck(kind="quotation", text=quoted, supported=ok, missing=missing))
        spans.append(match.span())
    digits = _ANY_DIGIT.search(claim) is not None
    for match in _DATE.finditer(claim) if digits else ():
        checks.append(_date_check(match, index))
        spans.append(match.span())
    masked = _mask(claim, spans)
    for match in _NUMBER.finditer(masked) if digits else ():
        values = number_values(masked, match)
        if not values:
            continue
        ok = any(v in index.numbers for v in values)
        checks.append(SpecificCheck(kind="number", text=match.group(0), supported=ok,
                                    missing=[] if ok else [match.group(0)]))
    starts: set[int] | None = None
    for match in _NAME.finditer(masked):
        tokens = [t.strip(".") for t in match.group(0).split()]
        while tokens and (tokens[0].lower() in STOPWORDS or tokens[0].lower() in _WEEKDAYS
                          or tokens[0].lower() in MONTHS):
            tokens.pop(0)
        tokens = [t for t in tokens if t.lower() not in STOPWORDS and t != "&"
                  and t.lower() not in MONTHS and t.lower() not in _WEEKDAYS]
        if not tokens:
            continue
        if starts is None:
            starts = _sentence_starts(masked)
        at_start = match.start() in starts and match.group(0).split()[0] == tokens[0]
        if at_start and len(tokens) == 1 and not tokens[0].isupper():
            continue  # a capitalised first word is usually just a sentence start
        if at_start and len(tokens) == 1 and masked[match.end():match.end() + 1] == ":":
            continue  # a label opening its line ("SUMMARY:", "Note:"), not a name
        missing = [t for t in tokens if not index.has_word(t)]
        checks.append(SpecificCheck(kind="name", text=" ".join(tokens), supported=not missing,
                                    missing=missing))
    return checks
