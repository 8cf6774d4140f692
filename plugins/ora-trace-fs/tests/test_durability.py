"""``[trace] durability``: "turn" commits a turn's files before it returns; "async" hands the
finished turn to the writer, which commits finished turns in groups behind one durability
barrier. A crash (a real SIGKILL here) loses at most the last group: every turn the sink said
it committed is complete on disk, the turns lost are the last ones to close, and no file on disk
is ever half-written."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import ora_bypass
import ora_scripted
import ora_signals
import ora_trace_fs
import pytest
from ora_trace_fs import files, sink

import ora_modes
from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

PHASE_A = {"match": "PHASE A CLEANUP", "on": "system",
           "reply": "CLEANED PROMPT:\nCui bono on the harness shift?\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}
PROMPT = "Cui bono on the harness shift?"

CHILD = textwrap.dedent('''
    import io, os, sys
    import ora_bypass, ora_scripted, ora_signals, ora_trace_fs, ora_modes
    from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

    PHASE_A = {PHASE_A!r}

    def say(line):
        os.write(1, (line + "\\n").encode())  # one write per line: whole lines from two threads

    resolved = scripted_config(sys.argv[1], rules=[PHASE_A], trace={{"durability": "async"}},
                               plugins={{"trace-fs": {{"fsync": True}}}},
                               backends={{"local": {{"options": {{"rules": [PHASE_A], "latency_s": 0.002}}}}}})
    host = make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs)
    rt = make_runtime(host, resolved, stderr=io.StringIO())
    rt.host.get("trace_sink", "trace-fs").on_commit = lambda ids: say("COMMITTED " + " ".join(ids))
    prompts = ["Cui bono on the harness shift?", "Hello, what time is it?"]
    for i in range(int(sys.argv[2])):
        result = run_turn(rt, prompts[i % 2])
        say(f"RETURNED {{result.turn_id}} {{result.trace_path}}")
    say("DONE")
''').format(PHASE_A=PHASE_A)


def _runtime(root: Path, durability: str, **trace_fs):
    resolved = scripted_config(root, rules=[PHASE_A], trace={"durability": durability},
                               plugins={"trace-fs": {"fsync": False, **trace_fs}})
    host = make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs)
    return make_runtime(host, resolved, stderr=io.StringIO())


def complete(path: Path) -> bool:
    """The turn's ``turn.json`` says it finished, and every file it lists is there."""
    try:
        turn = json.loads((path / "turn.json").read_text())
    except FileNotFoundError:
        return False
    if turn["status"] == "running":
        return False
    return (path / "step-health.json").is_file() and all((path / s).is_file() for s in turn["steps"])


def whole_files(root: Path) -> int:
    """Every trace file (not the hidden temporary ones) parses whole; returns how many."""
    count = 0
    for f in root.rglob("*"):
        if not f.is_file() or f.name.startswith("."):
            continue
        text = f.read_text()
        if f.suffix == ".json":
            json.loads(text)
        elif f.suffix == ".jsonl":
            assert not text or text.endswith("\n"), f"partial last line in {f}"
            for line in text.splitlines():
                json.loads(line)
        else:
            assert f.suffix == ".md" and text, f
        count += 1
    return count


def test_turn_durability_commits_before_the_turn_returns(tmp_path):
    result = run_turn(_runtime(tmp_path / "traces", "turn"), PROMPT)
    assert not result.tracing_degraded and complete(Path(result.trace_path))


def test_turn_durability_closes_waiting_together_share_one_batch_and_each_returns_complete(tmp_path, monkeypatch):
    import asyncio
    import threading

    from ora_core.testing import run_turn_async

    rt = _runtime(tmp_path / "traces", "turn")
    trace_sink = rt.host.get("trace_sink", "trace-fs")
    batches: list[list[str]] = []
    end_batch = trace_sink._end_batch

    def recording(writers, closing):
        if closing:
            batches.append([w.info.turn_id for w in closing])
        return end_batch(writers, closing)

    monkeypatch.setattr(trace_sink, "_end_batch", recording)
    returned: dict[str, bool] = {}

    async def one() -> object:
        result = await run_turn_async(rt, PROMPT)
        returned[result.turn_id] = complete(Path(result.trace_path))  # on disk when the turn returned
        return result

    async def three() -> list[object]:
        return list(await asyncio.gather(one(), one(), one()))

    trace_sink._work.acquire()  # the writer is busy: the three closes queue behind it
    released = threading.Event()

    def release_when_all_wait() -> None:
        deadline = time.monotonic() + 30
        while len(trace_sink._closing) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        trace_sink._work.release()
        released.set()

    threading.Thread(target=release_when_all_wait, daemon=True).start()
    results = asyncio.run(three())
    assert released.is_set()
    assert all(not r.tracing_degraded for r in results) and all(returned.values()) and len(returned) == 3
    assert sorted(map(sorted, batches)) == [sorted(r.turn_id for r in results)]  # one batch for the three


def test_async_durability_returns_first_and_the_group_commit_completes_the_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(sink, "GROUP_COMMIT_S", 30.0)  # the group waits for flush(), not for time
    monkeypatch.setattr(sink, "QUIET_S", 30.0)
    rt = _runtime(tmp_path / "traces", "async")
    trace_sink = rt.host.get("trace_sink", "trace-fs")
    committed: list[list[str]] = []
    trace_sink.on_commit = committed.append
    results = [run_turn(rt, PROMPT) for _ in range(3)]
    assert all(r.trace_path and not r.tracing_degraded for r in results)
    assert not any(complete(Path(r.trace_path)) for r in results)  # returned before they were committed
    assert trace_sink.flush(30.0)
    assert committed == [[r.turn_id for r in results]]  # one group, in close order
    assert all(complete(Path(r.trace_path)) for r in results)


