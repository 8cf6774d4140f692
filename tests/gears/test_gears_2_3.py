"""Gears 2 and 3, and the breadth slot's diversity rule."""

from __future__ import annotations

import os

from ora_core.engine.gears.roles import choose_breadth

# The model verifier runs on the analyst's own backend: these tests pin the gears' flow, not the lineage
# rule (tests/gears/test_lineage.py), so same_lineage = "allow" labels that edge without degrading the turn.
MODEL = {"verification": {"verifier": "model", "final_verifier": "model", "same_lineage": "allow"},
         "retrieval": {"streams": {"conversation": False, "relationship": False}}}
VAULT = [{"text": "Harness vendors bundle models with tooling.", "source": "notes/harness.md"}]


def test_gear_2_runs_one_analyst_then_verification(gears):
    result, trace, _ = gears.run(mode="standard", prompt="Explain why the harness shift matters.",
                                 plugins=[gears.Plugin(retrievers=[gears.Retriever(VAULT)])], **MODEL)
    assert (result.status, result.gear, result.mode) == ("ok", 2, "standard")
    assert result.answer.startswith("GEAR2-ANALYSIS")
    assert result.verdicts == {"gear2-cycle1-verify": "PASS"}
    assert trace.steps()[-3:] == ["gear2-analyst", "gear2-cycle1-verify", "final-output"]
    assert trace.step_health("gear2-analyst")["kind"] == "probabilistic"
    assert [c.role for c in result.runtime_role_models] == ["phase_a", "analyst", "verifier"]


def test_gear_2_fail_is_revised_by_the_reviser_and_verified_again(gears):
    rules = gears.rules(first=[gears.role(r"(?s)ROLE: VERIFIER.*UNDER REVIEW\s+GEAR2-ANALYSIS", gears.FAIL, on="any")])
    result, trace, _ = gears.run(rules=rules, mode="standard", **MODEL)
    assert result.verdicts == {"gear2-cycle1-verify": "FAIL", "gear2-cycle2-verify": "PASS"}
    assert result.answer.startswith("RE-REVISED")
    assert "reviser" in [c.role for c in result.runtime_role_models]
    assert trace.step("gear2-cycle1-re-revision")["output"]["criticisms_accepted"]


def test_the_steps_of_a_turn_share_the_evidence_as_a_prompt_prefix(gears):
    """The evidence sits ahead of the protocol and the role in the system message, so the
    analyst, the model verifier and the re-reviser of one turn all start with the same text: a
    prefix-caching backend (llama.cpp's KV cache) re-reads only the part that differs."""
    rules = gears.rules(first=[gears.role(r"(?s)ROLE: VERIFIER.*UNDER REVIEW\s+GEAR2-ANALYSIS", gears.FAIL, on="any")])
    result, _, rt = gears.run(rules=rules, mode="standard", prompt="Explain why the harness shift matters.",
                              plugins=[gears.Plugin(retrievers=[gears.Retriever(VAULT)])], **MODEL)
    assert result.verdicts == {"gear2-cycle1-verify": "FAIL", "gear2-cycle2-verify": "PASS"}
    calls = [c for c in rt.pool._built["local"].calls if "PHASE A CLEANUP" not in c[0].content]
    systems = {next(r for r in ("ROLE: ANALYST", "ROLE: VERIFIER", "ROLE: RE-REVISER") if r in c[0].content):
               c[0].content for c in calls}
    assert len(systems) == 3
    shared = os.path.commonprefix(list(systems.values()))
    assert "## EVIDENCE PACKAGE" in shared and VAULT[0]["text"] in shared
    assert "ROLE:" not in shared
    # the analyst and the re-reviser share the protocol instructions too; only the role differs
    analytical = os.path.commonprefix([systems["ROLE: ANALYST"], systems["ROLE: RE-REVISER"]])
    assert "## SUPPLEMENTAL RAG PROTOCOL" in analytical and "## CONFIDENCE" in analytical
    # the user message carries the step's own material and the request, not the evidence again
    for call in calls:
        assert VAULT[0]["text"] not in call[1].content
        assert "## THE USER'S REQUEST" in call[1].content or "ROLE: VERIFIER" in call[0].content


