"""Who writes what, when: the writer thread in the pipeline's quiet time, the closing turn for
the rest; writes relative to a directory descriptor or by path; the turn directory kept inside
the trace root; values ``orjson`` would change kept as ``json`` writes them; secrets redacted
in every spelling."""

from __future__ import annotations

import enum
import io
import json
import math
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import ora_bypass
import ora_scripted
import ora_signals
import ora_trace_fs
import pytest
from ora_trace_fs import files, sink
from ora_trace_fs.render import SPECIAL_OUTPUT

import ora_modes
from ora_core.api import TurnResult
from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

PHASE_A = {"match": "PHASE A CLEANUP", "on": "system",
           "reply": "CLEANED PROMPT:\nCui bono on the harness shift?\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}
PROMPT = "Cui bono on the harness shift?"


def _runtime(root: Path, *, fsync: bool = False, latency: float = 0.0, **config):
    plugins = {"trace-fs": {"fsync": fsync, **config.pop("trace_fs", {})}}
    resolved = scripted_config(root, rules=[PHASE_A], plugins=plugins,
                               backends={"local": {"options": {"rules": [PHASE_A], "latency_s": latency}},
                                         **config.pop("backends", {})}, **config)
    host = make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs)
    return make_runtime(host, resolved, stderr=io.StringIO())


def _reference(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, default=str)


class Plain(enum.Enum):
    RED = "red"


@pytest.mark.parametrize("dir_fd", [True, False])
@pytest.mark.parametrize("fsync", [True, False])
def test_write_files_relative_to_a_directory_descriptor_or_by_path_alike(tmp_path, monkeypatch, dir_fd, fsync):
    monkeypatch.setattr(files, "_DIR_FD", dir_fd and files._DIR_FD)
    (tmp_path / "a.json").write_text('{"old": true}')
    (tmp_path / "sub").mkdir()
    items = [(str(tmp_path / "a.json"), b'{"new": 1}'), (str(tmp_path / "missing" / "b.json"), b"{}"),
             (str(tmp_path / "sub" / "c.md"), "é".encode()), (str(tmp_path / "missing" / "d.json"), b"{}"),
             (str(tmp_path / "e.md"), b"# e")]
    failed = files.write_files(items, fsync=fsync)
    assert [p for p, _ in failed] == [str(tmp_path / "missing" / "b.json"), str(tmp_path / "missing" / "d.json")]
    assert all(isinstance(exc, FileNotFoundError) for _, exc in failed)
    assert json.loads((tmp_path / "a.json").read_text()) == {"new": 1}
    assert (tmp_path / "sub" / "c.md").read_text() == "é" and (tmp_path / "e.md").read_text() == "# e"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["a.json", "c.md", "e.md"]


def test_the_writer_thread_writes_in_the_pipelines_quiet_time_and_the_close_writes_the_rest(tmp_path, monkeypatch):
    on_disk_at_close: list[str] = []
    original_close = sink.TraceFsSink._close

    def close(self, writer, timeout):
        on_disk_at_close.extend(sorted(os.listdir(writer.dir)) if writer.usable else [])
        return original_close(self, writer, timeout)

    monkeypatch.setattr(sink.TraceFsSink, "_close", close)
    result = run_turn(_runtime(tmp_path / "traces", latency=0.05), PROMPT)
    assert not result.tracing_degraded
    # waiting on the models, the pipeline was quiet: the writer thread had opened the turn and
    # written finished steps before the turn closed
    assert "contingencies.jsonl" in on_disk_at_close
    assert any(name.endswith("-phase-a.json") for name in on_disk_at_close), on_disk_at_close
    path = Path(result.trace_path)
    for step_file in path.glob("[0-9][0-9]-*.json"):
        assert json.loads(step_file.read_text())["status"] == "finished"
        assert step_file.with_suffix(".md").exists()
    assert json.loads((path / "turn.json").read_text())["status"] == result.status


def test_a_close_that_cannot_wait_longer_is_named_and_the_writer_finishes_the_turn_later(tmp_path):
    rt = _runtime(tmp_path / "traces", trace_fs={"close_timeout_s": 0.2})
    trace_sink = rt.host.get("trace_sink", "trace-fs")
    trace_sink._work.acquire()  # the writer thread, stuck on a slow disk
    try:
        result = run_turn(rt, "Hello!")
    finally:
        trace_sink._work.release()
    assert result.status == "ok" and result.answer
    assert result.tracing_degraded is True
    assert "did not finish within 0.2 s" in rt.stderr.getvalue()
    trace_sink._kick.set()
    for _ in range(200):  # the writer thread picks the turn up once the disk lets go
        if not trace_sink._late and list(tmp_path.glob("traces/*/*/turn.json")):
            break
        time.sleep(0.01)
    [turn_json] = list(tmp_path.glob("traces/*/*/turn.json"))
    assert json.loads(turn_json.read_text())["turn_id"] == result.turn_id


