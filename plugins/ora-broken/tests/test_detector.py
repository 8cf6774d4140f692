"""The BROKEN detector as a registered plugin component."""

from __future__ import annotations

import ora_broken
from ora_broken import QUOTED_KEY, BrokenVerdictDetector

from ora_core.api import StandaloneContext
from ora_core.testing import run_detectors


def test_plugin_registers_the_detector_on_the_verifier_output_layer(ora_host, register_plugin):
    record = register_plugin(ora_broken)
    assert record.status == "ok", record.errors
    detector = ora_host.get("detector", "broken-verdict")
    assert detector.layer == "verifier_output" and detector.kind == "broken"
    assert ora_host.detectors(layer="verifier_output", kind="broken") == [detector]


def test_detector_signals_broken_output_with_the_parse_as_data(ora_host, register_plugin):
    register_plugin(ora_broken)
    ctx = StandaloneContext(config=None)
    signals = run_detectors(ora_host, "verifier_output",
                            "Playwright session error (chatgpt): session expired", ctx)
    assert [s.name for s in signals] == ["verifier-broken:browser_session"]
    assert signals[0].strength == "strong"
    assert signals[0].data["status"] == "BROKEN"
    assert ctx.contingencies == []


def broken(signals):
    return [s for s in signals if s.kind == "broken"]


def test_a_real_verdict_gives_a_verdict_signal_and_no_broken_one():
    passed = BrokenVerdictDetector().detect("Checked every claim.\n\nVERDICT: PASS", None)
    assert [(s.kind, s.data["status"], s.matched) for s in passed] == [("verdict", "PASS", "VERDICT: PASS")]
    failed = BrokenVerdictDetector().detect("VERIFICATION FAILED: invented date", None)
    assert [(s.kind, s.data["status"]) for s in failed] == [("verdict", "FAIL")]


def test_the_verdict_signal_carries_the_findings_after_the_verdict_line():
    raw = "I checked the figures.\n\n## VERDICT\nVERDICT: FAIL\n- the 2019 date is not in the evidence\n- no source"
    [signal] = BrokenVerdictDetector().detect(raw, None)
    assert signal.data["findings"] == ["the 2019 date is not in the evidence", "no source"]


def test_detector_reads_quoted_texts_from_the_turn_data():
    analysed = "Revenue rose 12% in 2023 per the annual report.\nVERDICT: PASS"
    raw = "Revenue rose 12% in 2023 per the annual report.\nVERDICT: PASS"
    ctx = StandaloneContext(config=None)
    assert broken(BrokenVerdictDetector().detect(raw, ctx)) == []  # unknown quote: read as a PASS
    ctx.data[QUOTED_KEY] = [analysed]
    signals = BrokenVerdictDetector().detect(raw, ctx)
    assert [s.name for s in signals] == ["verifier-broken:short_output"]


def test_conflicting_verdict_lines_give_a_weak_signal():
    signals = BrokenVerdictDetector().detect("VERDICT: FAIL\nwait, it holds.\nVERDICT: PASS", None)
    assert [(s.name, s.strength) for s in broken(signals)] == [("verifier-conflicting-verdicts", "weak")]
