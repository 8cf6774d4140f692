"""What the local engine used to say on stderr only now reaches a record a user can find: a model
loaded slower than configured (a Q8_0 copy that could not be made) is a contingency of the turn
(``Completion.warnings``), and a model that fails to close at exit, when no turn is open, is one
JSON line in ``exit-failures.jsonl`` under the last turn's trace root, besides its stderr line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import ora_local_llm
from ora_local_llm.engine import EXIT_LOG, exit_log_path

from ora_core.testing import BackendPool, TurnContext, build_messages, call_role, make_config, make_host


def test_a_failed_requantization_is_a_contingency_of_the_turn_not_only_a_python_warning(tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x", encoding="utf-8")
    resolved = make_config({"backends": {"local": {
        "type": "local-llm", "model": "SmolLM2-135M-Instruct", "family": "smollm", "max_tokens": 4,
        "options": {"threads": 1, "requantize": "q8_0", "cache_dir": str(blocker / "models")}}}})
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)
    pool = BackendPool(resolved.config, make_host(ora_local_llm))
    completion = asyncio.run(call_role(turn, pool, "direct", build_messages("Answer.", "Capital of France?"),
                                       prompt_key="test.direct"))
    assert completion.text.strip(), "the model ran anyway, from the file as it is"
    assert len(completion.warnings) == 1 and "could not make a Q8_0 copy" in completion.warnings[0]
    assert [c.name for c in turn.contingencies] == ["direct-backend-warning"]
    assert turn.contingencies[0].detail == completion.warnings[0]
    assert turn.contingencies[0].data["backend"] == "local"


def test_a_model_that_fails_to_close_at_exit_is_recorded_under_the_last_turns_trace_root(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    code = textwrap.dedent(f"""
        from pathlib import Path
        from types import SimpleNamespace
        from ora_local_llm import engine

        class Llama:
            def close(self):
                raise RuntimeError("llama.cpp bindings already gone")

        engine._MODELS[("key",)] = SimpleNamespace(llama=Llama(), path=Path("smollm.gguf"))
        engine.remember_trace_config(SimpleNamespace(resolved_root=lambda: Path({str(root)!r})))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    log = root / EXIT_LOG
    assert (f"ora-local-llm: closing smollm.gguf at exit failed: RuntimeError: llama.cpp bindings already gone; "
            f"recorded in {log}") in done.stderr
    record = json.loads(log.read_text(encoding="utf-8"))
    assert (record["tag"], record["what"], record["error_class"]) == (
        "local-llm-exit-failure", "closing smollm.gguf at exit", "RuntimeError")


def test_ora_turn_started_keeps_the_turns_trace_root_for_exit_records(tmp_path: Path) -> None:
    resolved = make_config({"trace": {"root": str(tmp_path / "t")}})
    host = make_host(ora_local_llm)
    assert "ora_turn_started" in host.records["ora_local_llm"].hooks
    ora_local_llm.ora_turn_started(TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash))
    assert exit_log_path() == tmp_path / "t" / EXIT_LOG
