"""Unhealthy-output detectors: what must fire, and the near misses that must not."""

from __future__ import annotations

import ora_health_detectors
import pytest
from ora_health_detectors import (
    BriefStubDetector,
    ClarificationLoopDetector,
    LeakedToolCallDetector,
    RefusalDetector,
)

from ora_core.api import StandaloneContext
from ora_core.testing import make_config, run_detectors

ANALYSIS = (
    "The harness shift moves margin from model vendors to the firms that own distribution. "
    "Depth: the labs that sell harnesses capture workflow data, which compounds their lead. "
    "Breadth: independent tool makers lose pricing power, while enterprise buyers gain "
    "leverage only if they can switch harnesses cheaply. The evidence in chunk 2 supports "
    "the first claim; the second rests on an assumption stated in Phase A."
)


def names(signals, strength=None):
    return [s.name for s in signals if strength is None or s.strength == strength]


def test_plugin_registers_five_unhealthy_detectors_on_model_output(ora_host, register_plugin):
    record = register_plugin(ora_health_detectors)
    assert record.status == "ok", record.errors
    detectors = ora_host.detectors(layer="model_output", kind="unhealthy")
    assert sorted(d.name for d in detectors) == ["brief-stub", "clarification-loop", "leaked-tool-call", "prompt-echo",
                                                 "refusal"]
    assert all(d.assumes == frozenset({"model_generated"}) for d in detectors)


def test_a_healthy_analysis_raises_no_signal_from_any_detector(ora_host, register_plugin):
    register_plugin(ora_health_detectors)
    ctx = StandaloneContext(config=None)
    assert run_detectors(ora_host, "model_output", ANALYSIS, ctx) == []
    assert ctx.contingencies == []


# --- refusal ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "I'm sorry, but I can't help with that.",
    "I cannot assist with this request.",
    "As an AI language model, I cannot provide opinions on political matters.",
    "I must respectfully decline to write this analysis.",
    "I’m afraid I can’t do that.",
])
def test_refusals_fire_strong(text):
    signals = RefusalDetector().detect(text, None)
    assert names(signals, "strong") == ["refusal"]


@pytest.mark.parametrize("text", [
    "I cannot verify the Q3 revenue figure from the evidence package. Gap: no chunk states it.",
    "I can't confirm the date; the sources in front of me do not give it.",
    "I don't know the current time.",
    "I can't stress enough how much the evidence favours the first reading.",
    "The vendor said it cannot help customers migrate, which the analysis treats as lock-in.",
    ANALYSIS,
])
def test_honest_gaps_and_prose_are_not_refusals(text):
    assert RefusalDetector().detect(text, None) == []


def test_a_refusal_quoted_inside_a_long_analysis_is_not_one():
    text = ANALYSIS + "\n\n> I'm sorry, but I can't help with that.\n\nThat reply is what users saw."
    assert RefusalDetector().detect(text, None) == []


def test_a_refusal_deep_in_a_long_text_is_weak():
    text = ANALYSIS + " " + ANALYSIS + " Finally, I cannot assist with the pricing section."
    assert names(RefusalDetector().detect(text, None)) == ["refusal"]
    assert names(RefusalDetector().detect(text, None), "strong") == []


# --- clarification loop ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Could you clarify what you mean by 'harness'?",
    "Before I proceed, can you tell me which market you are interested in? Do you want a "
    "global or a US view?",
    "Are you asking about who benefits financially, or politically?",
    "Please clarify the time period you have in mind.",
])
def test_questions_to_the_user_instead_of_the_task_fire(text):
    signals = ClarificationLoopDetector().detect(text, None)
    assert names(signals, "strong") == ["clarification-loop"]


@pytest.mark.parametrize("text", [
    ANALYSIS + " Would you like me to expand on the breadth section?",
    "Who benefits? " + ANALYSIS,
    "What happens when labs sell harnesses instead of models? The margin moves downstream.",
    ANALYSIS,
])
def test_analysis_with_rhetorical_or_closing_questions_does_not_fire(text):
    assert ClarificationLoopDetector().detect(text, None) == []


def test_clarification_body_limit_comes_from_the_plugin_config():
    text = ("The question has two readings, financial and political, and each needs its own "
            "evidence. Could you clarify which one you mean?")
    assert names(ClarificationLoopDetector().detect(text, None)) == ["clarification-loop"]
    config = make_config({"plugins": {"health-detectors": {"clarification_body_words": 10}}})
    assert ClarificationLoopDetector().detect(text, StandaloneContext(config=config)) == []


