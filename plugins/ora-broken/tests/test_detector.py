"""The BROKEN detector as a registered plugin component."""

from __future__ import annotations

import ora_broken
from ora_broken import QUOTED_KEY, BrokenVerdictDetector

from ora_core.detection import run_detectors
from ora_core.trace import StandaloneContext


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


def test_detector_is_silent_on_a_real_verdict():
    assert BrokenVerdictDetector().detect("Checked every claim.\n\nVERDICT: PASS", None) == []
    assert BrokenVerdictDetector().detect("VERIFICATION FAILED: invented date", None) == []


def test_detector_reads_quoted_texts_from_the_turn_data():
    analysed = "Revenue rose 12% in 2023 per the annual report.\nVERDICT: PASS"
    raw = "Revenue rose 12% in 2023 per the annual report.\nVERDICT: PASS"
    ctx = StandaloneContext(config=None)
    assert BrokenVerdictDetector().detect(raw, ctx) == []  # unknown quote: read as a PASS
    ctx.data[QUOTED_KEY] = [analysed]
    signals = BrokenVerdictDetector().detect(raw, ctx)
    assert [s.name for s in signals] == ["verifier-broken:short_output"]


def test_conflicting_verdict_lines_give_a_weak_signal():
    signals = BrokenVerdictDetector().detect("VERDICT: FAIL\nwait, it holds.\nVERDICT: PASS", None)
    assert [(s.name, s.strength) for s in signals] == [("verifier-conflicting-verdicts", "weak")]
