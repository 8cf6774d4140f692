"""Seed 000's silent failures owned by the front of the pipeline (#1-#8, #10, #12, #13): each
test recreates the failure's condition and asserts the named record in the on-disk trace."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import ora_modes
from ora_core import hookimpl
from ora_core.engine import run_turn
from ora_core.engine.prompts import ASSUMPTIONS_HEADER, DIRECTIVE_MARKER

CUI_BONO = "Cui bono on the harness paradigm shift in commercial AI?"
EXPANSION = ("Structured cui bono analysis of the harness paradigm shift in commercial AI: "
             "map stakeholders; no analysis needed of unrelated model benchmarks.")


def _backend(runtime):
    return runtime.pool._built["local"]


def test_1_time_question_bypasses_on_the_raw_prompt(front):
    rt = front.runtime()
    result = run_turn(rt, "Hello, what time is it right now?")
    assert (result.mode, result.gear) == ("simple", 1)
    stage0 = front.step_doc(result.trace_path, "stage0-bypass")
    assert stage0["output"]["bypass"] is True
    assert stage0["output"]["category"] == "time_date"
    assert "what time is it right now" in [s["name"] for s in stage0["output"]["signals"]]
    assert not list(Path(result.trace_path).glob("*-phase-a.json")), "a bypass must not run Phase A"


def test_2_pending_clarification_surfaces_and_stops_the_turn(front):
    prompt = "The quarterly numbers."  # not a request: no question, no request opening, no phrase
    rt = front.runtime(rules=[front.phase_a_rule(prompt)])
    result = run_turn(rt, prompt)
    assert result.status == "needs_clarification"
    assert result.question.count("(") >= 2 and "just answer" in result.question  # two real options at least
    routing = front.step_doc(result.trace_path, "pre-routing")
    assert routing["output"]["pending_clarification"] == result.question
    assert routing["output"]["classification_confidence"] == "pending"
    assert not list(Path(result.trace_path).glob("*-context-assembly.json"))
    turn = json.loads((Path(result.trace_path) / "turn.json").read_text())
    assert turn["status"] == "needs_clarification" and turn["question"] == result.question


def test_2_best_guess_continues_and_keeps_the_question(front):
    prompt = "What are the incentives and the options here?"  # one weak signal for two modes
    rt = front.runtime(rules=[front.phase_a_rule(prompt)])
    result = run_turn(rt, prompt, best_guess=True)
    assert result.status != "needs_clarification"
    routing = front.step_doc(result.trace_path, "pre-routing")["output"]
    assert routing["classification_confidence"] == "best-guess"
    assert routing["mode"] == result.mode
    assert routing["pending_clarification_swallowed"], "the question must be kept in the trace"
    names = [c["name"] for c in front.jsonl(result.trace_path, "contingencies.jsonl")]
    assert "stage2-clarification-pending-ran-best-guess" in names


def test_2_a_clear_request_no_mode_claims_is_answered_not_asked_back(front):
    prompt = "Tell me about the harness shift in AI."
    rt = front.runtime(rules=[front.phase_a_rule(prompt)])
    result = run_turn(rt, prompt)
    routing = front.step_doc(result.trace_path, "pre-routing")["output"]
    assert result.status != "needs_clarification" and result.mode == "standard"
    assert routing["classification_confidence"] == "default"
    assert routing["pending_clarification"] is None and routing["pending_clarification_swallowed"] is None


def test_2_no_signal_with_best_guess_uses_the_fallback_mode(front):
    prompt = "The quarterly numbers."
    rt = front.runtime(rules=[front.phase_a_rule(prompt)])
    result = run_turn(rt, prompt, best_guess=True)
    routing = front.step_doc(result.trace_path, "pre-routing")["output"]
    assert routing["classification_confidence"] == "fallback"
    assert result.mode == rt.config.pipeline.fallback_mode == "deep-clarification"
    assert routing["pending_clarification_swallowed"]


def _mode_dir(tmp_path: Path, *, drop: str | None = None, empty_section_of: str | None = None) -> Path:
    target = tmp_path / "modes"
    shutil.copytree(ora_modes.modes_dir(), target)
    if drop:
        (target / f"{drop}.md").unlink()
    if empty_section_of:
        path = target / f"{empty_section_of}.md"
        text = path.read_text()
        head, rest = text.split("## DEPTH ANALYSIS GUIDANCE", 1)
        path.write_text(head + "## DEPTH ANALYSIS GUIDANCE\n\n## BREADTH" + rest.split("## BREADTH", 1)[1])
    return target


def test_3_empty_required_section_is_a_named_failure(front):
    modes = _mode_dir(front.tmp_path, empty_section_of="standard")
    prompt = "Explain why the harness shift matters."
    rt = front.runtime(rules=[front.phase_a_rule(prompt)], with_modes=False, modes={"dirs": [str(modes)]})
    result = run_turn(rt, prompt)
    assert result.mode == "standard"
    records = {c["name"]: c for c in front.jsonl(result.trace_path, "contingencies.jsonl")}
    assert "mode-standard-section-empty" in records
    assert "DEPTH ANALYSIS GUIDANCE" in records["mode-standard-section-empty"]["detail"]
    assert "DEPTH ANALYSIS GUIDANCE" in rt.stderr.getvalue()
    health = json.loads((Path(result.trace_path) / "step-health.json").read_text())
    assert "mode-standard-section-empty" in health["contingencies"]


def test_8_missing_simple_mode_file_is_a_named_failure(front):
    modes = _mode_dir(front.tmp_path, drop="simple")
    rt = front.runtime(with_modes=False, modes={"dirs": [str(modes)]})
    result = run_turn(rt, "Hello!")
    assert (result.mode, result.gear) == ("simple", 1)
    names = [c["name"] for c in front.jsonl(result.trace_path, "contingencies.jsonl")]
    assert "mode-simple-missing" in names
    assert "mode 'simple' is not defined" in rt.stderr.getvalue()
    assert result.status == "degraded"


def test_4_empty_index_gives_index_empty_and_a_filter_gives_filtered_out(front):
    concept = front.Retriever("concept-mem", "concept", [])
    conversation = front.Retriever("conv-mem", "conversation",
                                   [{"text": "we discussed the harness shift", "type": "chat"}])
    relationship = front.Retriever("rel-mem", "relationship",
                                   [{"text": "unrelated gardening note", "type": "concept"}])
    rt = front.runtime(front.RetrieverPlugin(concept, conversation, relationship),
                       rules=[front.phase_a_rule(CUI_BONO)])
    result = run_turn(rt, CUI_BONO)
    out = front.step_doc(result.trace_path, "context-assembly")["output"]
    assert out["empty_diagnosis"]["concept"]["empty_reason"] == "index_empty"
    assert out["empty_diagnosis"]["relationship"]["empty_reason"] == "no_match"
    # cui-bono's default filter keeps concept/engram chunks; this override is in its front matter
    conv_filter = conversation.calls[0][1]
    assert conv_filter.types == ["chat"]
    assert out["retrievals"]["conversation"]["chunks"], "the chat chunk passes the per-stream filter"


def test_4_retriever_exception_gives_empty_context_and_a_rag_failure_record(front):
    broken = front.Retriever("concept-down", "concept", fail=True)
    rt = front.runtime(front.RetrieverPlugin(broken), rules=[front.phase_a_rule(CUI_BONO)])
    result = run_turn(rt, CUI_BONO)
    failures = front.jsonl(result.trace_path, "rag-failures.jsonl")
    assert len(failures) == 1
    record = failures[0]
    assert record["stream"] == "concept"
    assert record["query"] == CUI_BONO
    assert record["error_class"] == "RetrievalError"
    assert "refused the connection" in record["message"]
    assert record["at"]
    out = front.step_doc(result.trace_path, "context-assembly")["output"]
    assert out["retrievals"]["concept"]["chunks"] == []
    assert "context-concept-rag-failure-empty-context" in result.contingencies
    assert 5 in [s["code"] for s in out["budget"]["signals"]]


def test_5_an_invented_time_is_never_shipped_the_clock_answers(front):
    import ora_bypass

    invented = front.invented_time()
    rt = front.runtime(rules=[{"match": "what time", "reply": invented}])
    result = run_turn(rt, "Hello, what time is it?")
    assert invented not in result.answer and "system clock" in result.answer
    assert {"gear1-answer-time-not-grounded", "gear1-clock-answered-from-clock"} <= set(result.contingencies)
    assert result.status == "degraded"  # the model's path failed twice: a named fallback answered
    system = _backend(rt).calls[0][0].content
    assert DIRECTIVE_MARKER in system and "SYSTEM CLOCK READING" in system
    step = front.step_doc(result.trace_path, "direct-response")
    first = {s["name"] for s in step["output"]["clock_checks"][0]}
    assert first >= {"unsupported-time", "unsupported-weekday"}
    clock = step["output"]["answered_by"]
    assert clock.startswith("system clock")
    checker = ora_bypass.ClockClaimsDetector()
    assert checker.detect(result.answer, type("Ctx", (), {"data": {"clock": step["input"]["clock"]}})()) == []


def test_5_every_model_call_of_a_turn_carries_the_directive(front):
    rt = front.runtime(front.RetrieverPlugin(front.Retriever("c", "concept", [{"text": "harness"}])),
                       rules=[front.phase_a_rule(CUI_BONO, ["harness means agent scaffolding"])])
    result = run_turn(rt, CUI_BONO)
    calls = _backend(rt).calls
    assert len(calls) == len(result.runtime_role_models) >= 2  # phase A + every gear-4 step's call
    for messages in calls:
        assert messages[0].role == "system" and DIRECTIVE_MARKER in messages[0].content


def test_6_cui_bono_is_not_bypassed_and_no_analysis_needed_is(front):
    rt = front.runtime(rules=[front.phase_a_rule(CUI_BONO)])
    result = run_turn(rt, "Cui bono analysis of the harness paradigm shift?")
    stage0 = front.step_doc(result.trace_path, "stage0-bypass")["output"]
    assert stage0["bypass"] is False and stage0["signals"] == []
    assert result.mode == "cui-bono"
    direct = run_turn(front.runtime(), "Summarise this, no analysis needed.")
    assert (direct.mode, direct.gear) == ("simple", 1)
    assert front.step_doc(direct.trace_path, "stage0-bypass")["output"]["category"] == "opt_out"


def test_7_phase_a_expansion_cannot_cause_a_bypass(front):
    rt = front.runtime(rules=[front.phase_a_rule(EXPANSION)])
    result = run_turn(rt, CUI_BONO)
    assert result.mode == "cui-bono"
    routing = front.step_doc(result.trace_path, "pre-routing")["output"]
    assert routing["stage1_bypass_rescan"]["acted"] is False
    assert routing["classification_confidence"] == "high"


def test_7_phase_a_legitimately_revealing_a_time_question_is_caught_by_the_rescan(front):
    rt = front.runtime(rules=[front.phase_a_rule("Hello, what time is it?")])
    result = run_turn(rt, "helo, waht tiem is it")
    assert front.step_doc(result.trace_path, "stage0-bypass")["output"]["bypass"] is False
    routing = front.step_doc(result.trace_path, "pre-routing")["output"]
    assert routing["stage1_bypass_rescan"]["acted"] is True
    assert (result.mode, result.gear) == ("simple", 1)


def test_10_inferred_items_reach_every_later_prompt_but_not_the_query(front):
    item = "commercial AI means the frontier labs"
    retriever = front.Retriever("c", "concept", [{"text": "frontier labs sell harnesses"}])
    rt = front.runtime(front.RetrieverPlugin(retriever), rules=[front.phase_a_rule(CUI_BONO, [item])])
    result = run_turn(rt, CUI_BONO)
    phase_a_call, *later = _backend(rt).calls
    assert ASSUMPTIONS_HEADER not in phase_a_call[0].content
    assert later
    for messages in later:
        assert ASSUMPTIONS_HEADER in messages[0].content and item in messages[0].content
    assert item not in retriever.calls[0][0]
    assert front.step_doc(result.trace_path, "phase-a")["output"]["inferred_items"] == [item]


class _FailingIndexer:
    """A post-turn observer that fails like the conversation indexer of seed 000 #12."""

    @hookimpl
    def ora_turn_finished(self, turn, result):
        raise ConnectionError("conversations collection unavailable")


