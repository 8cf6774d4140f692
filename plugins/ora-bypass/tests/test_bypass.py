"""The Stage 0 bypass vocabulary on word boundaries (seed 000 #1, #6, #7) and the clock check (#5)."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import ora_bypass
import pytest

from ora_core import hookimpl
from ora_core.testing import bypass_decision as decide


@pytest.fixture
def bypass(ora_host, register_plugin):
    register_plugin(ora_bypass)
    return ora_host.get("detector", "bypass")


@pytest.mark.parametrize("prompt", [
    "Cui bono analysis of the harness paradigm shift?",
    "A monocultural analysis of farming",
    "Who benefits from the bono analysis?",
    "Explain the hi-fi market",
    "Thinking about timelines, what time-series model fits?",
])
def test_no_substring_collisions(bypass, prompt):
    assert not [s for s in bypass.detect(prompt) if s.strength == "strong"], prompt


@pytest.mark.parametrize("prompt, category", [
    ("No analysis needed, just summarise it.", "opt_out"),
    ("Hello, what time is it?", "time_date"),
    ("what’s   the date today", "time_date"),
    ("WHAT DAY IS IT", "time_date"),
    ("As I said earlier, the budget is fixed.", "earlier_conversation"),
    ("Please fix my spelling: recieve", "grammar_fix"),
    ("proofread this paragraph", "grammar_fix"),
    ("Just answer the question please", "opt_out"),
])
def test_vocabulary_categories_match(bypass, prompt, category):
    decision = decide(prompt, bypass.detect(prompt))
    assert decision.bypass and decision.category == category


def test_a_greeting_alone_bypasses_but_a_greeting_with_a_task_does_not(bypass):
    assert decide("Hello there!", bypass.detect("Hello there!")).bypass
    task = "Hi, who benefits from the harness shift in commercial AI?"
    decision = decide(task, bypass.detect(task))
    assert not decision.bypass and decision.signals and decision.residual_words > 2


def test_one_compiled_matcher_not_a_loop(bypass):
    import re

    assert isinstance(bypass.matcher.regex, re.Pattern)
    assert bypass.matcher.pattern.count("(?<![\\w-])") == 1  # one anchored alternation
    assert len(bypass.vocabulary) > 100


def test_signals_carry_position_and_layer_declaration(bypass):
    [signal] = [s for s in bypass.detect("ok, what is the time now") if s.data["category"] == "time_date"]
    assert "ok, what is the time now"[signal.start:signal.end] == signal.matched
    assert bypass.layer == "raw_prompt" and "unexpanded" in bypass.assumes


class _MisplacedBypass:
    """Failure #7 by configuration: bypass vocabulary on Phase A's expanded text."""

    name = "misplaced-bypass"
    kind = "bypass"
    layer = "cleaned_prompt"
    assumes = frozenset({"unexpanded"})

    def detect(self, text, ctx):
        return []


class _Plugin:
    @hookimpl
    def ora_register_detectors(self, register):
        register(_MisplacedBypass())


def test_a_bypass_detector_assuming_unexpanded_text_on_the_cleaned_prompt_is_refused():
    from ora_core.testing import make_host

    host = make_host(strict=False)
    record = host.register_plugin(_Plugin(), name="misplaced")
    assert record.status == "incompatible"
    assert "unexpanded" in record.errors[0]
    assert "misplaced-bypass" not in host.components("detector")


def test_rescan_only_uses_explicit_categories(ora_host, register_plugin):
    register_plugin(ora_bypass)
    rescan = ora_host.get("detector", "bypass-rescan")
    assert rescan.layer == "cleaned_prompt"
    assert not rescan.detect("Structured cui bono analysis; no analysis needed of benchmarks.")
    assert rescan.detect("Hello, what time is it?")


def _ctx(now: datetime):
    return SimpleNamespace(data={"clock": {"utc": now.isoformat(), "local": now.isoformat()}})


