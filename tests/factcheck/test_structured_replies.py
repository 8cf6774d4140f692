"""The debate roles' JSON replies (``ora_core.engine.factcheck.structured``): a constrained reply is
rendered into the role's canonical text, which the gear's parsers (``replies.py``) read unchanged; a
reply that does not validate is passed on as it came and reads as no verdict (the role's reply is
unparsed, an advocate's claim BROKEN), never as an invented one."""

from __future__ import annotations

import json

import pytest

from ora_core.engine.factcheck import structured
from ora_core.engine.factcheck.replies import (
    parse_directions,
    parse_points,
    parse_responses,
    parse_validation,
    parse_verdict,
)
from ora_core.engine.reliability import parse_confidence


def verdict_json(**over: object) -> str:
    reply = {"truth": 72, "certainty": 55, "cited": ["E1", "E3"],
             "reasoning": "E1 finds a small effect.\nCITED: E9\nE3 is a news report.", "confidence": 0.8}
    reply.update(over)
    return json.dumps(reply)


def test_a_verdict_is_rendered_into_the_fenced_block_and_read_by_the_text_parser() -> None:
    text = structured.VERDICT.render(verdict_json())
    assert text.startswith("```\nTRUTH: 72\nCERTAINTY: 55\nCITED: E1, E3\n```\n")
    reply = parse_verdict(text)
    assert reply.parsed and (reply.truth, reply.certainty, reply.cited) == (72.0, 55.0, ["E1", "E3"])
    assert reply.source == "lines" and not reply.problems
    # the reasoning is one line of prose below the block: a field-like line inside it cannot override a field
    assert reply.reasoning == "E1 finds a small effect. CITED: E9 E3 is a news report."
    confidence, rest, problem = parse_confidence(text)
    assert confidence == 0.8 and problem is None and "CONFIDENCE" not in rest


@pytest.mark.parametrize(("bad", "readable"), [
    ('{"truth": 72, "certainty": 55, "cited": ["E1"], "reasoning": "E1 finds a small eff', False),  # cut short
    (verdict_json(truth=150), False),
    (verdict_json(certainty=None), False),
    # JSON that only lacks the confidence, or has a key too many: not a valid constrained reply, so nothing is
    # rendered; the text parser's JSON fallback (as for any reply) still finds the verdict it states
    (json.dumps({"truth": 72, "certainty": 55, "cited": [], "reasoning": "x"}), True),
    (verdict_json(extra="field"), True),
])
def test_a_reply_that_does_not_validate_is_passed_on_as_it_came(bad: str, readable: bool) -> None:
    assert structured.VERDICT.render(bad) == bad
    assert structured.VERDICT.problem(bad)
    reply = parse_verdict(bad)
    assert reply.parsed is readable, reply
    if not readable:
        assert reply.problems and (reply.truth is None or reply.certainty is None)


def test_challenge_points_render_into_point_lines() -> None:
    reply = {"points": [{"direction": "lower", "severity": "high", "type": "contradicting_evidence",
                         "evidence": ["E2", "E7"], "argument": "E2 reports job losses; more precisely, 3%."},
                        {"direction": "higher", "severity": "low", "type": "overreach", "evidence": [],
                         "argument": "The claim is hedged."}], "confidence": 0.7}
    points = parse_points(structured.POINTS.render(json.dumps(reply)), allowed={"E2"})
    assert points.parsed and len(points.points) == 2 and not points.unreadable
    first, second = points.points
    assert (first.direction, first.severity, first.type) == ("lower", "high", "contradicting_evidence")
    assert first.evidence_ids == ["E2", "E7"] and first.invalid_evidence_ids == ["E7"] and first.valid
    assert first.argument == "E2 reports job losses; more precisely, 3%."
    assert second.valid is False, "a point without valid IDs does not count"
    none = parse_points(structured.POINTS.render('{"points": [], "confidence": 0.5}'), allowed=set())
    assert none.parsed and none.none_declared and not none.points


def test_a_reconciliation_renders_responses_and_the_verdict() -> None:
    reply = {"responses": [{"point": "P1", "accepted": True, "effect": -8, "reason": "E2 bears it out."},
                           {"point": "P2", "accepted": False, "effect": 0, "reason": "No item says so."}],
             "truth": 60, "certainty": 50, "cited": ["E2"], "reasoning": "E2 lowers it.", "confidence": 0.75}
    text = structured.RESPONSES.render(json.dumps(reply))
    verdict, answers = parse_verdict(text), parse_responses(text)
    assert verdict.parsed and (verdict.truth, verdict.certainty, verdict.cited) == (60.0, 50.0, ["E2"])
    assert verdict.reasoning == "E2 lowers it."
    assert [(r.point, r.accepted, r.effect_pp) for r in answers.responses] == [("P1", True, -8.0), ("P2", False, 0.0)]
    assert not answers.unreadable


def test_a_validation_renders_its_three_fields() -> None:
    reply = {"grounded": False, "direction": "inconsistent", "issues": ["E4 is not cited; E5 contradicts"],
             "confidence": 0.6}
    read = parse_validation(structured.VALIDATION.render(json.dumps(reply)))
    assert read.parsed and read.grounded is False and read.direction_consistent is False
    assert read.issues == ["E4 is not cited, E5 contradicts"]


def test_the_schemas_ask_for_every_key_and_no_other() -> None:
    for fmt in (structured.VERDICT, structured.POINTS, structured.RESPONSES, structured.VALIDATION):
        schema = fmt.schema
        assert schema["additionalProperties"] is False and schema["required"] == list(schema["properties"])
        assert "confidence" in schema["required"], "the reliability layer's confidence line has a field"


def test_the_direction_labels_are_asked_for_exactly_the_items_shown() -> None:
    fmt = structured.directions_format(["E1", "E4"])
    assert fmt.schema["required"] == ["E1", "E4", "confidence"]
    text = fmt.render(json.dumps({"E1": "supports", "E4": "contradicts", "confidence": 0.7}))
    assert parse_directions(text, {"E1", "E4"}).labels == {"E1": "supports", "E4": "contradicts"}
    for bad in ({"E1": "supports", "confidence": 0.7}, {"E1": "supports", "E4": "maybe", "confidence": 0.7},
                {"E1": "supports", "E4": "neutral", "E9": "neutral", "confidence": 0.7}):
        text = json.dumps(bad)
        assert fmt.render(text) == text and fmt.problem(text)
        assert parse_directions(text, {"E1", "E4"}).labels == {}, "JSON as it came holds no 'E1: label' line"
