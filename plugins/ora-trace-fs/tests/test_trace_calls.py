"""``ora trace calls`` lists a turn's model calls from its step files; ``ora trace replay`` re-sends one
recorded call, message for message, to the configured backend (or ``--backend``) and prints the new
output beside the recorded one. Run through the real ``ora`` command on a real traced turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ORA = str(Path(sys.executable).with_name("ora"))
PHASE_A = "CLEANED PROMPT:\\nWhy does the harness shift matter?\\nCORRECTIONS:\\n- none\\nINFERRED ITEMS:\\n- none"
ANALYSIS = ("The harness shift matters because vendors bundle models with tooling, so customers move budgets "
            "toward bundles and the evidence names no figure for it.\\nCONFIDENCE: 0.90")
PROMPT = "Why does the harness shift matter?"

pytestmark = pytest.mark.slow


def _setup(tmp_path: Path) -> tuple[str, dict[str, str]]:
    cfg = tmp_path / "ora.toml"
    cfg.write_text(f"""
[trace]
root = "{tmp_path / 'traces'}"
[backends.local]
type = "scripted"
model = "scripted-1"
family = "scripted"
options = {{ rules = [{{ match = "PHASE A CLEANUP", on = "system", reply = "{PHASE_A}" }},
                      {{ match = "ROLE: ANALYST", on = "system", reply = "{ANALYSIS}" }}] }}
[backends.other]
type = "scripted"
model = "scripted-other"
family = "other"
options = {{ default = "A different model says something else.\\nCONFIDENCE: 0.90" }}
[retrieval.streams]
concept = false
conversation = false
relationship = false
""")
    env = dict(os.environ)
    env.pop("ORA_CONFIG", None)
    env["ORA_PLUGINS"] = "scripted,bypass,signals,modes-default,trace-fs"
    run = subprocess.run([ORA, "-c", str(cfg), "run", "--mode", "standard", "--json", PROMPT], capture_output=True,
                         text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return str(cfg), env | {"TURN": json.loads(run.stdout)["turn_id"]}


def _ora(cfg: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ORA, "-c", cfg, "trace", *args], capture_output=True, text=True, env=env, timeout=120)


def test_calls_lists_every_call_and_replay_resends_one_beside_the_recording(tmp_path):
    cfg, env = _setup(tmp_path)
    turn = env["TURN"]
    listed = _ora(cfg, env, "calls", turn, "--json")
    assert listed.returncode == 0, listed.stderr
    calls = json.loads(listed.stdout)
    assert [(c["step"], c["step_call"], c["role"]) for c in calls] == [("phase-a", 1, "phase_a"),
                                                                         ("gear2-analyst", 1, "analyst")]
    assert [c["call"] for c in calls] == [1, 2] and all(c["messages"] and c["output"] for c in calls)
    table = _ora(cfg, env, "calls", turn[:18], "--step", "gear2-analyst")
    assert table.returncode == 0 and "gear2-analyst #1 (turn call 2)  analyst on local" in table.stdout
    assert "why: first attempt" in table.stdout

    same = _ora(cfg, env, "replay", turn, "--step", "gear2-analyst", "--call", "1", "--json")
    assert same.returncode == 0, same.stderr
    again = json.loads(same.stdout)
    assert again["backend"] == "local" and again["output"] == again["recorded_output"] == calls[1]["output"]
    other = _ora(cfg, env, "replay", turn, "--step", "gear2-analyst", "--call", "1", "--backend", "other")
    assert other.returncode == 0, other.stderr
    assert "--- recorded: local scripted-1" in other.stdout and "--- now: other scripted-other" in other.stdout
    assert "A different model says something else." in other.stdout and "--- changed" in other.stdout


def test_a_turn_step_call_or_backend_that_does_not_exist_is_named(tmp_path):
    cfg, env = _setup(tmp_path)
    turn = env["TURN"]
    cases = {
        ("replay", "20990101T000000", "--step", "gear2-analyst", "--call", "1"): "no turn '20990101T000000'",
        ("replay", turn, "--step", "gear9-nothing", "--call", "1"): "has no step 'gear9-nothing' (its steps: ",
        ("replay", turn, "--step", "gear2-analyst", "--call", "7"): "has no call 7 (its calls: 1)",
        ("replay", turn, "--step", "gear2-analyst", "--call", "1", "--backend", "nowhere"):
            "backend 'nowhere' (--backend) is not configured (configured backends: local, other)",
        ("calls", turn, "--step", "gear9-nothing"): "has no step 'gear9-nothing'",
    }
    for args, message in cases.items():
        done = _ora(cfg, env, *args)
        assert done.returncode == 1 and message in done.stderr, (args, done.stderr)
