"""Issue 13, item 5: a turn whose process died is named ``interrupted`` in ``ora trace ls``,
``ora trace show`` and ``ora health`` (counted apart), told from the turn's lock — held by the
writing process, freed by the kernel when it dies — never from the turn's age; a live turn shows
``running``; a pid reused by another process never makes a dead turn look alive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trace_turns
from ora_trace_fs import liveness
from ora_trace_fs.liveness import LOCK_NAME, process_alive, process_start_ticks, turn_liveness
from ora_trace_fs.reading import list_turns, load_turn

from ora_core.api import TurnResult
from ora_core.testing import run_turn

ORA = str(Path(sys.executable).with_name("ora"))
PHASE_A_REPLY = r"CLEANED PROMPT:\nCui bono on the harness shift?\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"


def _cli(tmp_path: Path, latency: float) -> tuple[str, dict[str, str]]:
    cfg = tmp_path / f"ora-{latency:g}.toml"
    rule = f'{{ match = "PHASE A CLEANUP", on = "system", reply = "{PHASE_A_REPLY}" }}'
    cfg.write_text(f"""
[trace]
root = "{tmp_path / 'traces'}"
[backends.local]
type = "scripted"
model = "scripted-1"
options = {{ latency_s = {latency}, rules = [{rule}] }}
""")
    env = dict(os.environ)
    env.pop("ORA_CONFIG", None)
    env["ORA_PLUGINS"] = "scripted,bypass,signals,modes-default,trace-fs"
    return str(cfg), env


def _ora(cfg: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ORA, "-c", cfg, *args], capture_output=True, text=True, env=env, timeout=120)


def _wait_for_open_turn(root: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> Path:
    """The turn directory once its turn.json (running) is on disk."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the child ended before its turn was open"
        found = list(root.glob("*/*/turn.json"))
        if found:
            return found[0].parent
        time.sleep(0.05)
    raise AssertionError(f"no turn.json under {root} within {timeout:g} s")


