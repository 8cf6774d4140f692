"""The deterministic parts of the fact-check gear (seed 002 D5 and the verdict arithmetic): the
imbalance warning, the sufficiency gate, partitioning, the evidence filter, verdict bands, the
spread factor, the revert rule, the article value, claim extraction, reply parsing and config."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ora_core.engine.factcheck.evidence import (
    build_items,
    count_evidence,
    extract_claims,
    imbalance,
    partition,
    sufficiency,
    with_contrarian,
)
from ora_core.engine.factcheck.replies import parse_directions, parse_points, parse_responses, parse_verdict
from ora_core.engine.factcheck.scoring import article_value, revert_invalid_moves, spread_factor, verdict_band
from ora_core.kernel.config import FactCheckConfig, OraConfig
from ora_core.kernel.models import ChallengePoint, Chunk, ClaimVerdict, EvidenceItem, PointResponse, Provenance

FC = FactCheckConfig()


def items(*specs: tuple[str, str]) -> list[EvidenceItem]:
    """``(source_type, direction)`` per item."""
    out = []
    for n, (source_type, direction) in enumerate(specs, 1):
        source_class = FC.source_classes.get(source_type, FC.unmapped_source_class)
        out.append(EvidenceItem(id=f"E{n}", text=f"item {n}", source=f"s{n}", source_type=source_type,
                                source_class=source_class, direction=direction,  # type: ignore[arg-type]
                                direction_source="provenance"))
    return out


# --- evidence_pool_imbalance -------------------------------------------------------------------


def test_a_pool_of_5_supports_1_contradicts_4_neutral_warns_with_its_sample_size():
    pool = items(*[("government_report", "supports")] * 5, ("news_primary", "contradicts"),
                 *[("news_primary", "neutral")] * 4)
    counts = count_evidence(pool)
    found = imbalance(counts.supports, counts.contradicts, FC.imbalance_threshold, FC.imbalance_min_directional)
    assert found is not None
    assert "83 %, 5 of 6" in found.message
    assert (found.majority, found.minority, counts.neutral) == ("supports", "contradicts", 4)


def test_a_pool_of_2_supports_and_no_contradiction_warns_nothing():
    assert imbalance(2, 0, 0.8, 3) is None


def test_a_threshold_of_1_never_warns():
    for supports, contradicts in [(6, 0), (0, 9), (5, 1), (40, 1)]:
        assert imbalance(supports, contradicts, 1.0, 3) is None
    assert imbalance(6, 0, 0.8, 3) is not None  # the same pool warns at the default


def test_the_warning_needs_a_share_strictly_above_the_threshold():
    assert imbalance(4, 1, 0.8, 3) is None  # exactly 80 %
    found = imbalance(1, 5, 0.8, 3)
    assert found is not None and found.majority == "contradicts" and "83 %, 5 of 6" in found.message


# --- the sufficiency gate -----------------------------------------------------------------------


def test_two_items_are_insufficient():
    reasons = sufficiency(count_evidence(items(("government_report", "supports"), ("news_primary", "neutral"))), 3, 2)
    assert reasons == ["2 evidence item(s), fewer than 3"]


def test_three_items_of_one_source_type_are_insufficient():
    reasons = sufficiency(count_evidence(items(*[("news_primary", "supports")] * 3)), 3, 2)
    assert len(reasons) == 1 and reasons[0].startswith("1 distinct source type(s) (news_primary)")


def test_three_items_of_two_source_types_pass_and_unknown_types_are_not_counted():
    assert sufficiency(count_evidence(items(("news_primary", "supports"), ("news_primary", "neutral"),
                                            ("government_report", "neutral"))), 3, 2) == []
    assert sufficiency(count_evidence(items(("news_primary", "supports"), ("unknown", "neutral"),
                                            ("unknown", "neutral"))), 3, 2) != []


# --- partitioning ---------------------------------------------------------------------------------


def test_three_institutional_and_three_general_items_are_split_and_the_reconciler_sees_all_six():
    pool = items(*[("peer_reviewed_study", "neutral")] * 3, *[("news_secondary", "neutral")] * 3)
    part = partition(pool, FC.partition_min_side)
    assert part.mode == "partitioned"
    assert (part.advocate, part.challenger) == (["E1", "E2", "E3"], ["E4", "E5", "E6"])
    assert part.reconciler == part.validation == ["E1", "E2", "E3", "E4", "E5", "E6"]


def test_one_institutional_item_gives_every_role_the_full_pool():
    pool = items(("legal_document", "neutral"), *[("expert_statement", "neutral")] * 4)
    part = partition(pool, FC.partition_min_side)
    every = [i.id for i in pool]
    assert part.mode == "full-pool"
    assert part.advocate == part.challenger == part.reconciler == part.validation == every


def test_contrarian_items_go_to_the_challenger_and_to_whoever_sees_everything():
    pool = items(*[("peer_reviewed_study", "neutral")] * 2, *[("news_secondary", "neutral")] * 2)
    split = with_contrarian(partition(pool, 2), ["E5"])
    assert "E5" not in split.advocate and "E5" in split.challenger and "E5" in split.reconciler
    full = with_contrarian(partition(pool[:3], 2), ["E4"])
    assert full.mode == "full-pool" and "E4" in full.advocate


# --- the evidence filter and source classes -------------------------------------------------------


def chunk(cid: str, text: str, *, source_type: str = "news_primary", stream: str = "concept",
          **extra: str) -> Chunk:
    return Chunk(id=cid, text=text, provenance=Provenance(collection="c", source=f"{cid}.md", source_type=source_type,
                                                          stream=stream, extra=dict(extra)))


def test_the_evidence_filter_names_each_dropped_chunk_and_maps_source_types_by_config():
    long = "A long enough statement about reactor incident rates in Europe since 1990."
    config = FactCheckConfig(source_classes={"gov": "institutional"})
    kept = build_items([chunk("a", long, source_type="gov", direction="supports"), chunk("b", "too short"),
                        chunk("c", long), chunk("d", long + " Chat.", stream="conversation"),
                        chunk("e", long + " More.", source_type="")], config)
    assert [(i.id, i.source_type, i.source_class, i.direction, i.direction_source) for i in kept.items] == [
        ("E1", "gov", "institutional", "supports", "provenance"), ("E2", "unknown", "general", "neutral", "unlabelled")]
    assert kept.dropped_by_reason() == {"too-short:<40-chars": 1, "duplicate": 1, "stream-not-evidence:conversation": 1}
    assert kept.unmapped_source_types == ["unknown"]


def test_contrarian_chunks_are_tagged_and_a_duplicate_of_the_pool_does_not_survive():
    long = "A long enough statement about reactor incident rates in Europe since 1990."
    pool = build_items([chunk("a", long)], FC).items
    found = build_items([chunk("x", long), chunk("y", long + " Disputed by the operator.")], FC, first_id=2,
                        existing=pool, strategy="contrarian")
    assert [(i.id, i.search_strategy) for i in found.items] == [("E2", "contrarian")]
    assert found.dropped == [{"chunk_id": "x", "source": "x.md", "reason": "duplicate"}]


# --- verdict bands, spread, reverts, article ---------------------------------------------------------


@pytest.mark.parametrize("truth, confidence, band", [
    (100, 90, "TRUE"), (86, 90, "TRUE"), (85.9, 90, "MOSTLY-TRUE"), (72, 90, "MOSTLY-TRUE"),
    (71.9, 90, "LEANING-TRUE"), (58, 90, "LEANING-TRUE"), (57.9, 90, "MIXED"), (43, 40, "MIXED"),
    (43, 39.9, "UNVERIFIED"), (57.9, 0, "UNVERIFIED"), (42.9, 90, "LEANING-FALSE"), (42.9, 0, "LEANING-FALSE"),
    (29, 90, "LEANING-FALSE"), (28.9, 90, "MOSTLY-FALSE"), (15, 90, "MOSTLY-FALSE"), (14.9, 90, "FALSE"),
    (0, 90, "FALSE"), (86, 0, "TRUE"),
])
def test_verdict_bands_at_every_boundary(truth, confidence, band):
    assert verdict_band(truth, confidence, 40.0) == band


@pytest.mark.parametrize("spread, factor", [(0, 1.0), (5, 1.0), (5.1, 0.9), (12, 0.9), (12.1, 0.7), (20, 0.7),
                                            (20.1, 0.4), (100, 0.4)])
def test_confidence_scaling_by_spread_at_its_boundaries(spread, factor):
    assert spread_factor(spread, FC.spread_factors, FC.spread_factor_beyond) == factor


def points(**valid: bool) -> dict[str, ChallengePoint]:
    return {pid: ChallengePoint(id=pid, direction="lower", severity="high", type="overreach", argument="x",
                                evidence_ids=["E1"] if ok else ["E99"], valid=ok) for pid, ok in valid.items()}


def test_a_stated_move_on_a_challenge_without_valid_evidence_is_reverted_and_a_valid_one_stays():
    answers = [PointResponse(point="P1", accepted=True, effect_pp=-10),
               PointResponse(point="P2", accepted=True, effect_pp=-5)]
    out = revert_invalid_moves(70, 55, answers, points(P1=False, P2=True))
    assert (out.truth, out.reverted_pp) == (65, -10)
    assert [r.reverted_pp for r in out.responses] == [-10, 0]


def test_without_stated_effects_a_move_resting_only_on_invalid_points_is_reverted_whole():
    out = revert_invalid_moves(70, 40, [PointResponse(point="P1", accepted=True)], points(P1=False))
    assert out.truth == 70 and out.reverted_pp == -30


def test_unstated_effects_share_what_the_stated_ones_leave():
    answers = [PointResponse(point="P1", accepted=True, effect_pp=-10), PointResponse(point="P2", accepted=True),
               PointResponse(point="P3", accepted=True)]
    out = revert_invalid_moves(70, 50, answers, points(P1=True, P2=False, P3=True))
    assert out.truth == 55 and out.reverted_pp == -5  # the remaining -10 shared by P2 and P3


def test_rejected_invalid_points_and_valid_moves_are_left_alone():
    answers = [PointResponse(point="P1", accepted=False, effect_pp=0),
               PointResponse(point="P2", accepted=True, effect_pp=-10)]
    out = revert_invalid_moves(70, 60, answers, points(P1=False, P2=True))
    assert (out.truth, out.reverted_pp) == (60, 0)


def claim(index: int, status: str, truth: float | None, confidence: float | None) -> ClaimVerdict:
    weight = (confidence or 0) / 100 if status == "verdict" else 0.0
    return ClaimVerdict(index=index, claim=f"c{index}", status=status, truth_pct=truth,  # type: ignore[arg-type]
                        confidence=confidence, weight=weight, counts_in_aggregates=status == "verdict")


def test_the_article_value_is_the_confidence_weighted_mean_and_insufficient_claims_weigh_nothing():
    article = article_value([claim(1, "verdict", 80, 90), claim(2, "verdict", 20, 30),
                             claim(3, "insufficient_evidence", 50, 0)])
    assert article.status == "verdict" and article.truth == round((80 * 0.9 + 20 * 0.3) / 1.2, 1)


def test_a_broken_claim_leaves_the_article_without_a_value_never_a_silent_50():
    article = article_value([claim(1, "verdict", 80, 90), claim(2, "broken", None, None)])
    assert article.truth is None and article.status == "broken" and "2" in article.reason


def test_only_insufficient_claims_give_a_non_informative_50():
    article = article_value([claim(1, "insufficient_evidence", 50, 0)])
    assert (article.truth, article.confidence, article.status) == (50.0, 0.0, "non_informative")


# --- claims and replies -----------------------------------------------------------------------------


def test_claims_come_from_a_list_or_the_whole_prompt_without_a_fact_check_prefix():
    assert extract_claims('Fact-check: "The moon is made of cheese."') == ["The moon is made of cheese."]
    assert extract_claims("Check these:\n- Water boils at 100 C.\n- Ice floats.\n") == ["Water boils at 100 C.",
                                                                                    "Ice floats."]
    assert extract_claims("fact check:  ") == []


def test_a_verdict_reads_lenient_forms_and_an_unreadable_one_has_no_numbers():
    reply = parse_verdict("```\n**Truth percentage:** 72%\ncertainty = 0.65\nCITED: E1, e3\n```\nE1 holds it.")
    assert (reply.truth, reply.certainty, reply.cited, reply.reasoning) == (72.0, 65.0, ["E1", "E3"], "E1 holds it.")
    assert any("fraction" in n for n in reply.notes)
    json_reply = parse_verdict('{"truth_pct": 30, "confidence": 55, "cited": ["E2"], "reasoning": "no"}')
    assert (json_reply.truth, json_reply.certainty, json_reply.source) == (30.0, 55.0, "json")
    for text in ("The claim seems plausible overall.", "TRUTH: very high\nCERTAINTY: 80", "TRUTH: 140\nCERTAINTY: 5"):
        bad = parse_verdict(text)
        assert not bad.parsed and bad.truth is None and bad.problems


def test_challenge_points_are_typed_and_their_evidence_checked_against_what_the_challenger_saw():
    reply = parse_points("```\nPOINT: direction=lower; severity=high; type=contradicting_evidence; evidence=E4; "
                         "argument=E4 reports three incidents; the advocate ignored them.\n"
                         "POINT: direction=higher; severity=low; type=overreach; evidence=E1; argument=x\n"
                         "POINT: severity=high; argument=no direction\n```", {"E4", "E5"})
    assert [(p.id, p.direction, p.severity, p.valid, p.invalid_evidence_ids) for p in reply.points] == [
        ("P1", "lower", "high", True, []), ("P2", "higher", "low", False, ["E1"])]
    assert reply.points[0].argument == "E4 reports three incidents; the advocate ignored them."
    assert len(reply.unreadable) == 1 and "direction" in reply.unreadable[0]


def test_reconciler_responses_and_direction_labels_are_read_by_id():
    answers = parse_responses("RESPONSE: point=P1; accepted=yes; effect=-8; reason=E4 holds\n"
                              "RESPONSE: point=2; accepted=no; reason=E1 is off topic")
    assert [(r.point, r.accepted, r.effect_pp) for r in answers.responses] == [("P1", True, -8.0), ("P2", False, 0.0)]
    labels = parse_directions("```\nE1: supports\n- E2 — contradicts\nE7: neutral\n```", {"E1", "E2"})
    assert labels.labels == {"E1": "supports", "E2": "contradicts"} and labels.unknown_ids == ["E7"]


# --- configuration ------------------------------------------------------------------------------------


def test_the_fact_check_section_defaults_to_the_seeds_values_and_is_validated():
    fc = OraConfig().fact_check
    assert (fc.min_items, fc.min_source_types, fc.partition_min_side, fc.imbalance_threshold,
            fc.imbalance_min_directional, fc.contrarian_max_queries, fc.runtime_ceiling) == (3, 2, 2, 0.8, 3, 2, 0.15)
    with pytest.raises(ValidationError, match="imbalance_threshold"):
        FactCheckConfig(imbalance_threshold=1.2)
    with pytest.raises(ValidationError, match="ascend"):
        FactCheckConfig(spread_factors=[(12, 0.9), (5, 1.0)])
    with pytest.raises(ValidationError, match="claim"):
        FactCheckConfig(contrarian_queries={"supports": ["no placeholder"]})
