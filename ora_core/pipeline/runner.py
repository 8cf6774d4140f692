"""One turn through the pipeline.

This is the kernel's orchestration: it dispatches to detectors, retrievers, backends,
verifiers and sinks only through the plugin registry. The stages grow with the pipeline
issues; what exists answers through Gear 1 (a direct response) with every boundary traced.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from typing import IO, Any

from ..backends import BackendPool, call_role
from ..config import ResolvedConfig
from ..errors import BackendError
from ..models import TurnResult
from ..plugins import PluginHost
from ..prompts import build_messages
from ..trace import TurnContext

DIRECT_TASK = (
    "You answer the user's message directly and briefly. You have no tools and no clock."
)


@dataclass
class Runtime:
    """What a turn runs on: the loaded plugins and the resolved configuration."""

    host: PluginHost
    resolved: ResolvedConfig
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    _pool: BackendPool | None = None

    @property
    def config(self) -> Any:
        return self.resolved.config

    @property
    def pool(self) -> BackendPool:
        if self._pool is None:
            self._pool = BackendPool(self.config, self.host)
        return self._pool

    def sinks(self) -> list[Any]:
        if not self.config.trace.enabled:
            return []
        available = self.host.components("trace_sink")
        wanted = self.config.trace.sinks or sorted(available)
        missing = [n for n in wanted if n not in available]
        if missing:
            print(f"ora: configured trace sink(s) {', '.join(missing)} not installed "
                  f"(installed: {', '.join(sorted(available)) or 'none'})", file=self.stderr)
        return [available[n] for n in wanted if n in available]

    def new_turn(self, prompt: str, conversation_id: str | None = None) -> TurnContext:
        return TurnContext(
            prompt=prompt,
            config=self.config,
            config_hash=self.resolved.hash,
            sinks=self.sinks(),
            host=self.host,
            conversation_id=conversation_id or self.config.pipeline.conversation_id,
            plugins=self.host.plugin_versions(),
            secrets=self.resolved.secrets(),
            stderr=self.stderr,
        )


async def run_turn_async(runtime: Runtime, prompt: str, *, conversation_id: str | None = None,
                         **options: Any) -> TurnResult:
    turn = runtime.new_turn(prompt, conversation_id).open()
    if not runtime.host.components("trace_sink") and runtime.config.trace.enabled:
        turn.contingency("trace-no-sink-installed", "turn",
                         "tracing is enabled but no trace sink plugin is installed", severity="degraded")
    runtime.host.call_observers("ora_turn_started", _observer_error(turn), turn=turn)
    result = await _gear1_direct(runtime, turn, prompt)
    result = turn.close(result)
    runtime.host.call_observers("ora_turn_finished", _observer_error(turn), turn=turn, result=result)
    await runtime.pool.aclose()
    return result


def run_turn(runtime: Runtime, prompt: str, **options: Any) -> TurnResult:
    return asyncio.run(run_turn_async(runtime, prompt, **options))


def _observer_error(turn: TurnContext) -> Any:
    def on_error(plugin: str, exc: BaseException) -> None:
        turn.contingency(f"observer-{plugin}-failed", "turn", f"{type(exc).__name__}: {exc}",
                         severity="warning")
        print(f"ora: plugin {plugin!r} failed in a turn observer: {type(exc).__name__}: {exc}",
              file=turn.stderr)

    return on_error


async def _gear1_direct(runtime: Runtime, turn: TurnContext, prompt: str) -> TurnResult:
    messages = build_messages(DIRECT_TASK, prompt)
    with turn.step("direct-response", prompt=prompt, messages=[m.model_dump() for m in messages]) as step:
        try:
            completion = await call_role(turn, runtime.pool, "direct", messages,
                                         prompt_key="gear1.direct", step="direct-response")
        except BackendError as exc:
            step.output["error"] = exc.describe()
            step.health.verdict = "BROKEN"
            step.contingency("direct-response-backend-failed", str(exc), severity="error")
            return TurnResult(status="halted", mode="simple", gear=1,
                              diagnostic={"step": "direct-response", **exc.describe()})
        step.output["answer"] = completion.text
        step.output["completion"] = completion.model_dump(mode="json")
    status = "degraded" if any(h.degraded for h in turn.health.values()) else "ok"
    return TurnResult(status=status, answer=completion.text, mode="simple", gear=1)
