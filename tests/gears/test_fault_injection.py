"""``ora run --inject MODE``: the ora-inject plugin registers its injectors through
``ora_register_fault_injectors``; each mode drives one failure path end to end, asserted on
the trace (step files, ``contingencies.jsonl``, ``step-health.json``, the mode's JSONL log and
the ``fault_injected`` events that say which failures were staged)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ora_core.kernel.errors import ConfigError

MODEL = {"verification": {"verifier": "model", "final_verifier": "model"}}
VAULT = [{"text": "Harness vendors bundle models with tooling; customers shift budgets to them.",
          "source": "notes/harness.md"}]
CONCEPT_ONLY = {"retrieval": {"streams": {"conversation": False, "relationship": False}}}
KNOWN_MODES = ["backend-timeout", "coverage", "hallucination", "lowconf", "persistent", "rag-down", "rate-limit",
               "verifier-exception", "verifier-garbage"]


def _run(gears, inject, rules=None, **config):
    rules = rules if rules is not None else gears.rules()
    config = {**MODEL, **gears.diverse(rules), **config}
    return gears.run(rules=rules, inject_mode=inject, **config)


def _injections(trace, step=None):
    """The ``fault_injected`` events of one step file (or of every step file and the turn)."""
    files = [trace.step(step)] if step else [trace.step(s) for s in trace.steps()]
    events = [e for doc in files for e in doc["events"] if e["kind"] == "fault_injected"]
    if step is None:
        events += [e for e in trace.turn()["turn_events"] if e["kind"] == "fault_injected"]
    return events


def _contingency(trace, name):
    found = [c for c in trace.jsonl("contingencies.jsonl") if c["name"] == name]
    assert found, f"no contingency {name!r} in {trace.contingencies()}"
    return found[0]


def test_every_mode_is_registered_with_a_description(gears):
    rt = gears.runtime()
    injectors = rt.host.components("fault_injector")
    assert sorted(injectors) == KNOWN_MODES
    assert all(getattr(i, "description", "") for i in injectors.values())


def test_an_unknown_mode_is_a_clear_error_listing_the_known_modes(gears):
    rt = gears.runtime()
    from ora_core.engine import run_turn

    with pytest.raises(ConfigError) as caught:
        run_turn(rt, gears.PROMPT, mode="cui-bono", inject="low-conf")
    message = str(caught.value)
    assert "'low-conf'" in message and "--inject" in message
    assert "known modes: " + ", ".join(KNOWN_MODES) in message
    assert not list((gears.tmp_path / "traces").rglob("turn.json"))  # refused before the turn opened


def test_without_the_plugin_an_inject_mode_says_none_is_installed(gears):
    from ora_core.engine import run_turn

    rt = gears.runtime(inject=False)
    with pytest.raises(ConfigError, match="no fault injector is installed"):
        run_turn(rt, gears.PROMPT, mode="cui-bono", inject="lowconf")


def test_lowconf_confidence_routing_retries_and_the_retry_recovers(gears):
    result, trace, rt = _run(gears, "lowconf")
    step = trace.step("step3-depth-analyst")
    first, second = step["output"]["attempts"]
    assert (first["confidence"], first["band"]) == (0.6, "low")
    assert first["failure_reason"] == "confidence 0.60 below 0.65"
    assert second["band"] == "high" and second["failure_reason"] is None
    assert second["retry_context"]["failure_reason"] == "confidence 0.60 below 0.65"
    assert trace.step_health("step3-depth-analyst")["attempts"] == 2
    assert trace.step_health("step3-breadth-analyst")["attempts"] == 1  # only the primary analyst
    assert "step3-depth-analyst-recovered-on-attempt-2" in trace.contingencies()
    assert "fault-injection-lowconf" in trace.contingencies()
    injected = _injections(trace, "step3-depth-analyst")
    assert len(injected) == 1 and injected[0]["mode"] == "lowconf" and injected[0]["effect"] == "replaced"
    # the trace says exactly what was staged: CONFIDENCE: 0.90 became 0.60
    assert injected[0]["point"]["attempt"] == 1 and (injected[0]["removed"], injected[0]["added"]) == ("9", "6")
    retry = [e for e in step["events"] if e["kind"] == "retry"]
    assert retry and retry[0]["negative_context"]["attempt"] == 2
    # the retried prompt carried the negative context
    calls = [c for c in rt.pool._built["local"].calls if "ROLE: DEPTH ANALYST" in c[0].content]
    assert len(calls) == 2 and "RETRY CONTEXT" in calls[1][1].content
    assert "confidence 0.60 below 0.65" in calls[1][1].content and "RETRY CONTEXT" not in calls[0][1].content
    assert result.gear == 4 and result.verdicts["step8-final-verify"] == "PASS"


def test_hallucination_the_judge_catches_the_fabricated_quote_and_the_retry_recovers(gears):
    result, trace, _ = _run(gears, "hallucination")
    step = trace.step("step3-depth-analyst")
    first, second = step["output"]["attempts"]
    assert first["judge"]["score"] == 0.0 and first["judge"]["unsupported"][0].startswith("The Orsini Institute")
    assert first["failure_reason"].startswith("judge score 0.00 below 0.80")
    assert second["failure_reason"] is None and "Orsini" not in step["output"]["text"]
    judges = [e for e in step["events"] if e["kind"] == "judge"]
    assert [j["passed"] for j in judges] == [False, True]
    assert trace.step_health("step3-depth-analyst")["attempts"] == 2
    assert "step3-depth-analyst-recovered-on-attempt-2" in trace.contingencies()
    assert [e["point"]["attempt"] for e in _injections(trace, "step3-depth-analyst")] == [1]
    assert "Orsini" not in result.answer and result.status != "halted"


def test_persistent_every_attempt_fails_the_judge_and_the_turn_halts_with_the_full_diagnostic(gears):
    result, trace, _ = _run(gears, "persistent")
    assert result.status == "halted" and result.answer == ""
    diagnostic = result.diagnostic
    assert diagnostic["step"] == "step3-depth-analyst" and diagnostic["retries"] == 2
    assert [a["attempt"] for a in diagnostic["attempts"]] == [1, 2, 3]
    assert all(a["judge_score"] == 0.0 and a["failure_reason"].startswith("judge score")
               for a in diagnostic["attempts"])
    assert diagnostic["attempts"][0]["negative_context"] is None
    assert [a["negative_context"]["attempt"] for a in diagnostic["attempts"][1:]] == [2, 3]
    assert diagnostic["final_failure"] == diagnostic["attempts"][-1]["failure_reason"]
    # the step file keeps the diagnostic; health and contingencies name the halt
    assert trace.step("step3-depth-analyst")["output"]["diagnostic"] == diagnostic
    health = trace.step_health("step3-depth-analyst")
    assert (health["verdict"], health["attempts"]) == ("FAIL", 3)
    assert _contingency(trace, "step3-depth-analyst-halted-retries-exhausted")["severity"] == "error"
    assert trace.health()["status"] == "halted" and trace.turn()["diagnostic"] == diagnostic
    assert len(_injections(trace, "step3-depth-analyst")) == 3
    assert not trace.has_step("step4-breadth-evaluates-depth")  # nothing ran after the halt


def test_coverage_the_deterministic_assertion_halts_at_once_with_no_retry(gears):
    result, trace, _ = _run(gears, "coverage", plugins=[gears.Plugin(retrievers=[gears.Retriever(VAULT)])],
                            **CONCEPT_ONLY)
    assert result.status == "halted"
    assert result.diagnostic["step"] == "context-assertions" and result.diagnostic["retries"] == 0
    assert "concept" in result.diagnostic["final_failure"] and "vanished silently" in result.diagnostic["final_failure"]
    step = trace.step("context-assertions")
    assert step["output"]["attempts"] == 1 and step["input"]["streams_present"] == []
    assert [a["ok"] for a in step["output"]["assertions"]] == [False, True, True]
    assert not [e for e in step["events"] if e["kind"] in ("retry", "judge")]
    health = trace.step_health("context-assertions")
    assert (health["kind"], health["verdict"], health["attempts"]) == ("deterministic", "FAIL", 1)
    assert "context-assertions-assertion-stream-coverage-failed-halted" in trace.contingencies()
    injected = [e for e in trace.turn()["turn_events"] + trace.step("context-assembly")["events"]
                if e["kind"] == "fault_injected"]
    assert [e["point"]["site"] for e in injected] == ["package"]
    assert not any(s.startswith("step3") for s in trace.steps())  # no model step ran


def test_verifier_exception_is_broken_never_pass_and_the_injection_is_traced(gears):
    result, trace, _ = _run(gears, "verifier-exception")
    assert result.verdicts and set(result.verdicts.values()) == {"BROKEN"}
    for slot in ("depth", "breadth"):
        assert f"step6-cycle1-{slot}-verifier-BROKEN-not-verified" in trace.contingencies()
        assert f"step6-cycle1-{slot}-verify-verifier-exception" in trace.contingencies()
        verdict = trace.step(f"step6-cycle1-{slot}-verify")["output"]["verdict"]
        assert verdict["status"] == "BROKEN" and verdict["data"]["exception"]["error_class"] == "RuntimeError"
        assert trace.step_health(f"step6-cycle1-{slot}-verify")["verdict"] == "BROKEN"
        assert [e["effect"] for e in _injections(trace, f"step6-cycle1-{slot}-verify")] == ["raised"]
    assert not trace.has_step("step6-cycle2-depth-verify")  # BROKEN unblocks, no re-revision
    assert result.answer.startswith("[warning: not verified")
    assert "\n" not in result.answer.split("CONSOLIDATED")[0].strip()  # a one-line header
    oversight = trace.jsonl("oversight-queue.jsonl")
    assert [o["reason"] for o in oversight] == ["verifier-broken"] and oversight[0]["verdict"] == "BROKEN"
    assert "PASS" not in {s["verdict"] for s in trace.health()["steps"]}


def test_verifier_garbage_is_broken_never_pass(gears):
    result, trace, _ = _run(gears, "verifier-garbage")
    assert set(result.verdicts.values()) == {"BROKEN"}
    step = trace.step("step8-final-verify")
    assert step["output"]["verdict"]["raw_output"] == "ok!! ✓✓ lgtm"
    assert any("short" in r for r in step["output"]["verdict"]["reasons"])
    assert [e["point"]["site"] for e in _injections(trace, "step8-final-verify")] == ["verifier_output"]
    assert "step8-final-verify-verifier-BROKEN-not-verified" in trace.contingencies()
    assert trace.step_health("step8-final-verify")["verdict"] == "BROKEN"
    assert result.answer.startswith("[warning: not verified")
    assert trace.jsonl("oversight-queue.jsonl")[0]["reason"] == "verifier-broken"


def test_verifier_exception_on_a_registered_verifier_is_broken_too(gears):
    verifier = gears.Verifier()
    result, trace, _ = gears.run(rules=gears.rules(), inject_mode="verifier-exception",
                                 verification={"verifier": verifier.name, "final_verifier": verifier.name},
                                 plugins=[gears.Plugin(verifiers=[verifier])], **gears.diverse(gears.rules()))
    assert set(result.verdicts.values()) == {"BROKEN"} and verifier.packages == []  # never reached
    assert trace.step_health("step8-final-verify")["verdict"] == "BROKEN"


def test_backend_timeout_degrades_the_primary_stream_and_gear_4_continues_on_the_other(gears):
    result, trace, _ = _run(gears, "backend-timeout")
    assert result.status == "degraded" and result.gear == 4
    depth = trace.step("step3-depth-analyst")
    assert depth["output"]["status"] == "degraded" and depth["output"]["degraded_reason"] == "backend:timeout"
    assert depth["output"]["error"]["kind"] == "timeout"
    assert trace.step_health("step3-depth-analyst")["degraded"] is True
    assert "step3-depth-analyst-backend-timeout" in trace.contingencies()
    assert "gear4-depth-stream-degraded-continued-on-breadth" in trace.contingencies()
    assert "step3-depth-analyst" in trace.health()["degraded_steps"]
    assert [e["effect"] for e in _injections(trace, "step3-depth-analyst")] == ["raised"]
    assert "step6-cycle1-depth-verify" not in result.verdicts and "step6-cycle1-breadth-verify" in result.verdicts
    assert not trace.has_step("step4-breadth-evaluates-depth")


def test_backend_timeout_in_gear_2_has_nothing_left_and_halts_with_the_error_named(gears):
    rules = gears.rules()
    result, trace, _ = gears.run(rules=rules, mode="standard", inject_mode="backend-timeout", **MODEL)
    assert (result.status, result.gear) == ("halted", 2)
    assert result.diagnostic["step"] == "gear2-analyst" and result.diagnostic["error"]["kind"] == "timeout"
    assert "gear2-analyst-no-output-halted" in trace.contingencies()
    assert "gear2-analyst-backend-timeout" in trace.contingencies()
    assert trace.step_health("gear2-analyst")["verdict"] == "BROKEN"
    assert [e["effect"] for e in _injections(trace, "gear2-analyst")] == ["raised"]


def test_rate_limit_in_gear_2_hits_the_primary_analyst(gears):
    rules = gears.rules()
    result, trace, _ = gears.run(rules=rules, mode="standard", inject_mode="rate-limit", **MODEL)
    assert result.status == "halted" and result.diagnostic["error"]["kind"] == "rate_limited"
    assert "gear2-analyst-backend-rate_limited" in trace.contingencies()


def test_rate_limit_degrades_consolidation_and_the_longer_stream_ships_under_the_header(gears):
    result, trace, _ = _run(gears, "rate-limit")
    assert result.answer.startswith("[degraded — consolidation failed]\n")
    consolidation = trace.step("step7-consolidation")
    assert consolidation["output"]["degraded_reason"] == "backend:rate_limited"
    assert "step7-consolidation-backend-rate_limited" in trace.contingencies()
    shipped = _contingency(trace, "step7-consolidation-degraded-shipped-longer-stream")
    assert shipped["data"]["shipped"] in ("depth", "breadth")
    assert [e["effect"] for e in _injections(trace, "step7-consolidation")] == ["raised"]
    assert trace.step_health("step7-consolidation")["degraded"] is True
    # the final gate still ran on what ships
    assert result.verdicts["step8-final-verify"] == "PASS"


def test_rag_down_every_stream_fails_by_name_and_supplements_cannot_resolve(gears):
    request = ("## SUPPLEMENTAL RAG REQUEST\nGap: who funds the harness consortium\n"
               "Query terms: harness consortium funding\nWhy: the benefit claim depends on it")
    rules = gears.rules(first=[gears.role("SUPPLEMENTAL RAG RESULT", gears.reply("DEPTH-AFTER-FAILED-FETCH"),
                                          on="user"),
                               gears.role("ROLE: DEPTH ANALYST", request)])
    retriever = gears.Retriever(VAULT)
    result, trace, _ = _run(gears, "rag-down", rules, plugins=[gears.Plugin(retrievers=[retriever])],
                            **CONCEPT_ONLY)
    assert retriever.queries == []  # the injector raised before the retriever was reached
    failures = trace.jsonl("rag-failures.jsonl")
    context = [f for f in failures if f["step"] == "context-assembly"]
    assert [f["stream"] for f in context] == ["concept"]
    assert context[0]["error_class"] == "RetrievalError" and "injected fault" in context[0]["message"]
    supplement = [f for f in failures if f["step"] == "step3-depth-analyst"]
    assert len(supplement) == 1 and supplement[0]["supplement"] == 1
    lines = trace.jsonl("supplemental-rag.jsonl")
    assert len(lines) == 1 and lines[0]["resolved"] is False and lines[0]["failed_streams"] == ["concept"]
    assert "step3-depth-analyst-supplement-rag-failure" in trace.contingencies()
    assert [f["stream"] for f in trace.step("context-assembly")["output"]["rag_failures"]] == ["concept"]
    sites = [e["point"]["site"] for e in _injections(trace)]
    assert sites.count("retrieve") == 2  # context assembly + the one supplement
    assert result.status == "degraded"


# --- the CLI, in a subprocess, on a scripted-backend configuration file --------------------------------

def _toml(value):
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _write_config(path: Path, rules, traces: Path) -> Path:
    def backend(name, model, family):
        rows = ", ".join(f"{{ match = {_toml(r['match'])}, reply = {_toml(r['reply'])}, "
                         f"on = {_toml(r.get('on', 'system'))} }}" for r in rules)
        return [f"[backends.{name}]", 'type = "scripted"', f"model = {_toml(model)}", f"family = {_toml(family)}",
                f"options = {{ rules = [{rows}] }}"]

    lines = ["[trace]", f"root = {_toml(str(traces))}",
             *backend("local", "scripted-1", "scripted"), *backend("other", "scripted-2", "other"),
             "[roles]", 'breadth = "other"',
             "[verification]", 'verifier = "model"', 'final_verifier = "model"',
             "[retrieval.streams]", "concept = false", "conversation = false", "relationship = false",
             "web = false"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _ora(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-m", "ora_core.cli", "--config", str(config), *args],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.slow
def test_cli_inject_verifier_exception_shows_broken_and_never_pass(gears, tmp_path):
    config = _write_config(tmp_path / "ora.toml", gears.rules(), tmp_path / "traces")
    proc = _ora("run", "--inject", "verifier-exception", "--mode", "cui-bono", gears.PROMPT, config=config)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "BROKEN" in out and "PASS" not in out
    assert "step8-final-verify BROKEN" in proc.stdout
    assert "verifier-BROKEN-not-verified" in proc.stdout
    assert proc.stdout.startswith("[warning: not verified")
    assert "injected (verifier-exception) at verify: raised" in proc.stderr  # the progress line
    assert "status: degraded" in proc.stdout and "trace: " in proc.stdout


@pytest.mark.slow
def test_cli_inject_persistent_exits_4_and_prints_the_full_diagnostic(gears, tmp_path):
    config = _write_config(tmp_path / "ora.toml", gears.rules(), tmp_path / "traces")
    proc = _ora("run", "--inject", "persistent", "--mode", "cui-bono", gears.PROMPT, config=config)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "status: halted" in proc.stdout
    diagnostic = json.loads(proc.stderr.split("Diagnostic:\n", 1)[1].split("\n}\n", 1)[0] + "\n}")
    assert diagnostic["step"] == "step3-depth-analyst" and diagnostic["retries"] == 2
    assert len(diagnostic["attempts"]) == 3
    assert all("judge score 0.00 below 0.80" in a["failure_reason"] for a in diagnostic["attempts"])
    assert "attempts=3" in proc.stderr  # the progress line of the halted step


def test_cli_unknown_inject_mode_exits_2_listing_the_known_modes(gears, tmp_path):
    config = _write_config(tmp_path / "ora.toml", gears.rules(), tmp_path / "traces")
    proc = _ora("run", "--inject", "nope", "hello", config=config)
    assert proc.returncode == 2
    assert "unknown fault-injection mode 'nope'" in proc.stderr and ", ".join(KNOWN_MODES) in proc.stderr
