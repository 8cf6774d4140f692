"""The writer's batches: staged files written whole behind one durability barrier, failures
named, concurrent turns each complete in their own directory, and the fast indented JSON
identical to ``json.dumps``."""

from __future__ import annotations

import asyncio
import enum
import io
import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path

import ora_bypass
import ora_scripted
import ora_signals
import ora_trace_fs
import pytest
from ora_trace_fs import files, sink
from ora_trace_fs.files import write_files
from ora_trace_fs.pretty import dumps_pretty

import ora_modes
from ora_core.testing import make_host, make_runtime, run_turn, run_turn_async, scripted_config

PHASE_A = {"match": "PHASE A CLEANUP", "on": "system",
           "reply": "CLEANED PROMPT:\nCui bono on the harness shift?\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}
PROMPT = "Cui bono on the harness shift?"


def _runtime(root: Path, *, fsync: bool, latency: float = 0.0):
    resolved = scripted_config(root, rules=[PHASE_A], plugins={"trace-fs": {"fsync": fsync}},
                               backends={"local": {"options": {"rules": [PHASE_A], "latency_s": latency}}})
    host = make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs)
    return make_runtime(host, resolved, stderr=io.StringIO())


def _reference(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False, default=str)


class Colour(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def test_dumps_pretty_is_byte_for_byte_json_dumps_indent_2():
    awkward = [
        {"a": [1, 2.5, None, True, False, "quote \" back \\ nl \n tab \t nul \x00 ls \u2028 é 😀"], 7: {},
         2.5: [], None: (1,), True: math.nan, False: -math.inf, 8.0: 0, "inf": math.inf},
        [], {}, "", 0, -0.0, 1e300, 1e-7, 12345678901234567890, [[[]]], [{}],
        {"x": [{"y": [1, [2, {"z": None}]]}]}, datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        {"when": datetime(2026, 1, 2), "set": {1}, "enum": Colour.RED, "int-enum": Level.HIGH}, Colour.RED,
    ]
    for value in awkward:
        assert dumps_pretty(value) == _reference(value), value
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        dumps_pretty(loop)
    with pytest.raises(TypeError):
        dumps_pretty({(1, 2): "tuple keys are not JSON"})


def test_step_markdown_and_turn_json_are_what_json_dumps_would_have_written(tmp_path):
    result = run_turn(_runtime(tmp_path / "traces", fsync=False), PROMPT)
    path = Path(result.trace_path)
    turn = json.loads((path / "turn.json").read_text())
    assert (path / "turn.json").read_text() == _reference(turn)
    health = json.loads((path / "step-health.json").read_text())
    assert (path / "step-health.json").read_text() == _reference(health)
    step = json.loads((path / "02-phase-a.json").read_text())
    assert step["status"] == "finished"  # started and finished in one batch: the last version
    markdown = (path / "02-phase-a.md").read_text()
    for value in step["output"].values():
        if not isinstance(value, str):
            assert "```json\n" + _reference(value) + "\n```" in markdown


@pytest.mark.parametrize("fsync", [True, False])
def test_write_files_writes_every_file_whole_and_names_the_ones_it_cannot(tmp_path, fsync):
    (tmp_path / "a.json").write_text('{"old": true}')
    items = [(tmp_path / "a.json", b'{"new": 1}'), (tmp_path / "missing-dir" / "b.json", b"{}"),
             (tmp_path / "c.md", "é".encode())]
    failed = write_files(items, fsync=fsync)
    assert [p for p, _ in failed] == [tmp_path / "missing-dir" / "b.json"]
    assert isinstance(failed[0][1], FileNotFoundError)
    assert json.loads((tmp_path / "a.json").read_text()) == {"new": 1}
    assert (tmp_path / "c.md").read_text() == "é"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "c.md"]  # no temporary file left


def test_a_failing_syncfs_is_a_named_trace_failure_never_a_silent_one(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_SYNCFS", lambda fd: -1)
    monkeypatch.setattr(sink, "SYNCFS_AVAILABLE", True)
    rt = _runtime(tmp_path / "traces", fsync=True)
    result = run_turn(rt, PROMPT)
    assert result.status in ("ok", "degraded") and result.answer
    assert result.tracing_degraded is True
    assert "syncfs failed" in rt.stderr.getvalue()
    path = Path(result.trace_path)
    assert not [p for p in path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(not files.SYNCFS_AVAILABLE, reason="syncfs is Linux-only; elsewhere fsync runs per file")
def test_concurrent_turns_each_get_their_own_complete_trace_behind_shared_barriers(tmp_path, monkeypatch):
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    rt = _runtime(tmp_path / "traces", fsync=True, latency=0.01)

    async def many() -> list:
        return list(await asyncio.gather(*(run_turn_async(rt, PROMPT) for _ in range(12))))

    results = asyncio.run(many())
    paths = [Path(r.trace_path) for r in results]
    assert len(set(paths)) == 12
    for result, path in zip(results, paths, strict=True):
        assert not result.tracing_degraded, rt.stderr.getvalue()
        assert json.loads((path / "turn.json").read_text())["status"] == result.status
        assert json.loads((path / "step-health.json").read_text())["turn_id"] == result.turn_id
        assert all(json.loads(p.read_text())["status"] == "finished" for p in path.glob("[0-9][0-9]-*.json"))
        assert not [p for p in path.iterdir() if p.name.endswith(".tmp")]
    assert fsyncs == []  # durability came from syncfs barriers, not one fsync per file