def test_gear_2_broken_verification_ships_with_a_warning_and_an_oversight_event(gears):
    result, trace, _ = gears.run(rules=gears.rules(verify="ok"), mode="standard", **MODEL)
    assert result.verdicts == {"gear2-cycle1-verify": "BROKEN"}
    assert result.answer.startswith("[warning: not verified — the verifier was BROKEN")
    assert "gear2-cycle1-verifier-BROKEN-not-verified" in trace.contingencies()
    assert [q["reason"] for q in trace.jsonl("oversight-queue.jsonl")] == ["verifier-broken"]


def test_gear_3_is_depth_then_breadth_reviewing_it(gears):
    rules = gears.rules()
    result, trace, _ = gears.run(rules=rules, mode="steelman", **MODEL, **gears.diverse(rules))
    assert (result.gear, result.mode) == (3, "steelman")
    assert trace.steps()[4:] == ["role-slots", "gear3-depth-analyst", "gear3-breadth-review",
                                 "gear3-cycle1-verify", "final-output"]
    review = trace.step("gear3-breadth-review")
    assert "GEAR3-DEPTH" in review["input"]["package"]
    assert result.answer.startswith("GEAR3-REVIEWED")
    ledger = {c.prompt_key: c.effective_model for c in result.runtime_role_models}
    assert ledger["gear3.depth-analyst"] == "scripted-1" and ledger["gear3.breadth-review"] == "scripted-2"


def test_gear_3_depth_backend_failure_lets_breadth_analyse_alone(gears):
    rules = gears.rules(gear3_depth="!error:timeout")
    result, trace, _ = gears.run(rules=rules, mode="steelman", **MODEL)
    assert result.gear == 3 and result.answer.startswith("GEAR3-BREADTH-ALONE")
    names = trace.contingencies()
    assert "gear3-depth-analyst-backend-timeout" in names
    assert "gear3-depth-failed-breadth-analysed-alone" in names
    assert trace.step_health("gear3-depth-analyst")["verdict"] == "BROKEN"


def test_same_model_for_both_slots_records_diversity_unavailable_and_still_runs(gears):
    result, trace, _ = gears.run(**MODEL)
    assert result.gear == 4 and "diversity-unavailable" in result.contingencies
    slots = trace.step("role-slots")
    assert slots["output"]["diversity"] == "unavailable" and "same backend" in slots["output"]["reason"]
    assert "diversity-unavailable" in trace.step_health("role-slots")["contingencies"]
    assert "role-slots" in trace.health()["degraded_steps"]


def test_the_breadth_slot_takes_the_first_configured_backend_of_another_model(gears):
    rules = gears.rules()
    same_family = {"type": "scripted", "model": "scripted-1b", "family": "scripted", "options": {"rules": rules}}
    other = {"type": "scripted", "model": "scripted-2", "family": "other", "options": {"rules": rules}}
    config = {**MODEL, "backends": {"local": {"fallbacks": []}, "twin": same_family, "other": other}}
    rt = gears.runtime(rules=rules, **config)
    choice = choose_breadth(rt.config, rt.pool, rt.host)
    assert (choice.diversity, choice.breadth) == ("substituted", "other")
    assert [(c.backend, c.same_lineage) for c in choice.candidates] == [("twin", "same family 'scripted'"),
                                                                        ("other", "")]
    result, trace, _ = gears.run(rules=rules, **config)
    assert "breadth-slot-substituted-for-diversity" in trace.contingencies()
    ledger = {c.prompt_key: c.effective_model for c in result.runtime_role_models}
    assert ledger["gear4.breadth-analyst"] == "scripted-2" and ledger["gear4.depth-analyst"] == "scripted-1"


def test_the_breadth_backends_fallbacks_are_tried_first(gears):
    rules = gears.rules()
    backends = {"local": {"fallbacks": ["second"]},
                "first": {"type": "scripted", "model": "m-first", "family": "f1", "options": {"rules": rules}},
                "second": {"type": "scripted", "model": "m-second", "family": "f2", "options": {"rules": rules}}}
    rt = gears.runtime(rules=rules, **MODEL, backends=backends)
    assert choose_breadth(rt.config, rt.pool, rt.host).breadth == "second"


def test_a_candidate_whose_backend_type_is_not_installed_is_skipped(gears):
    rules = gears.rules()
    backends = {"remote": {"type": "openai", "model": "gpt-x", "family": "gpt"}}
    rt = gears.runtime(rules=rules, **MODEL, backends=backends)
    choice = choose_breadth(rt.config, rt.pool, rt.host)
    assert choice.diversity == "unavailable"
    assert [(c.backend, c.installed) for c in choice.candidates] == [("remote", False)]
