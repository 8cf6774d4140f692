"""The faster ways the specifics detector reads a text give what the plain ways give.

Each fast path is pinned against the plain computation it replaced, over the dev texts (when
``../shared/data`` is beside the repository), this plugin's test literals and texts made to
reach the corners (accents, the characters case-insensitive matching folds onto ASCII letters,
abbreviations at sentence ends)."""

from __future__ import annotations

import ast
import json
import random
import re
import unicodedata
from pathlib import Path

from ora_grounding import lexical, specifics, text

TEST_DIR = Path(__file__).resolve().parent
DEV_DATA = TEST_DIR.parents[3] / "shared" / "data"  # ../shared/data beside the repository
CORNERS = [
    "On 14 March 2019, March 14, 2019 and the 14th of March; $4.7, €3, 83%, 12 per cent, 12,500, 3.14 in 1999.",
    "ſept 3, SEPT 4, İan 5, ıan 6, Dec. 7, DEC 8 and 9 SEPTEMBER 2020; MAY 2021 and may 12.",
    "Dr. Smith met Mr. Jones in the U.S. on Jan. 4. Then J. K. Rowling wrote it. Approx. 40 came, e.g. Ana.",
    "Süreyya Opera House, Bartók, Kadıköy, Łódź, Ørsted, Straße, Œuvre, naïve café — “quoted” ’s.",
    "It ended.He began again.The End. ok. Yes. No! Really? 3.5 million, -4, +5, 2nd, 1990s, $1,000.",
]


def corpus() -> list[str]:
    texts = list(CORNERS)
    for path in sorted(TEST_DIR.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 12:
                texts.append(node.value)
    for path in sorted(DEV_DATA.glob("*.jsonl")) if DEV_DATA.is_dir() else []:
        for line in path.read_text(encoding="utf-8").splitlines()[:120]:
            row = json.loads(line)
            texts += [row["answer"], row["evidence"][:6000], row.get("question") or ""]
    rng = random.Random(7)
    texts += ["".join(chr(rng.randrange(0x20, 0x2400)) for _ in range(120)) for _ in range(300)]
    return [t for t in dict.fromkeys(texts) if t]


def plain_fold(value: str) -> str:
    if value.isascii():
        return value.lower()
    decomposed = unicodedata.normalize("NFKD", value.translate(text._UNDECOMPOSABLE))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def plain_split_sentences(value: str) -> list[str]:
    """``split_sentences`` testing each whole sentence for a closing abbreviation."""
    out: list[str] = []
    for block in text._blocks(value):
        start = 0
        for match in text._SENTENCE_END.finditer(block):
            tail = block[start:match.start()].rstrip()
            if text._ABBREVIATIONS.search(tail) or text._INITIAL.search(tail):
                continue
            out.append(block[start:match.start()])
            start = match.end()
        out.append(block[start:])
    return [cleaned for piece in out if (cleaned := re.sub(r"\s+", " ", piece).strip())]


def test_folding_drops_the_marks_the_plain_fold_drops():
    for value in corpus():
        assert text.fold(value) == plain_fold(value), value[:60]
    assert text.fold("Süreyya Bartók Kadıköy Straße") == "sureyya bartok kadikoy strasse"


def test_sentences_are_cut_where_testing_the_whole_sentence_for_an_abbreviation_cuts_them():
    for value in corpus():
        assert text.split_sentences(value) == plain_split_sentences(value), value[:60]
    assert text.split_sentences(CORNERS[2]) == ["Dr. Smith met Mr. Jones in the U.S. on Jan. 4.",
                                                "Then J. K. Rowling wrote it.", "Approx. 40 came, e.g. Ana."]


def test_a_sentence_has_a_content_word_when_its_content_words_are_not_none():
    for value in corpus():
        for sentence in text.split_sentences(value)[:30]:
            assert text.has_content_word(sentence) == bool(text.content_words(sentence)), sentence[:60]
    assert not text.has_content_word("It is what it was, and so it is.")


def test_the_patterns_with_a_start_lookahead_find_what_their_sources_find():
    pairs = [(lexical._SPECIFIC.compiled(), re.compile(lexical.SPECIFIC_SOURCE, re.IGNORECASE)),
             (specifics._DATE.compiled(), re.compile(specifics.DATE_SOURCE, re.IGNORECASE)),
             (specifics._NUMBER.compiled(), re.compile(specifics.NUMBER_SOURCE))]
    found = 0
    for value in corpus():
        for fast, plain in pairs:
            matches = [(m.span(), m.groupdict()) for m in plain.finditer(value)]
            assert [(m.span(), m.groupdict()) for m in fast.finditer(value)] == matches, (plain.pattern, value[:60])
            found += len(matches)
    assert found > 200
    assert [m.group(0) for m in specifics._DATE.finditer(CORNERS[1])][:2] == ["ſept 3", "SEPT 4"]
