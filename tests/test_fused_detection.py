"""One analysis per output: detectors that take the kernel's ``TextAnalysis`` give the signals
they give alone, in the same order, beside detectors that only implement ``detect(text, ctx)``.

The corpus is every text of the detector tests (the string literals of their files) plus the
shapes that matter to masking and fences, each run with and without a step's material."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import ora_bypass
import ora_grounding
import ora_health_detectors
import pytest

from ora_core import hookimpl
from ora_core.api import Signal, StepMaterial
from ora_core.kernel.detection import TextAnalysis, run_detectors
from ora_core.testing import make_host

REPO = Path(__file__).resolve().parents[1]
TEST_FILES = [*sorted((REPO / "plugins/ora-health-detectors/tests").glob("test_*.py")),
              *sorted((REPO / "plugins/ora-broken/tests").glob("test_*.py")),
              REPO / "tests/gears/test_reliability.py"]
SHAPES = [
    "",
    "I'm sorry, but I can't help with that.",
    "> I'm sorry, but I can't help with that.\n\nThe analysis goes on with forty words " + "and more " * 20,
    "```\nI cannot help with that request\n```\nThe rest is prose. Could you clarify what you mean?",
    "Would you like me to expand? Could you please clarify which market you mean?",
    "TODO: fill in the analysis [insert figures here]",
    '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call> and prose after it',
    '```json\n{"name": "search", "arguments": {"q": "x"}}\n```\nShown as an example of the format.',
    "Action: search\nAction Input: harness vendors",
    "## COVERAGE GAP\nThe package does not give the date.",
    "It’s a well-known fact — 3 items, e.g. apples. ~~~\nfenced ~~~\n~~~\nafter the fence",
    "retry context negative feedback: your previous attempt failed, do not repeat that failure",
    "In 2023 the vendor Acme Corp reported 83% growth to $4.7 billion on 14 March.",
]


def corpus() -> list[str]:
    texts: list[str] = list(SHAPES)
    for path in TEST_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 12:
                texts.append(node.value)
    return list(dict.fromkeys(texts))


class Ctx:
    """A turn as detectors see it: scratch data, no configuration, contingencies kept."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.config = None
        self.prompt = "Cui bono on the harness paradigm shift?"
        self.contingencies: list[tuple[str, str]] = []

    def contingency(self, name: str, step: str, detail: str = "", **_: Any) -> None:
        self.contingencies.append((name, detail))


def contexts() -> list[dict[str, Any]]:
    material = StepMaterial(step="analyst", purpose="analyst", given="The package: vendors gain, users pay.",
                            instructions=["End your reply with one line of the form CONFIDENCE: 0.00 to "
                                          "CONFIDENCE: 1.00 how far the package supports what you wrote"],
                            retry_phrases=["your previous attempt failed", "do not repeat that failure"],
                            expected_min_words=40, quoted=[])
    return [{}, {"expected_min_words": 12, "material": material, "evidence": "Acme reported growth in 2023."}]


class OnlyDetect:
    """A third party's detector: ``detect(text, ctx)`` only."""

    name = "zz-third-party"
    kind = "style"
    layer = "model_output"
    assumes = frozenset({"model_generated"})

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        return [Signal(detector=self.name, kind=self.kind, name="long", data={"chars": len(text)})] if len(
            text) > 40 else []


class ThirdPartyPlugin:
    @hookimpl
    def ora_register_detectors(self, register: Any) -> None:
        register(OnlyDetect())


@pytest.fixture(scope="module")
def detectors() -> list[Any]:
    host = make_host(ora_health_detectors, ora_grounding, ora_bypass, ThirdPartyPlugin())
    found = host.detectors(layer="model_output")
    assert any(hasattr(d, "detect_analysed") for d in found) and any(not hasattr(d, "detect_analysed") for d in found)
    return found


def test_fused_and_unfused_detection_give_the_same_signals_in_the_same_order(detectors: list[Any]) -> None:
    texts = corpus()
    assert len(texts) > 100
    fired = 0
    for text in texts:
        for data in contexts():
            alone: list[dict[str, Any]] = []
            for detector in detectors:
                alone += [s.model_dump() for s in detector.detect(text, Ctx(dict(data)))]
            ctx = Ctx(dict(data))
            together = [s.model_dump() for s in run_detectors(None, "model_output", text, ctx, detectors=detectors)]
            assert together == alone, text[:80]
            assert not ctx.contingencies
            fired += len(together)
    assert fired > 50  # the corpus exercises the detectors, not only their silence


