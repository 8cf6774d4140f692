"""One compiled matcher for a vocabulary of phrases, on word boundaries.

Seed 000 failure #6: ``"no analysis"`` matched inside ``"cui bono analysis"`` because
multi-word triggers were matched as substrings. Here every phrase, single- or multi-word, is
anchored so that no word character (nor a hyphen: ``hi-fi`` is one word) touches either end,
and the whole vocabulary is one regular expression:
the phrases are folded into a character trie, so the engine makes one pass over the text
instead of one pass per phrase. Whitespace inside a phrase matches any run of whitespace and
an apostrophe matches both ``'`` and ``’``; matching ignores case.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

_APOSTROPHES = "'\u2019"


def normalize_phrase(text: str) -> str:
    """The key a phrase (or a matched span) is known by: lower case, one space, one apostrophe."""
    return " ".join(text.replace("\u2019", "'").lower().split())


def _atoms(phrase: str) -> list[str]:
    atoms: list[str] = []
    for ch in normalize_phrase(phrase):
        if ch == " ":
            atoms.append(r"\s+")
        elif ch in _APOSTROPHES:
            atoms.append("['\u2019]")
        else:
            atoms.append(re.escape(ch))
    return atoms


_END = ""  # a trie key marking "a phrase ends here"


def _trie_regex(node: dict[str, dict]) -> str:
    terminal = _END in node
    branches = [atom + _trie_regex(child) for atom, child in sorted(node.items()) if atom != _END]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if terminal:
        return f"(?:{body})?"
    return body


def build_pattern(phrases: Iterable[str]) -> str:
    """The regular expression source for ``phrases``, as one trie-structured alternation."""
    root: dict[str, dict] = {}
    for phrase in phrases:
        atoms = _atoms(phrase)
        if not atoms:
            continue
        node = root
        for atom in atoms:
            node = node.setdefault(atom, {})
        node[_END] = {}
    if not root:
        return r"(?!x)x"  # matches nothing
    return r"(?<![\w-])(?:" + _trie_regex(root) + r")(?![\w-])"


@dataclass(frozen=True)
class PhraseMatch:
    phrase: str  # the vocabulary phrase, normalised
    matched: str  # the text as it appears in the input
    start: int
    end: int


class PhraseMatcher:
    """Finds vocabulary phrases in text with one compiled regular expression."""

    def __init__(self, phrases: Iterable[str]) -> None:
        self.phrases = sorted({normalize_phrase(p) for p in phrases if p and p.strip()})
        self.pattern = build_pattern(self.phrases)
        self._regex: re.Pattern[str] | None = None
        self._known = set(self.phrases)

    @property
    def regex(self) -> re.Pattern[str]:
        """The compiled matcher, built on first use: registering a detector at start-up (every
        ``ora`` command loads the plugins) must not pay for compiling its vocabulary."""
        if self._regex is None:
            self._regex = re.compile(self.pattern, re.IGNORECASE)
        return self._regex

    def finditer(self, text: str) -> Iterator[PhraseMatch]:
        for m in self.regex.finditer(text):
            key = normalize_phrase(m.group(0))
            if key not in self._known:  # cannot happen for a well-formed trie; never silent
                raise AssertionError(f"phrase matcher produced {key!r}, which is not in its vocabulary")
            yield PhraseMatch(phrase=key, matched=m.group(0), start=m.start(), end=m.end())

    def search(self, text: str) -> PhraseMatch | None:
        return next(self.finditer(text), None)