def test_clock_claims_flags_invented_times_and_accepts_the_clock():
    detector = ora_bypass.ClockClaimsDetector()
    now = datetime(2026, 11, 23, 9, 52, tzinfo=timezone.utc)  # a Monday
    invented = detector.detect("It is Friday, May 15, 2026 at 10:07 AM PDT.", _ctx(now))
    assert {s.name for s in invented} == {"unsupported-time", "unsupported-weekday", "unsupported-date"}
    assert not detector.detect("It is Monday, 23 November 2026, 09:52 UTC.", _ctx(now))
    assert not detector.detect("I don't have access to a clock. Gap: the current time.", _ctx(now))


def test_clock_claims_flag_an_invented_iso_timestamp_and_numeric_dates():
    """Probe #5 found SmolLM2 answering "The time is 2026-12-31T09:45:57.832Z" at 03:22 on 24 November
    and the check letting it through: the time follows a "T" and the date was ISO."""
    detector = ora_bypass.ClockClaimsDetector()
    now = datetime(2026, 11, 24, 3, 22, tzinfo=timezone.utc)
    found = detector.detect("The time is 2026-12-31T09:45:57.832Z", _ctx(now))
    assert {(s.name, s.matched) for s in found} == {("unsupported-date", "2026-12-31"),
                                                    ("unsupported-time", "09:45")}
    assert not detector.detect("It is 2026-11-24T03:22:10Z, that is 03:22 UTC.", _ctx(now))
    assert {s.name for s in detector.detect("Today is 31/12/2026.", _ctx(now))} == {"unsupported-date"}
    assert not detector.detect("Today is 24/11/2026, or 11/24/2026 in US order, or 24.11.2026.", _ctx(now))
    assert not detector.detect("Version 1.09.2 of the library.", _ctx(now))  # not a time
    assert {s.name for s in detector.detect("It is 06:12.", _ctx(now))} == {"unsupported-time"}  # a full stop


def test_clock_claims_stay_quiet_on_turns_that_asked_no_time_question():
    # No clock reading in the turn: the dates of an analysis are not claims about the clock.
    detector = ora_bypass.ClockClaimsDetector()
    assert detector.detect("The 2019 report, published Friday 15 March at 10:07, said so.",
                           SimpleNamespace(data={})) == []


EARLIER_CONVERSATION = [
    "Summarise what we talked about in our last conversation.",
    "What did we discuss yesterday?",
    "Can you remind me what we were talking about?",
    "As I said before, I prefer short answers.",
    "Earlier you mentioned a book about habits. What was it called?",
    "You mentioned earlier that the deadline moved; when is it now?",
    "What you said earlier about the budget, can you repeat it?",
    "Pick up where we left off in our previous conversation.",
    "Last time we spoke you suggested a reading list.",
    "Like I said before, the flat is in Leipzig.",
    "I told you earlier that I'm vegetarian.",
    "Worüber wir gesprochen haben, fass es bitte zusammen.",
    "Comme je l'ai dit, je préfère le train.",
    "Résume notre dernière conversation.",
]


@pytest.mark.parametrize("prompt", EARLIER_CONVERSATION)
def test_each_earlier_conversation_reference_bypasses_to_gear_1(bypass, prompt):
    decision = decide(prompt, bypass.detect(prompt))
    assert decision.bypass and decision.category == "earlier_conversation", prompt


@pytest.mark.parametrize("prompt", [
    "Analyse the last conversation between Kennedy and Khrushchev before the crisis ended.",
    "Summarize what the two presidents talked about at Yalta.",
    "How do chatbots remember our conversations across sessions?",
    "What did Nixon say before resigning?",
    "Steelman the argument I mentioned in my essay draft.",
    "Who benefits when platforms store what users discussed in private chats?",
    "Reword this to be less passive-aggressive: As I already said in my last email, please send the files.",
    "Explain why earlier conversations in therapy matter for outcomes.",
])
def test_analytical_prompts_that_merely_contain_the_words_do_not_bypass(bypass, prompt):
    assert not decide(prompt, bypass.detect(prompt)).bypass, [s.name for s in bypass.detect(prompt)]


@pytest.mark.parametrize("prompt", ["hey, got the time?", "Wie spät ist es?", "Quelle heure est-il ?",
                                    "Quel jour sommes-nous ?", "Welcher Tag ist heute?"])
def test_time_and_date_variants_in_three_languages_bypass(bypass, prompt):
    decision = decide(prompt, bypass.detect(prompt))
    assert decision.bypass and decision.category == "time_date"
