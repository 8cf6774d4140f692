"""The unsupported-specifics detector (no model): what it flags, what it leaves alone."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import ora_grounding
from ora_grounding import UnsupportedSpecificsDetector
from ora_grounding.detector import INDEX_CACHE_SIZE
from ora_grounding.specifics import EvidenceIndex, IndexCache

from ora_core.api import Chunk, EvidencePackage, Provenance, StepMaterial
from ora_core.testing import check_assumptions, unsupported_specifics

EVIDENCE = EvidencePackage(chunks=[Chunk(
    id="c1", text="The committee approved the budget on 3 March 2021 after two readings chaired by Ana Ruiz.",
    provenance=Provenance(collection="vault", source="notes/budget.md", score=0.9, stream="concept"))])


def run(text: str, **data: object) -> list:
    return UnsupportedSpecificsDetector().detect(text, SimpleNamespace(data=dict(data)))


def test_specifics_absent_from_the_evidence_are_a_strong_counted_signal():
    signals = run("The committee approved the budget on 5 March 2021 by 14 votes, said Tom Hale.", evidence=EVIDENCE)
    assert [s.name for s in signals] == ["unsupported-specifics"]
    signal = signals[0]
    assert signal.strength == "strong" and signal.data["evidence_checked"] is True
    # the whole span of the lexical check first, then what the claim-level checks found
    assert signal.data["missing"][0] == "5 March 2021"
    assert set(signal.data["missing"]) == {"5 March 2021", "5", "14", "Tom", "Hale"}
    assert {c["kind"] for c in signal.data["claims"]} == {"date", "number", "name"}
    assert unsupported_specifics(signals) == signals  # the kernel counts it (confident confabulator)


def test_specifics_the_evidence_holds_raise_nothing():
    text = "Chaired by Ana Ruiz, the committee approved the budget on March 3, 2021, after two readings."
    assert run(text, evidence=EVIDENCE) == []


def test_an_invented_quotation_is_flagged():
    signals = run('Ana Ruiz said the budget was "a historic compromise".', evidence=EVIDENCE)
    assert [c["kind"] for c in signals[0].data["claims"]] == ["quotation"]


def test_an_empty_package_makes_every_specific_unsupported():
    signals = run("The budget passed in 2021.", evidence=EvidencePackage(chunks=[]))
    assert signals[0].data["missing"] == ["2021"] and signals[0].data["evidence_items"] == 0


def test_protocol_furniture_is_not_flagged():
    text = ("The committee approved the budget.\nCONFIDENCE: 0.92\n\n## COVERAGE GAP\n"
            "The evidence does not give the 2022 figure from Tom Hale.")
    assert run(text, evidence=EVIDENCE) == []


def test_without_an_evidence_package_specifics_are_recorded_unchecked_and_not_counted():
    signals = run("The budget passed in 2021 by 14 votes.")
    assert [(s.name, s.kind, s.strength) for s in signals] == [("specifics-unchecked", "specifics", "weak")]
    assert "no evidence package" in signals[0].data["reason"]
    assert unsupported_specifics(signals) == []
    assert run("The budget passed after a debate.") == []


def test_registered_on_model_output_with_its_assumption_held(ora_host, register_plugin):
    register_plugin(ora_grounding)
    detector = ora_host.get("detector", "unsupported-specifics")
    assert (detector.layer, detector.kind, tuple(detector.assumes)) == (
        "model_output", "unsupported_specifics", ("evidence_available",))
    assert check_assumptions(detector.name, detector.layer, detector.assumes).ok
    assert ora_host.get("verifier", "grounding").name == "grounding"


def test_conversation_memory_does_not_vouch_for_a_specific():
    memory = Chunk(id="m", text="The budget passed in 2021.", provenance=Provenance(
        collection="conversation", source="turn-1", score=0.9, stream="conversation"))
    signals = run("The budget passed in 2021.", evidence=EvidencePackage(chunks=[memory]))
    assert signals[0].data["missing"] == ["2021"] and signals[0].data["evidence_items"] == 0


def test_missing_specifics_finds_what_the_evidence_lacks_and_nothing_else():
    from ora_grounding.lexical import missing_specifics

    evidence = "In 2019 the committee met on 3 March; 40% of budgets moved, about 12,500 dollars."
    assert missing_specifics("In 2019, on 3 March, 40% moved: 12,500 dollars. See step 1 of 2.", evidence) == []
    found = missing_specifics('In 2021 on 14 March, 45 percent moved; 3.2 billion; "the vote was unanimous and '
                              'final" said the chair.', evidence)
    assert found == ["2021", "14 March", "45 percent", "3.2", "the vote was unanimous and final"]


def test_an_evaluators_contract_headings_and_quotes_are_no_claims_of_its_own():
    """Probe runs found every healthy gear-4 evaluator flagged a confident confabulator: the seven
    contract headings ("UNSUPPORTED CLAIMS") read as names, and the evaluator quotes what it attacks."""
    from ora_core.api import StepMaterial

    evaluation = ("## 1. UNSUPPORTED CLAIMS\nThe analysis says the budget moved on 5 March 2021.\n"
                  "## 2. CRITERIA CHECK\nMet.")
    as_evaluator = run(evaluation, evidence=EVIDENCE, material=StepMaterial(purpose="evaluator"))
    assert as_evaluator == []
    as_analyst = run(evaluation, evidence=EVIDENCE, material=StepMaterial(purpose="analyst"))
    [signal] = as_analyst
    assert "UNSUPPORTED" not in signal.data["missing"] and "CLAIMS" not in signal.data["missing"]
    assert "5 March 2021" in signal.data["missing"]


# --- the cached index and the fused pass change no signal ---------------------------------------

TEST_DIR = Path(__file__).resolve().parent
DEV_DATA = TEST_DIR.parents[3] / "shared" / "data"  # ../shared/data beside the repository


def output_corpus() -> list[str]:
    """Every string literal of this plugin's tests and of the gear tests (the outputs they feed
    the detector), plus the dev answers and claims when ``../shared/data`` is beside the repository."""
    texts: list[str] = []
    for path in [*sorted(TEST_DIR.glob("test_*.py")), *sorted((TEST_DIR.parents[2] / "tests" / "gears").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 12:
                texts.append(node.value)
    for path in sorted(DEV_DATA.glob("*.jsonl")) if DEV_DATA.is_dir() else []:
        for line in path.read_text(encoding="utf-8").splitlines()[:150]:
            texts.append(json.loads(line)["answer"])
    return list(dict.fromkeys(texts))


def packages() -> list[tuple[str, list[Chunk] | None, str]]:
    """(name, chunks, prompt): each detection gets a new package holding these same chunks."""
    memory = Chunk(id="m", text="The budget passed in 2021 by 14 votes.", provenance=Provenance(
        collection="conversation", source="turn-1", score=0.9, stream="conversation"))
    dev = [EVIDENCE.chunks[0]]
    if DEV_DATA.is_dir():
        row = json.loads((DEV_DATA / "wice_claim_dev.jsonl").read_text(encoding="utf-8").splitlines()[0])
        dev = [Chunk(id=f"w{i}", text=row["evidence"][i * 2000:(i + 1) * 2000], provenance=Provenance(
            collection="web", source=f"page-{i}", score=0.5, stream="web")) for i in range(3)]
    return [("budget", list(EVIDENCE.chunks), "What did the committee decide in 2021?"), ("dev", dev, ""),
            ("memory", [memory, *EVIDENCE.chunks], ""), ("empty", [], ""), ("none", None, "")]


def test_the_cached_index_and_the_fused_pass_give_the_signals_of_a_fresh_index_per_output():
    from ora_core.api import TextAnalysis

    texts = output_corpus()
    assert len(texts) > 150
    fresh = UnsupportedSpecificsDetector(index_cache_size=0)
    cached = UnsupportedSpecificsDetector()
    fired = 0
    for name, chunks, prompt in packages():
        for text in texts:
            for purpose in ("analyst", "evaluator"):
                alone = [s.model_dump() for s in fresh.detect(text, turn_ctx(chunks, prompt, purpose))]
                for _ in range(2):  # the second time from the kept index and its remembered lookups
                    ctx = turn_ctx(chunks, prompt, purpose)
                    fused = [s.model_dump() for s in cached.detect_analysed(TextAnalysis(text), ctx)]
                    assert fused == alone, (name, text[:80])
                fired += len(alone)
    assert fired > 100  # the corpus exercises the signals, not only their silence
    assert 0 < len(cached.indexes) <= INDEX_CACHE_SIZE and len(fresh.indexes) == 0


def turn_ctx(chunks: list[Chunk] | None, prompt: str, purpose: str) -> SimpleNamespace:
    """A detection's ctx: a new package holding the same chunk objects, as each step of a turn gets one."""
    data: dict[str, object] = {"material": StepMaterial(purpose=purpose)}
    if chunks is not None:
        data["evidence"] = EvidencePackage(chunks=list(chunks), prompt=prompt)
    return SimpleNamespace(data=data, prompt=prompt, config=None, contingency=_no_contingency)


