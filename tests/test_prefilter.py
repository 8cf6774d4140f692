"""The literal prefilter in front of LazyPattern scans: it skips work, never a match."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

from ora_core.kits.lazy import LazyPattern, lazy_compile
from ora_core.kits.prefilter import required_literal_sets, required_literals

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DETECTOR_MODULES = ["ora_health_detectors.detectors", "ora_health_detectors.common", "ora_broken.markers",
                    "ora_broken.verdict", "ora_broken.failure_signals", "ora_bypass.clock", "ora_grounding.subject",
                    "ora_grounding.text", "ora_grounding.specifics", "ora_grounding.lexical"]


def _patterns() -> list[LazyPattern]:
    found: dict[int, LazyPattern] = {}
    for name in DETECTOR_MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, LazyPattern):
                found[id(value)] = value
            elif isinstance(value, list | tuple):
                for item in value:
                    pattern = getattr(item, "pattern", None)
                    if isinstance(pattern, LazyPattern):
                        found[id(pattern)] = pattern
    return list(found.values())


def _corpus() -> list[str]:
    """Texts that match the patterns (every string in the detector plugins' tests) and texts that
    mostly do not (the vault, the seeds, the labelled data), plus case and Unicode tricks."""
    texts: list[str] = []
    for test_file in sorted(ROOT.glob("plugins/ora-*/tests/test_*.py")) + sorted(ROOT.glob("tests/**/test_*.py")):
        for node in ast.walk(ast.parse(test_file.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 3:
                texts.append(node.value)
    texts += [p.read_text() for p in sorted((ROOT / "vault").glob("*.md"))]
    for path in sorted(DATA.glob("*_dev.jsonl")):
        for line in path.read_text().splitlines()[:60]:
            record = json.loads(line)
            texts += [record["answer"], record["evidence"][:3000]]
    texts += [t.upper() for t in texts[:200]] + [t.replace("s", "ſ").replace("k", "K") for t in texts[:200]]
    return texts


@pytest.mark.slow
def test_every_detector_pattern_finds_what_it_found_without_the_prefilter() -> None:
    patterns = _patterns()
    assert len(patterns) > 40
    texts = _corpus()
    skipped = matched = 0
    for lazy in patterns:
        raw = re.compile(lazy._source, lazy._flags)
        for text in texts:
            expected = raw.findall(text)
            assert lazy.findall(text) == expected, (lazy, text[:200])
            assert bool(lazy.search(text)) == bool(expected), (lazy, text[:200])
            assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in raw.finditer(text)]
            skipped += lazy.cannot_match(text)
            matched += bool(expected)
    assert matched > 500, "the corpus must exercise matches, not only misses"
    assert skipped > 0.5 * len(patterns) * len(texts), "the prefilter must skip most scans on ordinary text"


def test_only_parts_every_match_passes_through_give_literals() -> None:
    assert required_literals(r"\bcolou?r\b") == (frozenset({"colo"}), False)
    assert required_literals(r"(?:alpha|beta)-\d+") == (frozenset({"alpha", "beta"}), False)
    assert required_literals(r"(?:alpha|[bB]eta)") == (frozenset({"alpha", "eta"}), False)
    assert required_literals(r"(?:alpha|\d+)") is None  # one alternative without a literal proves nothing
    assert required_literals(r"(?:warning)?\s*\d+") is None  # optional: no requirement
    assert required_literals(r"(?:stop){2,}") == (frozenset({"stop"}), False)
    assert required_literals(r"Error:(?i:fatal)") == (frozenset({"Error:"}), False)  # scoped flags skipped
    assert required_literals(r"a") is None  # too short to be worth a test
    assert required_literals(r"Sorry, BUT", re.IGNORECASE) == (frozenset({"sorry, but"}), True)


def test_a_match_needs_a_literal_of_every_requirement_and_a_line_lacking_one_is_ruled_out() -> None:
    needs = required_literal_sets(r"\b(?:not|never)\s+(?:\w+ly\s+)?(?:supported|backed)\b", re.IGNORECASE)
    # re's parser factors the common "n" out of not|never: "ot" | "ever" is what stays required
    assert needs == ((frozenset({"supported", "backed"}), frozenset({"ot", "ever"})), True)
    # a branch unites one requirement of each alternative: the k-th most selective, and the cheapest
    needs = required_literal_sets(r"(?:\bnot|n't)\s+supported|\bevidence\s+(?:\bnot|n't)\s+given"
                                  r"|\bwithout\s+(?:a\s+)?source")
    assert needs == ((frozenset({"supported", "evidence", "without"}), frozenset({"not", "n't", "source"}),
                      frozenset({"not", "n't", "given", "source"})), False)
    lazy = lazy_compile(r"(?:\bnot|n't)\s+(?:\w+ly\s+)?(?:supported|backed)\b", re.IGNORECASE)
    for text, can in [("every claim is supported by the evidence", False), ("this is not a claim", False),
                      ("it is not directly supported", True), ("it isn't backed", True)]:
        assert lazy.cannot_match(text) is not can
        assert bool(lazy.search(text)) is can
    assert required_literal_sets(r"(?:warning)?\s*\d+") is None


def test_case_folding_beyond_ascii_is_never_skipped() -> None:
    lazy = lazy_compile(r"\bsorry\b", re.IGNORECASE)
    assert lazy.search("I am ſorry") is not None  # re folds ſ to s; a lower() test would miss it
    assert not lazy.cannot_match("I am ſorry")
    assert lazy.cannot_match("I am glad") and lazy.search("I am glad") is None
    assert not lazy.cannot_match("SORRY") and lazy.search("SORRY") is not None


def test_positional_and_keyword_arguments_bypass_the_prefilter() -> None:
    lazy = lazy_compile(r"needle")
    assert lazy.search("a needle", 2).span() == (2, 8)
    assert lazy.findall("needle needle", pos=1) == ["needle"]
    assert lazy.cannot_match(b"no str") is False


@pytest.mark.parametrize("pattern", [r"(a|b)\1c", r"(?=xyz)abc", r"[^\W\d]+tion"])
def test_unusual_constructs_stay_exact(pattern: str) -> None:
    lazy = lazy_compile(pattern)
    for text in ["aac", "bbc", "abc", "xyzabc", "station", "nation 1", "zzz"]:
        assert lazy.findall(text) == re.findall(pattern, text)
