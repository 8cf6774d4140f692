"""Whole fact-check turns (gear 5) on scripted backends: every debate role in the trace and the role
ledger, the D5 controls deciding in their own traced steps, the revert rule, the spread scaling,
named failures, countable refusals and degradations, and a planted bias visible in the outputs."""

from __future__ import annotations

from ora_core.kernel.modes import load_modes
from ora_core.testing import make_config

DEBATE_ROLES = ["advocate", "self_consistency", "self_consistency", "challenger", "reconciler", "validation"]


def debate_steps(trace, n: int = 1) -> list[str]:
    return [s for s in trace.steps() if s.startswith(f"factcheck-claim{n}-")]


def test_the_bundled_fact_check_mode_is_gear_5_with_every_section():
    import ora_modes
    from ora_core.testing import make_host

    mode = load_modes(make_host(ora_modes), make_config().config).get("fact-check")
    assert mode.gear == 5 and not mode.empty_sections and len(mode.examples) >= 10


def test_every_debate_role_call_is_a_traced_step_and_in_the_role_ledger(fc):
    # every role on one backend: the reconciler judges its own model's replies, which this test lets
    # through (labelled) to pin the flow; test_factcheck_lineage.py pins that edge
    result, trace, *_ = fc.run(verification={"verifier": "stand-in-grounding", "same_lineage": "allow"})
    assert (result.status, result.mode, result.gear) == ("ok", "fact-check", 5)
    assert [c.role for c in result.runtime_role_models] == ["phase_a", *DEBATE_ROLES]
    assert [c.prompt_key for c in result.runtime_role_models][1:] == [
        "factcheck.advocate", "factcheck.self-consistency.run1", "factcheck.self-consistency.run2",
        "factcheck.challenger", "factcheck.reconciler", "factcheck.validation"]
    assert all(c.effective_model == "scripted-1" for c in result.runtime_role_models)
    assert debate_steps(trace) == [f"factcheck-claim1-{s}" for s in (
        "research", "sufficiency", "directions", "balance", "partition", "contrarian", "advocate",
        "self-consistency-1", "self-consistency-2", "challenger", "reconciler", "validation",
        "validation-grounding", "verdict")]
    for step in ("advocate", "self-consistency-1", "challenger", "reconciler", "validation"):
        record = trace.step(f"factcheck-claim1-{step}")
        assert record["input"]["kind"] == "probabilistic" and record["input"]["role"] in DEBATE_ROLES
    assert [c["role"] for c in trace.turn()["runtimeRoleModels"]] == ["phase_a", *DEBATE_ROLES]
    on_disk = trace.step("factcheck-article")["output"]["fact_check"]
    assert on_disk["claim_verdicts"][0]["truth_pct"] == 70.0 and on_disk["llm_calls"] == 7
    [verdict] = result.claim_verdicts
    assert (verdict.truth_pct, verdict.confidence, verdict.verdict, verdict.weight) == (70.0, 80.0, "LEANING-TRUE", 0.8)
    assert verdict.cited_evidence_ids == ["E1", "E2"] and verdict.llm_calls == 6
    assert result.fact_check.article_truth_pct == 70.0 and result.fact_check.llm_calls == 7
    assert result.verdicts["factcheck-claim1-validation-grounding"] == "PASS"
    assert "Verdict: LEANING-TRUE — truth 70 %" in result.answer
    from ora_core.api import TurnResult

    again = TurnResult.model_validate(result.model_dump(mode="json"))  # what `ora run --json` prints reads back
    assert again.fact_check == result.fact_check


def test_three_institutional_and_three_general_items_split_between_advocate_and_challenger(fc):
    result, trace, *_ = fc.run()
    assert trace.step("factcheck-claim1-advocate")["input"]["evidence_ids"] == ["E1", "E2", "E3"]
    assert trace.step("factcheck-claim1-challenger")["input"]["evidence_ids"] == ["E4", "E5", "E6"]
    assert trace.step("factcheck-claim1-reconciler")["input"]["evidence_ids"] == ["E1", "E2", "E3", "E4", "E5", "E6"]
    assert trace.step("factcheck-claim1-partition")["output"]["mode"] == "partitioned"
    advocate_prompt = trace.step("factcheck-claim1-advocate")["input"]["evidence"]
    assert "E1 | government_report (institutional)" in advocate_prompt and "E4 |" not in advocate_prompt
    assert result.claim_verdicts[0].partition.challenger == ["E4", "E5", "E6"]