def test_12_post_turn_failure_is_recorded_in_the_trace(front):
    rt = front.runtime(_FailingIndexer())
    result = run_turn(rt, "Hello!")
    names = [c["name"] for c in front.jsonl(result.trace_path, "contingencies.jsonl")]
    failed = [n for n in names if n.startswith("observer-") and n.endswith("-failed")]
    assert failed
    health = json.loads((Path(result.trace_path) / "step-health.json").read_text())
    assert failed[0] in health["contingencies"]
    assert "conversations collection unavailable" in rt.stderr.getvalue()
    assert failed[0] in result.contingencies


def test_13_single_strong_signal_dispatch_is_flagged(front):
    rt = front.runtime(rules=[front.phase_a_rule(CUI_BONO)])
    result = run_turn(rt, CUI_BONO)
    doc = front.step_doc(result.trace_path, "pre-routing")
    summary = doc["output"]["signal_strength_summary"]
    assert summary["single_signal_high_confidence"] is True
    assert summary["strong_signals_for_dispatched"] == ["cui bono"]
    md = next(Path(result.trace_path).glob("*-pre-routing.md")).read_text()
    assert "⚠️ **single_signal_high_confidence**" in md
    two = "Cui bono: who benefits from the harness shift?"
    rt2 = front.runtime(rules=[front.phase_a_rule(two)])
    summary2 = front.step_doc(run_turn(rt2, two).trace_path, "pre-routing")["output"]["signal_strength_summary"]
    assert summary2["single_signal_high_confidence"] is False
    assert summary2["strong_matches"] == 2


