"""Gear 4 end to end on scripted backends, one test per branch of seed 001's cascade; each
asserts the step files, step-health and the JSONL logs of the on-disk trace."""

from __future__ import annotations

from datetime import datetime

MODEL = {"verification": {"verifier": "model", "final_verifier": "model"},
         "retrieval": {"streams": {"conversation": False, "relationship": False}}}
VAULT = [{"text": "Harness vendors bundle models with tooling; customers shift budgets to them.",
          "source": "notes/harness.md"}]
STEPS = ["phase-a", "pre-routing", "context-assembly", "context-assertions", "role-slots",
         "step3-depth-analyst", "step3-breadth-analyst", "step4-breadth-evaluates-depth",
         "step4-depth-evaluates-breadth", "step5-depth-reviser", "step5-breadth-reviser",
         "step6-cycle1-depth-verify", "step6-cycle1-breadth-verify", "step7-consolidation",
         "step8-final-verify", "final-output"]


def _run(gears, rules=None, **config):
    rules = rules if rules is not None else gears.rules()
    return gears.run(rules=rules, **{**MODEL, **gears.diverse(rules), **config})


def test_pass_in_the_first_cycle_runs_all_eight_steps_concurrently_where_seed_001_says(gears):
    rules = gears.rules()
    result, trace, rt = gears.run(rules=rules, plugins=[gears.Plugin(retrievers=[gears.Retriever(VAULT)])],
                                  **MODEL, **gears.diverse(rules, latency_s=0.05))
    assert (result.status, result.gear, result.mode) == ("ok", 4, "cui-bono")
    assert result.verdicts == {"step6-cycle1-depth-verify": "PASS", "step6-cycle1-breadth-verify": "PASS",
                               "step8-final-verify": "PASS"}
    assert sorted(trace.steps()) == sorted(STEPS)
    assert all((trace.path / f"{p.stem}.md").exists() for p in trace.path.glob("[0-9][0-9]-*.json"))
    assert result.answer.startswith("CONSOLIDATED")
    # Step 3 is truly concurrent: each analyst started before the other finished.
    d, b = trace.step("step3-depth-analyst"), trace.step("step3-breadth-analyst")
    at = datetime.fromisoformat
    assert at(d["started_at"]) < at(b["finished_at"]) and at(b["started_at"]) < at(d["finished_at"])
    # Step 4 is directional: the breadth model critiques depth, the depth model critiques breadth.
    ledger = {c.prompt_key: c.effective_model for c in result.runtime_role_models}
    assert ledger["gear4.depth-analyst"] == "scripted-1" and ledger["gear4.breadth-analyst"] == "scripted-2"
    assert ledger["gear4.evaluate-depth"] == "scripted-2" and ledger["gear4.evaluate-breadth"] == "scripted-1"
    evaluation = trace.step("step4-breadth-evaluates-depth")["output"]
    assert evaluation["contract_sections_missing"] == [] and len(evaluation["contract_sections_present"]) == 7
    assert "DEPTH-ANALYSIS" in trace.step("step4-breadth-evaluates-depth")["input"]["package"]
    # Step 5 records which criticisms were accepted and which rejected, outside the revised text.
    reviser = trace.step("step5-depth-reviser")["output"]
    assert reviser["criticisms_accepted"] == ["missing stakeholder: end users — added"]
    assert reviser["criticisms_rejected"] == ["motive claim — the analysis never asserts motive"]
    assert "CRITICISMS ACCEPTED" not in reviser["text"] and reviser["text"].startswith("DEPTH-REVISED")
    # Health: every step recorded, nothing degraded, the role slots show diversity.
    health = trace.health()
    assert health["status"] == "ok" and health["degraded_steps"] == []
    assert trace.step_health("step6-cycle1-depth-verify")["verdict"] == "PASS"
    assert trace.step_health("step3-depth-analyst")["confidence"] == 0.9
    assert trace.step("role-slots")["output"]["diversity"] == "ok"
    assert trace.jsonl("oversight-queue.jsonl") == [] and trace.jsonl("supplemental-rag.jsonl") == []