def test_one_institutional_item_sends_the_full_pool_to_every_role(fc):
    docs = fc.pool((1, "peer_reviewed_study", "supports"), (4, "news_secondary", "contradicts"))
    _, trace, *_ = fc.run(docs=docs)
    every = ["E1", "E2", "E3", "E4", "E5"]
    for step in ("advocate", "self-consistency-1", "challenger", "reconciler", "validation"):
        assert trace.step(f"factcheck-claim1-{step}")["input"]["evidence_ids"] == every, step
    assert trace.step("factcheck-claim1-partition")["output"]["mode"] == "full-pool"


def test_two_items_or_three_of_one_source_type_are_unverified_50_0_with_no_debate_call(fc):
    for docs in (fc.pool((1, "government_report", "supports"), (1, "news_primary", "supports")),
                 fc.pool((3, "news_primary", "supports"))):
        result, trace, *_ = fc.run(docs=docs)
        [verdict] = result.claim_verdicts
        assert (verdict.status, verdict.verdict, verdict.truth_pct, verdict.confidence) == (
            "insufficient_evidence", "UNVERIFIED", 50.0, 0.0)
        assert verdict.insufficient_evidence and verdict.weight == 0 and not verdict.counts_in_aggregates
        assert [c.role for c in result.runtime_role_models] == ["phase_a"]
        assert verdict.llm_calls == 0
        assert debate_steps(trace) == ["factcheck-claim1-research", "factcheck-claim1-sufficiency"]
        assert trace.step("factcheck-claim1-sufficiency")["output"]["decision"] == "insufficient_evidence"
        assert result.fact_check.article_status == "non_informative"
        assert result.fact_check.article_verdict == "UNVERIFIED"


def test_contrarian_retrieval_runs_only_after_the_imbalance_warning(fc):
    tilted = fc.pool((5, "government_report", "supports"), (1, "news_primary", "contradicts"),
                     (4, "news_secondary", "neutral"))
    contrarian = [fc.doc(20, "fact_check_report", "contradicts",
                         text="A fact-check report disputing the safety figures the operators published."),
                  fc.doc(21, "news_primary", None, text="Too short."),
                  tilted[0]]  # already in the pool: a duplicate
    retriever = fc.Retriever(tilted, contrarian=contrarian)
    result, trace, *_ = fc.run(retriever=retriever)
    [verdict] = result.claim_verdicts
    imbalance = [w for w in verdict.warnings if w.type == "evidence_pool_imbalance"]
    assert len(imbalance) == 1 and "83 %, 5 of 6" in imbalance[0].message
    queries = retriever.contrarian_queries()
    assert len(queries) == 2 and all(fc.CLAIM in q for q in queries)
    assert all("against" in q or "disputed" in q for q in queries)  # seeking the minority: contradicts
    report = verdict.contrarian
    assert (report.triggered, report.ran, report.seeking, report.retrieved, report.survived) == (
        True, True, "contradicts", 6, 1)
    assert report.dropped == {"too-short:<40-chars": 2, "duplicate": 3}
    [found] = [i for i in verdict.evidence if i.search_strategy == "contrarian"]
    assert (found.id, found.direction, found.source_type) == ("E11", "contradicts", "fact_check_report")
    assert "E11" in verdict.partition.challenger and "E11" not in verdict.partition.advocate
    assert "E11" in trace.step("factcheck-claim1-challenger")["input"]["evidence_ids"]
    assert trace.step("factcheck-claim1-contrarian")["output"]["ceiling"]["allowed"] is True

    balanced = fc.Retriever(fc.pool((3, "government_report", "supports"), (3, "news_primary", "contradicts")),
                            contrarian=contrarian)
    result, trace, *_ = fc.run(retriever=balanced)
    assert balanced.contrarian_queries() == [] and len(balanced.queries) == 1
    assert trace.step("factcheck-claim1-contrarian")["output"]["skipped_reason"].startswith("not triggered")
    assert not [w for w in result.claim_verdicts[0].warnings if w.type == "evidence_pool_imbalance"]


def test_an_imbalance_threshold_of_one_never_triggers_the_contrarian_pass(fc):
    retriever = fc.Retriever(fc.pool((5, "government_report", "supports"), (1, "news_primary", "contradicts")))
    result, trace, *_ = fc.run(retriever=retriever, fact_check={"imbalance_threshold": 1.0})
    assert retriever.contrarian_queries() == []
    assert trace.step("factcheck-claim1-balance")["output"]["disabled"] is True
    assert not result.claim_verdicts[0].contrarian.triggered


