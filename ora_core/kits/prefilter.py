"""Literals a regular expression cannot match without: a cheap, exact test before the scan.

Python's ``re`` tries every alternative at every position of the text, and the detectors' patterns
are long, case-insensitive alternations that start with ``\\b``: ~15-40 µs per pattern over a
400-character model output, for patterns that almost never match. :func:`required_literals`
reads a pattern's parse tree and returns strings of which *every* match contains at least one;
when none of them occurs in a text (a substring test in C, well under a microsecond), the
pattern cannot match there and the scan is skipped.

Exact by construction, not by tuning: literals are collected only from parts every match must
pass through (a sequence's consecutive literal characters, each alternative of a branch, a
repeat that must run at least once); anything else — character classes, optional parts,
back-references, scoped flag changes — contributes no requirement. Under ``IGNORECASE`` the
literals are lower-case and compared with the lower-cased text, which is exact only for ASCII
(Unicode case folding maps e.g. "ſ" to "s"): ``LazyPattern.cannot_match`` (the test itself)
rules out no non-ASCII text under ``IGNORECASE``, and literals that are not ASCII are not used.
"""

from __future__ import annotations

import re
from typing import Any

#: a requirement whose shortest literal is shorter than this filters too little to be worth a test
MIN_LITERAL = 2
MAX_LITERALS = 64


def _best(candidates: list[frozenset[str]]) -> frozenset[str] | None:
    """The most selective requirement: longest shortest literal, then fewest literals."""
    if not candidates:
        return None
    return max(candidates, key=lambda s: (min(map(len, s)), -len(s)))


def _sequence(items: Any, icase: bool) -> frozenset[str] | None:
    from re import _constants as c

    candidates: list[frozenset[str]] = []
    run: list[str] = []

    def end_run() -> None:
        if run:
            candidates.append(frozenset({"".join(run)}))
            run.clear()

    for op, av in items:
        if op is c.LITERAL:
            ch = chr(av)
            if icase and not ch.isascii():
                end_run()
                continue
            run.append(ch.lower() if icase else ch)
        elif op is c.AT or op is c.ASSERT or op is c.ASSERT_NOT:
            continue  # zero-width: the characters around it are still contiguous in the match
        else:
            end_run()
            found = _element(op, av, icase)
            if found is not None:
                candidates.append(found)
    end_run()
    return _best(candidates)


def _element(op: Any, av: Any, icase: bool) -> frozenset[str] | None:
    from re import _constants as c

    if op is c.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        if (add_flags | del_flags) & re.IGNORECASE:
            return None
        return _sequence(sub, icase)
    if op is c.BRANCH:
        union: set[str] = set()
        for alternative in av[1]:
            found = _sequence(alternative, icase)
            if found is None:
                return None
            union |= found
        return frozenset(union)
    if op is c.MAX_REPEAT or op is c.MIN_REPEAT or op is getattr(c, "POSSESSIVE_REPEAT", None):
        low, _high, sub = av
        return _sequence(sub, icase) if low >= 1 else None
    if op is getattr(c, "ATOMIC_GROUP", None):
        return _sequence(av, icase)
    return None


def required_literals(pattern: str, flags: int = 0) -> tuple[frozenset[str], bool] | None:
    """``(literals, icase)``: every match of ``pattern`` contains one of ``literals`` (lower-cased
    when ``icase``); None when no useful requirement can be proven."""
    from re import _parser

    parsed = _parser.parse(pattern, flags)  # a pattern that does not parse raises, as re.compile does
    icase = bool(parsed.state.flags & re.IGNORECASE)
    found = _sequence(parsed, icase)
    if not found or len(found) > MAX_LITERALS or min(map(len, found)) < MIN_LITERAL:
        return None
    return found, icase
