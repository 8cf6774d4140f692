"""No model judges its own lineage: every verification edge is checked by one rule, on the models
that actually ran (ora_core/engine/lineage.py), and ``[verification] same_lineage`` says what a same
or unknown lineage does (degrade, refuse, allow)."""

from __future__ import annotations

import pytest

from ora_core.engine.lineage import ModelIdentity, relation
from ora_core.kernel.config import load_config
from ora_core.kernel.errors import ConfigError

VAULT = [{"text": "Harness vendors bundle models with tooling.", "source": "notes/harness.md"}]
CONCEPT_ONLY = {"retrieval": {"streams": {"conversation": False, "relationship": False}}}
VERIFY = "gear2-cycle1-verify"
PROMPT = "Explain why the harness shift matters."


def _gear2(gears, *, same_lineage=None, backends=None, roles=None, pipeline=None, rules=None):
    rules = rules or gears.rules()
    verification = {"verifier": "model", "final_verifier": "model"}
    if same_lineage:
        verification["same_lineage"] = same_lineage
    config = {"verification": verification, **CONCEPT_ONLY}
    if backends:
        config["backends"] = {"local": {"options": {"rules": rules}}, **backends}
    if roles:
        config["roles"] = roles
    if pipeline:
        config["pipeline"] = pipeline
    return gears.run(rules=rules, mode="standard", prompt=PROMPT,
                     plugins=[gears.Plugin(retrievers=[gears.Retriever(VAULT)])], **config)


def _checker(rules, family="checkers", **extra):
    return {"type": "scripted", "model": "scripted-checker", "family": family, "options": {"rules": rules}, **extra}


def _edge(trace, step=VERIFY):
    return trace.step(step)["output"]["lineage"]


# --- the rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "expected"), [
    (("x", "m1", "f1"), ("x", "m2", "f2"), "same"),  # one backend
    (("x", "Qwen2.5-7B", "qwen"), ("y", "qwen2.5-7b ", "other"), "same"),  # one model id, case and spaces aside
    (("x", "m1", "Llama"), ("y", "m2", "llama"), "same"),  # one declared family
    (("x", "m1", "llama"), ("y", "m2", "qwen"), "different"),
    (("x", "m1", ""), ("y", "m2", "qwen"), "unknown"),  # undeclared is never different
    (("x", "m1", ""), ("y", "m2", ""), "unknown"),
])
def test_the_lineage_rule(a, b, expected):
    one, two = (ModelIdentity(backend=n, model=m, family=f) for n, m, f in (a, b))
    assert relation(one, two)[0] == relation(two, one)[0] == expected


# --- degrade (the default), allow, two families -----------------------------------------------------------


def test_a_model_verifying_its_own_output_is_labelled_named_and_the_turn_cannot_end_ok(gears):
    result, trace, _ = _gear2(gears)
    assert result.verdicts == {VERIFY: "PASS"}
    assert result.status == "degraded" and "self-verification" in result.contingencies
    verdict = trace.step(VERIFY)["output"]["verdict"]
    assert verdict["status"] == "PASS" and verdict["data"]["lineage"] == "same"
    edge = _edge(trace)
    assert (edge["relation"], edge["action"], edge["policy"]) == ("same", "labelled", "degrade")
    assert edge["author"]["backend"] == edge["judges"][0]["backend"] == "local"
    assert edge["author"]["role"] == "analyst" and edge["judges"][0]["role"] == "verifier"
    named = [c for c in trace.jsonl("contingencies.jsonl") if c["name"] == "self-verification"]
    assert [c["step"] for c in named] == [VERIFY] and named[0]["severity"] == "degraded"
    assert "**Lineage: same** (same backend" in trace.markdown(VERIFY)


def test_allow_labels_the_edge_without_a_contingency(gears):
    result, trace, _ = _gear2(gears, same_lineage="allow")
    assert result.status == "ok" and "self-verification" not in result.contingencies
    assert trace.step(VERIFY)["output"]["verdict"]["data"]["lineage"] == "same"
    assert _edge(trace)["action"] == "labelled"