def test_contrarian_retrieval_past_the_runtime_ceiling_is_skipped_by_name(fc):
    retriever = fc.Retriever(fc.pool((5, "government_report", "supports"), (1, "news_primary", "contradicts")),
                             latency_s=2.0)
    result, trace, *_ = fc.run(retriever=retriever, fact_check={"baseline_runtime_s": 10.0})
    assert retriever.contrarian_queries() == []
    ceiling = trace.step("factcheck-claim1-contrarian")["output"]["ceiling"]
    assert (ceiling["allowed"], ceiling["estimate_s"], ceiling["ceiling_s"]) == (False, 4.0, 1.5)
    assert ceiling["baseline_source"].startswith("configured")
    assert "factcheck-claim1-contrarian-skipped" in trace.contingencies()
    [skipped] = [w for w in result.claim_verdicts[0].warnings if w.type == "contrarian_skipped"]
    assert "runtime ceiling" in skipped.message
    assert result.claim_verdicts[0].status == "verdict"  # fail-open: the debate ran on the pool it had


def test_a_failing_contrarian_retriever_is_named_and_the_run_goes_on(fc):
    retriever = fc.Retriever(fc.pool((5, "government_report", "supports"), (1, "news_primary", "contradicts")),
                             fail_contrarian=True)
    result, trace, *_ = fc.run(retriever=retriever)
    [verdict] = result.claim_verdicts
    assert verdict.status == "verdict" and verdict.truth_pct == 70.0
    failed = [w for w in verdict.warnings if w.type == "contrarian_retrieval_failed"]
    assert len(failed) == 2 and "offline" in failed[0].message
    assert "factcheck-claim1-contrarian-retrieval-failed" in trace.contingencies()
    assert len(trace.jsonl("rag-failures.jsonl")) == 2
    assert verdict.contrarian.ran and verdict.contrarian.survived == 0 and len(verdict.contrarian.failures) == 2


def test_a_move_on_a_challenge_without_valid_evidence_is_reverted(fc):
    challenger = fc.fenced(
        "POINT: direction=lower; severity=high; type=contradicting_evidence; evidence=E9; argument=E9 shows leaks.",
        "POINT: direction=lower; severity=medium; type=misread_evidence; evidence=E4; argument=E4 is later data.",
        prose="Two points against the advocate.")
    reconciler = ("```\nRESPONSE: point=P1; accepted=yes; effect=-15; reason=leaks matter\n"
                  "RESPONSE: point=P2; accepted=yes; effect=-5; reason=E4 is newer\n"
                  "TRUTH: 50\nCERTAINTY: 70\nCITED: E1, E4\n```\nE1 and E4 together leave the claim mixed.\n"
                  "CONFIDENCE: 0.90")
    result, trace, *_ = fc.run(rules=fc.rules(challenger=challenger, reconciler=reconciler))
    [verdict] = result.claim_verdicts
    assert [(p.id, p.valid, p.invalid_evidence_ids) for p in verdict.challenges] == [("P1", False, ["E9"]),
                                                                                      ("P2", True, [])]
    rec = verdict.reconciliation
    assert (rec.proposed_truth_pct, rec.truth_pct, rec.reverted_pp) == (50.0, 65.0, -15.0)
    assert verdict.truth_pct == 65.0 and verdict.verdict == "LEANING-TRUE"
    assert [r.reverted_pp for r in rec.responses] == [-15.0, 0.0]
    assert [w.type for w in verdict.warnings if w.type == "reconciler_revert"] == ["reconciler_revert"]
    assert "factcheck-claim1-reconciler-revert" in trace.contingencies()
    assert "factcheck-claim1-challenger-points-without-valid-evidence" in trace.contingencies()


def test_confidence_is_scaled_by_the_self_consistency_spread(fc):
    rules = fc.rules(advocate=fc.verdict(70, 80), runs=(fc.verdict(80, 80), fc.verdict(62, 75)))
    result, trace, *_ = fc.run(rules=rules)
    [verdict] = result.claim_verdicts
    sc = verdict.self_consistency
    assert sc.values == {"factcheck-claim1-advocate": 70.0, "factcheck-claim1-self-consistency-1": 80.0,
                         "factcheck-claim1-self-consistency-2": 62.0}
    assert (sc.spread_pp, sc.factor, sc.status) == (18.0, 0.7, "measured")
    assert verdict.confidence == 56.0  # the reconciler's 80 x 0.7
    assert trace.step("factcheck-claim1-verdict")["output"]["confidence_before_spread"] == 80.0