def _no_contingency(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"a detector failed: {args}")


def test_the_index_cache_is_keyed_by_the_evidence_texts_and_bounded():
    cache = IndexCache(2)
    first = cache.get(["The budget passed in 2021.", "Ana Ruiz chaired."])
    assert cache.get(["".join(["The budget passed ", "in 2021."]), "Ana Ruiz chaired."]) is first  # equal texts
    other = cache.get(["The budget passed in 2022.", "Ana Ruiz chaired."])  # one character apart: another index
    assert other is not first and "2022" in other.numbers and "2022" not in first.numbers
    cache.get(["A third package."])
    assert len(cache) == 2 and cache.get(["The budget passed in 2021.", "Ana Ruiz chaired."]) is not first  # evicted
    unkept = IndexCache(0)
    assert unkept.get(["x 1"]) is not unkept.get(["x 1"]) and len(unkept) == 0


def test_an_index_remembers_its_word_lookups_without_changing_them():
    index = EvidenceIndex.build(["The Süreyya Opera House opened in Kadıköy in 1927."])
    words = ["Sureyya", "opera", "operas", "Kadikoy", "Istanbul", "1927", "opened", "Opera-House"]
    first = [index.has_word(w) for w in words]
    assert first == [True, True, True, True, False, True, True, True]
    assert [index.has_word(w) for w in words] == first
    assert set(index._memo) == set(words)
