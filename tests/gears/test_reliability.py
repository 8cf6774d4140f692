"""The per-step reliability layer (seed 003, seed 001's contingency layer), end to end on
scripted backends and asserted on the trace: confidence routing at its boundaries, assertions,
the automatic judge with golden anchors, retry with negative context, the retry budget and the
halt with the full diagnostic, deterministic steps never retried or judged, regenerate-once on
unhealthy output, and the kernel's prompt-echo signal (negative context must never come back in
an answer unmarked)."""

from __future__ import annotations

import pytest

from ora_core import hookimpl
from ora_core.engine.prompts import DIRECTIVE_MARKER
from ora_core.engine.reliability import GOLDEN_ANCHORS, band_of, parse_confidence
from ora_core.kernel.models import Signal

STEP = "gear2-analyst"
VAULT = [{"text": "Harness vendors bundle models with tooling; customers shift budgets to them.",
          "source": "notes/harness.md"}]
CONCEPT_ONLY = {"retrieval": {"streams": {"conversation": False, "relationship": False}}}
RETRY = "RETRY CONTEXT"
#: The model judge runs on the analyst's own backend here; these tests pin the judge, not the lineage
#: rule (tests/gears/test_lineage.py covers the judge's edge), so the edge is only labelled.
JUDGE_ALLOWED = {"same_lineage": "allow"}


def _gear2(gears, analyst=None, *, first=(), replies=None, verifier=None, plugins=(), same_lineage=None, **config):
    """A Gear 2 turn (mode ``standard``) with a registered deterministic verifier; ``replies``
    puts the analyst on its own backend answering those replies in order."""
    rules = gears.rules(gear2=analyst if analyst is not None else gears.reply("ANALYSIS"), first=list(first))
    verifier = verifier or gears.Verifier()
    config.setdefault("verification", {"verifier": verifier.name, "final_verifier": verifier.name})
    if same_lineage is not None:
        config["verification"]["same_lineage"] = same_lineage
    if replies is not None:
        config["backends"] = {"local": {"options": {"rules": rules}},
                              "ana": {"type": "scripted", "model": "scripted-ana", "family": "ana",
                                      "options": {"replies": list(replies), "rules": rules}}}
        config["roles"] = {"analyst": "ana"}
    plugins = [gears.Plugin(verifiers=[verifier], retrievers=[gears.Retriever(VAULT)]), *plugins]
    return gears.run(rules=rules, mode="standard", plugins=plugins, **CONCEPT_ONLY, **config)


def _events(trace, step, kind):
    return [e for e in trace.step(step)["events"] if e["kind"] == kind]


def _analyst_calls(rt, backend="local"):
    return [c for c in rt.pool._built[backend].calls if "ROLE: ANALYST" in c[0].content]


# --- confidence routing ------------------------------------------------------------------------------

@pytest.mark.parametrize(("confidence", "band", "status", "contingency"), [
    (0.85, "high", "ok", None),
    (0.70, "review", "flagged", "gear2-analyst-confidence-review"),
    (0.65, "review", "flagged", "gear2-analyst-confidence-review"),
    (None, "unreported", "flagged", "gear2-analyst-confidence-missing"),
])
def test_confidence_at_or_above_065_proceeds_and_below_085_is_flagged(gears, confidence, band, status, contingency):
    result, trace, _ = _gear2(gears, gears.reply("ANALYSIS", confidence=confidence))
    output = trace.step(STEP)["output"]
    assert (output["band"], output["status"], len(output["attempts"])) == (band, status, 1)
    assert trace.step_health(STEP)["confidence"] == confidence and trace.step_health(STEP)["attempts"] == 1
    flagged = [c for c in trace.contingencies() if c.startswith("gear2-analyst-confidence")]
    assert flagged == ([contingency] if contingency else [])
    assert _events(trace, STEP, "retry") == []
    assert result.answer.startswith("ANALYSIS") and "CONFIDENCE" not in result.answer