# --- brief stub ----------------------------------------------------------------------------------------


def test_short_output_is_a_stub_under_the_default_minimum():
    signals = BriefStubDetector().detect("Labs benefit. Users lose.", None)
    assert names(signals, "strong") == ["brief-stub"]
    assert signals[0].data == {"words": 4, "min_words": 40}


def test_the_step_sets_its_own_minimum_through_ctx_data():
    ctx = StandaloneContext(config=None)
    ctx.data["expected_min_words"] = 3
    assert BriefStubDetector().detect("Labs benefit. Users lose.", ctx) == []
    ctx.data["expected_min_words"] = 200
    assert names(BriefStubDetector().detect(ANALYSIS, ctx)) == ["brief-stub"]


def test_minimum_from_plugin_config():
    config = make_config({"plugins": {"health-detectors": {"min_words": 5}}})
    assert BriefStubDetector().detect("Labs benefit. Users lose out.", StandaloneContext(config=config)) == []
    assert names(BriefStubDetector().detect("Labs benefit.", StandaloneContext(config=config))) == ["brief-stub"]


def test_a_long_output_is_not_a_stub():
    assert BriefStubDetector().detect(ANALYSIS, None) == []


@pytest.mark.parametrize("text", [
    "## COVERAGE GAP\nThe package has no revenue figures.",
    "## SUPPLEMENTAL RAG REQUEST\nGap: revenue\nQuery terms: q3 revenue\nWhy: the claim rests on it",
])
def test_authorised_gap_and_request_blocks_are_not_stubs(text):
    assert BriefStubDetector().detect(text, None) == []


def test_unfilled_template_is_a_stub_even_when_long():
    text = ANALYSIS + "\n\n## Consolidation\n[Insert consolidated findings here]"
    assert names(BriefStubDetector().detect(text, None)) == ["stub-placeholder"]


def test_placeholder_words_inside_a_code_block_are_not_stubs():
    text = ANALYSIS + "\n\n```python\n# TODO: the reader adds their key here\n```"
    assert BriefStubDetector().detect(text, None) == []


# --- leaked tool call -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text, syntax", [
    ('Let me look that up. {"name": "web_search", "arguments": {"query": "apple revenue"}}', "tool-json"),
    ('<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>', "tool-markup"),
    ('{"tool_calls": [{"id": "call_1", "type": "function"}]}', "tool-json"),
    ("<|python_tag|>brave_search.call(query=\"weather\")", "tool-markup"),
    ("Thought: I need data.\nAction: search\nAction Input: apple q3 revenue", "react-action"),
    ('<function=get_weather>{"city": "Paris"}</function>', "tool-markup"),
])
def test_tool_call_syntax_in_prose_fires_strong(text, syntax):
    signals = LeakedToolCallDetector().detect(text, None)
    assert signals and signals[0].strength == "strong"
    assert syntax in {s.data["syntax"] for s in signals}


def test_tool_call_format_shown_in_a_fenced_example_is_weak():
    text = ("Function calling returns an object like this:\n```json\n"
            '{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\nThe client then runs it.')
    signals = LeakedToolCallDetector().detect(text, None)
    assert names(signals) == ["leaked-tool-call"] and names(signals, "strong") == []


@pytest.mark.parametrize("text", [
    'The config sets {"name": "ora", "version": 2} and nothing else.',
    "The action taken was decisive: the board voted to sell.",
    "Use the <b>bold</b> tag for emphasis; JSON objects map names to values.",
    ANALYSIS,
])
def test_json_and_markup_that_are_not_tool_calls_do_not_fire(text):
    assert LeakedToolCallDetector().detect(text, None) == []


def test_the_shared_masking_and_sentence_split_never_serve_another_texts_result() -> None:
    from ora_health_detectors.common import mask_quoted, sentences

    quoted, plain = "Intro.\n> quoted line\nEnd.", "One. Two!\nThree"
    first = mask_quoted(quoted)
    assert mask_quoted(plain) == (plain, (False, False))
    assert mask_quoted(quoted) == first == ("Intro.\n             \nEnd.", (False, False, False))
    assert [s for *_, s in sentences(plain)] == ["One.", "Two!", "Three"]
    assert [s for *_, s in sentences(quoted)] == ["Intro.", "> quoted line", "End."]
    assert [s for *_, s in sentences(plain)] == ["One.", "Two!", "Three"]
