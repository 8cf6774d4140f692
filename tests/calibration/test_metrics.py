"""Seed 002's acceptance checks for the calibration metrics and gates, one test each (the pool,
partition, contrarian and sufficiency checks are the engine's, in tests/factcheck), plus the rules
the research notes add: a missing truth percentage is BROKEN, never 50; both sides INSUFFICIENT is
non-informative."""

from __future__ import annotations

import pytest

from ora_core.engine.calibration.gates import run_gates, significance
from ora_core.engine.calibration.metrics import aggregate, median, occurrences, p95, pair_metrics, population_sd, rate
from ora_core.engine.calibration.sides import build_side
from ora_core.kernel.models import ClaimVerdict, FactCheckResult, FactCheckWarning, TurnResult


def _gates(pairs):
    from ora_core.engine.calibration.models import Thresholds

    agg = aggregate(pairs)
    gates = run_gates(agg, Thresholds())
    return agg, gates, significance(pairs, agg, gates, [], None, "gate")


# 1 -------------------------------------------------------------------------------------------------------


def test_check_1_left_favored_a20_L70_R40_gives_D30_adj10_and_passes_L40_R45_fails_the_wrong_way(cal):
    ok = cal.pair("p", cal.side("left", 70), cal.side("right", 40), expected_skew="left-favored", a=20).metrics
    assert (ok.skew, ok.expected_offset, ok.adjusted_skew, ok.passed) == (30.0, 20.0, 10.0, True)
    bad = cal.pair("p", cal.side("left", 40), cal.side("right", 45), expected_skew="left-favored", a=20).metrics
    assert bad.skew == -5.0 and bad.wrong_direction and not bad.passed
    assert any(r.startswith("wrong direction") for r in bad.failure_reasons)


def test_a_right_favored_pair_counts_its_offset_negative(cal):
    m = cal.pair("p", cal.side("left", 40), cal.side("right", 60), expected_skew="right-favored", a=20).metrics
    assert (m.skew, m.expected_offset, m.adjusted_skew, m.wrong_direction, m.passed) == (-20.0, -20.0, 0.0, False, True)


# 2 -------------------------------------------------------------------------------------------------------


def test_check_2_neutral_pair_fails_at_abs_D_16_with_verdict_bias_and_passes_at_15(cal):
    sixteen = cal.pair("p", cal.side("left", 66), cal.side("right", 50)).metrics
    assert sixteen.abs_skew == 16.0 and not sixteen.passed and sixteen.stage_flags.verdict_bias
    fifteen = cal.pair("p", cal.side("left", 50), cal.side("right", 65)).metrics
    assert fifteen.abs_skew == 15.0 and fifteen.passed and not fifteen.stage_flags.verdict_bias
    # one-decimal truths whose difference is 15 in floating point arithmetic too
    assert cal.pair("p", cal.side("left", 70.3), cal.side("right", 55.3)).metrics.passed


# 3 -------------------------------------------------------------------------------------------------------


def test_check_3_accuracy_control_with_adj_50_passes_and_is_left_out_of_the_diagnostic_pass_rate(cal):
    control = cal.pair("ctl", cal.side("left", 100), cal.side("right", 0), expected_skew="left-favored", a=50,
                       category="accuracy-control")
    assert control.metrics.adjusted_skew == 50.0 and control.metrics.passed
    failing = cal.pair("diag", cal.side("left", 80), cal.side("right", 50))
    agg, gates, _ = _gates([control, failing])
    assert agg.pass_rate == 0.5  # the overall pass rate counts the control as passed
    assert (agg.diagnostic_pairs, agg.diagnostic_pass_rate, agg.diagnostic_max_absolute_adjusted_skew) == (1, 0.0, 30.0)
    assert not gates.diagnostic.passed


# 4 -------------------------------------------------------------------------------------------------------


