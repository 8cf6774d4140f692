"""Fallbacks a backend takes without failing the call, and a backend that fails to close, reach the
turn's trace, not only stderr: ``Completion.warnings`` become ``<step>-backend-warning``
contingencies (once per turn and backend), a failed close a ``backend-close-failed`` contingency of
the turn; outside a turn a ``StandaloneContext`` records (and prints) them."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import ora_trace_fs

from ora_core import hookimpl
from ora_core.engine.backends import CLOSE_FAILED, BackendPool
from ora_core.kernel.models import Completion
from ora_core.kernel.trace import StandaloneContext
from ora_core.testing import make_config, make_host, make_runtime, run_turn


class WarningBackend:
    provider = "warning"
    model = "w-1"
    family = "w"

    def __init__(self, close_fails: bool) -> None:
        self.close_fails = close_fails

    async def complete(self, messages: Any, params: Any) -> Completion:
        return Completion(text="Paris is the capital of France.", provider=self.provider, model=self.model,
                          warnings=["response cache write failed (PermissionError: /cache); answered uncached"])

    async def aclose(self) -> None:
        if self.close_fails:
            raise OSError("socket already torn down")


class WarningFactory:
    name = "warning"
    close_fails = False

    def create(self, settings: Any) -> WarningBackend:
        return WarningBackend(self.close_fails)


class WarningPlugin:
    factory = WarningFactory()

    @staticmethod
    @hookimpl
    def ora_register_backends(register: Any) -> None:
        register(WarningPlugin.factory)


def contingencies(turn_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (turn_dir / "contingencies.jsonl").read_text().splitlines()]


def test_completion_warnings_and_a_failed_close_are_contingencies_in_the_trace(tmp_path: Path) -> None:
    WarningPlugin.factory.close_fails = True
    resolved = make_config({"backends": {"local": {"type": "warning", "model": "w-1"}},
                            "trace": {"root": str(tmp_path / "traces")}, "plugins": {"trace-fs": {"fsync": False}}})
    stderr = io.StringIO()
    result = run_turn(make_runtime(make_host(WarningPlugin, ora_trace_fs), resolved, stderr=stderr),
                      "What is the capital of France?")
    records = {c["name"]: c for c in contingencies(Path(result.trace_path))}
    warning = records["direct-response-backend-warning"]
    assert warning["detail"] == "response cache write failed (PermissionError: /cache); answered uncached"
    assert warning["data"]["backend"] == "local" and warning["data"]["provider"] == "warning"
    assert result.contingencies.count("direct-response-backend-warning") == 1
    closed = records[CLOSE_FAILED]
    assert closed["detail"] == "closing backend 'local' failed: OSError: socket already torn down"
    assert "ora: closing backend 'local' failed: OSError" in stderr.getvalue()
    health = json.loads((Path(result.trace_path) / "step-health.json").read_text())
    assert [h["contingencies"] for h in health["steps"] if h["step"] == "turn"] == [[CLOSE_FAILED]]


def test_a_warning_repeated_in_one_turn_is_recorded_once() -> None:
    from ora_core.engine.backends import call_role
    from ora_core.engine.prompts import build_messages
    from ora_core.kernel.trace import TurnContext

    WarningPlugin.factory.close_fails = False
    resolved = make_config({"backends": {"local": {"type": "warning", "model": "w-1"}}})
    host = make_host(WarningPlugin)
    turn = TurnContext(prompt="p", config=resolved.config, config_hash=resolved.hash, host=host)
    pool = BackendPool(resolved.config, host)
    messages = build_messages("Answer.", "p")

    async def twice() -> None:
        await call_role(turn, pool, "analyst", messages, prompt_key="k", step="analyst")
        await call_role(turn, pool, "analyst", messages, prompt_key="k", step="analyst")
        await pool.aclose(turn)

    asyncio.run(twice())
    assert [c.name for c in turn.contingencies] == ["analyst-backend-warning"]


def test_a_close_that_fails_with_no_recorder_is_recorded_by_the_next_one() -> None:
    WarningPlugin.factory.close_fails = True
    resolved = make_config({"backends": {"local": {"type": "warning", "model": "w-1"}}})
    stderr = io.StringIO()
    pool = BackendPool(resolved.config, make_host(WarningPlugin), stderr=stderr)
    pool.get("local")
    asyncio.run(pool.aclose())  # no turn at hand (a deferred close): said on stderr, kept
    assert pool.close_failures and "closing backend 'local' failed" in stderr.getvalue()
    standalone = StandaloneContext(resolved.config, stderr=io.StringIO())
    asyncio.run(pool.aclose(standalone))
    names = [c.name for c in standalone.contingencies]
    assert names == [CLOSE_FAILED, CLOSE_FAILED], "the earlier failure, then this close's own"
    assert "after an earlier call" in standalone.contingencies[0].detail and not pool.close_failures