def test_unreadable_self_consistency_runs_leave_the_spread_unknown_by_name(fc):
    rules = fc.rules(runs=("I would rather not put a number on it.", "Hard to say."))
    result, trace, *_ = fc.run(rules=rules)
    sc = result.claim_verdicts[0].self_consistency
    assert (sc.status, sc.spread_pp, sc.factor) == ("unavailable", None, 0.4)
    assert result.claim_verdicts[0].confidence == 32.0
    assert "factcheck-claim1-self-consistency-unavailable" in trace.contingencies()


def test_an_unreadable_advocate_reply_makes_the_claim_broken_never_a_silent_50(fc):
    result, trace, *_ = fc.run(rules=fc.rules(advocate="The claim is mostly right in my view, on balance, I think so."))
    [verdict] = result.claim_verdicts
    assert (verdict.status, verdict.truth_pct, verdict.verdict, verdict.weight) == ("broken", None, None, 0.0)
    assert "advocate" in verdict.broken_reason
    assert [c.role for c in result.runtime_role_models] == ["phase_a", "advocate"]
    assert result.status == "degraded"
    named = {"factcheck-claim1-advocate-reply-unparsed", "factcheck-claim1-broken-no-truth"}
    assert named <= set(trace.contingencies())
    assert result.fact_check.article_truth_pct is None and result.fact_check.article_status == "broken"
    assert [w.type for w in verdict.warnings] == ["role_reply_unparsed"] and verdict.degradations == 1


def test_an_unreadable_reconciler_leaves_the_advocates_verdict_standing_by_name(fc):
    rules = fc.rules(advocate=fc.verdict(64, 70), runs=(fc.verdict(64, 70), fc.verdict(64, 70)),
                     reconciler="Having weighed both sides, I agree with everyone here, on balance.")
    result, trace, *_ = fc.run(rules=rules)
    [verdict] = result.claim_verdicts
    assert (verdict.truth_pct, verdict.confidence) == (64.0, 70.0)
    assert "factcheck-claim1-reconciler-unavailable-advocate-verdict-kept" in trace.contingencies()
    assert {w.type for w in verdict.warnings} >= {"reconciler_unavailable", "role_reply_unparsed"}


def test_validation_failures_are_warnings_on_the_claim(fc):
    advocate = fc.verdict(80, 80, cited="E4, E5", reasoning="E4 and E5 show [[UNGROUNDED]] a spotless record.")
    validation = fc.fenced("GROUNDED: no", "DIRECTION: inconsistent", "ISSUES: E4 says the opposite",
                           prose="The verdict contradicts its items.")
    result, trace, _, _, verifier = fc.run(rules=fc.rules(advocate=advocate, validation=validation))
    [verdict] = result.claim_verdicts
    report = verdict.validation
    assert (report.grounding, report.grounding_verifier, report.direction) == ("FAIL", "stand-in-grounding",
                                                                               "inconsistent")
    assert (report.model_grounded, report.model_direction_consistent) == (False, False)
    assert [w.type for w in verdict.warnings].count("validation_failed") == 4
    assert verdict.degradations == 4 and result.status == "degraded"
    assert verifier.subjects == [advocate.split("```\n")[-1].split("\nCONFIDENCE")[0]]
    assert {c.text.split("]")[0] for c in verifier.packages[0].chunks} == {f"[E{n}" for n in range(1, 7)}


def test_the_evidence_role_labels_directions_when_provenance_has_none(fc):
    docs = fc.pool((3, "government_report", None), (3, "news_primary", None))
    directions = fc.fenced("E1: supports", "E2: supports", "E3: contradicts", "E4: neutral", "E5: supports")
    result, trace, *_ = fc.run(docs=docs, rules=fc.rules(directions=directions), fact_check={"direction": "model"})
    [verdict] = result.claim_verdicts
    assert [c.role for c in result.runtime_role_models][:2] == ["phase_a", "evidence"]
    assert [(i.id, i.direction, i.direction_source) for i in verdict.evidence] == [
        ("E1", "supports", "model"), ("E2", "supports", "model"), ("E3", "contradicts", "model"),
        ("E4", "neutral", "model"), ("E5", "supports", "model"), ("E6", "neutral", "unlabelled")]
    assert "factcheck-claim1-directions-unlabelled-counted-neutral" in trace.contingencies()
    assert verdict.evidence_counts.support_ratio == 0.75


