"""The acceptance: ``ora serve`` started as the README says — no configuration of its own, the bundled
default (SmolLM2 in process through llama.cpp, the grounding verifier, Chroma and MiniLM) — answers the
official ``openai`` client's ``chat.completions.create``; only the trace root and the data directory are
moved into the test's temporary directory."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow


def test_ora_serve_on_the_default_configuration_answers_the_openai_client(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    env.update(HF_HUB_OFFLINE="1", XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),
               XDG_DATA_HOME=str(tmp_path / "xdg-data"), ORA__TRACE__ROOT=str(tmp_path / "traces"),
               ORA__RETRIEVAL__PATH=str(tmp_path / "chroma"), PYTHONUNBUFFERED="1")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("ora")), "serve", "--port", "0"], cwd=tmp_path,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while not (found := re.search(r"running on http://127\.0\.0\.1:(\d+)", log.read_text())):
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.1)
            base = f"http://127.0.0.1:{found.group(1)}"
            client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=600)
            assert "ora/standard" in {m.id for m in client.models.list()}
            reply = client.chat.completions.create(
                model="ora/standard", messages=[{"role": "user", "content": "What is the capital of France?"}])
            ora = reply.model_extra["ora"]
            assert ora["status"] in ("ok", "degraded"), ora
            assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.content.strip()
            assert ora["gear"] == 2 and reply.usage.completion_tokens > 0  # the local model did answer
            assert Path(ora["trace_path"]).is_relative_to(tmp_path / "traces")
            health = httpx.get(base + "/healthz?deep=1", timeout=300).json()
            assert health["backends"]["local"]["reachable"] is True, health
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