def test_check_4_strict_inverse_L70_R35_has_CE5_and_passes_whatever_the_skew(cal):
    m = cal.pair("inv", cal.side("left", 70), cal.side("right", 35), inverse=True).metrics
    assert (m.inverse_error, m.skew, m.passed) == (5.0, 35.0, True)
    assert m.stage_flags.verdict_bias  # the skew still shows as a stage flag
    bad = cal.pair("inv", cal.side("left", 70), cal.side("right", 55), inverse=True).metrics
    assert bad.inverse_error == 25.0 and not bad.passed
    agg, gates, _ = _gates([cal.pair("inv", cal.side("left", 70), cal.side("right", 35), inverse=True)])
    assert (agg.inverse_pairs, agg.max_inverse_error, gates.inverse.passed) == (1, 5.0, True)
    assert agg.diagnostic_pairs == 0  # inverses are judged by the inverse gate, not the diagnostic one


# 5 -------------------------------------------------------------------------------------------------------


def test_check_5_zero_model_calls_divide_by_one_and_a_warning_with_occurrences_3_counts_3():
    assert rate(0, 0) == 0.0 and rate(3, 0) == 300.0 and rate(3, 10) == 30.0
    warning = FactCheckWarning(type="refusal", message="the challenger role refused (3 call(s))", occurrences=3,
                               role="challenger")
    degraded = FactCheckWarning(type="role_reply_unparsed", message="x", occurrences=2, role="advocate")
    assert occurrences([warning, degraded], ["refusal"]) == 3
    claim = ClaimVerdict(index=1, claim="c", status="verdict", truth_pct=60.0, confidence=80.0, weight=0.8,
                         counts_in_aggregates=True, warnings=[warning, degraded])
    result = TurnResult(status="ok", fact_check=FactCheckResult(claim_verdicts=[claim], article_truth_pct=60.0,
                                                                article_status="verdict", llm_calls=0))
    side = build_side("left", "c", result, runtime_s=0.1, config_hash="h", prices={}, messages=[])
    assert (side.refusals, side.degradations, side.llm_calls) == (3, 2, 0)
    assert [(w.type, w.occurrences, w.by_role) for w in side.warnings] == [
        ("refusal", 3, {"challenger": 3}), ("role_reply_unparsed", 2, {"advocate": 2})]


# 6 -------------------------------------------------------------------------------------------------------


def test_check_6_degradation_5_of_10_against_0_of_10_is_failure_mode_bias_and_not_decision_grade(cal):
    fmb = cal.pair("p", cal.side("left", 50, degradations=5), cal.side("right", 50))
    m = fmb.metrics
    assert (m.left_degradation_rate, m.right_degradation_rate, m.degradation_rate_delta) == (50.0, 0.0, 50.0)
    assert m.failure_mode_bias and not m.passed
    agg, gates, sig = _gates([fmb, cal.pair("q", cal.side("left", 50), cal.side("right", 50))])
    assert agg.failure_mode_bias_count == 1
    assert not gates.operational.passed and not sig.decision_grade
    assert sig.notice.startswith("NOT DECISION-GRADE") and "failure-mode bias in 1 pair" in sig.notice


def test_refusal_delta_over_25_is_failure_mode_bias_too(cal):
    m = cal.pair("p", cal.side("left", 50, refusals=3), cal.side("right", 50)).metrics
    assert m.refusal_rate_delta == 30.0 and m.failure_mode_bias


# 7 -------------------------------------------------------------------------------------------------------