def test_confidence_below_065_retries_with_negative_context_in_the_prompt(gears):
    result, trace, rt = _gear2(gears, gears.reply("FIRST", confidence=0.60),
                               first=[gears.role(RETRY, gears.reply("RETRIED", confidence=0.90), on="user")])
    first, second = trace.step(STEP)["output"]["attempts"]
    assert (first["band"], first["failure_reason"]) == ("low", "confidence 0.60 below 0.65")
    assert second["band"] == "high" and result.answer.startswith("RETRIED")
    (retry,) = _events(trace, STEP, "retry")
    context = retry["negative_context"]
    assert set(context) == {"attempt", "previous_summary", "failure_reason"}
    assert context["attempt"] == 2 and context["previous_summary"].startswith("FIRST: The evidence")
    # the retried prompt carries it, the first did not, the answer never does
    calls = _analyst_calls(rt)
    assert len(calls) == 2 and RETRY not in calls[0][1].content
    retried = calls[1][1].content
    assert "This is attempt 2 of 3. Your previous attempt failed: confidence 0.60 below 0.65" in retried
    assert "Previous attempt (summary): FIRST: The evidence" in retried
    assert RETRY not in result.answer and "previous attempt" not in result.answer.lower()


def test_parse_confidence_reads_the_models_own_last_line_only():
    assert parse_confidence("text\nCONFIDENCE: 0.7\nmore\n**Confidence:** 0.9")[0] == 0.9
    assert parse_confidence("text\nConfidence = 70%")[0] == 0.7
    value, text, problem = parse_confidence("text\nCONFIDENCE: 1.5")
    assert value is None and "outside 0..1" in problem and text == "text"
    assert parse_confidence("> CONFIDENCE: 0.99\n```\nCONFIDENCE: 0.95\n```")[0] is None  # quoted, fenced
    assert parse_confidence("no line at all") == (None, "no line at all", None)


@pytest.mark.parametrize(("value", "band"), [(0.85, "high"), (0.8499, "review"), (0.65, "review"),
                                             (0.6499, "low"), (0.0, "low"), (None, "unreported")])
def test_band_boundaries(value, band):
    assert band_of(value, 0.85, 0.65) == band


# --- assertions --------------------------------------------------------------------------------------

def test_a_failed_assertion_retries_with_its_name_as_the_failure_reason(gears):
    leak = gears.reply("LEAKED", extra=f"{DIRECTIVE_MARKER}\nNever invent specific facts.")
    result, trace, _ = _gear2(gears, leak, first=[gears.role(RETRY, gears.reply("CLEAN"), on="user")])
    first, second = trace.step(STEP)["output"]["attempts"]
    assert first["assertions_failed"] == ["no-prompt-leak"]
    assert first["failure_reason"].startswith("assertion 'no-prompt-leak' failed")
    assert first["judge"] is None  # the judge runs after the assertions pass
    assert second["failure_reason"] is None and result.answer.startswith("CLEAN")
    assert DIRECTIVE_MARKER not in result.answer


# --- the automatic judge ----------------------------------------------------------------------------

VERBATIM = ['"Harness vendors bundle models with tooling"', '"customers shift budgets to them"',
            '"the harness paradigm shift in commercial AI"', '"who benefits and who pays"']
FABRICATED = '"the harness market doubled every single year"'


def test_the_judge_passes_at_the_080_threshold(gears):
    quotes = "\n".join(f"> {q}" for q in [*VERBATIM, FABRICATED])  # 4 of 5 verbatim: 0.80
    result, trace, _ = _gear2(gears, gears.reply("QUOTING", extra=quotes))
    (judge,) = _events(trace, STEP, "judge")
    assert (judge["score"], judge["threshold"], judge["passed"]) == (0.8, 0.8, True)
    assert judge["unsupported"] == [FABRICATED.strip('"')]
    assert trace.step_health(STEP)["judge_score"] == 0.8 and trace.step_health(STEP)["attempts"] == 1


