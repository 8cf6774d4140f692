"""Whole turns against a real OpenAI-compatible server nobody here wrote: llama-cpp-python's
``python -m llama_cpp.server`` serving the SmolLM2 GGUF on 127.0.0.1 (``ora_core.testing``'s
``llama_servers`` fixture), every role on it through the ``openai`` plugin, with the default
configuration's grounding verifier and Chroma/MiniLM retrieval on a temporary trace root and store.

- a standard turn, its model calls answered as one JSON body each, then streamed (``options.stream``):
  ok or degraded, never halted; the role ledger (``TurnResult.runtime_role_models`` and turn.json's
  ``runtimeRoleModels``) names the served model and carries what the server reported of usage;
  the trace directory complete;
- ``ora models list --check`` (the CLI, on a configuration file) shows the served model listed;
- the server killed in the middle of a streamed reply: a typed backend error, the turn halted or
  degraded by a contingency naming it, the partial output in the call record, no file written half;
- a prompt over the server's context window: ``BackendContextExceeded`` naming the window, one
  request per call, a named contingency, no hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ora_core.api import Ora, TurnResult
from ora_core.testing import LlamaServer, LlamaServers

pytestmark = pytest.mark.slow
MODEL = "SmolLM2-135M-Instruct"
N_CTX = 2048
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def server(llama_servers: LlamaServers) -> LlamaServer:
    return llama_servers.start(alias=MODEL, n_ctx=N_CTX, threads=1)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user configuration, environment override or user data directory leaks into a turn."""
    for name in [n for n in os.environ if n.startswith("ORA")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)


def write_config(tmp_path: Path, base_url: str, *, stream: bool, max_tokens: int = 48, max_retries: int = 2) -> Path:
    """The bundled default (grounding verifier, Chroma retrieval, every role on ``local``) with
    ``local`` pointed at the server, the traces and the store in ``tmp_path``."""
    path = tmp_path / "ora.toml"
    path.write_text(f"""
[trace]
root = "{tmp_path / 'traces'}"

[retrieval]
path = "{tmp_path / 'chroma'}"

[backends.local]
type = "openai"
model = "{MODEL}"
family = "smollm"
base_url = "{base_url}"
context_window = {N_CTX}
max_tokens = {max_tokens}
temperature = 0.2
timeout_s = 120
max_retries = {max_retries}
prompt_profile = "compact"
options = {{ stream = {str(stream).lower()}, stream_usage = true, backoff_initial_s = 0.1, backoff_max_s = 0.5 }}
""", encoding="utf-8")
    return path


def turn_json(result: TurnResult) -> dict[str, Any]:
    assert result.trace_path, "the turn was traced"
    return json.loads((Path(result.trace_path) / "turn.json").read_text(encoding="utf-8"))


def assert_trace_whole(result: TurnResult, turn: dict[str, Any]) -> None:
    """Every file the turn lists is there, every JSON file parses, every JSONL line parses, and no
    temporary file is left (trace-fs writes ``.<name>.<pid>.<thread>.tmp`` and renames it)."""
    trace = Path(result.trace_path or "")
    names = sorted(p.name for p in trace.iterdir())
    assert [n for n in names if n.startswith(".") or n.endswith(".tmp")] == [], names
    for required in ("turn.json", "step-health.json", "contingencies.jsonl"):
        assert required in names, (required, names)
    for step_file in turn["steps"]:
        assert step_file in names and step_file.removesuffix(".json") + ".md" in names, (step_file, names)
    for path in trace.rglob("*.json"):
        json.loads(path.read_text(encoding="utf-8"))
    for path in trace.rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            json.loads(line)
    assert turn["trace_write_errors"] in ([], None, {}), turn["trace_write_errors"]


