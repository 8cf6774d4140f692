"""A verifier's JSON verdict (``VERDICT_SCHEMA``: status PASS|FAIL, findings), as a backend that holds
the reply to the schema returns it: read by the one verdict parser in the contract's form (so a PASS
whose findings name a failure is still a FAIL), and BROKEN when it does not validate."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from ora_broken import VERDICT_SCHEMA, BrokenVerdictDetector, ModelVerifier, parse_verdict

from ora_core.api import ModelReply, ModelRequest, VerdictStatus

PASS, FAIL, BROKEN = VerdictStatus.PASS, VerdictStatus.FAIL, VerdictStatus.BROKEN


def verdict(status: str, *findings: str) -> str:
    return json.dumps({"status": status, "findings": list(findings)})


def test_a_json_pass_is_a_pass_read_in_the_contracts_form() -> None:
    parsed = parse_verdict(verdict("PASS", "every date is in the evidence"))
    assert parsed.status is PASS and parsed.structured and parsed.source == "contract"
    assert parsed.verdict_line == "VERDICT: PASS" and parsed.findings == ["every date is in the evidence"]
    assert parsed.reasons[0].startswith("JSON verdict (status PASS, 1 finding(s))")


def test_a_json_fail_carries_its_findings() -> None:
    parsed = parse_verdict(verdict("FAIL", "the 2019 date is not in the evidence", "the quotation is invented"))
    assert parsed.status is FAIL and parsed.structured
    assert parsed.findings == ["the 2019 date is not in the evidence", "the quotation is invented"]


def test_a_json_pass_whose_findings_name_a_failure_is_a_fail() -> None:
    parsed = parse_verdict(verdict("PASS", "the figure of 40% is not in the evidence"))
    assert parsed.status is FAIL and parsed.downgraded and parsed.structured


def test_a_finding_that_looks_like_a_verdict_line_does_not_decide() -> None:
    parsed = parse_verdict(verdict("FAIL", "PASS"))
    assert parsed.status is FAIL and parsed.verdict_line == "VERDICT: FAIL"
    assert parsed.findings == ["finding: PASS"]


@pytest.mark.parametrize("raw", [
    json.dumps({"status": "MAYBE", "findings": []}),
    json.dumps({"status": "PASS"}),
    json.dumps({"status": "PASS", "findings": [], "score": 1}),
    json.dumps({"verdict": "PASS"}),
])
def test_a_json_reply_that_does_not_validate_is_broken_and_named(raw: str) -> None:
    parsed = parse_verdict(raw)
    assert parsed.status is BROKEN and parsed.broken_kind == "invalid_structured" and parsed.structured
    assert "not a valid verdict" in parsed.reasons[0]


def test_a_json_reply_cut_short_is_broken_too() -> None:
    parsed = parse_verdict('{"status": "PASS", "findings": ["every date is in the ev')
    assert parsed.status is BROKEN and parsed.broken_kind in ("short_output", "no_verdict")


def test_the_detector_turns_an_invalid_json_verdict_into_a_strong_broken_signal() -> None:
    [signal] = BrokenVerdictDetector().detect(json.dumps({"status": "OK", "findings": []}), None)
    assert signal.kind == "broken" and signal.strength == "strong"
    assert signal.name == "verifier-broken:invalid_structured"
    [ok] = BrokenVerdictDetector().detect(verdict("PASS"), None)
    assert ok.kind == "verdict" and ok.data["status"] == "PASS"


class Ctx:
    """What a verifier is given as ``ctx``: ``ask_model`` (here it keeps the request and answers as a
    backend that held its reply to the schema would)."""

    verification = None

    def __init__(self, text: str) -> None:
        self.text = text
        self.requests: list[ModelRequest] = []

    async def ask_model(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return ModelReply(text=self.text)

    def contingency(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("no backend failure here")


def test_the_model_verifier_asks_for_the_verdict_schema() -> None:
    ctx = Ctx(verdict("FAIL", "the date is invented"))
    reply = asyncio.run(ModelVerifier().verify("The treaty was signed in 1990.", None, "criteria", ctx))
    [request] = ctx.requests
    assert request.response_schema == VERDICT_SCHEMA and request.schema_name == "verdict"
    assert '"status" is "PASS" or "FAIL"' in request.task and "## VERDICT" in request.task
    assert isinstance(reply, ModelReply) and parse_verdict(reply.text).status is FAIL