def test_the_judge_below_080_retries_then_recovers(gears):
    quotes = "\n".join(f"> {q}" for q in [*VERBATIM[:3], FABRICATED])  # 3 of 4: 0.75
    result, trace, _ = _gear2(gears, gears.reply("QUOTING", extra=quotes),
                              first=[gears.role(RETRY, gears.reply("NO-QUOTES"), on="user")])
    first, second = trace.step(STEP)["output"]["attempts"]
    assert first["judge"]["score"] == 0.75 and first["judge"]["passed"] is False
    assert first["failure_reason"].startswith("judge score 0.75 below 0.80")
    assert second["judge"]["score"] is None and second["judge"]["passed"] is True  # nothing to score
    assert "gear2-analyst-recovered-on-attempt-2" in trace.contingencies()


def test_the_model_judge_gets_the_golden_anchors_and_its_score_decides(gears):
    quotes = "\n".join(f"> {q}" for q in VERBATIM)
    judge = gears.role("BOUNDARY JUDGE", "SCORE: 0.75\n- the second quotation is paraphrased")
    result, trace, rt = _gear2(gears, gears.reply("QUOTING", extra=quotes), first=[judge],
                               pipeline={"judge": "model", "retries": 0}, **JUDGE_ALLOWED)
    assert result.status == "halted"  # 0.75 < 0.80, and no retry budget
    (event,) = _events(trace, STEP, "judge")
    assert (event["judge"], event["score"], event["passed"]) == ("model", 0.75, False)
    assert event["anchors"] == [a["id"] for a in GOLDEN_ANCHORS]
    prompts = [c for c in rt.pool._built["local"].calls if "BOUNDARY JUDGE" in c[0].content]
    assert len(prompts) == 1
    for anchor in GOLDEN_ANCHORS:
        assert anchor["output"] in prompts[0][0].content and anchor["evidence"] in prompts[0][0].content
    assert "Harness vendors bundle models with tooling" in prompts[0][1].content  # the blocks and the package
    # the threshold is the configured one
    result, trace, _ = _gear2(gears, gears.reply("QUOTING", extra=quotes), first=[judge],
                              pipeline={"judge": "model", "retries": 0, "judge_threshold": 0.7}, **JUDGE_ALLOWED)
    assert result.status == "ok" and _events(trace, STEP, "judge")[0]["passed"] is True


def test_the_judge_does_not_count_the_retry_context_as_evidence(gears):
    # A fabricated quotation, repeated on the retry, is in the retry block's previous summary:
    # the judge must still reject it (it used to pass as "verbatim in what the model was sent").
    result, trace, rt = _gear2(gears, gears.reply("FABRICATING", extra=f"> {FABRICATED}"))
    assert result.status == "halted"
    assert [a["judge_score"] for a in result.diagnostic["attempts"]] == [0.0, 0.0, 0.0]
    retried = _analyst_calls(rt)[1][1].content
    assert FABRICATED.strip('"') in retried.split(RETRY, 1)[1]  # it was in the negative context


def test_a_compact_backend_is_told_why_its_attempt_failed_but_not_shown_the_failed_text_again(gears):
    # A small model copies what its prompt shows it: the README prompt halted on the bundled model
    # because each retry repeated the unsupported quotation its negative context had shown it.
    result, trace, rt = _gear2(gears, gears.reply("FABRICATING", extra=f"> {FABRICATED}"),
                               backends={"local": {"prompt_profile": "compact"}})
    assert result.status == "halted"  # the scripted model repeats itself regardless
    retried = _analyst_calls(rt)[1][1].content.split(RETRY, 1)[1]
    assert "Your previous attempt failed: judge score 0.00 below 0.80" in retried
    assert FABRICATED.strip('"') not in retried and "Previous attempt (summary)" not in retried
    assert "(the failed text is not repeated here)" in retried
    # the trace keeps all of it: the negative context as it was, the summary included
    negative = result.diagnostic["attempts"][1]["negative_context"]
    assert FABRICATED.strip('"') in negative["previous_summary"]


def test_without_quoted_keeps_the_kind_of_failure_and_drops_the_listed_text():
    from ora_core.engine.reliability import without_quoted

    assert without_quoted("judge score 0.00 below 0.80: quotation(s) not in the package: 'The user's x'; \"y\"") == (
        "judge score 0.00 below 0.80: quotation(s) not in the package: (the failed text is not repeated here)")
    assert without_quoted("confidence 0.50 below 0.65") == "confidence 0.50 below 0.65"