def contingencies(result: TurnResult) -> list[dict[str, Any]]:
    """The turn's named contingencies as ``contingencies.jsonl`` records them (name, step, detail...)."""
    text = (Path(result.trace_path or "") / "contingencies.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def step_calls(result: TurnResult, turn: dict[str, Any]) -> list[dict[str, Any]]:
    """Every model call as the step files record it (messages, params and raw output included)."""
    trace = Path(result.trace_path or "")
    calls: list[dict[str, Any]] = []
    for step_file in turn["steps"]:
        calls += json.loads((trace / step_file).read_text(encoding="utf-8")).get("calls", [])
    return calls


@pytest.mark.parametrize("stream", [False, True], ids=["json-body", "streamed"])
def test_a_standard_turn_with_every_role_on_the_server(server: LlamaServer, tmp_path: Path, stream: bool) -> None:
    before = len(server.requests())
    result = Ora.open(write_config(tmp_path, server.base_url, stream=stream)).run(QUESTION, mode="standard")
    assert result.status in ("ok", "degraded"), (result.status, result.diagnostic)
    assert result.answer.strip()
    turn = turn_json(result)
    ledger, recorded = result.runtime_role_models, turn["runtimeRoleModels"]
    assert len(ledger) >= 2 and len(recorded) == len(ledger)
    assert "analyst" in {r.role for r in ledger}  # (Phase A is skipped under the compact profile, by name)
    for record, entry in zip(ledger, recorded, strict=True):
        assert (record.effective_provider, record.effective_model, record.mismatch) == ("openai", MODEL, False)
        assert record.error is None and record.attempts == 1, record
        assert (entry["effectiveProvider"], entry["effectiveModel"], entry["error"]) == ("openai", MODEL, None)
        assert (entry["promptTokens"], entry["completionTokens"]) == (record.prompt_tokens, record.completion_tokens)
        assert record.latency_s > 0
    assert result.model_dump(mode="json")["runtime_role_models_mismatch"] is False
    assert turn["runtimeRoleModelsMismatch"] is False
    # one request per model call, each answered 200 (no retry hidden under the ledger)
    assert server.requests()[before:] == [200] * len(ledger)
    warnings = [c for c in contingencies(result) if c["name"].endswith("-backend-warning")]
    if not stream:
        assert all(r.prompt_tokens > 50 and r.completion_tokens > 0 for r in ledger), ledger
        assert warnings == []
    else:
        # llama-cpp-python 0.3.36 streams no usage, include_usage or not: the counts stay 0 and the turn
        # names that (once per backend and turn), rather than show 0 as if it were measured
        assert all((r.prompt_tokens, r.completion_tokens) == (0, 0) for r in ledger), ledger
        assert warnings and all("reported no token usage" in w["detail"] for w in warnings), warnings
        assert {r.finish_reason for r in ledger} <= {"stop", "length", "stop_unless"}
    calls = step_calls(result, turn)
    assert len(calls) == len(ledger) and all(c["output"] for c in calls)
    assert_trace_whole(result, turn)


def test_models_list_check_shows_the_served_model(server: LlamaServer, tmp_path: Path) -> None:
    config = write_config(tmp_path, server.base_url, stream=False)
    before = len(server.requests("GET", "/v1/models"))

    def ora(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ora_core.cli", "--config", str(config), *args],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={**os.environ, "COLUMNS": "250"})  # the table's cells unfolded

    listed = ora("models", "list", "--check", "--json")
    assert listed.returncode == 0, listed.stderr
    [local] = [r for r in json.loads(listed.stdout)["backends"] if r["backend"] == "local"]
    assert (local["type"], local["model"], local["distribution"]) == ("openai", MODEL, "ora-openai")
    check = local["check"]
    assert check["reachable"] is True, check
    assert check["info"]["model_listed"] is True and MODEL in check["info"]["models"]
    table = ora("models", "list", "--check")
    assert table.returncode == 0, table.stderr
    assert "model_listed=True" in table.stdout and "reachable (" in table.stdout, table.stdout
    assert len(server.requests("GET", "/v1/models")) - before == 2, "each --check asked the server itself"


def test_the_server_killed_mid_generation_halts_or_degrades_the_turn_by_name(llama_servers: LlamaServers,
                                                                             tmp_path: Path) -> None:
    doomed = llama_servers.start(alias=MODEL, n_ctx=N_CTX, threads=1)
    config = write_config(tmp_path, doomed.base_url, stream=True, max_tokens=1200, max_retries=1)
    watchers: list[Any] = []

    def on_event(event: Any) -> None:  # armed when the analyst starts: phase A's reply is not the one killed
        if event.type == "step_started" and event.step == "gear2-analyst" and not watchers:
            watchers.append(doomed.kill_when_sent(3000))

    result = Ora.open(config).run("Write a long, detailed essay about the history of the Roman Empire.",
                                  mode="standard", on_event=on_event)
    [watcher] = watchers
    watcher.join(timeout=60)
    assert watcher.error is None and watcher.outcome.startswith("killed at"), watcher.outcome
    assert doomed.killed and not doomed.alive
    assert result.status in ("halted", "degraded"), result.status
    turn = turn_json(result)
    # the call the kill cut: typed, its partial output kept in the ledger's error and the step file's record
    cut = [r for r in result.runtime_role_models if r.error and r.error["partial_output_chars"] != "0"]
    assert len(cut) == 1, result.runtime_role_models
    [killed] = cut
    assert killed.error is not None and killed.error["kind"] == "unavailable" and killed.attempts == 1
    assert killed.finish_reason == "error"
    [cut_call] = [c for c in step_calls(result, turn) if c["call"] == killed.call]
    assert cut_call["output"] and len(cut_call["output"]) == int(killed.error["partial_output_chars"])
    # the turn says so by name, in the step that made the call
    named = [c for c in contingencies(result) if c["step"] == killed.step and "backend" in c["name"]]
    assert named, turn["contingencies"]
    assert all(c["name"] in turn["contingencies"] for c in named)
    if result.status == "halted":
        assert result.diagnostic.get("error", {}).get("kind") == "unavailable", result.diagnostic
    assert_trace_whole(result, turn)


def test_a_prompt_over_the_context_window_is_a_named_failure_not_a_retry_loop(server: LlamaServer,
                                                                              tmp_path: Path) -> None:
    before = len(server.requests())
    started = time.monotonic()
    result = Ora.open(write_config(tmp_path, server.base_url, stream=False)).run(
        "Summarise this text: " + "word " * 2500, mode="standard")
    elapsed = time.monotonic() - started
    turn = turn_json(result)
    ledger = result.runtime_role_models
    assert ledger and all(r.error is not None and r.error["kind"] == "context_window" for r in ledger), ledger
    assert all(f"context window of {N_CTX} tokens" in (r.error or {})["message"] for r in ledger)
    assert all(r.attempts == 1 for r in ledger)
    assert server.requests()[before:] == [400] * len(ledger), "one request per call: the window is never retried"
    names = turn["contingencies"]
    # the step that made the call names the failure (the analyst's: gear2-analyst-backend-context_window)
    assert any(n.endswith("-backend-context_window") for n in names), names
    assert result.status in ("halted", "degraded") and result.status != "ok"
    assert elapsed < 120, f"the turn took {elapsed:.0f}s"
    assert_trace_whole(result, turn)