@pytest.mark.slow
def test_a_live_turn_is_running_and_the_same_turn_killed_is_interrupted_in_ls_show_and_health(tmp_path):
    cfg, env = _cli(tmp_path, latency=120.0)  # the first model call waits: the turn stays open
    root = tmp_path / "traces"
    child = subprocess.Popen([ORA, "-c", cfg, "run", "Cui bono on the harness shift?"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        turn_dir = _wait_for_open_turn(root, child)
        assert (turn_dir / LOCK_NAME).is_file()
        turn_json = json.loads((turn_dir / "turn.json").read_text())
        assert turn_json["status"] == "running" and turn_json["lock_file"] == LOCK_NAME
        # alive: running everywhere
        [row] = json.loads(_ora(cfg, env, "trace", "ls", "--json").stdout)
        assert row["status"] == "running", row
        shown = json.loads(_ora(cfg, env, "trace", "show", "--json").stdout)
        assert shown["status"] == "running"
        report = json.loads(_ora(cfg, env, "health", "--json").stdout)
        assert report["open_turns"] == {"running": 1, "interrupted": 0, "incomplete": 0}
        assert report["turns"] == 0
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    # dead: its turn.json still says running and its lock file is still there, but nobody holds it
    assert json.loads((turn_dir / "turn.json").read_text())["status"] == "running"
    assert (turn_dir / LOCK_NAME).is_file()
    [row] = json.loads(_ora(cfg, env, "trace", "ls", "--json").stdout)
    assert row["status"] == "interrupted" and "died before closing it" in row["status_why"]
    shown = json.loads(_ora(cfg, env, "trace", "show", "--json").stdout)
    assert shown["status"] == "interrupted"
    show_text = _ora(cfg, env, "trace", "show", "--brief").stdout
    assert "status: interrupted" in show_text
    table = _ora(cfg, env, "trace", "ls").stdout
    assert "│ interrupted" in table and "│ running" not in table
    health = _ora(cfg, env, "health", "--json")
    report = json.loads(health.stdout)
    assert report["open_turns"] == {"running": 0, "interrupted": 1, "incomplete": 0}
    assert report["statuses"] == {"interrupted": 1} and report["turns"] == 0  # apart from the closed turns
    assert "1 interrupted" in _ora(cfg, env, "health").stdout
    # a finished turn beside it is counted as closed, the dead one still apart
    cfg_fast, env_fast = _cli(tmp_path, latency=0.0)
    assert _ora(cfg_fast, env_fast, "run", "Hello, what time is it?").returncode == 0
    report = json.loads(_ora(cfg, env, "health", "--json").stdout)
    assert report["turns"] == 1 and report["open_turns"]["interrupted"] == 1


@pytest.mark.slow
def test_a_pid_reused_by_another_process_does_not_make_a_dead_turn_look_alive(tmp_path, monkeypatch):
    cfg, env = _cli(tmp_path, latency=120.0)
    root = tmp_path / "traces"
    child = subprocess.Popen([ORA, "-c", cfg, "run", "Cui bono on the harness shift?"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        turn_dir = _wait_for_open_turn(root, child)
        recorded = json.loads((turn_dir / LOCK_NAME).read_text())
        assert recorded["pid"] == child.pid and recorded["start_ticks"] == process_start_ticks(child.pid)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    # Another process now has the dead writer's pid (written into the lock file: the kernel would
    # hand the number out again sooner or later); its start time is its own.
    squatter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = turn_dir / LOCK_NAME
        lock.write_text(json.dumps({**recorded, "pid": squatter.pid}))
        doc = json.loads((turn_dir / "turn.json").read_text())
        assert turn_liveness(turn_dir, doc).state == "interrupted"  # the free lock decides
        # where flock is unavailable, the pid and start time decide: the squatter's start time differs
        monkeypatch.setattr(liveness, "_lock_held", lambda fd: None)
        report = turn_liveness(turn_dir, doc)
        assert report.state == "interrupted" and f"pid {squatter.pid}" in report.why
        # ...and the same check says running for a process that really is the recorded one
        lock.write_text(json.dumps({**recorded, "pid": squatter.pid,
                                    "start_ticks": process_start_ticks(squatter.pid)}))
        assert turn_liveness(turn_dir, doc).state == "running"
    finally:
        squatter.kill()
        squatter.wait(timeout=30)


def test_process_alive_needs_the_recorded_start_time_not_just_a_live_pid():
    me = os.getpid()
    ticks = process_start_ticks(me)
    assert ticks is not None
    assert process_alive(me, ticks) is True
    assert process_alive(me, ticks - 1) is False  # the same pid, another process's start
    assert process_alive(me, ticks, "another-boot") is False
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    assert process_alive(gone.pid, 1) is False


def test_a_turn_open_in_this_very_process_reads_as_running_and_as_its_status_once_closed(tmp_path):
    rt = trace_turns.simple_runtime(tmp_path / "traces")
    turn = rt.new_turn("Hello!").open()
    deadline = time.monotonic() + 10
    while not list((tmp_path / "traces").glob("*/*/turn.json")) and time.monotonic() < deadline:
        time.sleep(0.01)  # the writer thread opens the turn's directory
    [summary] = list_turns(tmp_path / "traces")
    assert summary.as_row()["status"] == "running"  # another descriptor of this process holds the lock
    result = turn.close(TurnResult(status="ok", answer="hi"))
    path = Path(result.trace_path)
    assert not (path / LOCK_NAME).exists()  # let go at the close, after the closing turn.json
    assert load_turn(path)["status"] == "ok" and list_turns(tmp_path / "traces")[0].as_row()["status"] == "ok"


def test_a_closed_turn_leaves_no_lock_file_and_names_it_in_turn_json(tmp_path):
    result = run_turn(trace_turns.simple_runtime(tmp_path / "traces"), "Hello, what time is it?")
    path = Path(result.trace_path)
    assert not (path / LOCK_NAME).exists() and not list(path.glob(".*.tmp"))
    turn = json.loads((path / "turn.json").read_text())
    assert turn["status"] == result.status and turn["lock_file"] == LOCK_NAME


def test_a_running_turn_written_before_the_lock_existed_is_incomplete_never_guessed_from_its_age(tmp_path):
    turn_dir = tmp_path / "traces" / "default" / "20200101T000000.000000Z-abcdef"
    turn_dir.mkdir(parents=True)
    (turn_dir / "turn.json").write_text(json.dumps({
        "turn_id": turn_dir.name, "conversation_id": "default", "prompt": "old", "status": "running",
        "started_at": "2020-01-01T00:00:00+00:00"}))  # years old, and no lock_file: cannot be told
    [summary] = list_turns(tmp_path / "traces")
    row = summary.as_row()
    assert row["status"] == "incomplete" and "cannot be told" in row["status_why"]
    # the same turn, naming a lock file that is gone: its process let go without closing it
    (turn_dir / "turn.json").write_text(json.dumps({
        "turn_id": turn_dir.name, "conversation_id": "default", "prompt": "old", "status": "running",
        "started_at": "2020-01-01T00:00:00+00:00", "lock_file": LOCK_NAME}))
    assert list_turns(tmp_path / "traces")[0].as_row()["status"] == "interrupted"