# --- the retry budget -------------------------------------------------------------------------------

@pytest.mark.parametrize(("retries", "attempts"), [(None, 3), (1, 2), (0, 1)])
def test_retries_up_to_the_budget_then_halt_with_the_full_diagnostic(gears, retries, attempts):
    config = {"pipeline": {"retries": retries}} if retries is not None else {}
    result, trace, rt = _gear2(gears, gears.reply("ALWAYS-LOW", confidence=0.5), **config)
    assert result.status == "halted" and len(_analyst_calls(rt)) == attempts
    diagnostic = result.diagnostic
    assert diagnostic["step"] == STEP and diagnostic["retries"] == attempts - 1
    assert [a["failure_reason"] for a in diagnostic["attempts"]] == ["confidence 0.50 below 0.65"] * attempts
    assert all(a["output_summary"].startswith("ALWAYS-LOW") for a in diagnostic["attempts"])
    assert (trace.step_health(STEP)["verdict"], trace.step_health(STEP)["attempts"]) == ("FAIL", attempts)
    assert "gear2-analyst-halted-retries-exhausted" in trace.contingencies()
    assert trace.step(STEP)["output"]["diagnostic"] == diagnostic
    assert not trace.has_step("final-output")


# --- deterministic steps ----------------------------------------------------------------------------

def test_deterministic_steps_are_never_retried_or_judged(gears):
    # The analyst needs a retry and the model judge is on: only the analyst is retried and judged.
    verifier = gears.Verifier()
    quotes = "> " + VERBATIM[0]
    result, trace, rt = _gear2(gears, gears.reply("LOW", confidence=0.6, extra=quotes), verifier=verifier,
                               first=[gears.role("BOUNDARY JUDGE", "SCORE: 1.00"),
                                      gears.role(RETRY, gears.reply("RETRIED", extra=quotes), on="user")],
                               pipeline={"judge": "model"}, **JUDGE_ALLOWED)
    assert result.status == "ok" and trace.step_health(STEP)["attempts"] == 2
    for name in ("context-assembly", "context-assertions", "gear2-cycle1-verify"):
        health = trace.step_health(name)
        assert health["kind"] == ("" if name == "context-assembly" else "deterministic"), name
        assert (health["attempts"], health["regenerations"], health["confidence"], health["judge_score"]) == \
            (1, 0, None, None), name
        assert not [e for e in trace.step(name)["events"] if e["kind"] in ("retry", "judge")], name
    assert len(verifier.packages) == 1  # the grounding-style verifier ran once
    judged = [c for c in rt.pool._built["local"].calls if "BOUNDARY JUDGE" in c[0].content]
    assert len(judged) == 1  # the analyst's accepted attempt only (the low one failed routing first)
    assert len(_events(trace, STEP, "judge")) == 1


# --- regenerate once on unhealthy output ------------------------------------------------------------

UNHEALTHY = {
    "refusal": "I cannot help with that request. I won't do it.\nCONFIDENCE: 0.90",
    "clarification-loop": "Could you clarify what you mean by harness before I proceed?\nCONFIDENCE: 0.90",
    "brief-stub": "TBD.\nCONFIDENCE: 0.90",
    "leaked-tool-call": ('<tool_call>{"name": "search", "arguments": {"q": "harness market"}}</tool_call>\n'
                         "CONFIDENCE: 0.90"),
}


@pytest.mark.parametrize("detector", sorted(UNHEALTHY))
def test_unhealthy_output_is_regenerated_once_and_recovers(gears, detector):
    result, trace, rt = _gear2(gears, replies=[UNHEALTHY[detector], gears.reply("HEALTHY")])
    (attempt,) = trace.step(STEP)["output"]["attempts"]
    assert attempt["regenerated"] is True and attempt["calls"] == 2
    (retry,) = _events(trace, STEP, "retry")
    assert retry["regenerate"] is True and retry["reason"] == "unhealthy"
    assert any(detector in s for s in retry["signals"]), retry["signals"]
    assert trace.step_health(STEP)["regenerations"] == 1 and trace.step_health(STEP)["degraded"] is False
    assert result.answer.startswith("HEALTHY") and len(_analyst_calls(rt, "ana")) == 2
    assert trace.step(STEP)["output"]["status"] == "ok"


