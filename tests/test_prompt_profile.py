"""The prompt profiles (issue 14, item 8): ``full`` and ``compact`` carry the same rules; a compact
backend's steps get the compact wording, fitted evidence and capped replies, named as budget
signal 4; verification, the revision after a FAIL and the supplement path still run."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from ora_core import hookimpl
from ora_core.engine import profiles, prompts, reliability, supplement
from ora_core.engine.context import CUT_MARK, cut_at_sentence, estimate_tokens, fit_evidence
from ora_core.engine.gears import prompts as gear_prompts
from ora_core.kernel.models import Chunk, Provenance, Retrieval, Verdict, VerdictStatus
from ora_core.testing import make_config, make_host, make_runtime, scripted_config

CAP = 2
CAPS = profiles.COMPACT_FIT.max_tokens


# --- the two wordings -------------------------------------------------------------------------------


@pytest.mark.parametrize("wording", profiles.WORDINGS, ids=lambda w: w.part)
def test_both_wordings_of_every_part_carry_every_mark_of_its_rules(wording: profiles.Wording) -> None:
    assert wording.rules and all(r in profiles.RULES for r in wording.rules)
    assert profiles.missing_marks(wording, "full") == []
    assert profiles.missing_marks(wording, "compact") == []


def test_a_compact_wording_missing_a_rules_mark_is_caught() -> None:
    dropped = profiles.DIRECTIVE.model_copy(update={"compact": profiles.DIRECTIVE.compact.replace("name the gap",
                                                                                                 "say so")})
    assert profiles.missing_marks(dropped, "compact") == ["directive.name-the-gap: 'name the gap'"]


def test_every_rule_is_carried_by_some_part_and_each_part_is_shorter_compact() -> None:
    assert {r for w in profiles.WORDINGS for r in w.rules} == set(profiles.RULES)
    for wording in profiles.WORDINGS:
        values = {k: v for k, v in profiles.SAMPLE_FIELDS.items() if k in wording.fields()}
        full, compact = wording.text("full", **values), wording.text("compact", **values)
        assert len(compact.split()) < len(full.split()), wording.part


def test_the_full_profile_is_the_wording_the_engine_always_had() -> None:
    assert prompts.ANTI_CONFABULATION_DIRECTIVE.splitlines()[1] == (
        "Never invent specific facts you cannot verify from the material in front of you. The high-risk")
    assert reliability.CONFIDENCE_INSTRUCTION.endswith("what you wrote (1.00 = every claim rests on it).")
    assert ("When the task needs a factual claim, name, date, statistic or relationship that the package in\n"
            "front of you does not support") in supplement.protocol_text(CAP)
    assert "You may ask at most 2 time(s) in this step." in supplement.protocol_text(CAP)
    assert gear_prompts.EVALUATION_CONTRACT.startswith("Answer under exactly these seven headings, in this order "
                                                       "(write 'None found.' under a heading with nothing to report)")


def test_the_compact_protocol_keeps_every_token_the_engine_reads() -> None:
    protocol = supplement.protocol_text(CAP, "compact")
    for token in ("## SUPPLEMENTAL RAG REQUEST", "\nGap:", "\nQuery terms:", "\nWhy:", "## SUPPLEMENTAL RAG RESULT",
                  "## COVERAGE GAP", "most 2 time(s) in this step"):
        assert token in protocol, token
    assert "## COVERAGE GAP" in supplement.coverage_gap_text(CAP, "compact")
    assert "SUPPLEMENTAL RAG REQUEST" in supplement.coverage_gap_text(CAP, "compact")
    assert "`CONFIDENCE: 0.00`" in profiles.CONFIDENCE.text("compact")


def test_a_request_and_a_confidence_line_written_from_the_compact_templates_are_read() -> None:
    block = supplement.protocol_text(CAP, "compact").split("\n\n")[1]
    reply = (block.replace("<what is missing>", "the year the cap was introduced")
             .replace("<search terms>", "cap history changelog").replace("<why it is needed>", "the answer dates it"))
    request, notes = supplement.parse_request(reply, sent="an unrelated package")
    assert request is not None and notes == []
    assert (request.gap, request.query) == ("the year the cap was introduced", "cap history changelog")
    confidence, _, problem = reliability.parse_confidence("An answer.\nCONFIDENCE: 0.70")
    assert (confidence, problem) == (0.7, None)


def test_an_echo_of_the_compact_protocol_is_an_unhealthy_prompt_echo() -> None:
    from ora_health_detectors.echo import PromptEchoDetector

    from ora_core.kernel.models import StepMaterial

    echo = "Here is my answer. " + profiles.PROTOCOL.text("compact", cap=CAP, request="", result="", gap="")
    material = StepMaterial(given="the package", instructions=list(reliability.control_texts(CAP)),
                            retry_phrases=list(reliability.RETRY_PHRASES))
    signals = PromptEchoDetector().detect(echo, SimpleNamespace(data={"material": material}))
    assert [s.name for s in signals] == ["prompt-echo"] and signals[0].strength == "strong"


def test_the_system_prompt_is_worded_by_the_profile_it_is_given() -> None:
    compact = prompts.system_prompt("TASK", inferred_items=["the user means 2024"], profile="compact")
    assert compact.startswith(profiles.DIRECTIVE.compact)
    assert profiles.ASSUMPTIONS.compact in compact and profiles.ASSUMPTIONS.full not in compact
    assert prompts.carries_directive(prompts.build_messages("T", "u", profile="compact"))


def test_compact_findings_say_each_reason_once_without_its_figures_and_full_keeps_them() -> None:
    claim = 'Ora\'s "cap" was set in 1987.'  # its reason quotes it as repr() writes it, the apostrophe escaped
    reason = f"unsupported (0.02): {claim!r} — number not in the evidence: '1987' (best similarity 0.31, 29% of words)"
    verdict = Verdict(status=VerdictStatus.FAIL, verifier="grounding", unsupported_claims=[claim, "Another claim."],
                      reasons=["0 of 2 claims supported", reason, reason])
    compact = gear_prompts._findings(verdict, "compact")
    assert compact.count("number not in the evidence: '1987'") == 1 and "best similarity" not in compact
    assert compact.count("set in 1987") == 1  # the claim its reason quotes (escaped) is not listed again
    assert "Unsupported claims:\n- Another claim." in compact
    full = gear_prompts._findings(verdict)
    assert full.count("(best similarity 0.31, 29% of words)") == 2 and full.count("set in 1987") == 3
    labelled = Verdict(status=VerdictStatus.FAIL, verifier="grounding", reasons=[
        "unsupported (0.08): 'The tool is new.' — no evidence sentence says this (best similarity 0.30, 50% of its "
        "content words in the evidence; not in the evidence: tool, new)"])
    assert gear_prompts._findings(labelled, "compact") == ("- unsupported (0.08): 'The tool is new.' — no evidence "
                                                           "sentence says this (not in the evidence: tool, new)")


# --- configuration ----------------------------------------------------------------------------------


def test_the_bundled_default_runs_its_local_model_compact_and_other_backends_full() -> None:
    assert make_config().config.backends["local"].prompt_profile == "compact"
    assert scripted_config().config.backends["local"].prompt_profile == "full"  # a retyped table: the model's default
    with pytest.raises(ValidationError, match="prompt_profile"):
        make_config({"backends": {"local": {"prompt_profile": "tiny"}}})


def test_max_tokens_are_capped_per_step_kind_only_under_compact() -> None:
    config = make_config({"backends": {"big": {"type": "scripted", "max_tokens": 512}}}).config
    assert profiles.max_tokens_cap(config, "local", "analyst") == profiles.COMPACT_FIT.max_tokens["analyst"]
    assert profiles.max_tokens_cap(config, "local", "evaluator") == profiles.COMPACT_FIT.max_tokens["evaluator"]
    assert profiles.max_tokens_cap(config, "big", "analyst") is None


# --- fitting the evidence ----------------------------------------------------------------------------

SENTENCES = ("The cap is two requests per step. After the second the model writes a coverage gap. "
             "A third request tends to loop without benefit. The cap is configurable in the pipeline. ") * 4


def chunk(cid: str, score: float, text: str = SENTENCES, stream: str = "concept") -> Chunk:
    return Chunk(id=cid, text=text, provenance=Provenance(collection="vault", source=f"notes/{cid}.md", score=score,
                                                          stream=stream))


def test_cut_at_sentence_ends_at_the_last_sentence_end_that_fits() -> None:
    cut = cut_at_sentence(SENTENCES, 120)
    assert cut == "The cap is two requests per step. After the second the model writes a coverage gap."
    assert cut_at_sentence("short.", 120) == "short."
    no_end = "word " * 60
    assert cut_at_sentence(no_end, 100) == ("word " * 20).strip()  # no sentence end: the last word boundary


def test_compact_keeps_the_best_chunks_per_stream_and_cuts_them_at_sentence_ends() -> None:
    config = make_config().config  # the bundled default: the analyst's backend is compact
    retrievals = {"concept": Retrieval(stream="concept", query="q", chunks=[chunk("low", 0.2), chunk("high", 0.9),
                                                                            chunk("mid", 0.5)]),
                  "relationship": Retrieval(stream="relationship", query="q", chunks=[chunk("rel", 0.4, "Short.")])}
    fit = fit_evidence(config, retrievals, "analyst")
    assert fit is not None
    kept = [c.id for c in retrievals["concept"].chunks]
    assert kept == ["high", "mid"] and [d.id for d in fit.dropped] == ["low"]
    assert retrievals["relationship"].chunks[0].text == "Short."  # fits: untouched
    for c in retrievals["concept"].chunks:
        assert c.text.endswith("." + CUT_MARK) and estimate_tokens(c.text) <= fit.chunk_tokens
        assert c.provenance.extra["fitted"]["tokens_before"] == estimate_tokens(SENTENCES)
    assert {c.id for c in fit.cut} == {"high", "mid"}
    assert fit.evidence_tokens == min(config.backends["local"].context_window // 8, 450)
    assert "at most 2 chunk(s) per stream (dropped 1: low (concept))" in fit.detail()


def test_full_leaves_the_evidence_as_retrieved() -> None:
    config = scripted_config().config
    retrievals = {"concept": Retrieval(stream="concept", query="q", chunks=[chunk(str(i), 0.5) for i in range(4)])}
    assert fit_evidence(config, retrievals, "analyst") is None
    assert [c.text for c in retrievals["concept"].chunks] == [SENTENCES] * 4


# --- a compact turn, end to end (scripted backend, in process) ---------------------------------------

VAULT = [{"text": SENTENCES * 2, "source": f"notes/cap-{i}.md"} for i in range(3)]  # ~400 tokens each
HEALTHY = ("The evidence says the cap is two requests per step and that after the second the model writes a "
           "coverage gap instead of guessing; a third request tends to loop without benefit, and the cap is "
           "configurable in the pipeline, so a step that lacks a fact asks, then admits the gap.")
REQUEST = ("## SUPPLEMENTAL RAG REQUEST\nGap: when the protocol was first proposed\nQuery terms: protocol origin "
           "proposal\nWhy: the answer dates it")


FENCED = re.compile(r"<data \w+>\[")  # a chunk's opening fence line (the fence note has no provenance)


class Retriever:
    name, stream = "vault", "concept"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def retrieve(self, query: str, filters: Any, k: int, ctx: Any) -> Retrieval:
        self.calls.append((query, k))
        chunks = [Chunk(id=f"c{i}", text=d["text"], provenance=Provenance(collection="vault", source=d["source"],
                                                                           score=0.9 - i / 10, stream="concept"))
                  for i, d in enumerate(VAULT[:k])]
        return Retrieval(stream="concept", query=query, chunks=chunks, retriever=self.name)


class Verifier:
    """FAIL while the subject carries [[FAIL]], else PASS (a non-model verifier)."""

    name = "marker"

    def verify(self, subject: str, package: Any, criteria: str, ctx: Any) -> Verdict:
        status = VerdictStatus.FAIL if "[[FAIL]]" in subject else VerdictStatus.PASS
        return Verdict(status=status, verifier=self.name, reasons=[f"marker {status.value}"])


class Components:
    def __init__(self) -> None:
        self.retriever = Retriever()

    @hookimpl
    def ora_register_retrievers(self, register: Any) -> None:
        register(self.retriever)

    @hookimpl
    def ora_register_verifiers(self, register: Any) -> None:
        register(Verifier())


def run_compact_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str = "compact",
                     cycles: int | None = None) -> Any:
    import ora_health_detectors
    import ora_scripted
    import ora_trace_fs

    import ora_modes
    from ora_core.engine import run_turn

    rules = [
        {"match": "PHASE A CLEANUP", "on": "system",
         "reply": "CLEANED PROMPT:\nHow does the supplement cap work?\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"},
        {"match": "ROLE: RE-REVISER", "on": "system",
         "reply": f"{HEALTHY}\n## CRITICISMS ACCEPTED\n- marker — removed\n## CRITICISMS REJECTED\n- none\n"
                  "CONFIDENCE: 0.90"},
        {"match": "## SUPPLEMENTAL RAG RESULT", "reply": f"{HEALTHY} [[FAIL]]\nCONFIDENCE: 0.90"},
        {"match": "ROLE: ANALYST", "on": "system", "reply": REQUEST},
    ]
    resolved = scripted_config(tmp_path / "traces", rules=rules, backends={"local": {"prompt_profile": profile}},
                               retrieval={"k": 3, "streams": {"conversation": False, "relationship": False}},
                               verification={"verifier": "marker", "final_verifier": "marker"},
                               pipeline={"verification_cycles": cycles},
                               plugins={"trace-fs": {"fsync": False}})
    components = Components()
    runtime = make_runtime(make_host(ora_scripted, ora_modes, ora_trace_fs, ora_health_detectors, components),
                           resolved, stderr=io.StringIO())
    caps: list[tuple[str, int | None]] = []
    real = reliability.call_role

    async def recording(turn: Any, pool: Any, role: str, messages: Any, **kw: Any) -> Any:
        caps.append((role, kw.get("max_tokens_cap")))
        return await real(turn, pool, role, messages, **kw)

    monkeypatch.setattr(reliability, "call_role", recording)
    result = run_turn(runtime, "How does the supplement cap work?", mode="standard")
    return result, Path(result.trace_path), runtime, caps, components


def step(trace: Path, name: str) -> dict[str, Any]:
    return json.loads(next(trace.glob(f"[0-9][0-9]-{name}.json")).read_text())


def test_a_compact_turn_still_supplements_verifies_and_revises_after_a_fail(tmp_path, monkeypatch) -> None:
    # two verification cycles set explicitly (the compact profile's default is one: a FAIL goes to on_fail,
    # test_the_compact_profile_verifies_once_and_a_fail_goes_to_on_fail)
    result, trace, runtime, caps, components = run_compact_turn(tmp_path, monkeypatch, cycles=2)
    assert result.verdicts == {"gear2-cycle1-verify": "FAIL", "gear2-cycle2-verify": "PASS"}
    assert result.status == "ok" and result.answer.startswith(HEALTHY[:40])
    supplements = [json.loads(line) for line in (trace / "supplemental-rag.jsonl").read_text().splitlines()]
    assert [s["query"] for s in supplements] == ["protocol origin proposal"]
    fitted = profiles.COMPACT_FIT.max_tokens
    assert caps == [("analyst", fitted["analyst"]), ("analyst", fitted["analyst"]), ("reviser", fitted["reviser"])]
    # every analytical call got the compact wording, the evidence fitted (2 of 3 chunks, cut)
    calls = [c for c in runtime.pool._built["local"].calls if "PHASE A CLEANUP" not in c[0].content]
    for call in calls:
        system = call[0].content
        assert system.startswith(profiles.DIRECTIVE.compact)
        assert supplement.protocol_text(2, "compact") in system and supplement.protocol_text(2) not in system
        package = system.split("## SUPPLEMENTAL EVIDENCE")[0]  # the re-reviser also sees what the supplement fetched
        assert len(FENCED.findall(package)) == 2 and CUT_MARK.strip() in package
    assert profiles.ANALYST.text("compact", gear=2) in calls[0][0].content
    assert profiles.RE_REVISER.text("compact", cycle=1, who="the analysis") in calls[-1][0].content
    # the verifier checks the answer against the evidence the model was given: the fitted chunks
    context = step(trace, "context-assembly")["output"]
    assert [c["id"] for c in context["retrievals"]["concept"]["chunks"]] == ["c0", "c1"]


def test_the_compact_profile_verifies_once_and_a_fail_goes_to_on_fail(tmp_path, monkeypatch) -> None:
    result, trace, runtime, caps, _ = run_compact_turn(tmp_path, monkeypatch)
    assert result.verdicts == {"gear2-cycle1-verify": "FAIL"} and ("reviser", CAPS["reviser"]) not in caps
    assert result.withheld_answer is not None and "answer-withheld-evidence-shown" in result.contingencies
    assert "gear2-cycle1-FAIL-cap-reached-not-verified" in result.contingencies


def test_the_context_step_names_the_fit_as_budget_signal_4_with_its_numbers(tmp_path, monkeypatch) -> None:
    result, trace, *_ = run_compact_turn(tmp_path, monkeypatch)
    context = step(trace, "context-assembly")
    [signal] = [s for s in context["output"]["budget"]["signals"] if s["code"] == 4]
    assert signal["name"] == "hardware_constraint"
    assert re.search(r"prompt profile 'compact' for backend 'local' .*8192-token window.*~450 tokens.*"
                     r"at most 2 chunk\(s\) per stream \(dropped 1: c2 \(concept\)\).*cut 2: c0 \d+->\d+, c1 .*"
                     rf"max_tokens per step kind analyst {CAPS['analyst']}, reviser {CAPS['reviser']}",
                     signal["detail"])
    fit = context["output"]["evidence_fit"]
    assert (fit["k_per_stream"], fit["evidence_tokens"], [d["id"] for d in fit["dropped"]]) == (2, 450, ["c2"])
    names = [json.loads(line)["name"] for line in (trace / "contingencies.jsonl").read_text().splitlines()]
    assert "context-budget-signal-4-hardware_constraint" in names
    assert context["health"]["degraded"] is False  # named, not a degradation of the turn


def test_a_full_turn_is_neither_fitted_nor_capped(tmp_path, monkeypatch) -> None:
    result, trace, runtime, caps, _ = run_compact_turn(tmp_path, monkeypatch, profile="full")
    assert result.verdicts == {"gear2-cycle1-verify": "FAIL", "gear2-cycle2-verify": "PASS"}
    assert {cap for _, cap in caps} == {None}
    context = step(trace, "context-assembly")["output"]
    assert "evidence_fit" not in context and all(s["code"] != 4 for s in context["budget"]["signals"])
    system = [c for c in runtime.pool._built["local"].calls if "PHASE A CLEANUP" not in c[0].content][0][0].content
    assert system.startswith(profiles.DIRECTIVE.full) and len(FENCED.findall(system)) == 3