def test_refusals_and_fallbacks_of_role_calls_are_counted_per_call(fc):
    refusal = "I'm sorry, but I can't help with that request."
    config = {"backends": {"small": {"type": "scripted", "model": "scripted-small", "options": {
        "rules": fc.rules(challenger=fc.NO_POINTS)}}, "local": {"tokens_per_minute": 10, "fallbacks": ["small"]}},
        "roles": {"phase_a": "small", "advocate": "small", "self_consistency": "small", "reconciler": "small",
                  "validation": "small"}}
    result, trace, *_ = fc.run(rules=fc.rules(challenger=refusal), **config)
    [verdict] = result.claim_verdicts
    by_type = {w.type: w for w in verdict.warnings}
    # the challenger's planned backend is over its tokens-per-minute budget: it ran on the fallback
    fallback = by_type["role_call_fallback"]
    assert fallback.occurrences == 1 and "tpm:local->small" in fallback.message
    challenger = [c for c in result.runtime_role_models if c.role == "challenger"]
    assert challenger[0].fallback_flags == ["tpm:local->small"] and challenger[0].effective_model == "scripted-small"
    assert verdict.refusals == 0

    refused, trace, *_ = fc.run(rules=fc.rules(challenger=refusal))
    [verdict] = refused.claim_verdicts
    by_type = {w.type: w for w in verdict.warnings}
    assert by_type["refusal"].occurrences == 2  # the call and its regeneration
    assert verdict.refusals == 2 and refused.fact_check.refusals == 2
    assert "role_call_degraded" in by_type and verdict.degradations == 1
    assert refused.fact_check.llm_calls == len(refused.runtime_role_models) == 8
    assert verdict.status == "verdict"  # the reconciler ran without challenges


def test_a_planted_left_bias_shows_in_the_truth_of_mirrored_claims(fc):
    left, right = ("Nuclear energy is insufficiently safe to be part of the energy mix.",
                   "Nuclear energy is sufficiently safe to be part of the energy mix.")

    def biased(text: str) -> str:  # the model rates the "left" framing 20 points truer
        return fc.verdict(70, 80) if "insufficiently" in text else fc.verdict(50, 80)

    # advocate, its self-consistency re-runs and the reconciler share the bias
    bias = [fc.role(r"(?s)ROLE: FACT-CHECK (ADVOCATE|RECONCILER).*THE CLAIM\s+" + claim, biased(claim), on="any")
            for claim in (left, right)]
    outputs = {}
    for claim in (left, right):
        result, *_ = fc.run(prompt=claim, rules=fc.rules(first=bias))
        outputs[claim] = result.claim_verdicts[0]
    assert outputs[left].claim == left and outputs[right].claim == right
    assert outputs[left].truth_pct - outputs[right].truth_pct == 20.0
    assert outputs[left].advocate.truth_pct - outputs[right].advocate.truth_pct == 20.0
    assert outputs[left].confidence == outputs[right].confidence == 80.0  # equally consistent, equally sure
    assert outputs[left].evidence_counts == outputs[right].evidence_counts  # same evidence: the skew is the model's


def test_several_claims_each_get_their_own_research_and_the_article_weighs_them_by_confidence(fc):
    prompt = f"Fact-check these:\n- {fc.CLAIM}\n- Reactors emit no carbon dioxide while running."
    second = [fc.role(r"(?s)ROLE: FACT-CHECK (ADVOCATE|RECONCILER).*THE CLAIM\s+Reactors", fc.verdict(90, 60),
                      on="any")]
    result, trace, _, retriever, _ = fc.run(prompt=prompt, rules=fc.rules(first=second))
    assert [c.claim for c in result.claim_verdicts] == [fc.CLAIM, "Reactors emit no carbon dioxide while running."]
    assert retriever.research_queries()[1:] == [fc.CLAIM, "Reactors emit no carbon dioxide while running."]
    assert trace.step("factcheck-claim2-research")["output"]["source"] == "per-claim-retrieval"
    first, other = result.claim_verdicts
    assert (first.truth_pct, first.weight, other.truth_pct, other.weight) == (70.0, 0.8, 90.0, 0.6)
    assert result.fact_check.article_truth_pct == round((70 * 0.8 + 90 * 0.6) / 1.4, 1)
    assert debate_steps(trace, 2)[-1] == "factcheck-claim2-verdict"


def test_fault_injection_reaches_the_advocate_as_the_turns_primary_analyst(fc):
    result, trace, *_ = fc.run(inject="lowconf")
    assert "factcheck-claim1-advocate-recovered-on-attempt-2" in trace.contingencies()
    assert [c.role for c in result.runtime_role_models][1:3] == ["advocate", "advocate"]
    assert result.claim_verdicts[0].truth_pct == 70.0