def test_a_conversation_directory_linked_outside_the_trace_root_is_refused_by_name(tmp_path):
    root = tmp_path / "traces"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "evil").symlink_to(outside, target_is_directory=True)
    rt = _runtime(root)
    result = run_turn(rt, "Hello!", conversation_id="evil")
    assert result.status == "ok" and result.answer
    assert result.tracing_degraded is True and result.trace_path is None
    assert "outside the trace root" in rt.stderr.getvalue()
    assert list(outside.iterdir()) == []
    (root / "real").mkdir()
    (root / "alias").symlink_to(root / "real", target_is_directory=True)  # a link that stays inside is fine
    result = run_turn(_runtime(root), "Hello!", conversation_id="alias")
    assert not result.tracing_degraded
    assert (root / "real" / Path(result.trace_path).name / "turn.json").exists()


def test_values_orjson_would_change_reach_the_files_as_json_writes_them(tmp_path):
    rt = _runtime(tmp_path / "traces")
    turn = rt.new_turn("Hello!").open()
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    output = {"score": math.nan, "ceiling": math.inf, "colour": Plain.RED, "when": when, "pair": (1, 2),
              "tiny": 5.7e-05, "nested": [{"ratio": 1.5e-07, "label": "0.00001"}]}
    with turn.step("scoring", values=[math.nan, 2]) as step:
        step.output.update(output)
    turn.emit("note", step="turn", tiny=5.7e-05, nan=math.nan)
    result = turn.close(TurnResult(status="ok", answer="done"))
    assert not result.tracing_degraded
    path = Path(result.trace_path)
    [step_file] = list(path.glob("*-scoring.json"))
    doc = json.loads(step_file.read_text())
    assert math.isnan(doc["output"]["score"]) and doc["output"]["ceiling"] == math.inf
    assert doc["output"]["colour"] == str(Plain.RED) and doc["output"]["when"] == str(when)
    assert doc["output"]["pair"] == [1, 2] and doc["output"]["tiny"] == 5.7e-05
    assert math.isnan(doc["input"]["values"][0])
    markdown = step_file.with_suffix(".md").read_text()
    for value in doc["output"].values():
        if not isinstance(value, str):
            assert "```json\n" + _reference(value) + "\n```" in markdown
    turn_doc = json.loads((path / "turn.json").read_text())
    assert (path / "turn.json").read_text() == _reference(turn_doc)
    assert math.isnan(turn_doc["turn_events"][0]["nan"]) and turn_doc["turn_events"][0]["tiny"] == 5.7e-05


def test_every_json_block_of_every_step_markdown_is_what_json_dumps_writes(tmp_path):
    result = run_turn(_runtime(tmp_path / "traces"), PROMPT, mode="cui-bono")
    path = Path(result.trace_path)
    blocks = 0
    for step_file in sorted(path.glob("[0-9][0-9]-*.json")):
        doc = json.loads(step_file.read_text())
        markdown = step_file.with_suffix(".md").read_text()
        for section in ("input", "output"):
            for key, value in (doc.get(section) or {}).items():
                if not isinstance(value, str) and not (section == "output" and key in SPECIAL_OUTPUT):
                    assert "```json\n" + _reference(value) + "\n```" in markdown, (step_file.name, value)
                    blocks += 1
    assert blocks > 40


def test_a_secret_is_redacted_in_every_spelling_it_can_take_on_disk(tmp_path, monkeypatch):
    secret = 'sk-"q"\\b-é-\x01'
    monkeypatch.setenv("ORA_TEST_KEY", secret)
    rt = _runtime(tmp_path / "traces", backends={"local": {"api_key_env": "ORA_TEST_KEY",
                                                           "options": {"rules": [PHASE_A]}}})
    result = run_turn(rt, f"Hello! my key is {secret}")
    spellings = {secret.encode(), json.dumps(secret)[1:-1].encode(),
                 json.dumps(secret, ensure_ascii=False)[1:-1].encode()}
    written = [p for p in Path(result.trace_path).iterdir() if p.is_file()]
    assert len(written) > 10
    for f in written:
        data = f.read_bytes()
        assert not any(s in data for s in spellings), f.name
    assert b"[REDACTED]" in (Path(result.trace_path) / "turn.json").read_bytes()
    assert b"[REDACTED]" in next(Path(result.trace_path).glob("*-phase-a.md")).read_bytes()


def test_a_short_write_is_continued_until_the_file_is_whole(tmp_path, monkeypatch):
    real_write = os.write
    calls: list[int] = []

    def trickle(fd, data):
        calls.append(fd)
        return real_write(fd, bytes(data[:5]))

    monkeypatch.setattr(files.os, "write", trickle)
    payload = "é — a step document, longer than five bytes".encode()
    failed = files.write_files([(str(tmp_path / "s.md"), payload)], fsync=False)
    monkeypatch.undo()
    assert failed == [] and (tmp_path / "s.md").read_bytes() == payload
    assert len(calls) == -(-len(payload) // 5)
