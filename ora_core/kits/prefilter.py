"""Literals a regular expression cannot match without: a cheap, exact test before the scan.

Python's ``re`` tries every alternative at every position of the text, and the detectors' patterns
are long, case-insensitive alternations that start with ``\\b``: ~15-40 µs per pattern over a
400-character model output, for patterns that almost never match. :func:`required_literals`
reads a pattern's parse tree and returns strings of which *every* match contains at least one;
when none of them occurs in a text (a substring test in C, well under a microsecond), the
pattern cannot match there and the scan is skipped. :func:`required_literal_sets` returns up to
three such requirements, all of which a match must meet (``not\\s+(?:supported|backed)`` needs
``not`` *and* one of ``supported``/``backed``): a verifier's line that says "supported" but no
negation is ruled out without running the pattern (ora-broken's failure signals: ~80 µs per line
of prose before, most of it patterns that could not match).

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
#: requirements tested per text at most: each further one costs a substring test per literal on a
#: text the earlier ones did not rule out
MAX_REQUIREMENTS = 3


def _rank(requirement: frozenset[str]) -> tuple[int, int]:
    """How selective a requirement is: longest shortest literal, then fewest literals."""
    return min(map(len, requirement)), -len(requirement)


def _cheap(requirement: frozenset[str]) -> tuple[bool, int, int]:
    """How well a requirement serves as a test of its own: no literal of one or two characters
    (``in``, ``no`` occur in nearly every line), then fewest literals (one substring test each),
    then the longest shortest literal."""
    shortest = min(map(len, requirement))
    return shortest > 2, -len(requirement), shortest


def _best(candidates: list[frozenset[str]]) -> frozenset[str] | None:
    """The most selective requirement."""
    if not candidates:
        return None
    return max(candidates, key=_rank)


def _sequence(items: Any, icase: bool) -> list[frozenset[str]]:
    """Every requirement of a sequence: a match passes through each of its parts, so it needs a
    literal of *each* requirement found in them (a conjunction)."""
    from re import _constants as c  # type: ignore[attr-defined]  # CPython's sre internals: typeshed has no stub

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
            candidates.extend(_element(op, av, icase))
    end_run()
    return candidates


def _element(op: Any, av: Any, icase: bool) -> list[frozenset[str]]:
    from re import _constants as c  # type: ignore[attr-defined]  # CPython's sre internals: typeshed has no stub

    if op is c.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        if (add_flags | del_flags) & re.IGNORECASE:
            return []
        return _sequence(sub, icase)
    if op is c.BRANCH:
        # A match takes one alternative, so a requirement of each alternative, united, is one of the
        # branch's. The k-th: each alternative's k-th most selective (its last, when it has fewer).
        ranked: list[list[frozenset[str]]] = []
        for alternative in av[1]:
            found = _sequence(alternative, icase)
            if not found:
                return []
            useful = [r for r in found if min(map(len, r)) >= MIN_LITERAL] or found
            ranked.append(sorted(useful, key=_rank, reverse=True))
        width = min(MAX_REQUIREMENTS, max(map(len, ranked)))
        united = [frozenset().union(*(r[min(k, len(r) - 1)] for r in ranked)) for k in range(width)]
        # and each alternative's cheapest to test (``not`` | ``n't`` beside ``without``)
        united.append(frozenset().union(*(max(r, key=_cheap) for r in ranked)))
        return united
    if op is c.MAX_REPEAT or op is c.MIN_REPEAT or op is getattr(c, "POSSESSIVE_REPEAT", None):
        low, _high, sub = av
        return _sequence(sub, icase) if low >= 1 else []
    if op is getattr(c, "ATOMIC_GROUP", None):
        return _sequence(av, icase)
    return []


def _useful(requirement: frozenset[str]) -> bool:
    return len(requirement) <= MAX_LITERALS and min(map(len, requirement)) >= MIN_LITERAL


def required_literal_sets(pattern: str, flags: int = 0,
                          limit: int = MAX_REQUIREMENTS) -> tuple[tuple[frozenset[str], ...], bool] | None:
    """``(requirements, icase)``: every match of ``pattern`` contains a literal of *each* of the
    ``requirements`` (at most ``limit``, the cheapest to test first, see ``_cheap``; lower-cased
    when ``icase``).
    A text lacking every literal of any one of them cannot match. None when no useful requirement
    can be proven."""
    from re import _parser  # type: ignore[attr-defined]  # CPython's sre internals: typeshed has no stub

    parsed = _parser.parse(pattern, flags)  # a pattern that does not parse raises, as re.compile does
    icase = bool(parsed.state.flags & re.IGNORECASE)
    found = sorted({r for r in _sequence(parsed, icase) if _useful(r)}, key=_cheap, reverse=True)
    if not found:
        return None
    return tuple(found[:limit]), icase


def required_literals(pattern: str, flags: int = 0) -> tuple[frozenset[str], bool] | None:
    """``(literals, icase)``: every match of ``pattern`` contains one of ``literals`` (lower-cased
    when ``icase``), the most selective such requirement; None when no useful one can be proven."""
    from re import _parser  # type: ignore[attr-defined]  # CPython's sre internals: typeshed has no stub

    parsed = _parser.parse(pattern, flags)
    icase = bool(parsed.state.flags & re.IGNORECASE)
    found = _best([r for r in _sequence(parsed, icase) if _useful(r)])
    return (found, icase) if found is not None else None