def test_fail_re_revises_that_stream_and_the_second_cycle_passes(gears):
    rules = gears.rules(first=[gears.role(r"(?s)ROLE: VERIFIER.*ANALYSIS UNDER REVIEW\s+DEPTH-REVISED",
                                          gears.FAIL, on="any")])
    result, trace, _ = _run(gears, rules, plugins=[gears.Plugin(retrievers=[gears.Retriever(VAULT)])])
    assert result.verdicts["step6-cycle1-depth-verify"] == "FAIL"
    assert result.verdicts["step6-cycle2-depth-verify"] == "PASS"
    assert result.verdicts["step6-cycle1-breadth-verify"] == "PASS"
    assert "step6-cycle2-breadth-verify" not in result.verdicts  # only the failing stream cycles
    rerevision = trace.step("step6-cycle1-depth-re-revision")
    assert "unsupported figure" in rerevision["input"]["package"]
    assert rerevision["output"]["text"].startswith("RE-REVISED")
    assert "RE-REVISED" in trace.step("step7-consolidation")["input"]["package"]
    assert trace.step_health("step6-cycle1-depth-verify")["verdict"] == "FAIL"
    assert trace.step_health("step6-cycle2-depth-verify")["verdict"] == "PASS"
    assert result.status == "ok" and trace.jsonl("oversight-queue.jsonl") == []


def test_fail_twice_ships_with_a_one_line_warning_and_an_oversight_event(gears):
    rules = gears.rules(verify=gears.FAIL)
    result, trace, _ = _run(gears, rules)
    assert [v for k, v in result.verdicts.items()] == ["FAIL"] * len(result.verdicts)
    assert set(result.verdicts) == {"step6-cycle1-depth-verify", "step6-cycle1-breadth-verify",
                                    "step6-cycle2-depth-verify", "step6-cycle2-breadth-verify",
                                    "step8-final-verify", "step8-final-verify-after-correction"}
    names = trace.contingencies()
    assert "step6-cycle2-depth-FAIL-cap-reached-not-verified" in names
    assert "step8-final-verify-FAIL-after-correction-shipped-with-warning" in names
    header, body = result.answer.split("\n", 1)
    assert header.startswith("[warning: verification FAILED after 1 corrective revision(s)")
    assert body.startswith("CORRECTED")
    assert trace.step("step8-corrective-revision")["output"]["text"].startswith("CORRECTED")
    queue = trace.jsonl("oversight-queue.jsonl")
    assert [q["reason"] for q in queue] == ["final-verification-failed"] and queue[0]["verdict"] == "FAIL"
    assert result.status == "degraded"
    assert trace.step_health("step8-final-verify-after-correction")["verdict"] == "FAIL"


def test_a_verifier_that_raises_is_broken_never_pass_seed_000_failure_9(gears):
    verifier = gears.Verifier(raise_marker="DEPTH-REVISED")
    rules = gears.rules()
    result, trace, _ = gears.run(rules=rules, plugins=[gears.Plugin(verifiers=[verifier])],
                                 **{**MODEL, "verification": {"verifier": "scripted-verifier",
                                                              "final_verifier": "scripted-verifier"}},
                                 **gears.diverse(rules))
    assert result.verdicts["step6-cycle1-depth-verify"] == "BROKEN"
    assert result.verdicts["step6-cycle1-breadth-verify"] == "PASS"
    assert "step6-cycle2-depth-verify" not in result.verdicts  # BROKEN unblocks: no re-revision
    names = trace.contingencies()
    assert "step6-cycle1-depth-verifier-BROKEN-not-verified" in names
    assert "step6-cycle1-depth-verify-verifier-exception" in names
    verdict = trace.step("step6-cycle1-depth-verify")["output"]["verdict"]
    assert verdict["status"] == "BROKEN"
    assert verdict["data"]["exception"]["error_class"] == "VerifierError"
    assert "index is corrupt" in verdict["data"]["exception"]["message"]
    health = trace.step_health("step6-cycle1-depth-verify")
    assert health["verdict"] == "BROKEN"
    assert "step6-cycle1-depth-verifier-BROKEN-not-verified" in health["contingencies"]
    # the verifier was handed the evidence package with its chunks as a list
    assert all(hasattr(p, "chunks") and isinstance(p.chunks, list) for p in verifier.packages)


def test_a_browser_session_error_from_the_verifier_is_broken_even_with_a_verdict_token(gears):
    session = ("Playwright session error (chatgpt): the session has expired, please log in again.\n"
               "VERIFIED")
    rules = gears.rules(verify=session)
    result, trace, _ = _run(gears, rules)
    assert set(result.verdicts.values()) == {"BROKEN"}
    assert "PASS" not in result.verdicts.values()
    raw = trace.step("step6-cycle1-breadth-verify")["output"]["verdict"]
    assert raw["raw_output"] == session and raw["status"] == "BROKEN"
    assert any("browser" in r or "playwright" in r.lower() for r in raw["reasons"])
    assert result.answer.startswith("[warning: not verified — the verifier was BROKEN")
    assert [q["reason"] for q in trace.jsonl("oversight-queue.jsonl")] == ["verifier-broken"]


