"""A response cache that cannot be used (its directory cannot be created) never stops the call, and
never stays on stderr only: the turn's trace names it as a ``<step>-backend-warning`` contingency.
A real turn against the fault server on 127.0.0.1, written to disk by the trace-fs sink."""

from __future__ import annotations

import io
import json
from pathlib import Path

import ora_openai
import ora_trace_fs
from fault_server import FaultServer

from ora_core.testing import make_config, make_host, make_runtime, run_turn


def test_an_unusable_response_cache_is_a_contingency_in_the_turns_trace(tmp_path: Path, capfd) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should go", encoding="utf-8")
    with FaultServer() as server:
        url = server.script("cache-trace", ["ok:Paris is the capital of France."])
        resolved = make_config({
            "backends": {"local": {"type": "openai", "model": "test-model", "family": "test", "base_url": url,
                                   "timeout_s": 5.0, "options": {"cache": True, "cache_dir": str(blocker / "cache")}}},
            "trace": {"root": str(tmp_path / "traces")}, "plugins": {"trace-fs": {"fsync": False}}},
            base_default=False)
        result = run_turn(make_runtime(make_host(ora_openai, ora_trace_fs), resolved, stderr=io.StringIO()),
                          "What is the capital of France?")
    assert result.answer == "Paris is the capital of France.", "the call went on without the cache"
    lines = [json.loads(line) for line in (Path(result.trace_path) / "contingencies.jsonl").read_text().splitlines()]
    warned = [c for c in lines if c["name"].endswith("-backend-warning")]
    assert len(warned) == 1, lines
    assert warned[0]["detail"].startswith("openai response cache read failed (")
    assert "answering without the cache" in warned[0]["detail"] and warned[0]["data"]["backend"] == "local"
    assert "openai response cache read failed" in capfd.readouterr().err, "stderr still says it at once"