class _CrashingRetriever:
    name = "crash"
    stream = "concept"

    def retrieve(self, query, filters, k, ctx):
        return {"not": "a retrieval"}  # a contract violation: named as a rag failure


def test_a_retriever_breaking_its_contract_is_a_named_rag_failure(front):
    rt = front.runtime(front.RetrieverPlugin(_CrashingRetriever()), rules=[front.phase_a_rule(CUI_BONO)])
    result = run_turn(rt, CUI_BONO)
    [record] = front.jsonl(result.trace_path, "rag-failures.jsonl")
    assert record["error_class"] == "ValidationError" and record["retriever"] == "crash"


def test_an_unexpected_exception_halts_the_turn_and_still_closes_the_trace(front, monkeypatch):
    from ora_core.engine import routing

    def explode(*args, **kwargs):
        raise RuntimeError("routing bug")

    monkeypatch.setattr(routing, "dispatch", explode)
    rt = front.runtime(rules=[front.phase_a_rule(CUI_BONO)])
    result = run_turn(rt, CUI_BONO)
    assert result.status == "halted" and result.diagnostic["error_class"] == "RuntimeError"
    turn = json.loads((Path(result.trace_path) / "turn.json").read_text())
    assert turn["status"] == "halted" and "turn-crashed-RuntimeError" in turn["contingencies"]
    assert front.step_doc(result.trace_path, "pre-routing")["health"]["verdict"] == "BROKEN"