def test_two_families_verify_each_other_and_the_trace_names_which_verified_which(gears):
    rules = gears.rules()
    result, trace, _ = _gear2(gears, backends={"checker": _checker(rules)},
                              roles={"verifier": "checker", "final_verifier": "checker"}, rules=rules)
    assert result.status == "ok" and "self-verification" not in result.contingencies
    edge = _edge(trace)
    assert edge["relation"] == "different" and edge["action"] == "independent"
    assert (edge["author"]["backend"], edge["judges"][0]["backend"]) == ("local", "checker")
    assert trace.step(VERIFY)["output"]["verdict"]["data"]["lineage"] == "different"


def test_an_undeclared_family_is_unknown_never_different(gears):
    rules = gears.rules()
    result, trace, _ = _gear2(gears, backends={"checker": _checker(rules, family="")},
                              roles={"verifier": "checker"}, rules=rules)
    assert result.status == "degraded" and "self-verification" in result.contingencies
    assert _edge(trace)["relation"] == "unknown" and "declare no family" in _edge(trace)["reason"]


def test_the_model_that_actually_ran_is_judged_not_the_planned_one(gears):
    """The verifier is planned on another family, but that backend fails and the role falls back to
    the analyst's own backend: the edge is the same lineage."""
    rules = gears.rules()
    failing = _checker(rules, fallbacks=["local"])
    failing["options"] = {"default": "!error:unavailable"}
    result, trace, _ = _gear2(gears, backends={"checker": failing}, roles={"verifier": "checker"}, rules=rules)
    edge = _edge(trace)
    assert edge["relation"] == "same" and [j["backend"] for j in edge["judges"]] == ["local"]
    assert "self-verification" in result.contingencies
    result, trace, _ = _gear2(gears, backends={"checker": failing}, roles={"verifier": "checker"}, rules=rules,
                              same_lineage="refuse")
    assert result.verdicts == {VERIFY: "BROKEN"} and "gear2-cycle1-verify-lineage-refused" in result.contingencies
    assert trace.step(VERIFY)["output"]["verdict"]["data"]["refused_verdict"] == "PASS"


# --- refuse -------------------------------------------------------------------------------------------


def test_refuse_re_routes_the_verifier_to_the_first_backend_of_another_lineage(gears):
    rules = gears.rules()
    result, trace, _ = _gear2(gears, backends={"twin": _checker(rules, family="scripted"), "checker": _checker(rules)},
                              same_lineage="refuse", rules=rules)
    assert result.status == "ok" and result.verdicts == {VERIFY: "PASS"}
    step = trace.step(VERIFY)
    assert step["output"]["routed_to"] == "checker" and _edge(trace)["action"] == "re-routed"
    assert [c["backend"] for c in step["calls"]] == ["checker"]
    assert "lineage-rerouted" in result.contingencies


def test_refuse_without_another_lineage_is_broken_with_the_reason(gears):
    result, trace, _ = _gear2(gears, same_lineage="refuse")
    assert result.verdicts == {VERIFY: "BROKEN"} and result.status == "degraded"
    verdict = trace.step(VERIFY)["output"]["verdict"]
    assert "no installed backend of a lineage different" in verdict["reasons"][0]
    assert trace.step(VERIFY)["calls"] == []  # nothing was asked of a model that does not count
    assert "gear2-cycle1-verify-lineage-refused" in result.contingencies
    assert "[warning: not verified" in result.answer


# --- the other edges --------------------------------------------------------------------------------------


def test_the_model_judge_on_the_judged_step_s_own_lineage_is_named(gears):
    quote = "> Harness vendors bundle models with tooling and more"
    rules = gears.rules(gear2=gears.reply("QUOTING", extra=quote),
                        first=[gears.role("BOUNDARY JUDGE", "SCORE: 1.00")])
    gears_result, trace, _ = gears.run(
        rules=rules, mode="standard", prompt=PROMPT, plugins=[gears.Plugin(retrievers=[gears.Retriever(VAULT)])],
        pipeline={"judge": "model"}, **CONCEPT_ONLY)
    judged = [c for c in trace.jsonl("contingencies.jsonl") if c["name"] == "self-verification"]
    assert [c["step"] for c in judged] == ["gear2-analyst"]
    [event] = [e for e in trace.step("gear2-analyst")["events"] if e["kind"] == "judge"]
    assert event["judge"] == "model" and event["lineage"]["relation"] == "same"
    calls = trace.step("gear2-analyst")["calls"]
    assert [c["why"].split(":")[0] for c in calls] == ["first attempt", "judge"]


