"""The index beside the traces (``.ora-index.jsonl``): the sink appends one validated line per
closed turn; a read checks it against the turn directories and rebuilds what is missing from
the files, saying so; ``ora health`` reads it and names its populations ("degraded on 12 % of
multi-stream turns")."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import trace_turns
from ora_trace_fs import index
from ora_trace_fs.health import HealthAggregate
from ora_trace_fs.index import INDEX_NAME, IndexLine, line_from_files, scan
from ora_trace_fs.reading import aggregate_health

from ora_core.testing import run_turn


def _lines(root: Path) -> list[dict]:
    return [json.loads(x) for x in (root / INDEX_NAME).read_text().splitlines()]


def _two_turns(root: Path) -> list:
    rt = trace_turns.simple_runtime(root)
    return [run_turn(rt, "Cui bono on the harness shift?"), run_turn(rt, "Hello, what time is it?")]


def test_the_sink_appends_one_valid_line_per_closed_turn_matching_its_files(tmp_path):
    root = tmp_path / "traces"
    gear4, bypass = _two_turns(root)
    lines = _lines(root)
    assert [x["turn_id"] for x in lines] == [gear4.turn_id, bypass.turn_id]
    parsed = [IndexLine.model_validate(x) for x in lines]  # the shape the readers validate
    for line, result in zip(parsed, (gear4, bypass), strict=True):
        health = json.loads((Path(result.trace_path) / "step-health.json").read_text())
        assert line.status == result.status and line.mode == result.mode and line.gear == result.gear
        assert [(s.step, s.verdict, s.degraded) for s in line.steps] == [
            (h["step"], h["verdict"], h["degraded"]) for h in health["steps"]]
        assert line.contingencies == result.contingencies
        assert line.dir == Path(result.trace_path).relative_to(root).as_posix() and line.source == "sink"
    assert parsed[0].multi_stream is True and parsed[1].multi_stream is False  # depth and breadth vs bypass
    # the line rebuilt from the files says what the sink's says
    for line, result in zip(parsed, (gear4, bypass), strict=True):
        rebuilt = IndexLine.model_validate(line_from_files(Path(result.trace_path), root))
        assert rebuilt.model_dump(exclude={"source"}) == line.model_dump(exclude={"source"})


def test_a_secret_never_reaches_the_index(tmp_path, monkeypatch):
    secret = "sk-index-4f1e9a"
    monkeypatch.setenv("ORA_TEST_KEY", secret)
    rt = trace_turns.simple_runtime(tmp_path / "traces", backends={"local": {"api_key_env": "ORA_TEST_KEY"}})
    run_turn(rt, f"Hello! my key is {secret}")
    text = (tmp_path / "traces" / INDEX_NAME).read_text()
    assert secret not in text and "[REDACTED]" in text


def test_a_stale_index_is_completed_from_the_files_and_every_repair_is_said(tmp_path):
    root = tmp_path / "traces"
    first, second = _two_turns(root)
    third = run_turn(trace_turns.simple_runtime(root), "Hello again, what time is it?")
    good = (root / INDEX_NAME).read_text().splitlines()
    gone = json.loads(good[0])
    gone_dir = root / "default" / "20200101T000000.000000Z-gone00"
    (root / INDEX_NAME).write_text("\n".join([
        json.dumps({**gone, "dir": f"default/{gone_dir.name}", "turn_id": gone_dir.name}),  # a deleted turn
        good[0], good[0],  # the same turn twice (two rebuilds at once)
        '{"v": 1, "turn_id": "broken"',  # a torn or edited line
        # the second and third turns are missing (written by an older version, or lost)
    ]) + "\n")
    seen: list[IndexLine] = []
    found = scan(root, seen.append)
    assert sorted(x.turn_id for x in seen) == sorted([first.turn_id, second.turn_id, third.turn_id])
    assert found.from_index == 1 and found.rebuilt == 2
    notes = " | ".join(found.notes)
    assert "1 unreadable line(s)" in notes and "no longer on disk: left out" in notes
    assert "2 closed turn(s) were not in the index: read from their files and added" in notes
    # what was rebuilt was appended: the next read needs no repair for them
    again: list[IndexLine] = []
    found = scan(root, again.append)
    assert found.rebuilt == 0 and len(again) == 3
    assert {x.source for x in again if x.turn_id != first.turn_id} == {"rebuilt"}


def test_without_an_index_every_turn_is_read_from_its_files_and_the_index_written(tmp_path):
    root = tmp_path / "traces"
    _two_turns(root)
    sink_lines = _lines(root)
    (root / INDEX_NAME).unlink()
    report = aggregate_health(root)
    assert report["turns"] == 2 and report["index"]["rebuilt"] == 2
    assert any("no index at" in n for n in report["index"]["notes"])
    assert [x["turn_id"] for x in _lines(root)] == [x["turn_id"] for x in sink_lines]
    assert aggregate_health(root)["index"]["notes"] == []  # now complete: nothing to say


def test_health_from_the_index_equals_health_read_from_every_file(tmp_path):
    root = tmp_path / "traces"
    _two_turns(root)
    trace_turns.gear4_turn(root)
    from_index = aggregate_health(root)
    full = aggregate_health(root, rebuild_index=True)
    assert from_index["index"]["from_index"] == 3 and full["index"]["rebuilt"] == 3
    for key in ("turns", "statuses", "steps", "contingencies", "supplements", "noncompliance", "mismatches"):
        assert from_index[key] == full[key], key
    assert from_index["mismatches"]["turns"] == 1  # the gear-4 turn ran its roles on the spare model
    assert from_index["steps"]["role-slots"]["top_contingencies"][0]["name"] == "diversity-unavailable"


def _line(turn: int, *, gear: int, consolidation: str = "OK", degraded: bool = False, **more) -> IndexLine:
    steps = [{"step": "stage0-bypass"}]
    if gear == 4:
        steps += [{"step": "step3-depth-analyst"}, {"step": "step3-breadth-analyst"},
                  {"step": "step7-consolidation", "verdict": consolidation, "degraded": degraded,
                   "latency_s": 2.0 + turn % 7},
                  {"step": "step8-final-verify", "verdict": more.pop("final", "PASS")}]
    else:
        steps += [{"step": "direct-response", "latency_s": 1.0}]
    started = datetime(2026, 11, 1, tzinfo=timezone.utc) + timedelta(hours=turn)
    return IndexLine.model_validate({
        "turn_id": f"t{turn:03d}", "conversation_id": "c", "dir": f"c/t{turn:03d}", "started_at": started,
        "status": "degraded" if degraded else "ok", "gear": gear, "multi_stream": gear == 4, "steps": steps, **more})


def test_the_headline_names_the_share_and_its_population_twelve_percent_of_multi_stream_turns():
    aggregate = HealthAggregate()
    for i in range(25):  # 25 multi-stream turns, 3 with the consolidation degraded
        aggregate.add(_line(i, gear=4, consolidation="DEGRADED" if i < 3 else "OK", degraded=i < 3,
                            final="FAIL" if i % 5 == 0 else "PASS"))
    for i in range(25, 40):  # 15 single-stream turns, which never run a consolidation
        aggregate.add(_line(i, gear=1))
    report = aggregate.report(root=Path("/traces"), since=None)
    texts = [h["text"] for h in report["headlines"]]
    assert "step7-consolidation degraded on 12 % of multi-stream turns (3 of 25)" in texts
    assert "step8-final-verify FAIL on 20 % of multi-stream turns (5 of 25)" in texts
    consolidation = report["steps"]["step7-consolidation"]
    assert consolidation["degraded_pct"] == 12.0 and consolidation["runs"] == 25
    assert consolidation["latency_median_s"] == 5.0 and consolidation["latency_p95_s"] == 8.0
    assert report["steps"]["stage0-bypass"]["population"] == "turns"


def test_supplements_coverage_gaps_noncompliance_and_mismatches_are_counted_per_turn():
    aggregate = HealthAggregate()
    aggregate.add(_line(1, gear=4, supplements=2, supplements_resolved=1, coverage_gaps=1,
                        noncompliance={"confident-confabulator": 2}, mismatched_roles=["depth"]))
    aggregate.add(_line(2, gear=4))
    report = aggregate.report(root=Path("/traces"), since=None)
    assert report["supplements"] == {"turns_with": 1, "turns_with_pct": 50.0, "requests": 2, "resolved": 1,
                                     "resolved_pct": 50.0, "coverage_gap_turns": 1, "coverage_gap_pct": 50.0}
    assert report["noncompliance"] == {"confident-confabulator": {"count": 2, "turns": 1}}
    assert report["mismatches"] == {"turns": 1, "pct": 50.0, "roles": {"depth": 1}}


def test_a_coverage_gap_is_read_from_a_steps_own_text():
    assert index.output_has_coverage_gap({"text": "Partial answer.\n\n## COVERAGE GAP\nNo figure in the package."})
    assert index.output_has_coverage_gap({"answer": "COVERAGE GAP: the date of the approval."})
    assert not index.output_has_coverage_gap({"text": "The report covers gap analysis of coverage."})
    assert not index.output_has_coverage_gap("COVERAGE GAP: not a step output")
