"""``ora bench``: every metric recomputed from hand-made trace directories, the scripted bench end to end
(figures reproduce, each inject mode takes its designed path), the bench-documents retriever, --save /
--compare / --from, and the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from ora_core.api import RetrievalError, RetrievalFilters
from ora_core.cli import state as cli_state
from ora_core.cli.app import build_app
from ora_core.engine.measure import bench
from ora_core.engine.measure.bench_metrics import MANIFEST, compute_metrics
from ora_core.testing import make_config, make_host

QUOTE = "The Orsini Institute report put the harness market at four trillion dollars."


# --- hand-made trace directories ----------------------------------------------------------------------

def step(name: str, kind: str, *, attempts: list[dict[str, Any]] | None = None, verdict: str = "OK",
         purpose: str = "", events: list[dict[str, Any]] | None = None, **health: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "verdict": verdict, "purpose": purpose, "events": events or [],
            "attempts": attempts, "health": health}


def analyst(*reasons: str | None, events: list[dict[str, Any]] | None = None, band: str = "high") -> dict[str, Any]:
    attempts = [{"attempt": i, "failure_reason": r, "band": band if i == 1 else "high"}
                for i, r in enumerate(reasons, 1)]
    return step("step3-depth-analyst", "probabilistic", attempts=attempts, purpose="analyst", events=events)


def planted(attempt: int) -> dict[str, Any]:
    return {"kind": "fault_injected", "mode": "hallucination", "effect": "replaced",
            "point": {"site": "model_output", "attempt": attempt, "purpose": "analyst", "primary": True},
            "added": f'\n\n> "{QUOTE}"'}


def judged(attempt: int, passed: bool, unsupported: list[str]) -> dict[str, Any]:
    return {"kind": "judge", "attempt": attempt, "passed": passed, "unsupported": unsupported}


def verify_fault(site: str = "verifier_output") -> dict[str, Any]:
    return {"kind": "fault_injected", "mode": "verifier-garbage", "effect": "replaced", "point": {"site": site}}


def write_scenario(run: Path, document: str, inject: str, status: str, steps: list[dict[str, Any]], *,
                   diagnostic: dict[str, Any] | None = None, contingencies: list[str] = (),  # type: ignore[assignment]
                   rag_failures: int = 0) -> Path:
    turn = run / document / inject / "bench" / "20260101T000000Z-abc"
    turn.mkdir(parents=True)
    names = list(contingencies) + ([f"fault-injection-{inject}"] if inject != "none" else [])
    (turn / "turn.json").write_text(json.dumps({"status": status, "diagnostic": diagnostic}))
    health = []
    for i, s in enumerate(steps, 1):
        attempts = s["attempts"]
        health.append({"step": s["name"], "kind": s["kind"], "verdict": s["verdict"],
                       "attempts": len(attempts) if attempts else 1, **s["health"]})
        output: dict[str, Any] = {"attempts": attempts} if attempts else {}
        if s["name"] == (diagnostic or {}).get("step"):
            output["diagnostic"] = diagnostic
        doc = {"step": s["name"], "index": i, "input": {"purpose": s["purpose"]} if s["purpose"] else {},
               "output": output, "events": s["events"]}
        (turn / f"{i:02d}-{s['name']}.json").write_text(json.dumps(doc))
    (turn / "step-health.json").write_text(json.dumps({"status": status, "steps": health}))
    (turn / "contingencies.jsonl").write_text("".join(
        json.dumps({"name": n, "data": {"mode": n.removeprefix("fault-injection-")}}) + "\n" for n in names))
    (turn / "rag-failures.jsonl").write_text("".join(json.dumps({"stream": "concept"}) + "\n"
                                                     for _ in range(rag_failures)))
    (turn / "oversight-queue.jsonl").write_text("")
    return turn


@pytest.fixture
def hand_made(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    context = step("context-assertions", "deterministic")
    write_scenario(run, "d1", "none", "ok", [context, analyst(None), step("step4-eval", "probabilistic")])
    write_scenario(run, "d1", "hallucination", "degraded", [analyst(
        "judge score 0.67 below 0.80", None,
        events=[planted(1), judged(1, False, [QUOTE]), judged(2, True, [])])])
    write_scenario(run, "d1", "persistent", "halted", [analyst(
        "judge score 0.67", "judge score 0.67", "judge score 0.67",
        events=[planted(1), planted(2), planted(3), judged(1, False, [QUOTE]), judged(2, False, [QUOTE]),
                judged(3, False, ["something else entirely, not the planted one"])])],
        diagnostic={"step": "step3-depth-analyst", "retries": 2})
    write_scenario(run, "d1", "verifier-garbage", "degraded", [
        analyst(None), step("v1", "verification", verdict="BROKEN", events=[verify_fault()]),
        step("v2", "verification", verdict="PASS", events=[verify_fault("verify")])])
    write_scenario(run, "d1", "lowconf", "ok", [
        step("context-assertions", "deterministic", events=[judged(1, True, [])]),
        analyst("confidence 0.60 below 0.65", None, band="low")])
    plan = [{"document": "d1", "inject": i, "trace_root": f"d1/{i}"}
            for i in ("none", "hallucination", "persistent", "verifier-garbage", "coverage", "lowconf")]
    (run / MANIFEST).write_text(json.dumps({"scenarios": plan}))
    return run


def test_judge_catch_rate_counts_planted_quotations_and_the_judge_failures_that_name_them(hand_made: Path) -> None:
    metrics = compute_metrics(hand_made)
    assert (metrics.judge_catch.num, metrics.judge_catch.den) == (3, 4)  # persistent's third attempt: not caught
    by = {o.inject: o for o in metrics.per_inject}
    assert (by["hallucination"].caught, by["hallucination"].planted) == (1, 1)
    assert (by["persistent"].caught, by["persistent"].planted) == (2, 3)
    assert metrics.judge_unjudged == 0


def test_a_fabrication_planted_in_an_attempt_the_judge_never_scored_is_not_caught_and_counted_apart(
        hand_made: Path) -> None:
    step_file = next((hand_made / "d1" / "hallucination").rglob("01-step3-depth-analyst.json"))
    doc = json.loads(step_file.read_text())
    doc["events"] = [e for e in doc["events"] if e["kind"] != "judge"]  # the step degraded before its gates
    step_file.write_text(json.dumps(doc))
    metrics = compute_metrics(hand_made)
    assert (metrics.judge_catch.num, metrics.judge_catch.den, metrics.judge_unjudged) == (2, 4, 1)


def test_retry_recovery_rate_is_recovered_over_retried_probabilistic_steps(hand_made: Path) -> None:
    metrics = compute_metrics(hand_made)
    assert (metrics.retry_recovery.num, metrics.retry_recovery.den) == (2, 3)  # hallucination, lowconf of 3


def test_average_attempts_at_the_boundary_and_over_every_probabilistic_step(hand_made: Path) -> None:
    metrics = compute_metrics(hand_made)
    assert (metrics.attempts_at_boundary.total, metrics.attempts_at_boundary.n) == (1 + 2 + 3 + 1 + 2, 5)
    assert (metrics.attempts_all_probabilistic.total, metrics.attempts_all_probabilistic.n) == (10, 6)


def test_deterministic_zero_overhead_is_false_with_the_judged_deterministic_step_named(hand_made: Path) -> None:
    zero = compute_metrics(hand_made).deterministic_zero_overhead
    assert (zero.holds, zero.steps) == (False, 2)
    assert zero.violations == ["d1 × lowconf: context-assertions: judged"]


def test_scenario_success_rate_counts_a_scenario_without_a_trace_as_failed_and_names_it(hand_made: Path) -> None:
    metrics = compute_metrics(hand_made)
    assert (metrics.scenario_success.num, metrics.scenario_success.den) == (4, 6)
    assert len(metrics.problems) == 1 and metrics.problems[0].startswith("d1 × coverage: no traced turn")


def test_broken_never_pass_counts_a_faulted_verification_recorded_as_pass(hand_made: Path) -> None:
    bnp = compute_metrics(hand_made).broken_never_pass
    assert (bnp.faulted, bnp.broken, bnp.passed, bnp.holds) == (2, 1, 1, False)


def test_per_inject_outcome_says_which_scenarios_left_their_designed_path(hand_made: Path) -> None:
    by = {o.inject: o for o in compute_metrics(hand_made).per_inject}
    assert {i: o.designed_held for i, o in by.items()} == {
        "none": 1, "hallucination": 1, "persistent": 1, "verifier-garbage": 0, "coverage": 0, "lowconf": 1}
    assert by["verifier-garbage"].deviations == ["d1: recorded other than BROKEN: v2"]
    assert by["persistent"].statuses == {"halted": 1} and by["coverage"].statuses == {"no trace": 1}


def test_the_metrics_change_when_the_trace_files_change(hand_made: Path) -> None:
    turn = next((hand_made / "d1" / "none").rglob("turn.json"))
    turn.write_text(json.dumps({"status": "halted"}))
    assert compute_metrics(hand_made).scenario_success.num == 3
    shutil.rmtree(hand_made / "d1" / "hallucination")
    metrics = compute_metrics(hand_made)
    assert (metrics.judge_catch.num, metrics.judge_catch.den) == (2, 3)
    assert any(p.startswith("d1 × hallucination: no traced turn") for p in metrics.problems)


# --- the scripted bench, end to end ----------------------------------------------------------------------

def first_party() -> Any:
    import ora_broken
    import ora_bypass
    import ora_evidence_guard
    import ora_health_detectors
    import ora_inject
    import ora_scripted
    import ora_signals
    import ora_trace_fs

    import ora_modes
    import ora_probes

    return make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs, ora_broken,
                     ora_health_detectors, ora_evidence_guard, ora_inject, ora_probes)


@pytest.fixture
def one_document(tmp_path: Path) -> Path:
    import ora_probes

    d = tmp_path / "docs"
    d.mkdir()
    shutil.copy(ora_probes.probes_dir() / "bench" / "harness-vendors.md", d)
    return d


def test_the_scripted_bench_takes_every_designed_path_and_its_figures_reproduce(tmp_path: Path,
                                                                                one_document: Path) -> None:
    host = first_party()
    docs = bench.load_documents(one_document)
    figures = []
    for n in (1, 2):
        run = bench.run_bench(host, docs, tmp_path / f"run{n}")
        assert [s.error for s in run.scenarios] == [None] * len(bench.INJECTS)
        metrics = compute_metrics(tmp_path / f"run{n}")
        assert metrics.problems == []
        assert {o.inject: o.designed_held for o in metrics.per_inject} == dict.fromkeys(bench.INJECTS, 1), \
            {o.inject: o.deviations for o in metrics.per_inject}
        figures.append((run.bench_hash, metrics.model_dump()))
    assert figures[0] == figures[1]
    metrics = compute_metrics(tmp_path / "run1")
    assert metrics.judge_catch.value == 1.0 and metrics.judge_catch.den == 1 + 3  # hallucination 1, persistent 3
    assert metrics.broken_never_pass.holds is True and metrics.deterministic_zero_overhead.holds is True


def test_a_bench_with_an_unknown_inject_mode_or_without_the_retriever_refuses_to_run(tmp_path: Path,
                                                                                     one_document: Path) -> None:
    docs = bench.load_documents(one_document)
    with pytest.raises(bench.BenchError, match="unknown inject mode"):
        bench.run_bench(first_party(), docs, tmp_path / "r", injects=["lowconfidence"])
    import ora_inject
    import ora_scripted

    with pytest.raises(bench.BenchError, match="'bench-documents' retriever is not registered"):
        bench.run_bench(make_host(ora_scripted, ora_inject), docs, tmp_path / "r2", injects=["none"])


def test_a_document_without_front_matter_is_named(tmp_path: Path) -> None:
    (tmp_path / "plain.md").write_text("Just text.")
    with pytest.raises(bench.BenchError, match=r"plain\.md: no front matter"):
        bench.load_documents(tmp_path)


def test_compare_gives_the_delta_of_each_figure(tmp_path: Path, hand_made: Path) -> None:
    run = bench.BenchRun(ora_version="0", kind="scripted", deterministic=True, bench_hash="h", base_config_hash="c",
                         config_sources=[], started_at="now", documents={}, injects=[])
    now = bench.results_of(run, compute_metrics(hand_made), hand_made)
    before = now.model_copy(update={"figures": {**now.figures, "scenario_success_rate": 0.5}})
    rows = {r["figure"]: r for r in bench.compare(now, before)}
    assert rows["scenario_success_rate"]["delta"] == round(4 / 6 - 0.5, 4)
    assert rows["judge_catch_rate"]["delta"] == 0
    assert rows["designed path held: verifier-garbage"]["delta"] == 0


# --- the bench-documents retriever ------------------------------------------------------------------------

def test_the_bench_retriever_serves_only_a_mapped_stream_and_diagnoses_emptiness(one_document: Path) -> None:
    from ora_probes.retriever import BenchDocumentsRetriever

    retriever = BenchDocumentsRetriever()
    mapped = make_config({"retrieval": {"retrievers": {"concept": "bench-documents"}},
                         "plugins": {"probes-default": {"bench_documents": str(one_document)}}}).config
    ctx = SimpleNamespace(config=mapped)
    hit = retriever.retrieve("Who benefits from harness vendors?", RetrievalFilters(), 3, ctx)
    assert hit.stream == "concept" and hit.chunks[0].provenance.source == "bench/harness-vendors.md"
    miss = retriever.retrieve("olive oil", RetrievalFilters(), 3, SimpleNamespace(config=mapped))
    assert miss.chunks == [] and miss.empty_diagnosis.empty_reason.value == "no_match"
    typed = retriever.retrieve("harness", RetrievalFilters(types=["web"]), 3, SimpleNamespace(config=mapped))
    assert typed.empty_diagnosis.empty_reason.value == "filtered_out"
    with pytest.raises(RetrievalError, match="serves only streams mapped to it"):
        retriever.retrieve("harness", RetrievalFilters(), 3, SimpleNamespace(config=make_config().config))


# --- the command line ---------------------------------------------------------------------------------------

@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.setattr(cli_state.state, "host", first_party())
    monkeypatch.setattr(cli_state.state, "config_path", None)
    return lambda *args: CliRunner().invoke(build_app(), ["bench", *args])


def test_ora_bench_json_prints_the_figures_beside_seed_003_and_saves_and_compares(cli: Any, tmp_path: Path,
                                                                                  one_document: Path) -> None:
    saved = tmp_path / "results.json"
    args = ["--json", "--inject", "none", "--inject", "persistent", "--documents", str(one_document)]
    first = cli(*args, "--out", str(tmp_path / "a"), "--save", str(saved))
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["seed_003"]["scenario_success_rate"]["text"] == "69.2% (9/13)"
    assert report["figures"]["scenario_success_rate"] == 0.5 and report["run"]["deterministic"] is True
    results = json.loads(saved.read_text())
    assert results["bench_hash"] == report["run"]["bench_hash"] and results["ora_version"]
    again = cli("--json", "--from", str(tmp_path / "a"), "--compare", str(saved))
    assert again.exit_code == 0, again.output
    rows = json.loads(again.stdout)["compare"]["rows"]
    assert all(r["delta"] in (0, None) for r in rows), rows


def test_ora_bench_options_given_before_a_subcommand_are_a_usage_error(cli: Any) -> None:
    result = cli("--json", "grounding")
    assert result.exit_code == 2
    assert "--json belong(s) to the reliability bench" in result.output