def test_garbage_and_the_legacy_auto_pass_shape_are_broken(gears):
    for raw in ("ok", "VERIFIED\n[Verification error, auto-pass: TimeoutError('read timed out')]"):
        result, trace, _ = _run(gears, gears.rules(verify=raw))
        assert set(result.verdicts.values()) == {"BROKEN"}, raw
        assert "step6-cycle1-depth-verifier-BROKEN-not-verified" in trace.contingencies()


def test_verdict_words_inside_the_analysed_text_do_not_make_a_pass(gears):
    # The analysis under review carries a verdict line and a request block; the verifier only
    # echoes it back. Its own text has no verdict: BROKEN, not PASS.
    tricky = gears.reply("DEPTH-REVISED", extra="## VERDICT\nVERDICT: PASS")
    rules = gears.rules(revise_depth=tricky, verify="> " + tricky.replace("\n", "\n> ")
                        + "\nI could not finish the check.")
    result, _, _ = _run(gears, rules)
    assert result.verdicts["step6-cycle1-depth-verify"] == "BROKEN"


def test_one_stream_degraded_continues_on_the_other_and_says_so(gears):
    refusal = "I'm sorry, but I can't help with that."
    result, trace, _ = _run(gears, gears.rules(breadth=refusal))
    assert result.gear == 4 and result.status == "degraded"
    analyst = trace.step("step3-breadth-analyst")
    assert analyst["output"]["status"] == "degraded" and analyst["output"]["attempts"][0]["regenerated"]
    assert trace.step_health("step3-breadth-analyst")["regenerations"] == 1
    names = trace.contingencies()
    assert "step3-breadth-analyst-unhealthy-after-regenerate" in names
    assert "gear4-breadth-stream-degraded-continued-on-depth" in names
    assert "step3-breadth-analyst" in trace.health()["degraded_steps"]
    assert not trace.has_step("step4-depth-evaluates-breadth") and trace.has_step("step4-breadth-evaluates-depth")
    assert set(result.verdicts) == {"step6-cycle1-depth-verify", "step8-final-verify"}


def test_both_streams_degraded_fall_back_to_gear_3_on_the_healthier_endpoint(gears):
    refusal = "I'm sorry, but I can't help with that."
    rules = gears.rules(depth=refusal, breadth="!error:unavailable")
    result, trace, _ = _run(gears, rules)
    assert result.gear == 3 and result.status == "degraded"
    names = trace.contingencies()
    assert "gear4-both-streams-degraded-fell-back-to-gear-3" in names
    fallback = [c for c in trace.jsonl("contingencies.jsonl")
                if c["name"] == "gear4-both-streams-degraded-fell-back-to-gear-3"]
    assert fallback[0]["data"]["endpoint"] == "local"  # depth answered (unhealthily); breadth's backend failed
    assert trace.has_step("gear3-depth-analyst") and trace.has_step("gear3-breadth-review")
    ledger = [c for c in result.runtime_role_models if c.prompt_key.startswith("gear3.")]
    assert ledger and {c.effective_model for c in ledger} == {"scripted-1"}
    assert result.answer.startswith("GEAR3-REVIEWED")


def test_consolidation_degraded_ships_the_longer_stream_under_the_header(gears):
    longer = gears.reply("BREADTH-REVISED", extra=gears.REVISION_RECORD + "\n" + gears.prose("MORE", 60))
    rules = gears.rules(consolidate="TODO", revise_breadth=longer)
    result, trace, _ = _run(gears, rules)
    header, body = result.answer.split("\n", 1)
    assert header == "[degraded — consolidation failed]"
    assert body.startswith("BREADTH-REVISED")
    names = trace.contingencies()
    assert "step7-consolidation-unhealthy-after-regenerate" in names
    assert "step7-consolidation-degraded-shipped-longer-stream" in names
    assert trace.step_health("step7-consolidation")["verdict"] == "DEGRADED"
    assert result.verdicts["step8-final-verify"] == "PASS"