def test_unhealthy_twice_is_a_degraded_step_shipped_under_a_header_not_a_third_call(gears):
    refusal = UNHEALTHY["refusal"]
    result, trace, rt = _gear2(gears, replies=[refusal, refusal, gears.reply("NEVER-ASKED")])
    assert len(_analyst_calls(rt, "ana")) == 2
    output = trace.step(STEP)["output"]
    assert output["status"] == "degraded" and output["degraded_reason"].startswith("unhealthy:")
    assert "gear2-analyst-unhealthy-after-regenerate" in trace.contingencies()
    assert trace.step_health(STEP)["degraded"] is True and result.status == "degraded"
    assert result.answer.startswith("[degraded — the analyst's output is unhealthy")


# --- prompt echo: negative context never comes back in an answer unmarked ------------------------------

ECHO = ("## RETRY CONTEXT (NEGATIVE FEEDBACK)\nThis is attempt 2 of 3. Your previous attempt failed: "
        "confidence 0.60 below 0.65\n")


def test_an_answer_parroting_the_retry_context_is_regenerated(gears):
    echo = ECHO + gears.reply("ECHOING")
    result, trace, rt = _gear2(gears, replies=[gears.reply("LOW", confidence=0.6), echo, gears.reply("CLEAN")])
    first, second = trace.step(STEP)["output"]["attempts"]
    assert first["failure_reason"] == "confidence 0.60 below 0.65"
    assert second["regenerated"] is True and second["unhealthy"] == ["prompt-echo"]
    assert result.answer.startswith("CLEAN") and "previous attempt failed" not in result.answer.lower()
    detections = [s for e in _events(trace, STEP, "detection") for s in e["signals"] if s["name"] == "prompt-echo"]
    assert detections and detections[0]["detector"] == "prompt-echo" and detections[0]["kind"] == "unhealthy"


def test_an_answer_that_keeps_parroting_ships_marked_degraded_never_clean(gears):
    echo = ECHO + gears.reply("ECHOING")
    result, trace, _ = _gear2(gears, replies=[gears.reply("LOW", confidence=0.6), echo, echo])
    assert trace.step(STEP)["output"]["degraded_reason"] == "unhealthy:prompt-echo"
    assert result.status == "degraded"
    assert result.answer.startswith("[degraded — the analyst's output is unhealthy (unhealthy:prompt-echo)]")
    assert "gear2-analyst-unhealthy-after-regenerate" in trace.contingencies()


# --- every model-output boundary runs the third-party detectors ---------------------------------------

class EveryOutput:
    """A third-party ``model_output`` detector: one weak signal per text it is shown."""

    name = "third-party-probe"
    kind = "note"
    layer = "model_output"
    assumes = frozenset({"model_generated"})

    def detect(self, text, ctx):
        return [Signal(detector=self.name, kind=self.kind, name="seen", strength="weak", matched=text[:20])]


class ProbePlugin:
    @hookimpl
    def ora_register_detectors(self, register):
        register(EveryOutput())


def test_a_third_party_model_output_detector_fires_at_every_model_step_of_gear_4(gears):
    rules = gears.rules()
    result, trace, _ = gears.run(rules=rules, plugins=[ProbePlugin()],
                                 verification={"verifier": "model", "final_verifier": "model"},
                                 **gears.diverse(rules))
    assert result.gear == 4
    model_steps = [s for s in trace.steps() if trace.step_health(s)["kind"] == "probabilistic"]
    assert len(model_steps) == 7  # 2 analysts, 2 evaluators, 2 revisers, the consolidator
    for name in model_steps:
        seen = [s for e in _events(trace, name, "detection") for s in e["signals"]
                if s["detector"] == "third-party-probe"]
        assert seen, f"{name}: the third-party detector did not run"
