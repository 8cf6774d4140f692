"""The fact-check reconciler judges the advocate's and the challenger's replies: its edge is checked by
the lineage rule like every verification edge (ora_core/engine/lineage.py)."""

from __future__ import annotations

RECONCILER = "factcheck-claim1-reconciler"


def _two_families(rules):
    """The reconciler on a backend of another family than the advocate's and challenger's."""
    return {"backends": {"local": {"options": {"rules": rules}},
                         "judge": {"type": "scripted", "model": "scripted-judge", "family": "judges",
                                   "options": {"rules": rules}}},
            "roles": {"reconciler": "judge"}}


def test_a_reconciler_of_the_debaters_own_lineage_is_named_and_the_turn_is_not_ok(fc):
    result, trace, *_ = fc.run()
    assert result.status == "degraded" and "self-verification" in result.contingencies
    edge = trace.step(RECONCILER)["output"]["lineage"]
    assert (edge["relation"], edge["action"], edge["policy"]) == ("same", "labelled", "degrade")
    assert edge["author"]["backend"] == "local" and [j["backend"] for j in edge["judges"]] == ["local"]
    named = [c for c in trace.jsonl("contingencies.jsonl") if c["name"] == "self-verification"]
    assert [c["step"] for c in named] == [RECONCILER]


def test_a_reconciler_of_another_family_judges_without_a_contingency(fc):
    rules = fc.rules()
    result, trace, *_ = fc.run(rules=rules, **_two_families(rules))
    assert result.status == "ok" and "self-verification" not in result.contingencies
    edge = trace.step(RECONCILER)["output"]["lineage"]
    assert edge["relation"] == "different" and [j["backend"] for j in edge["judges"]] == ["judge"]


def test_refuse_re_routes_the_reconciler_to_a_backend_of_another_lineage(fc):
    rules = fc.rules()
    config = _two_families(rules)
    config["roles"] = {}  # every role on local: refuse must find "judge" itself
    result, trace, *_ = fc.run(rules=rules, verification={"verifier": "stand-in-grounding", "same_lineage": "refuse"},
                               **config)
    step = trace.step(RECONCILER)
    assert step["output"]["lineage"]["action"] == "re-routed" and step["output"]["lineage"]["routed_to"] == "judge"
    assert [c["backend"] for c in step["calls"]] == ["judge"]
    assert "lineage-rerouted" in result.contingencies and "self-verification" not in result.contingencies