def test_close_waits_only_under_turn_durability_or_with_the_writer_too_far_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(sink, "GROUP_COMMIT_S", 30.0)
    monkeypatch.setattr(sink, "QUIET_S", 30.0)
    monkeypatch.setattr(sink, "MAX_PENDING_TURNS", 1)

    def answers_for(durability: str, turns: int) -> list[bool]:
        rt = _runtime(tmp_path / durability, durability)
        trace_sink = rt.host.get("trace_sink", "trace-fs")
        probe, answers = trace_sink.close_waits, []

        def recording(info):
            answers.append(probe(info))
            return answers[-1]

        trace_sink.close_waits = recording
        results = [run_turn(rt, PROMPT) for _ in range(turns)]
        assert all(r.trace_path and not r.tracing_degraded for r in results)
        assert trace_sink.flush(30.0) and all(complete(Path(r.trace_path)) for r in results)
        return answers

    assert answers_for("turn", 1) == [True]
    # the first async close hands its turn over; the second finds the writer a turn behind (the
    # group waits 30 s) and commits both itself, so it may wait
    assert answers_for("async", 2) == [False, True]


def test_a_writer_too_far_behind_makes_the_closing_turn_commit_the_waiting_ones_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(sink, "MAX_PENDING_TURNS", 1)
    monkeypatch.setattr(sink, "GROUP_COMMIT_S", 30.0)
    monkeypatch.setattr(sink, "QUIET_S", 30.0)
    rt = _runtime(tmp_path / "traces", "async")
    committed: list[list[str]] = []
    rt.host.get("trace_sink", "trace-fs").on_commit = committed.append
    first, second = run_turn(rt, PROMPT), run_turn(rt, PROMPT)
    assert committed == [[first.turn_id, second.turn_id]]
    assert complete(Path(first.trace_path)) and complete(Path(second.trace_path))


def test_a_write_error_found_after_the_turn_returned_degrades_the_next_turn_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sink, "GROUP_COMMIT_S", 30.0)
    monkeypatch.setattr(sink, "QUIET_S", 30.0)
    rt = _runtime(tmp_path / "traces", "async")
    trace_sink = rt.host.get("trace_sink", "trace-fs")
    first = run_turn(rt, PROMPT)
    original = files.write_files

    def failing(items, *, fsync):
        return [(path, OSError(28, "No space left on device")) for path, _ in items]

    monkeypatch.setattr(sink, "write_files", failing)
    assert trace_sink.flush(30.0)
    monkeypatch.setattr(sink, "write_files", original)
    assert not first.tracing_degraded  # it had returned before its files were written
    second = run_turn(rt, PROMPT)
    assert second.tracing_degraded
    stderr = rt.stderr.getvalue()
    assert f"turn {first.turn_id} (committed after it returned)" in stderr
    assert "No space left on device" in stderr


def test_interpreter_exit_commits_the_last_group(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    root = tmp_path / "traces"
    proc = subprocess.run([sys.executable, str(script), str(root), "4"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    returned = [line.split()[2] for line in proc.stdout.splitlines() if line.startswith("RETURNED")]
    assert len(returned) == 4 and all(complete(Path(p)) for p in returned)


@pytest.mark.slow
def test_sigkill_loses_at_most_the_last_group_and_never_leaves_a_partial_file(tmp_path):
    rng = random.Random(12)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    root = tmp_path / "traces"
    kills = lost_total = committed_total = 0
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, str(script), str(root), "100000"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        head: list[str] = []
        deadline = time.monotonic() + 90
        while sum(line.startswith("COMMITTED") for line in head) < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()  # a few groups committed, then a random moment
            assert line, "the child ended before committing anything"
            head.append(line)
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(proc.pid, signal.SIGKILL)
        kills += 1
        rest, _ = proc.communicate(timeout=30)  # what the child wrote before it died is still in the pipe
        assert proc.returncode == -signal.SIGKILL
        lines = [line for line in "".join(head).splitlines() + rest.splitlines()
                 if line.startswith(("COMMITTED", "RETURNED"))]
        committed = {tid for line in lines if line.startswith("COMMITTED") for tid in line.split()[1:]}
        returned = [(line.split()[1], Path(line.split()[2])) for line in lines if line.startswith("RETURNED")]
        committed_before = committed | {tid for tid, path in returned if complete(path)}
        # every turn the sink said it committed is complete on disk
        for tid, path in returned:
            if tid in committed:
                assert complete(path), f"turn {tid} was committed but is incomplete"
        # the turns lost are the last ones to close: the uncommitted form the tail of the returns
        states = [tid in committed_before for tid, _ in returned]
        assert states == sorted(states, reverse=True), f"a lost turn before a committed one: {states}"
        lost_total += states.count(False)
        committed_total += states.count(True)
    assert kills == 4 and committed_total > 0
    assert whole_files(root) > 0  # ...and nothing on disk is half-written
    print(f"{committed_total} turns committed and complete, {lost_total} returned turns lost in 4 kills")