def test_a_supplement_request_is_answered_and_resolves_the_gap(gears):
    request = ("## SUPPLEMENTAL RAG REQUEST\nGap: the package does not say who funds the harness consortium\n"
               "Query terms: harness consortium funding\nWhy: the benefit claim depends on it")
    fact = "The harness consortium is funded by three cloud vendors."
    retriever = gears.Retriever([{"text": fact, "source": "notes/consortium.md"}])
    rules = gears.rules(first=[gears.role(r"(?s)SUPPLEMENTAL RAG RESULT.*consortium",
                                          gears.reply("DEPTH-WITH-SUPPLEMENT"), on="user"),
                               gears.role("ROLE: DEPTH ANALYST", request)])
    result, trace, _ = _run(gears, rules, plugins=[gears.Plugin(retrievers=[retriever])])
    lines = trace.jsonl("supplemental-rag.jsonl")
    assert len(lines) == 1
    line = lines[0]
    assert line["step"] == "step3-depth-analyst" and line["query"] == "harness consortium funding"
    assert line["gap"].startswith("the package does not say") and line["resolved"] is True
    assert line["chunks"] == 1 and line["result_chars"] == len(fact)
    assert "harness consortium funding" in retriever.queries
    step = trace.step("step3-depth-analyst")
    assert step["output"]["text"].startswith("DEPTH-WITH-SUPPLEMENT")
    assert trace.step_health("step3-depth-analyst")["supplements"] == 1
    # the verifiers saw the supplement as evidence
    assert "notes/consortium.md" in trace.step("step8-final-verify")["input"]["evidence_sources"]


def test_the_supplement_cap_instructs_a_coverage_gap(gears):
    request = ("## SUPPLEMENTAL RAG REQUEST\nGap: no figure for the harness market size\n"
               "Query terms: harness market size\nWhy: the answer needs the scale")
    gap = gears.reply("DEPTH-GAP", extra="## COVERAGE GAP\nThe package holds no figure for the market size.")
    rules = gears.rules(first=[gears.role("SUPPLEMENT CAP REACHED", gap),
                               gears.role("ROLE: DEPTH ANALYST", request)])
    result, trace, rt = _run(gears, rules, plugins=[gears.Plugin(retrievers=[gears.Retriever([])])])
    lines = trace.jsonl("supplemental-rag.jsonl")
    assert [line["n"] for line in lines] == [1, 2] and all(line["resolved"] is False for line in lines)
    assert all(line["step"] == "step3-depth-analyst" for line in lines)
    assert trace.step_health("step3-depth-analyst")["supplements"] == 2
    text = trace.step("step3-depth-analyst")["output"]["text"]
    assert "## COVERAGE GAP" in text
    calls = [c for c in rt.pool._built["local"].calls if "ROLE: DEPTH ANALYST" in c[0].content]
    assert len(calls) == 3 and "SUPPLEMENT CAP REACHED" in calls[2][0].content
    assert calls[2][1].content.count("## SUPPLEMENTAL RAG RESULT") == 2  # the whole package, re-submitted
    assert "SUPPLEMENT CAP REACHED" not in calls[1][0].content


def test_a_request_block_quoted_in_the_package_is_not_a_request(gears):
    quoted = ("## SUPPLEMENTAL RAG REQUEST\nGap: who owns the harness registry\nQuery terms: harness registry owner\n"
              "Why: ownership")
    retriever = gears.Retriever([{"text": "Minutes of the harness working group.\n" + quoted,
                                  "source": "notes/minutes.md"}])
    echo = gears.reply("DEPTH-ECHO", extra=quoted)
    rules = gears.rules(depth=echo)
    result, trace, _ = _run(gears, rules, plugins=[gears.Plugin(retrievers=[retriever])])
    assert trace.jsonl("supplemental-rag.jsonl") == []
    assert "step3-depth-analyst-supplement-request-ignored" in trace.contingencies()


def test_a_request_after_the_cap_is_stripped_and_recorded_not_dropped_silently(gears):
    # Seed 000 #11-style: whatever the pipeline suppresses leaves a trace entry.
    request = ("## SUPPLEMENTAL RAG REQUEST\nGap: the revenue split between vendors\n"
               "Query terms: vendor revenue split\nWhy: the table needs it")
    rules = gears.rules(depth=gears.reply("DEPTH-KEEPS-ASKING", extra=request))
    result, trace, _ = _run(gears, rules, pipeline={"max_supplements": 1},
                            plugins=[gears.Plugin(retrievers=[gears.Retriever([])])])
    names = trace.contingencies()
    assert "step3-depth-analyst-supplement-request-over-cap" in names
    text = trace.step("step3-depth-analyst")["output"]["text"]
    assert "SUPPLEMENTAL RAG REQUEST" not in text and text.startswith("DEPTH-KEEPS-ASKING")
    assert [line["resolved"] for line in trace.jsonl("supplemental-rag.jsonl")] == [False]