def test_the_cascade_cross_evaluates_and_cross_verifies_across_its_two_lineages(gears):
    rules = gears.rules()
    result, trace, _ = gears.run(rules=rules, plugins=[gears.Plugin(retrievers=[gears.Retriever(VAULT)])],
                                 verification={"verifier": "model", "final_verifier": "model"}, **CONCEPT_ONLY,
                                 **gears.diverse(rules))
    assert result.status == "ok" and "self-verification" not in result.contingencies
    for judge, stream in (("breadth", "depth"), ("depth", "breadth")):
        edge = trace.step(f"step4-{judge}-evaluates-{stream}")["output"]["lineage"]
        assert edge["relation"] == "different" and edge["edge"] == f"cross-evaluation: {judge} evaluates {stream}"
    # seed 001 step 6: each stream's output verified by the other stream's model
    depth, breadth = trace.step("step6-cycle1-depth-verify"), trace.step("step6-cycle1-breadth-verify")
    assert depth["output"]["routed_to"] == "other" and [c["backend"] for c in depth["calls"]] == ["other"]
    assert [c["backend"] for c in breadth["calls"]] == ["local"]
    assert depth["output"]["lineage"]["author"]["backend"] == "local"
    assert breadth["output"]["lineage"]["author"]["backend"] == "other"


def test_a_cascade_on_one_model_names_every_edge_it_judged_itself(gears):
    result, trace, _ = gears.run(plugins=[gears.Plugin(retrievers=[gears.Retriever(VAULT)])],
                                 verification={"verifier": "model", "final_verifier": "model"}, **CONCEPT_ONLY)
    named = {c["step"] for c in trace.jsonl("contingencies.jsonl") if c["name"] == "self-verification"}
    assert {"step4-breadth-evaluates-depth", "step4-depth-evaluates-breadth", "step6-cycle1-depth-verify",
            "step6-cycle1-breadth-verify", "step8-final-verify"} <= named
    assert result.status == "degraded"


# --- bad input ---------------------------------------------------------------------------------------------


def test_an_unknown_same_lineage_word_is_refused_naming_the_file_the_field_and_the_words(tmp_path):
    path = tmp_path / "ora.toml"
    path.write_text('[verification]\nsame_lineage = "sometimes"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    message = str(caught.value)
    assert str(path) in message and "verification.same_lineage" in message
    assert all(word in message for word in ("degrade", "refuse", "allow"))


def test_refuse_with_a_backend_of_no_family_says_which_backend_to_declare(tmp_path):
    path = tmp_path / "ora.toml"
    path.write_text('[verification]\nsame_lineage = "refuse"\n\n[backends.vllm]\ntype = "openai"\nmodel = "m"\n'
                    'base_url = "http://127.0.0.1:9/v1"\n\n[roles]\nverifier = "vllm"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    message = str(caught.value)
    assert "'vllm'" in message and "[backends.vllm] family" in message and "refuse" in message
    assert "backends.vllm.family" in message and str(path) in message


def test_the_model_judge_s_calls_in_a_step_never_count_as_its_author(gears):
    """The judge's calls are recorded in the step they judge; the analyst stays the author the verifier
    is checked against."""
    quote = "> Harness vendors bundle models with tooling and more"
    rules = gears.rules(gear2=gears.reply("QUOTING", extra=quote), first=[gears.role("BOUNDARY JUDGE", "SCORE: 1.00")])
    result, trace, _ = _gear2(gears, backends={"checker": _checker(rules)},
                              roles={"verifier": "checker", "final_verifier": "checker"}, rules=rules,
                              pipeline={"judge": "model"})
    analyst = trace.step("gear2-analyst")
    assert [c["backend"] for c in analyst["calls"]] == ["local", "checker"]  # the answer, then the judge
    assert analyst["output"]["author"]["backend"] == "local"
    assert _edge(trace)["author"]["backend"] == "local" and _edge(trace)["relation"] == "different"
    assert "self-verification" not in result.contingencies and result.status == "ok"