def test_a_detector_taking_the_analysis_that_raises_is_named_like_any_other() -> None:
    class Broken:
        name, kind, layer = "broken-fused", "style", "model_output"

        def detect(self, text: str, ctx: Any) -> list[Signal]:
            return []

        def detect_analysed(self, analysis: Any, ctx: Any) -> list[Signal]:
            raise ValueError("no view for that")

    ctx = Ctx({})
    assert run_detectors(None, "model_output", "text", ctx, detectors=[Broken(), OnlyDetect()]) == []
    assert ctx.contingencies == [("detector-broken-fused-failed", "ValueError: no view for that")]


def test_the_analysis_computes_each_view_once_and_shares_it() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text)

    analysis = TextAnalysis("Some Text\nTwo lines")
    assert analysis.view("test.len", count) == analysis.view("test.len", count) == 19
    assert calls == ["Some Text\nTwo lines"]
    assert analysis.lower == "some text\ntwo lines" and analysis.lines == ["Some Text", "Two lines"]


#: A match of every branch of the refusal and placeholder patterns.
BRANCH_EXAMPLES = [
    "I'm sorry, but I can't do that.", "I am afraid I cannot.", "I won't help with that.", "I will not assist.",
    "I am unable to answer.", "I'm unable to comply.", "I am not able to provide it.", "I'm not able to write",
    "I must decline to engage.", "I am not going to produce it.", "I'm not comfortable creating that.",
    "I cant help", "I canot help", "As an AI language model, I cannot", "As an AI, I don't",
    "I must respectfully decline", "I must decline.", "This request violates the policy.",
    "Your request is not something I do.", "I am not allowed to", "I'm not permitted to",
    "TODO", "TBD here", "FIXME", "[insert the figure]", "[your name]", "[add data]", "[fill in]", "[placeholder]",
    "<insert here>", "<placeholder>", "<fill>", "{{ name }}", "lorem ipsum", "(to be completed)",
    "(to be added)", "(details to follow)", "analysis goes here", "content will go here", "The text goes here.",
    "Could you clarify?", "Can you please specify", "Would you tell me", "Will you confirm", "please let me know",
    "What exactly do you mean?", "What are you hoping for", "Which of the markets are you referring to",
    "Do you want the long form?", "Would you prefer it short?", "Are you asking about 2024?",
    "Before I proceed, tell me", "I need more information from you", "Can you be more specific?",
    "I can’t help with that — sorry.", "CAN'T HELP, SORRY",
    "<tool_call>", "</tool_use>", "<function_calls>", '<invoke name="x">', "<function=search>", "</tool_response>",
    "<|tool_call|>", "<|python_tag|>", "<|im_start|>", "<|eot_id|>", "[TOOL_CALLS]", "[tool_request]",
    '{"name": "search", "arguments": {}}', '{ "tool": "x", "input": 1}', '"tool_calls": [', '"function_call": {',
    '{"type": "function"', '{"type":"tool_use"', "Action: search\nAction Input: x",
]


def test_the_literals_a_detector_rules_a_text_out_by_are_in_every_match_of_its_pattern() -> None:
    from ora_health_detectors import common
    from ora_health_detectors import detectors as health

    for pattern, needs in ((health._REFUSAL, health._REFUSAL_NEEDS), (health._PLACEHOLDER, health._PLACEHOLDER_NEEDS),
                           (health._ASKS_USER, health._ASKS_NEEDS), (health._TOOL_MARKUP, health._TOOL_NEEDS),
                           (health._TOOL_JSON, health._TOOL_NEEDS), (health._REACT, health._TOOL_NEEDS)):
        compiled = pattern.compiled()
        for text in BRANCH_EXAMPLES:
            for match in compiled.finditer(text.replace("’", "'")):  # every branch's match holds a needed literal
                assert any(n in match.group(0).lower() for n in needs), (match.group(0), needs)
        assert sum(bool(compiled.search(t)) for t in BRANCH_EXAMPLES) >= 1  # the examples reach the pattern
        for text in [*corpus(), *BRANCH_EXAMPLES]:
            analysis = common.Analysis(text)
            if common.lacks_all(analysis, needs):
                assert compiled.search(text) is None and compiled.search(common.masked(analysis)[0]) is None, text


def test_a_text_with_a_character_ignorecase_folds_onto_ascii_is_never_ruled_out_by_literals() -> None:
    from ora_health_detectors import common
    from ora_health_detectors import detectors as health

    for text in ("I'm ſorry, but I can't help with that.", "I'm sorry, but I can't help with that. ı"):
        assert health._REFUSAL.compiled().search(common.masked(common.Analysis(text))[0])
        assert not common.lacks_all(common.Analysis(text), ("sorry", "zzz"))
        assert health.RefusalDetector().detect(text, Ctx({}))
    # an em dash or a curly apostrophe is no such character: the text is ruled out on its literals
    assert common.lacks_all(common.Analysis("Vendors gain — users pay."), health._REFUSAL_NEEDS)
    assert not common.lacks_all(common.Analysis("I can’t — sorry"), ("can't",))
