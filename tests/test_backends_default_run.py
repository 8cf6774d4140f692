"""Acceptance on the installed plugins: with the bundled default configuration and no network,
``ora models list --check`` shows the local model reachable, and ``ora run`` answers with it,
every role of the trace's ``runtimeRoleModels`` naming it, with no mismatch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
MODEL = "SmolLM2-135M-Instruct"


def ora(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    env.update({"ORA__TRACE__ROOT": str(tmp_path / "traces"), "ORA__RETRIEVAL__PATH": str(tmp_path / "chroma"),
                "ORA__BACKENDS__LOCAL__OPTIONS__THREADS": "1", "HF_HUB_OFFLINE": "1",
                "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"), "XDG_DATA_HOME": str(tmp_path / "xdg-data")})
    return subprocess.run([sys.executable, "-m", "ora_core.cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)


def test_models_list_check_shows_the_local_model_reachable(tmp_path: Path) -> None:
    proc = ora(tmp_path, "models", "list", "--check", "--json")
    assert proc.returncode == 0, proc.stderr
    [local] = [r for r in json.loads(proc.stdout)["backends"] if r["backend"] == "local"]
    assert (local["type"], local["model"], local["distribution"]) == ("local-llm", MODEL, "ora-local-llm")
    assert local["check"]["reachable"] is True and local["check"]["info"]["chat_template_from_gguf"] is True


def test_a_default_run_answers_with_the_local_model_for_every_role(tmp_path: Path) -> None:
    proc = ora(tmp_path, "run", "--mode", "standard", "--json", "What is the capital of France?")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["answer"].strip() and result["trace_path"]
    turn = json.loads((Path(result["trace_path"]) / "turn.json").read_text())
    ledger = turn["runtimeRoleModels"]
    assert ledger and {e["role"] for e in ledger} >= {"analyst"}
    # the local backend runs the compact profile: Phase A is skipped, named, and spends no model call
    assert "phase-a-skipped-profile" in result["contingencies"] and "phase_a" not in {e["role"] for e in ledger}
    for entry in ledger:
        assert (entry["effectiveProvider"], entry["effectiveModel"]) == ("local-llm", MODEL), entry
        assert entry["mismatch"] is False and entry["error"] is None
    assert turn["runtimeRoleModelsMismatch"] is False
    assert result["runtime_role_models_mismatch"] is False
