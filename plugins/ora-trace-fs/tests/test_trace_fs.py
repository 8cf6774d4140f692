"""The forensic trace on disk: layout, atomicity, redaction, sanitised ids, failures that never
break the run, and the commands that read traces back."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import ora_bypass
import ora_scripted
import ora_signals
import ora_trace_fs
import pytest
from ora_trace_fs.files import AppendLog, atomic_write, safe_component

import ora_modes
from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

ORA = str(Path(sys.executable).with_name("ora"))
REPLY = r"CLEANED PROMPT:\nCui bono on the harness shift?\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"
PHASE_A = {"match": "PHASE A CLEANUP", "on": "system",
           "reply": "CLEANED PROMPT:\nCui bono on the harness shift?\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}


def _runtime(root: Path, **config):
    resolved = scripted_config(root, rules=[PHASE_A], **config)
    host = make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs)
    return make_runtime(host, resolved, stderr=io.StringIO())


def test_turn_directory_holds_every_file_complete_when_the_turn_returns(tmp_path):
    result = run_turn(_runtime(tmp_path / "traces"), "Cui bono on the harness shift?")
    path = Path(result.trace_path)
    assert path.parent.parent == tmp_path / "traces" and path.parent.name == "default"
    assert path.name.startswith(result.turn_id[:8])  # <utc-timestamp>...
    names = {p.name for p in path.iterdir()}
    assert {"turn.json", "step-health.json", "rag-failures.jsonl", "supplemental-rag.jsonl",
            "contingencies.jsonl", "oversight-queue.jsonl"} <= names
    for step in ("01-stage0-bypass", "02-phase-a", "03-pre-routing", "04-context-assembly",
                 "07-step3-depth-analyst", "15-step7-consolidation", "17-final-output"):
        assert f"{step}.json" in names and f"{step}.md" in names
        assert json.loads((path / f"{step}.json").read_text())["status"] == "finished"
    turn = json.loads((path / "turn.json").read_text())
    assert turn["status"] == result.status and turn["prompt"] == "Cui bono on the harness shift?"
    assert turn["config_hash"] and "ora_trace_fs" in turn["plugins"]  # in-process: module name
    assert turn["timings"]["total_s"] > 0 and set(turn["timings"]["steps"]) >= {"phase-a", "pre-routing"}
    roles = [c["role"] for c in turn["runtimeRoleModels"]]
    assert roles[0] == "phase_a" and {"depth", "breadth", "consolidator"} <= set(roles)
    assert turn["runtimeRoleModelsMismatch"] is False
    health = json.loads((path / "step-health.json").read_text())
    assert [s["step"] for s in health["steps"]][:2] == ["stage0-bypass", "phase-a"]
    assert "diversity-unavailable" in health["contingencies"]
    lines = (path / "contingencies.jsonl").read_text().splitlines()
    assert [json.loads(line)["name"] for line in lines] == result.contingencies
    assert not [p for p in path.iterdir() if p.name.endswith(".tmp")]


def test_a_fallback_shows_as_a_role_model_mismatch_in_turn_json(tmp_path):
    config = {"backends": {"spare": {"type": "scripted", "model": "spare-1"},
                           "local": {"fallbacks": ["spare"]}}}
    rt = _runtime(tmp_path / "traces", **config)
    rt.config.backends["local"].options["default"] = "!error:timeout"
    result = run_turn(rt, "Hello!")
    turn = json.loads((Path(result.trace_path) / "turn.json").read_text())
    assert turn["runtimeRoleModelsMismatch"] is True
    assert [c["mismatch"] for c in turn["runtimeRoleModels"]] == [False, True]


def test_secrets_known_to_the_config_never_reach_the_disk(tmp_path, monkeypatch):
    secret = "sk-test-7f3a9c1e5b2d"
    monkeypatch.setenv("ORA_TEST_KEY", secret)
    rt = _runtime(tmp_path / "traces", backends={"local": {"api_key_env": "ORA_TEST_KEY"}})
    result = run_turn(rt, f"Hello! my key is {secret}")
    files = list(Path(result.trace_path).iterdir())
    assert files
    for f in files:
        assert secret not in f.read_text(), f.name
    assert "[REDACTED]" in (Path(result.trace_path) / "turn.json").read_text()


def test_conversation_id_is_sanitised(tmp_path):
    root = tmp_path / "traces"
    result = run_turn(_runtime(root), "Hello!", conversation_id="../../etc")
    path = Path(result.trace_path).resolve()
    assert path.is_relative_to(root.resolve())
    assert ".." not in path.relative_to(root.resolve()).parts
    assert safe_component("../../etc") == "etc"
    assert safe_component("a/b\\c\x00d e") == "a-b-c-d-e"
    assert safe_component("...") == "default"


def test_unwritable_trace_root_the_run_completes_and_says_why(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the trace root should be")
    rt = _runtime(blocker / "traces")
    result = run_turn(rt, "Hello!")
    assert result.status == "ok" and result.answer
    assert result.tracing_degraded is True
    assert result.trace_path is None
    err = rt.stderr.getvalue()
    assert "cannot create the trace directory" in err and "not-a-dir" in err


def test_a_write_failure_mid_turn_is_reported_and_degrades_tracing(tmp_path):
    rt = _runtime(tmp_path / "traces")
    from ora_trace_fs import sink as sink_module

    original = sink_module.render_step_markdown

    def exploding(doc):
        if doc["step"] == "phase-a":
            return "\udcff"  # cannot be encoded: the .md write of this step fails
        return original(doc)

    sink_module.render_step_markdown = exploding
    try:
        result = run_turn(rt, "Cui bono on the harness shift?")
    finally:
        sink_module.render_step_markdown = original
    assert result.status == "degraded" and result.answer
    assert result.tracing_degraded is True
    assert "trace-fs" in rt.stderr.getvalue() and "phase-a" in rt.stderr.getvalue()
    path = Path(result.trace_path)
    assert (path / "02-phase-a.json").exists() and (path / "07-step3-depth-analyst.md").exists()


def test_atomic_write_replaces_whole_files_and_jsonl_lines_are_single_writes(tmp_path):
    target = tmp_path / "x.json"
    atomic_write(target, b'{"a": 1}', fsync=True)
    atomic_write(target, b'{"a": 2}', fsync=False)
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
    log = AppendLog(tmp_path / "log.jsonl")
    log.append(b'{"n": 1}')
    log.append(b'{"n": 2}\n')
    log.close(fsync=True)
    assert [json.loads(x)["n"] for x in (tmp_path / "log.jsonl").read_text().splitlines()] == [1, 2]


def test_handle_only_queues_and_close_turn_drains(tmp_path):
    rt = _runtime(tmp_path / "traces", plugins={"trace-fs": {"fsync": False}})
    sink = rt.host.get("trace_sink", "trace-fs")
    turn = rt.new_turn("Hello!").open()
    start = time.perf_counter()
    for i in range(200):
        turn.emit("note", step="turn", i=i)
    per_event = (time.perf_counter() - start) / 200
    info = sink.close_turn(turn.info)
    assert info["errors"] == [] and Path(info["trace_path"], "turn.json").exists()
    assert per_event < 0.005  # generous: the event is only queued; the disk is the writer's


def _env(tmp_path: Path) -> dict[str, str]:
    """Only the plugins these runs are about: installed retrievers would load real models."""
    env = dict(os.environ)
    env.pop("ORA_CONFIG", None)
    env["ORA__TRACE__ROOT"] = str(tmp_path / "traces")
    env["ORA_PLUGINS"] = "scripted,bypass,signals,modes-default,trace-fs"
    return env


def _config(tmp_path: Path, latency: float = 0.0) -> Path:
    cfg = tmp_path / "ora.toml"
    cfg.write_text(f"""
