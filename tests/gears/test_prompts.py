"""What the gears tell a reviser about a failed verification."""

from __future__ import annotations

from ora_core.engine.gears.prompts import _findings
from ora_core.kernel.models import Verdict, VerdictStatus

CLAIM = "Ora was founded in 1987 by three engineers."
REPORT = "## GROUNDING REPORT\n- [supported 0.91] A supported claim with its best evidence quoted at length."


def test_a_non_llm_verifiers_findings_are_its_reasons_and_claims_not_its_whole_report():
    verdict = Verdict(status=VerdictStatus.FAIL, verifier="grounding", unsupported_claims=[CLAIM, "Another one."],
                      reasons=["1 of 3 claims supported", f"unsupported (0.20): {CLAIM!r} — number not in the "
                               "evidence: '1987'"], raw_output=REPORT)
    findings = _findings(verdict)
    assert "'1987'" in findings and findings.count(CLAIM) == 1  # quoted once, by its reason
    assert "Unsupported claims:\n- Another one." in findings  # a claim no reason quotes is listed
    assert "GROUNDING REPORT" not in findings and "supported 0.91" not in findings


def test_a_model_verifiers_report_is_its_finding():
    verdict = Verdict(status=VerdictStatus.FAIL, verifier="model", reasons=["unsupported figure"],
                      raw_output="The analysis states a figure the evidence does not hold.\nVERDICT: FAIL")
    assert "states a figure the evidence does not hold" in _findings(verdict)


def test_a_verifier_that_gave_no_reasons_or_claims_is_read_through_its_report():
    verdict = Verdict(status=VerdictStatus.FAIL, verifier="third-party", raw_output="Claim 2 has no source.")
    findings = _findings(verdict)
    assert "(no reasons given)" in findings and "Claim 2 has no source." in findings