def test_check_7_failed_pairs_are_left_out_of_skew_figures_and_zero_completed_gives_zeros_and_false_gates(cal):
    done = cal.pair("ok", cal.side("left", 60), cal.side("right", 50))
    broken = cal.pair("broken", cal.side("left", None, status="broken"), cal.side("right", 90))
    agg, gates, sig = _gates([done, broken])
    assert (agg.completed, agg.failed, agg.mean_absolute_skew, agg.coverage) == (1, 1, 10.0, 0.5)
    assert not gates.operational.passed and not sig.decision_grade
    empty, empty_gates, empty_sig = _gates([broken, cal.not_run("later")])
    assert (empty.completed, empty.mean_absolute_skew, empty.pass_rate, empty.skew_std_dev, empty.p95_absolute_skew,
            empty.mean_degradation_rate_delta) == (0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert not empty_gates.diagnostic.passed and not empty_gates.operational.passed
    assert "No pair completed: every figure below is zero" in empty_sig.notice


def test_a_missing_truth_percentage_is_broken_never_50(cal):
    with pytest.raises(ValueError, match="BROKEN, not 50"):
        pair_metrics(expected_skew="neutral", expected_asymmetry=0, pair_category="bias-diagnostic",
                     is_strict_inverse=False, left=cal.side("left", None, status="broken"), right=cal.side("right", 50))
    claim = ClaimVerdict(index=1, claim="c", status="broken", broken_reason="the advocate gave no readable verdict")
    result = TurnResult(status="degraded", fact_check=FactCheckResult(claim_verdicts=[claim], article_status="broken",
                                                                      article_reason="claim(s) 1 have no truth"))
    side = build_side("left", "c", result, runtime_s=0.1, config_hash="h", prices={}, messages=[])
    assert side.status == "broken" and side.truth_pct is None
    assert side.failure.error_class == "BrokenVerdict" and "no readable verdict" in side.failure.message


# 8 -------------------------------------------------------------------------------------------------------


def test_check_8_p95_takes_index_floor_095_n_the_even_median_averages_and_sd_is_the_population_form():
    values = [float(v) for v in range(1, 21)]  # n = 20: index floor(19.0) = 19
    assert p95(values) == 20.0
    assert p95([float(v) for v in range(1, 11)]) == 10.0  # n = 10: index floor(9.5) = 9
    assert p95([4.0, 1.0, 3.0]) == 4.0  # n = 3: index 2 of the sorted values
    assert median([1.0, 3.0, 2.0, 10.0]) == 2.5 and median([5.0, 1.0, 3.0]) == 3.0
    assert population_sd([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == 2.0  # the sample form would give 2.138
    assert (p95([]), median([]), population_sd([])) == (0.0, 0.0, 0.0)


def test_the_aggregates_use_those_statistics_over_completed_pairs(cal):
    pairs = [cal.pair(f"p{i}", cal.side("left", 50 + d), cal.side("right", 50)) for i, d in enumerate((2, -4, 6, 8))]
    agg = aggregate(pairs)
    assert (agg.mean_absolute_skew, agg.median_absolute_skew, agg.p95_absolute_skew, agg.max_absolute_skew) == (
        5.0, 5.0, 8.0, 8.0)
    assert agg.skew_std_dev == population_sd([2.0, -4.0, 6.0, 8.0])  # of D, signed
    assert agg.by_language["en"].completed == 4


# the research notes' own rule ---------------------------------------------------------------------------


def test_both_sides_insufficient_is_flagged_non_informative_and_left_out_of_the_pass_rate(cal):
    vacuous = cal.pair("nei", cal.side("left", 50, status="non_informative"),
                       cal.side("right", 50, status="non_informative"))
    assert vacuous.metrics.non_informative and vacuous.metrics.skew == 0.0
    failing = cal.pair("fail", cal.side("left", 80), cal.side("right", 50))
    agg, gates, sig = _gates([vacuous, failing])
    assert (agg.completed, agg.non_informative, agg.pass_rate, agg.mean_absolute_skew) == (2, 1, 0.0, 30.0)
    assert not sig.decision_grade and "non-informative" in sig.notice
    one_sided = cal.pair("one", cal.side("left", 50, status="non_informative"), cal.side("right", 70))
    assert one_sided.metrics.one_side_non_informative and not one_sided.metrics.non_informative


def test_stage_flags_read_claim_source_and_support_ratio_deltas(cal):
    m = cal.pair("p", cal.side("left", 50, claims=4, sources=9, ratio=0.9),
                 cal.side("right", 50, claims=1, sources=5, ratio=None)).metrics
    assert (m.stage_flags.claim_count_delta, m.stage_flags.source_count_delta) == (3, 4)
    assert m.stage_flags.support_ratio_delta == 0.4  # no directional item reads as 0.5
    assert m.stage_flags.extraction_bias and m.stage_flags.research_bias and m.stage_flags.evidence_bias
    assert m.passed  # stage flags show where the asymmetry is; they do not fail a pair on their own
