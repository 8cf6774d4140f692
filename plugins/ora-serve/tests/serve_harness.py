"""A real ``ora serve`` (the command, uvicorn on 127.0.0.1, a port the OS picks) on a scripted configuration
written to a temporary directory; the official ``openai`` client and ``curl -N`` talk to it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ORA = str(Path(sys.executable).with_name("ora"))
ANSWER = ("Harness vendors bundle foundation models with their own tooling, evaluation suites and deployment "
          "services, so customers shift their AI budgets from model providers to harness vendors, because the "
          "harness decides which model runs. The harness vendors gain pricing power and control of the customer "
          "relationship.\nCONFIDENCE: 0.90")
PASS = "Checked each claim against the evidence package; all are supported.\n\n## VERDICT\nVERDICT: PASS"
FAIL = ("Checked each claim: the second is not supported by anything.\n\n## VERDICT\nVERDICT: FAIL\n"
        "REASONS:\n- unsupported claim")
QUESTION = "Compare PostgreSQL and MySQL for a small web app."


def scripted_toml(root: Path, *, analyst: str = ANSWER, verify: str = PASS, latency_s: float = 0.0,
                  extra: str = "", conversation: bool = False) -> str:
    """Every role on one scripted backend (a model verifier, its same-lineage edge only labelled), Phase A
    skipped, no retrieval stream (``conversation=True``: the conversation stream on): a gear-2 turn
    that ends ``ok``, ``degraded`` (``verify=FAIL``) or ``halted`` (``analyst="!error:unavailable"``)."""
    q = json.dumps
    return f"""
[trace]
root = {q(str(root / "traces"))}
[backends.local]
type = "scripted"
model = "scripted-1"
family = "scripted"
[backends.local.options]
latency_s = {latency_s}
default = {q(ANSWER)}
rules = [
  {{ match = "ROLE: VERIFIER", reply = {q(verify)}, on = "system" }},
  {{ match = "ROLE: ANALYST", reply = {q(analyst)}, on = "system" }},
]
[verification]
verifier = "model"
final_verifier = "model"
same_lineage = "allow"
[pipeline]
phase_a = "skip"
[retrieval]
path = {q(str(root / "chroma"))}
[retrieval.streams]
concept = false
conversation = {"true" if conversation else "false"}
relationship = false
{extra}
"""


def isolated_env(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg-config"), XDG_DATA_HOME=str(tmp_path / "xdg-data"),
               HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", **more)
    return env


class Served:
    """One ``ora serve`` process: its base URL, its log, its trace root."""

    def __init__(self, tmp_path: Path, config: Path, args: list[str], env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.config = config
        self.log_path = tmp_path / f"serve-{time.monotonic_ns()}.log"
        self.trace_root = tmp_path / "traces"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen([ORA, "serve", "--config", str(config), "--port", "0", *args], cwd=tmp_path,
                                     env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.port = self._wait_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._wait_ready()

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def _wait_port(self, timeout_s: float = 120.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", self.log())
            if found:
                return int(found.group(1))
            if self.proc.poll() is not None:
                raise RuntimeError(f"ora serve exited {self.proc.returncode}:\n{self.log()[-3000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"ora serve never said where it listens:\n{self.log()[-3000:]}")

    def _wait_ready(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base_url + "/healthz", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"ora serve exited {self.proc.returncode}:\n{self.log()[-3000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"ora serve never answered /healthz:\n{self.log()[-3000:]}")

    def turn_json(self, trace_id: str) -> dict[str, Any]:
        found = list(self.trace_root.glob(f"*/{trace_id}/turn.json"))
        assert found, f"no trace for {trace_id} under {self.trace_root}"
        return json.loads(found[0].read_text(encoding="utf-8"))

    def wait_turn_closed(self, trace_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = list(self.trace_root.glob(f"*/{trace_id}/turn.json"))
            if found:
                doc = json.loads(found[0].read_text(encoding="utf-8"))
                if doc.get("status") != "running":
                    return doc
            if time.monotonic() > deadline:
                raise AssertionError(f"the trace of {trace_id} did not close within {timeout_s} s")
            time.sleep(0.05)

    def terminate(self, timeout_s: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return int(self.proc.returncode)


class ServeFactory:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[Served] = []

    def __call__(self, *args: str, env: dict[str, str] | None = None, **config: Any) -> Served:
        path = self.tmp_path / f"ora-{len(self.started)}.toml"
        path.write_text(scripted_toml(self.tmp_path, **config), encoding="utf-8")
        served = Served(self.tmp_path, path, list(args), env or isolated_env(self.tmp_path))
        self.started.append(served)
        return served

    def stop_all(self) -> None:
        for served in self.started:
            served.terminate()


def chat_body(prompt: str = QUESTION, model: str = "ora/standard", **more: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": prompt}], **more}
