"""The fact language of probes, checked on a hand-made trace directory (no turn is run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from ora_core.engine.measure.facts import Fact, check_facts, parse_path, resolve
from ora_core.engine.measure.tracefiles import TurnFiles

STEP = {"step": "context-assembly", "index": 3, "input": {"query": "q"},
        "output": {"mode_sections": {"DEPTH ANALYSIS GUIDANCE": "work from the package",
                                     "OUTPUT FORMAT GUIDANCE": ""},
                   "signals": [{"name": "hello", "strength": "weak"},
                               {"name": "what time is it", "strength": "strong"}],
                   "empty_diagnosis": {"concept": {"empty_reason": "no_match"},
                                       "web": {"empty_reason": "index_empty"}}}}


@pytest.fixture
def turn(tmp_path: Path) -> TurnFiles:
    d = tmp_path / "root" / "conv" / "t1"
    d.mkdir(parents=True)
    (d / "turn.json").write_text(json.dumps({"status": "degraded", "mode": "standard", "gear": 2,
                                             "answer": "COVERAGE GAP: no figure.\nRevenue was not found."}))
    (d / "step-health.json").write_text(json.dumps({"steps": [{"step": "phase-a", "verdict": "OK"},
                                                              {"step": "gear2-cycle1-verify", "verdict": "BROKEN"}]}))
    (d / "03-context-assembly.json").write_text(json.dumps(STEP))
    (d / "contingencies.jsonl").write_text("\n".join(json.dumps(c) for c in [
        {"name": "phase-a-unparseable-used-raw-prompt", "severity": "warning"},
        {"name": "gear2-cycle1-verify-verifier-exception", "severity": "degraded"}]) + "\n")
    (d / "oversight-queue.jsonl").write_text(json.dumps({"reason": "verifier-broken", "gear": 2}) + "\n")
    (d / "supplemental-rag.jsonl").write_text("")
    (tmp_path / "root" / "indexing.jsonl").write_text(json.dumps({"error_class": "OSError"}) + "\n")
    return TurnFiles(d)


def held(turn: TurnFiles, **fact: Any) -> tuple[bool, str]:
    parsed = TypeAdapter(Fact).validate_python(fact)
    result = check_facts([parsed], turn)[0]
    return result.held, result.actual


def test_paths_take_quoted_keys_indexes_wildcards_and_selectors() -> None:
    assert parse_path('output."DEPTH ANALYSIS GUIDANCE"') == [("key", "output"), ("key", "DEPTH ANALYSIS GUIDANCE")]
    assert parse_path("steps[step=phase-a].verdict") == [("key", "steps"), ("select", ("step", "phase-a")),
                                                         ("key", "verdict")]
    assert resolve(STEP, "output.signals[strength=strong].name")[0] == [
        ("output.signals[strength=strong].name", "what time is it")]
    assert [w for w, _ in resolve(STEP, "output.signals.*.strength")[0]] == [
        "output.signals.0.strength", "output.signals.1.strength"]
    values, _ = resolve(STEP, "output.signals.1.name")
    assert values == [("output.signals.1.name", "what time is it")]
    values, why = resolve(STEP, "output.signals[strength=medium].name")
    assert values == [] and "no element of output.signals has strength='medium'" in why
    values, why = resolve(STEP, "output.missing")
    assert values == [] and "no key 'missing' at output" in why


def test_field_facts_equals_contains_matches_one_of_exists_and_negate(turn: TurnFiles) -> None:
    assert held(turn, kind="field", file="step:context-assembly", path="output.signals[strength=strong].name",
                equals="what time is it")[0]
    assert held(turn, kind="field", file="step:context-assembly",
                path='output.mode_sections."DEPTH ANALYSIS GUIDANCE"', contains="package")[0]
    ok, actual = held(turn, kind="field", file="step:context-assembly", path="output.mode_sections.*", matches=r"\S")
    assert not ok and actual.startswith("1 of 2 value(s) do not:") and '"OUTPUT FORMAT GUIDANCE"' in actual
    assert held(turn, kind="field", file="step:context-assembly", path="output.empty_diagnosis.*.empty_reason",
                one_of=["no_match", "index_empty"])[0]
    assert held(turn, kind="field", file="step:context-assembly", path="output.signals[name=no analysis]",
                exists=False)[0]
    assert held(turn, kind="field", file="step-health.json", path="steps[step=gear2-cycle1-verify].verdict",
                equals="PASS", negate=True)[0]
    ok, actual = held(turn, kind="field", file="turn.json", path="answer.deep", equals=1)
    assert not ok and "path not found" in actual


def test_step_contingency_jsonl_answer_status_and_any_of_facts(turn: TurnFiles) -> None:
    assert held(turn, kind="step_ran", step="context-assembly")[0]
    ok, actual = held(turn, kind="step_ran", step="phase-a")
    assert not ok and actual == "steps on disk: context-assembly"
    assert held(turn, kind="step_absent", step="phase-a")[0]
    assert held(turn, kind="contingency", matches="-verifier-exception$")[0]
    ok, actual = held(turn, kind="contingency", name="gear2-cycle1-verify-verifier-exception", fired=False)
    assert not ok and actual == "fired: gear2-cycle1-verify-verifier-exception"
    assert held(turn, kind="jsonl", file="oversight-queue.jsonl", count=1, where={"reason": "verifier-broken"})[0]
    assert not held(turn, kind="jsonl", file="oversight-queue.jsonl", min=1, where={"gear": 4})[0]
    assert held(turn, kind="jsonl", file="supplemental-rag.jsonl", count=0)[0]
    assert held(turn, kind="jsonl", file="root:indexing.jsonl", count=1, where_matches={"error_class": "Error$"})[0]
    assert held(turn, kind="answer", contains="COVERAGE GAP")[0]
    ok, actual = held(turn, kind="answer", lacks=r"(?i)revenue")
    assert not ok and "found 'Revenue'" in actual
    assert held(turn, kind="status", one_of=["ok", "degraded"])[0]
    assert held(turn, kind="any_of", facts=[{"kind": "status", "one_of": ["halted"]},
                                            {"kind": "answer", "contains": "GAP"}])[0]
    assert not held(turn, kind="any_of", facts=[{"kind": "status", "one_of": ["halted"]},
                                                {"kind": "answer", "contains": "nothing"}])[0]


def test_a_missing_or_malformed_file_fails_the_fact_naming_the_file(turn: TurnFiles) -> None:
    (turn.path / "rag-failures.jsonl").write_text('{"ok": 1}\nnot json\n')
    ok, actual = held(turn, kind="jsonl", file="rag-failures.jsonl", count=0)
    assert not ok and actual == "cannot read the trace: line 2 is not JSON (Expecting value: line 1 column 1 (char 0))"
    (turn.path / "step-health.json").unlink()
    result = check_facts([TypeAdapter(Fact).validate_python(
        {"kind": "field", "file": "step-health.json", "path": "steps", "exists": True})], turn)[0]
    assert not result.held and result.file.endswith("step-health.json") and "does not exist" in result.actual
    ok, actual = held(turn, kind="jsonl", file="root:../../escape.jsonl", count=0)
    assert not ok and "leads out of the trace directory" in actual


@pytest.mark.parametrize(("answer", "ok"), [
    ("It is 03:48 on Tuesday, 24 November 2026 (UTC).", True),
    ("It is 3:50 am, UTC.", True),  # within the tolerance
    ("It's 05:48 here (UTC+2).", True),  # the local reading
    ("The time is 2026-12-31T09:45:57.832Z", False),  # the ISO timestamp the clock-claims detector misses
    ("Today is 2026-11-24.", True),
    ("The time is 12:30.", False),
    ("It is Friday.", False),
    ("It is the 15th of May.", False),
    ("I cannot see a clock.", True),
])
def test_clock_consistent_checks_times_and_dates_against_the_recorded_reading(turn: TurnFiles, answer: str,
                                                                              ok: bool) -> None:
    (turn.path / "02-direct-response.json").write_text(json.dumps(
        {"input": {"clock": {"utc": "2026-11-24T03:48:16+00:00", "local": "2026-11-24T05:48:16+02:00"}}}))
    doc = json.loads((turn.path / "turn.json").read_text())
    (turn.path / "turn.json").write_text(json.dumps({**doc, "answer": answer}))
    assert held(turn, kind="clock_consistent")[0] is ok


def test_clock_consistent_without_a_clock_reading_does_not_hold(turn: TurnFiles) -> None:
    (turn.path / "02-direct-response.json").write_text(json.dumps({"input": {}}))
    ok, actual = held(turn, kind="clock_consistent")
    assert not ok and actual.startswith("no clock reading: no key 'clock' at input")
