"""The debate on a backend that constrains its replies (``structured_output``): each role is asked for
JSON with its schema, the reliability layer renders the constrained reply into the role's canonical
block before anything reads it, and the gear reads that block as before. A constrained advocate reply
that does not validate is no verdict: the claim is BROKEN, named, never given a made-up number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ora_scripted.backend import ScriptedFactory

from ora_core import hookimpl
from ora_core.engine import run_turn
from ora_core.engine.factcheck import structured
from ora_core.kernel.models import Completion


class StructuredScripted:
    """The scripted backend (its rules and replies), declaring ``structured_output``: a call that
    carries a schema is answered ``constrained`` (as a grammar-backed backend answers it), and every
    call's parameters are kept."""

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


def js(**reply: Any) -> str:
    return json.dumps(reply)


VERDICT = js(truth=70, certainty=80, cited=["E1", "E2"],
             reasoning="Items E1 and E2 describe the safety record the claim rests on.", confidence=0.9)


def json_rules(fc: Any, advocate: str = VERDICT) -> list[dict[str, str]]:
    return fc.rules(advocate=advocate, runs=(VERDICT, js(**{**json.loads(VERDICT), "truth": 72})),
                    challenger=js(points=[], confidence=0.9),
                    reconciler=js(responses=[], **{k: v for k, v in json.loads(VERDICT).items()}),
                    validation=js(grounded=True, direction="consistent", issues=[], confidence=0.9))


def run(fc: Any, rules: list[dict[str, str]]) -> tuple[Any, Any, StructuredScripted]:
    backend = StructuredScripted()
    retriever, verifier = fc.Retriever(fc.pool((3, "government_report", "supports"), (3, "news_primary",
                                                                                        "contradicts"))), fc.Verifier()
    rt = fc.runtime(rules_=rules, retriever=retriever, verifier=verifier,
                    backends={"local": {"type": "structured-scripted"}},
                    verification={"verifier": verifier.name, "same_lineage": "allow"},
                    pipeline={"phase_a": "skip"})
    rt.host.register_plugin(backend, name="structured-scripted")
    result = run_turn(rt, fc.CLAIM, mode="fact-check")
    assert result.trace_path, rt.stderr.getvalue()
    return result, TraceDir(Path(result.trace_path)), backend


class TraceDir:
    """The step files and contingencies of one turn's trace."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def step(self, name: str) -> dict[str, Any]:
        [found] = sorted(self.path.glob(f"[0-9][0-9]-{name}.json"))
        return json.loads(found.read_text())

    def contingencies(self) -> list[str]:
        lines = (self.path / "contingencies.jsonl").read_text().splitlines()
        return [json.loads(line)["name"] for line in lines if line]


def test_every_role_is_asked_for_its_schema_and_the_json_reads_as_the_block(fc: Any) -> None:
    result, trace, backend = run(fc, json_rules(fc))
    names = [p.schema_name for p in backend.params]
    assert names == ["factcheck_verdict", "factcheck_verdict", "factcheck_verdict", "factcheck_points",
                     "factcheck_reconciliation", "factcheck_validation"], names
    assert backend.params[0].response_schema == structured.VERDICT.schema
    advocate = trace.step("factcheck-claim1-advocate")
    assert advocate["output"]["text"].startswith("```\nTRUTH: 70\nCERTAINTY: 80\nCITED: E1, E2\n```")
    assert advocate["output"]["parsed"]["truth"] == 70.0 and advocate["output"]["parsed"]["format"] == "lines"
    assert advocate["output"]["confidence"] == 0.9, "the confidence field became the layer's confidence line"
    [call] = advocate["calls"]  # the call record keeps what the model said: the JSON, not its rendering
    assert json.loads(call["output"])["truth"] == 70 and call["params"]["schema_name"] == "factcheck_verdict"
    assert '"truth": 0-100' in advocate["input"]["task"] and "TRUTH: <0-100" not in advocate["input"]["task"]
    [verdict] = result.claim_verdicts
    assert verdict.status != "broken" and verdict.truth_pct == 70.0


def test_a_constrained_advocate_reply_that_does_not_validate_is_a_broken_claim(fc: Any) -> None:
    cut = '{"truth": 70, "certainty": 80, "cited": ["E1"], "reasoning": "Items E1 and E2 describe the saf'
    result, trace, _ = run(fc, json_rules(fc, advocate=cut))
    advocate = trace.step("factcheck-claim1-advocate")
    assert advocate["output"]["text"] == cut, "nothing is rendered from a reply that does not validate"
    assert "factcheck-claim1-advocate-reply-unparsed" in trace.contingencies()
    [verdict] = result.claim_verdicts
    assert verdict.status == "broken" and verdict.truth_pct is None
