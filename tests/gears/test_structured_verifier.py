"""The model verifier on a backend that constrains its replies (``structured_output``): its call carries
``VERDICT_SCHEMA``, the JSON verdict is read by the one verdict parser (ora-broken), and a constrained
reply that does not validate is BROKEN, recorded as not verified (never PASS)."""

from __future__ import annotations

import json
from typing import Any

from ora_broken import VERDICT_SCHEMA
from ora_scripted.backend import ScriptedFactory

from ora_core import hookimpl
from ora_core.kernel.models import Completion

MODEL = {"verification": {"verifier": "model", "final_verifier": "model", "same_lineage": "allow"},
         "retrieval": {"streams": {"conversation": False, "relationship": False}},
         "backends": {"local": {"type": "structured-scripted"}}, "pipeline": {"phase_a": "skip"}}


class StructuredScripted:
    """The scripted backend declaring ``structured_output``: a call that carries a schema is answered
    ``constrained`` (as a grammar-backed backend answers it); every call's parameters are kept."""

    name = "structured-scripted"

    def __init__(self) -> None:
        self.params: list[Any] = []

    def create(self, settings: Any) -> Any:
        inner = ScriptedFactory().create(settings)
        outer = self

        class _Backend:
            provider, model, family = "structured-scripted", inner.model, inner.family
            structured_output = True

            async def complete(self, messages: Any, params: Any) -> Completion:
                outer.params.append(params)
                completion = await inner.complete(messages, params)
                return completion.model_copy(update={"provider": self.provider,
                                                     "constrained": params.response_schema is not None})

        return _Backend()

    @hookimpl
    def ora_register_backends(self, register: Any) -> None:
        register(self)


def verify_with(gears: Any, verdict: str) -> tuple[Any, Any, StructuredScripted]:
    backend = StructuredScripted()
    rules = gears.rules(first=[gears.role(r"ROLE: VERIFIER", verdict)])
    result, trace, _ = gears.run(rules=rules, mode="standard", plugins=[backend], **MODEL)
    return result, trace, backend


def test_the_verifier_asks_for_the_verdict_schema_and_a_json_pass_passes(gears: Any) -> None:
    result, trace, backend = verify_with(gears, json.dumps({"status": "PASS", "findings": ["every claim checked"]}))
    assert result.verdicts == {"gear2-cycle1-verify": "PASS"}
    verifier_calls = [p for p in backend.params if p.schema_name == "verdict"]
    assert len(verifier_calls) == 1 and verifier_calls[0].response_schema == VERDICT_SCHEMA
    verdict = trace.step("gear2-cycle1-verify")["output"]["verdict"]
    assert verdict["status"] == "PASS" and json.loads(verdict["raw_output"])["status"] == "PASS"


def test_a_json_fail_sends_the_answer_back_for_revision(gears: Any) -> None:
    fail = json.dumps({"status": "FAIL", "findings": ["the 40% figure is not in the evidence"]})
    result, _, _ = verify_with(gears, fail)
    assert result.verdicts["gear2-cycle1-verify"] == "FAIL" and "gear2-cycle2-verify" in result.verdicts


def test_a_constrained_verdict_that_does_not_validate_is_broken_not_verified(gears: Any) -> None:
    result, trace, _ = verify_with(gears, json.dumps({"status": "PASSED", "findings": []}))
    assert result.verdicts["gear2-cycle1-verify"] == "BROKEN"
    assert "gear2-cycle1-verifier-BROKEN-not-verified" in trace.contingencies()
    verdict = trace.step("gear2-cycle1-verify")["output"]["verdict"]
    assert "not a valid verdict" in " ".join(verdict["reasons"])
    assert result.status != "ok"
