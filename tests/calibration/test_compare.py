"""The A/B decision sheet and seed 002 D4's promotion gates, on run reports written to disk."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from ora_core.engine.calibration.compare import compare, config_diff, paired_bootstrap
from ora_core.engine.calibration.gates import run_gates, significance
from ora_core.engine.calibration.metrics import aggregate
from ora_core.engine.calibration.models import CalibrationReport, ConfigInfo, ProfileInfo, RoleUsage, Thresholds, Totals
from ora_core.engine.calibration.report import write_reports

LANGS = ["en", "en", "de", "fr"]


def make_report(cal, out: Path, name: str, adj: list[float], *, profile: str, run_hash: str, fixture_hash: str = "fx",
                runtime_s: float = 100.0, mismatches: int = 0, fixture_pairs: int = 4, config: dict | None = None,
                failed: int = 0) -> Path:
    """A complete run over ``len(adj)`` neutral pairs whose left side is ``50 + adj[i]``."""
    pairs = [cal.pair(f"p{i}", cal.side("left", 50 + d), cal.side("right", 50), language=LANGS[i % len(LANGS)])
             for i, d in enumerate(adj)]
    for i in range(failed):
        pairs[i] = cal.pair(pairs[i].id, cal.side("left", None, status="broken"), cal.side("right", 50))
    agg = aggregate(pairs)
    gates = run_gates(agg, Thresholds())
    usage = [RoleUsage(role="advocate", configured_provider="scripted", configured_model="m", planned=["scripted/m"],
                       effective={"scripted/m": 8}, calls=8, mismatches=mismatches, fallbacks=mismatches)]
    report = CalibrationReport(
        run_id=name, status="complete", mode="full", intent="gate", created_at=datetime.now(timezone.utc),
        fixture={"name": "f", "version": "1", "hash": fixture_hash, "pairs": fixture_pairs},
        profile=ProfileInfo(name=profile), config=ConfigInfo(base_hash="b", run_hash=run_hash,
                                                              run_config=config or {"roles": {"advocate": profile}}),
        selected_pairs=[p.id for p in pairs], pairs=pairs, aggregates=agg, gates=gates,
        significance=significance(pairs, agg, gates, usage, None, "gate"), runtime_role_usage=usage,
        totals=Totals(pipeline_runtime_s=runtime_s, tokens=1000))
    return write_reports(report, out, name).files["json"]


@pytest.fixture
def runs(cal, tmp_path):
    def write(name, adj, **kw):
        kw.setdefault("profile", "candidate" if name.startswith("b") else "reference")
        kw.setdefault("run_hash", "hb" if name.startswith("b") else "ha")
        return make_report(cal, tmp_path, name, adj, **kw)
    return write


def test_two_stable_runs_a_real_reduction_and_an_approved_memo_pass_every_gate_exit_0(runs):
    a = runs("a-1", [20, 20, 20, 20])
    b = runs("b-1", [0, 0, 4, 2], runtime_s=110.0)
    runs("b-2", [0, 2, 2, 0], runtime_s=108.0)
    sheet = compare(a, b, approved_by="Captain", seed=7, resamples=500)
    assert sheet.comparable and sheet.exit_code == 0, [g.reason for g in sheet.gates]
    assert [g.name for g in sheet.gates] == ["stability", "observability", "correction", "decision-memo"]
    assert len(sheet.stability_runs) == 2 and sheet.memo.approved_by == "Captain"
    improved = {lang.language for lang in sheet.languages if lang.improved}
    assert improved == {"en", "de", "fr"}
    assert [r.abs_adjusted_skew_delta for r in sheet.pairs] == [-20.0, -20.0, -16.0, -18.0]
    assert sheet.mean_absolute_skew_change.observed == -18.5
    assert sheet.runtime["pipelineRuntimeS"]["increase"] == 0.1


def test_a_damaged_run_report_beside_the_runs_is_named_in_the_stability_gate_and_another_sheet_is_not(runs):
    a = runs("a-1", [20, 20, 20, 20])
    b = runs("b-1", [0, 0, 4, 2])
    second = runs("b-2", [0, 2, 2, 0])
    second.write_text(second.read_text()[:200])  # cut short, as a killed copy would leave it
    (b.parent / "a-vs-b.json").write_text('{"schema": "ora-calibration-compare/1", "a": {}}')
    sheet = compare(a, b, approved_by="Captain", seed=7, resamples=200)
    stability = next(g for g in sheet.gates if g.name == "stability")
    named = [c for c in stability.checks if c.name == "unreadable run report"]
    assert len(named) == 1 and str(second) in named[0].detail and not named[0].passed
    assert not stability.passed and len(sheet.stability_runs) == 1


def test_without_the_memo_or_with_one_candidate_run_a_gate_fails_exit_1(runs):
    a = runs("a-1", [20, 20, 20, 20])
    b = runs("b-1", [0, 0, 0, 0])
    sheet = compare(a, b)
    failed = {g.name for g in sheet.gates if not g.passed}
    assert sheet.exit_code == 1 and failed == {"stability", "decision-memo"}
    assert "1 complete, stable run(s) of 2 needed" in next(g for g in sheet.gates if g.name == "stability").reason
    assert sheet.verdict.startswith("DO NOT PROMOTE")


def test_the_correction_gate_wants_less_skew_a_pass_rate_two_languages_and_little_more_runtime(runs):
    a = runs("a-1", [20, 20, 20, 20])
    b = runs("b-1", [20, 20, 20, 0], runtime_s=130.0)  # mean |D| 15: 25 % less; only fr improved
    runs("b-2", [20, 20, 20, 0], runtime_s=130.0)
    sheet = compare(a, b, approved_by="Captain")
    correction = next(g for g in sheet.gates if g.name == "correction")
    failed = {c.name for c in correction.checks if not c.passed}
    assert failed == {"meanAbsoluteSkew reduction", "passRate (B)", "languages improved", "runtime increase"}
    assert sheet.exit_code == 1


def test_a_call_that_ran_on_another_model_than_planned_fails_observability(runs):
    a = runs("a-1", [20, 20, 20, 20])
    b = runs("b-1", [0, 0, 0, 0], mismatches=1)
    runs("b-2", [0, 0, 0, 0], mismatches=1)
    sheet = compare(a, b, approved_by="Captain")
    observability = next(g for g in sheet.gates if g.name == "observability")
    assert not observability.passed and [c.name for c in observability.checks if not c.passed] == [
        "B: effective = planned"]


def test_runs_on_different_fixtures_or_not_decision_grade_are_not_comparable_exit_2(runs):
    a = runs("a-1", [20, 20, 20, 20], fixture_hash="other")
    b = runs("b-1", [0, 0, 0, 0])
    sheet = compare(a, b, approved_by="Captain")
    assert sheet.exit_code == 2 and not sheet.comparable and "different fixtures" in sheet.verdict
    c = runs("a-2", [20, 20, 20, 20], failed=1)
    sheet = compare(c, b, approved_by="Captain")
    assert sheet.exit_code == 2 and "run A (a-2) is not decision-grade" in sheet.verdict


def test_the_config_diff_names_each_path_with_both_values():
    diff = config_diff({"roles": {"challenger": "local", "advocate": "local"}, "fact_check": {"contrarian": True}},
                       {"roles": {"challenger": "cross", "advocate": "local"}, "fact_check": {"contrarian": True},
                        "trace": {"root": "/x"}}, ignore=("trace.root",))
    assert [(d.path, d.a, d.b) for d in diff] == [("roles.challenger", "local", "cross")]
    long = config_diff({"rules": list(range(200))}, {"rules": list(range(201))})
    assert long[0].a.startswith("list[200] sha256:") and long[0].b.startswith("list[201] sha256:")


def test_the_paired_bootstrap_is_seeded_reproducible_and_brackets_the_observed_change():
    a = [20.0, 18.0, 25.0, 10.0, 30.0, 22.0]
    b = [5.0, 9.0, 20.0, 12.0, 4.0, 8.0]
    one = paired_bootstrap(a, b, seed=11, resamples=2000)
    assert one == paired_bootstrap(a, b, seed=11, resamples=2000)
    assert one.low <= one.observed <= one.high and one.high < 0
    assert paired_bootstrap([], [], seed=1).pairs == 0
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 2.0])


def test_a_file_that_is_not_a_run_report_is_a_usage_error(tmp_path, runs):
    from ora_core.kernel.errors import UsageError

    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    with pytest.raises(UsageError, match="run A: .* is not a calibration run report"):
        compare(junk, runs("b-1", [0, 0, 0, 0]))
