"""``ora calibrate`` on the command line: a run killed mid-way resumes from its checkpoint, usage
errors exit 2, and ``ora --help`` stays light."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ora_core.cli import state as cli_state
from ora_core.cli.app import build_app

TARGETED = ["--targeted", "pair:minimum-wage-en", "--targeted", "pair:rent-control-en", "--targeted",
            "pair:immigration-wages-en"]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "ora.toml"
    config.write_text('[plugins.trace-fs]\nfsync = false\n')
    profiles = tmp_path / "profiles.toml"
    profiles.write_text('[profiles.slow-planted]\ndescription = "the planted-bias instrument, 0.1 s a call"\n'
                        'instrument = "planted-bias"\ninstrument_latency_s = 0.1\n')
    return config, profiles


def test_ora_help_does_not_import_the_calibration_engine():
    code = ("import sys; from ora_core.cli.app import build_app; build_app(); "
            "print(sorted(m for m in sys.modules if m.startswith('ora_core.engine')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert "ora_core.engine.calibration" not in done.stdout


def test_two_modes_at_once_are_a_usage_error():
    result = CliRunner().invoke(build_app(), ["calibrate", "run", "--quick", "--full"])
    assert result.exit_code == 2 and "choose one of --quick, --full, --targeted" in result.output


def test_a_run_killed_after_its_first_pair_resumes_from_the_checkpoint(files, tmp_path, host, monkeypatch):
    config, profiles = files
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ora_core.cli", "-c", str(config), "calibrate", "run", *TARGETED,
               "--profile", "slow-planted", "--profiles", str(profiles), "--out", str(out)]
    checkpoint = out / "smoke-targeted-latest.partial.json"
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done_before: dict[str, str] = {}
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            if checkpoint.is_file():
                partial = json.loads(checkpoint.read_text())
                done_before = {p["id"]: p["left"]["turnId"] for p in partial["pairs"] if p["status"] == "completed"}
                if done_before:
                    break
            time.sleep(0.2)
    finally:
        proc.kill()  # SIGKILL: no clean-up runs
        _, err = proc.communicate(timeout=30)
    assert done_before, f"no pair finished before the deadline: {err[-2000:]}"
    assert len(done_before) < 3, "the run finished before it could be killed"
    monkeypatch.setattr(cli_state.state, "host", host)
    result = CliRunner().invoke(build_app(), ["-c", str(config), "calibrate", "run", *TARGETED, "--profile",
                                              "slow-planted", "--profiles", str(profiles), "--out", str(out),
                                              "--resume"])
    assert result.exit_code == 0, result.output
    [report_file] = [p for p in out.glob("smoke-targeted-*.json") if not p.name.endswith("partial.json")]
    report = json.loads(report_file.read_text())
    assert report["status"] == "complete" and [p["status"] for p in report["pairs"]] == ["completed"] * 3
    assert report["resumedFrom"] == [str(checkpoint)] and not checkpoint.exists()
    for pair in report["pairs"]:
        if pair["id"] in done_before:
            assert pair["left"]["turnId"] == done_before[pair["id"]]  # kept, not run again
    assert "resuming:" in result.output and f"{len(done_before)} pair(s) done" in result.output
