"""Two workers sharing one vault through a Chroma server (``[retrieval] server_url``, the ``ora-chroma``
plugin's client mode): the vault is ingested once with ``ora vault add`` into a real ``chroma run``, and
turns answered by either worker retrieve its chunks (read back from each turn's trace)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from serve_harness import Served, isolated_env, scripted_toml

pytestmark = pytest.mark.slow

NOTE = """
# Supplemental RAG Protocol

At most two supplement requests per step; after the cap the model must emit a COVERAGE GAP instead of guessing.
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_workers_retrieve_from_one_vault_on_a_chroma_server(tmp_path):
    chroma = Path(sys.executable).with_name("chroma")
    if not chroma.exists() and shutil.which("chroma") is None:
        pytest.skip("the chroma CLI (from the chromadb package) is not installed")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "chroma.log").open("wb")
    server = subprocess.Popen([str(chroma) if chroma.exists() else "chroma", "run", "--path", str(tmp_path / "srv"),
                               "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    served = None
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(url + "/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "chroma run did not start"
            time.sleep(0.2)
        vault = tmp_path / "vault"
        vault.mkdir()
        (vault / "supplemental-rag.md").write_text(textwrap.dedent(NOTE), encoding="utf-8")
        text = scripted_toml(tmp_path).replace("[retrieval]\n", f'[retrieval]\nserver_url = "{url}"\n', 1)
        text = text.replace("concept = false", "concept = true")
        config = tmp_path / "ora.toml"
        config.write_text(text, encoding="utf-8")
        env = isolated_env(tmp_path)
        ora = str(Path(sys.executable).with_name("ora"))
        added = subprocess.run([ora, "--config", str(config), "vault", "add", str(vault)], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=300)
        assert added.returncode == 0, added.stderr[-2000:]
        served = Served(tmp_path, config, ["--workers", "2"], env)
        workers: dict[str, str] = {}
        for i in range(30):  # new connections until both workers have answered
            prompt = f"Explain the supplement cap ({i})."
            response = httpx.post(served.base_url + "/v1/chat/completions", timeout=120, json={
                "model": "ora/standard", "messages": [{"role": "user", "content": prompt}]})
            assert response.status_code == 200, response.text
            workers.setdefault(response.headers["x-ora-worker"], response.headers["x-ora-trace-id"])
            if len(workers) == 2:
                break
        assert len(workers) == 2, "one worker answered every request"
        for trace_id in workers.values():
            trace = next(served.trace_root.glob(f"*/{trace_id}"))
            context = "".join(p.read_text(encoding="utf-8") for p in trace.glob("*context*.json"))
            assert "supplemental-rag.md" in context and "COVERAGE GAP" in context, trace_id
    finally:
        if served is not None:
            served.terminate()
        server.kill()
        server.wait(30)
        log.close()
