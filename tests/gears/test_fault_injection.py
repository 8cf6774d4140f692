"""``ora run --inject MODE``: the ora-inject plugin registers its injectors through
``ora_register_fault_injectors``; each mode drives one failure path end to end, asserted on
the trace."""

from __future__ import annotations

MODEL = {"verification": {"verifier": "model", "final_verifier": "model"}}


def test_verifier_exception_is_broken_never_pass_and_the_injection_is_traced(gears):
    rules = gears.rules()
    result, trace, _ = gears.run(rules=rules, inject_mode="verifier-exception", **MODEL, **gears.diverse(rules))
    assert result.verdicts and set(result.verdicts.values()) == {"BROKEN"}
    assert "step6-cycle1-depth-verifier-BROKEN-not-verified" in trace.contingencies()
    assert result.answer.startswith("[warning: not verified")
    assert trace.jsonl("oversight-queue.jsonl")
