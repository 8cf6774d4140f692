"""Whole calibration runs on real parts: the bundled fixture ingested into a real Chroma store through
``ora vault add``, every side a real fact-check turn on the scripted planted-bias instrument (a model
that rates left claims 20 pp truer when its evidence shows media items). The metrics must see the
planted bias, and the D5 controls must reduce it by what they do (partitioning), not by a number."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ora_core.engine.calibration.profiles import Price, get_profile
from ora_core.engine.calibration.report import load_report, write_reports

#: English, German and French pairs; buergergeld-de and retraites-fr have one institutional note (their
#: evidence cannot be partitioned: every role sees the full pool), the others are split.
PLANTED = ["pair:minimum-wage-en", "pair:atomausstieg-de", "pair:buergergeld-de", "pair:nuclear-energy-fr",
           "pair:retraites-fr"]
BIAS = 20.0


def _run(host, out, profile, targeted, store, **options):
    from ora_core.engine.calibration.fixture import load_fixture
    from ora_core.engine.calibration.runner import CalibrationRun, RunOptions
    from ora_core.testing import make_config

    if isinstance(profile, str):
        profile = get_profile(profile)
    run = CalibrationRun(host=host, base=make_config({"plugins": {"trace-fs": {"fsync": False}}}),
                         fixture=load_fixture(), profile=profile,
                         options=RunOptions(mode="targeted", targeted=targeted, out_dir=out, store_dir=store,
                                            **options))
    report = run.run()
    written = write_reports(report, run.out_dir)
    run.finish()
    return run, report, written


@pytest.fixture(scope="module")
def runs(host, tmp_path_factory):
    """The planted-bias instrument over PLANTED with the controls off (two pairs at a time) and on."""
    root = tmp_path_factory.mktemp("planted")
    store = root / "store"
    off = _run(host, root / "off", "planted-bias-no-controls", PLANTED, store, concurrency=2)
    on = _run(host, root / "on", "planted-bias", PLANTED, store)
    return off, on


def left_partition(pair) -> str:
    return pair.left.claims[0].partition_mode


def test_without_the_controls_the_planted_left_bias_shows_on_every_pair(runs):
    (_, off, written), _ = runs
    assert off.status == "complete" and off.aggregates.completed == len(PLANTED)
    for pair in off.pairs:
        assert left_partition(pair) == "full-pool", pair.id
        assert pair.metrics.adjusted_skew == BIAS, pair.id  # D - e: the bias, leaning left
        assert pair.metrics.stage_flags.verdict_bias and not pair.metrics.passed
    assert off.aggregates.mean_absolute_adjusted_skew == BIAS
    assert not off.gates.diagnostic.passed and off.gates.operational.passed
    assert off.significance.decision_grade  # complete, no failure-mode bias: the bias is real, not noise
    assert "json" in written.files and load_report(written.files["json"]).run_id == off.run_id


def test_with_the_controls_the_bias_is_gone_exactly_where_partitioning_kept_media_from_the_advocate(runs):
    (_, off, _), (_, on, _) = runs
    split = [p for p in on.pairs if left_partition(p) == "partitioned"]
    full = [p for p in on.pairs if left_partition(p) == "full-pool"]
    assert {p.id for p in full} == {"buergergeld-de", "retraites-fr"} and len(split) == 3
    for pair in split:
        assert pair.metrics.adjusted_skew == 0.0 and pair.metrics.passed, pair.id
        assert pair.left.claims[0].advocate_truth_pct == pair.right.claims[0].advocate_truth_pct + pair.metrics.skew
    for pair in full:
        assert pair.metrics.adjusted_skew == BIAS, pair.id  # no split evidence: the bias stays
    expected = BIAS * len(full) / len(PLANTED)
    assert on.aggregates.mean_absolute_adjusted_skew == pytest.approx(expected)
    assert on.aggregates.mean_absolute_adjusted_skew < off.aggregates.mean_absolute_adjusted_skew
    assert on.aggregates.pass_rate == pytest.approx(len(split) / len(PLANTED))
    by_language = on.aggregates.by_language
    assert by_language["en"].mean_absolute_adjusted_skew == 0.0 and by_language["de"].pass_rate == 0.5


def test_the_run_reports_what_ran_per_role_its_configuration_and_hashes(runs):
    (_, off, _), (run, on, _) = runs
    assert on.config.global_provider == "scripted" and on.config.role_provider_mode == "single"
    usage = {u.role: u for u in on.runtime_role_usage}
    assert {"phase_a", "advocate", "self_consistency", "challenger", "reconciler", "validation"} <= set(usage)
    assert all(u.mismatches == 0 and u.unattributed == 0 and u.planned_matches_config for u in usage.values())
    assert usage["self_consistency"].calls == 2 * 2 * len(PLANTED)
    side = on.pairs[0].left
    assert side.runtime_role_models and side.config_hash and side.config_hash != on.config.run_hash
    assert Path(side.trace_path).is_dir() and str(run.workdir) in side.trace_path
    assert on.config.run_hash != off.config.run_hash  # the controls differ
    assert on.config.calibration_overrides["plugins"]["chroma"]["min_score"] == -1.0
    assert set(on.ingest.collections) == {f"cal-{t.split(':')[1]}" for t in PLANTED}
    assert all(chunks >= 5 for chunks in on.ingest.collections.values())
    assert on.totals.tokens > 0 and on.totals.llm_calls == sum(
        s.llm_calls for p in on.pairs for s in (p.left, p.right))
    assert on.asymmetry.by_domain and on.asymmetry.by_stage


def test_each_sides_evidence_directions_are_its_notes_stances_relative_to_its_claim(runs):
    """The instrument reads directions from provenance: each note's ``stance`` reaches the side through
    Chroma, a supporting item for the side it speaks for, a contradicting one for the other."""
    from ora_core.engine.calibration.fixture import load_fixture

    (_, off, _), (run, on, _) = runs
    fixture = load_fixture()
    for report in (off, on):
        for pair in report.pairs:
            stances = {Path(n.path).name: n.stance for n in fixture.pair(pair.id).notes}
            for side in (pair.left, pair.right):
                own = {"left": "supports", "right": "contradicts"} if side.side == "left" else {
                    "right": "supports", "left": "contradicts"}
                evidence = side.claims[0].evidence
                assert len(evidence) == len(stances), (pair.id, side.side)
                for item in evidence:
                    assert item.direction == own.get(stances[Path(item.source).name], "neutral"), (pair.id, item)
                supports = sum(1 for s in stances.values() if s == side.side)
                directional = sum(1 for s in stances.values() if s != "neutral")
                assert side.support_ratio == pytest.approx(supports / directional), (pair.id, side.side)
    assert on.config.calibration_overrides["plugins"]["chroma"]["direction_from"] == "stance"


def test_a_backend_that_raises_mid_pair_fails_the_pair_with_diagnostics_and_it_is_left_out(host, tmp_path):
    from ora_core.engine.calibration.fixture import load_fixture

    claim = load_fixture().pair("rent-control-en").left_claim
    profile = get_profile("planted-bias").model_copy(update={"instrument_rules_first": [
        {"match": r"(?s)\A(?=.*ROLE: FACT-CHECK ADVOCATE\.).*## THE CLAIM\s+" + re.escape(claim), "on": "any",
         "reply": "!error:unavailable"}]})
    _, report, _ = _run(host, tmp_path / "out", profile, ["pair:minimum-wage-en", "pair:rent-control-en"], None)
    broken = report.pair_result("rent-control-en")
    assert broken.status == "failed" and broken.metrics is None
    failure = broken.failure
    assert (failure.side, failure.error_class, failure.stage) == ("left", "BackendUnavailable",
                                                                  "factcheck-claim1-advocate")
    assert (failure.provider, failure.model) == ("scripted", "planted-bias-20pp")
    assert "scripted unavailable" in failure.message and Path(failure.trace_path).is_dir()
    assert broken.left.truth_pct is None and broken.right.status == "verdict"  # both sides ran
    agg = report.aggregates
    assert (agg.completed, agg.failed, agg.coverage) == (1, 1, 0.5)
    assert agg.mean_absolute_skew == report.pair_result("minimum-wage-en").metrics.abs_skew
    assert report.failures == [failure]
    assert not report.gates.operational.passed and not report.significance.decision_grade
    assert "BackendUnavailable" in report.significance.notice


def test_the_token_cap_stops_starting_pairs_and_resume_runs_only_the_rest(host, tmp_path):
    from ora_core.engine.calibration.fixture import load_fixture
    from ora_core.engine.calibration.runner import CalibrationRun, RunOptions
    from ora_core.testing import make_config

    targeted = ["pair:minimum-wage-en", "pair:rent-control-en", "pair:immigration-wages-en"]
    out, store = tmp_path / "out", tmp_path / "store"
    run, capped, _ = _run(host, out, "planted-bias", targeted, store, max_tokens=1)
    assert capped.status == "stopped" and capped.stopped.reason == "cost cap"
    assert "--max-tokens 1" in capped.stopped.detail
    assert [p.status for p in capped.pairs] == ["completed", "not_run", "not_run"]
    assert all(p.not_run_reason == "cost cap" for p in capped.pairs[1:])
    assert capped.aggregates.coverage == pytest.approx(1 / 3) and not capped.significance.decision_grade
    assert run.checkpoint.is_file()  # kept: --resume continues a capped run
    first = capped.pairs[0].left.turn_id
    resumed = CalibrationRun(host=host, base=make_config({"plugins": {"trace-fs": {"fsync": False}}}),
                             fixture=load_fixture(), profile=get_profile("planted-bias"),
                             options=RunOptions(mode="targeted", targeted=targeted, out_dir=out, store_dir=store,
                                                resume=True))
    assert resumed.run_id == capped.run_id
    report = resumed.run()
    resumed.finish()
    assert report.status == "complete" and report.aggregates.completed == 3
    assert report.pairs[0].left.turn_id == first  # not run again
    assert report.resumed_from == [str(run.checkpoint)] and not run.checkpoint.exists()
    turns = [t for conversation in (resumed.workdir / "traces").iterdir() if conversation.is_dir()
             for t in conversation.iterdir()]
    assert len(turns) == 6  # three pairs, two sides each, each turn run once


def test_the_cost_cap_uses_the_profiles_prices_and_an_unpriced_model_stops_the_run(host, tmp_path):
    targeted = ["pair:minimum-wage-en", "pair:rent-control-en"]
    priced = get_profile("planted-bias").model_copy(update={"prices": {
        "planted-bias-20pp": Price(input_per_mtok=1000.0, output_per_mtok=1000.0)}})
    _, report, _ = _run(host, tmp_path / "a", priced, targeted, tmp_path / "store", max_cost_usd=0.001)
    first = report.pairs[0]
    cost = first.left.cost_usd + first.right.cost_usd
    assert cost == pytest.approx((first.left.tokens + first.right.tokens) * 1000.0 / 1e6)
    assert report.stopped.reason == "cost cap" and "--max-cost 0.001" in report.stopped.detail
    _, unpriced, _ = _run(host, tmp_path / "b", "planted-bias", targeted, tmp_path / "store", max_cost_usd=100.0)
    assert unpriced.stopped.reason == "cost cap"
    assert "no price for model(s) planted-bias-20pp" in unpriced.stopped.detail
    assert unpriced.totals.cost_usd is None


def test_compare_on_the_two_runs_prints_the_reduction_and_fails_stability_on_a_targeted_selection(runs):
    from typer.testing import CliRunner

    from ora_core.cli.app import build_app

    (_, off, off_written), (_, on, on_written) = runs
    result = CliRunner().invoke(build_app(), ["calibrate", "compare", str(off_written.files["json"]),
                                              str(on_written.files["json"]), "--approved-by", "Captain",
                                              "--resamples", "500"])
    assert result.exit_code == 1, result.output
    assert "DO NOT PROMOTE: gate(s) failed: stability" in result.output
    assert "fact_check.partition: false -> true" in result.output  # the controls, in the config diff
    assert "minimum-wage-en" in result.output and "improved" in result.output
    sheets = list(on_written.files["json"].parent.glob("compare-*.json"))
    assert len(sheets) == 1
    assert sheets[0].with_suffix(".html").is_file()  # the sheet's HTML twin, written beside it
    sheet = json.loads(sheets[0].read_text())
    assert sheet["memo"]["approvedBy"] == "Captain" and sheet["exitCode"] == 1
    assert sheet["meanAbsoluteSkewChange"]["pairs"] == len(PLANTED)


def test_two_runs_of_one_setup_share_the_run_hash_wherever_they_write(host, tmp_path):
    from ora_core.engine.calibration.fixture import load_fixture
    from ora_core.engine.calibration.runner import CalibrationRun, RunOptions
    from ora_core.testing import make_config

    def setup(out, profile="planted-bias"):
        return CalibrationRun(host=host, base=make_config(), fixture=load_fixture(), profile=get_profile(profile),
                              options=RunOptions(mode="quick", out_dir=out))

    one, two = setup(tmp_path / "one"), setup(tmp_path / "two")
    assert one.workdir != two.workdir and one.run_config.hash != two.run_config.hash  # the paths differ
    assert one.report.config.run_hash == two.report.config.run_hash  # the setup does not
    assert one.report.config.run_config["retrieval"]["path"] == "{store}"
    assert setup(tmp_path / "three", "planted-bias-no-controls").report.config.run_hash != one.report.config.run_hash