[trace]
root = "{tmp_path / 'traces'}"
[backends.local]
type = "scripted"
model = "scripted-1"
options = {{ latency_s = {latency}, rules = [{{ match = "PHASE A CLEANUP", on = "system", reply = "{REPLY}" }}] }}
""")
    return cfg


@pytest.mark.slow
def test_trace_ls_show_and_health_read_back_real_runs(tmp_path):
    cfg = str(_config(tmp_path))
    env = _env(tmp_path)
    for prompt in ("Hello, what time is it?", "Cui bono on the harness shift?"):
        run = subprocess.run([ORA, "-c", cfg, "run", prompt], capture_output=True, text=True, env=env, timeout=60)
        assert run.returncode == 0, run.stderr
    ls = subprocess.run([ORA, "-c", cfg, "trace", "ls", "--json"], capture_output=True, text=True, env=env)
    rows = json.loads(ls.stdout)
    assert [r["mode"] for r in rows] == ["cui-bono", "simple"]
    show = subprocess.run([ORA, "-c", cfg, "trace", "show"], capture_output=True, text=True, env=env)
    assert show.returncode == 0, show.stderr
    assert "step3-depth-analyst" in show.stdout and "Signal strength summary" in show.stdout
    show_one = subprocess.run([ORA, "-c", cfg, "trace", "show", rows[1]["turn_id"][:20], "--brief"],
                              capture_output=True, text=True, env=env)
    assert "stage0-bypass" in show_one.stdout and "direct-response" in show_one.stdout
    health = subprocess.run([ORA, "-c", cfg, "health", "--json"], capture_output=True, text=True, env=env)
    report = json.loads(health.stdout)
    assert report["turns"] == 2
    assert report["steps"]["stage0-bypass"]["runs"] == 2
    assert report["steps"]["role-slots"]["runs"] == 1
    assert report["steps"]["role-slots"]["top_contingencies"][0]["name"] == "diversity-unavailable"
    future = subprocess.run([ORA, "-c", cfg, "health", "--json", "--since", "2999-01-01"],
                            capture_output=True, text=True, env=env)
    assert json.loads(future.stdout)["turns"] == 0
    bad = subprocess.run([ORA, "-c", cfg, "health", "--since", "yesterday-ish"], capture_output=True,
                         text=True, env=env)
    assert bad.returncode == 1 and "--since" in bad.stderr


@pytest.mark.slow
def test_sigkill_at_random_moments_leaves_no_partial_file_or_line(tmp_path):
    import random

    rng = random.Random(5)
    cfg = str(_config(tmp_path, latency=0.03))
    env = _env(tmp_path)
    root = tmp_path / "traces"

    def turns_started() -> int:
        return len(list(root.glob("*/*/"))) if root.exists() else 0

    kills = 0
    for _ in range(8):
        base = turns_started()
        procs = [subprocess.Popen([ORA, "-c", cfg, "run", "Cui bono on the harness shift?"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                 for _ in range(3)]
        for i, proc in enumerate(procs):
            # Interpreter start-up is slow and variable on a busy machine: the random moment is
            # measured from when this process's turn has opened its trace directory.
            deadline = time.monotonic() + 30
            while turns_started() <= base + i and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.4))
            proc.kill()
            kills += 1
        for proc in procs:
            proc.wait(timeout=30)
    assert kills == 24
    json_files = list(root.rglob("*.json"))
    jsonl_files = list(root.rglob("*.jsonl"))
    assert json_files, "the kills were all too early to leave any trace; widen the window"
    for f in json_files:
        json.loads(f.read_text())  # raises on a partial file
    lines = 0
    for f in jsonl_files:
        text = f.read_text()
        assert not text or text.endswith("\n"), f"partial last line in {f}"
        for line in text.splitlines():
            json.loads(line)
            lines += 1
    assert lines > 0
