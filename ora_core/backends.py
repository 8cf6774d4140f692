"""Resolving roles to backends and calling them: the role ledger and the fallback chain.

Every model call goes through ``call_role``: it refuses messages that lack the universal
anti-confabulation directive, records ``{role, promptKey, plannedProvider, plannedModel,
effectiveProvider, effectiveModel, fallbackFlags, tokens, latency}`` in the turn, and on a
``BackendError`` walks the backend's configured ``fallbacks``, flagging what ran instead.
A failure of the whole chain raises the last ``BackendError``: it never becomes text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .config import BackendConfig, OraConfig
from .errors import BackendError, ConfigError, PluginError
from .models import Completion, CompletionParams, Message, ModelCallRecord
from .prompts import carries_directive


class BackendPool:
    """Builds configured backends lazily (heavy models load on first use) and caches them."""

    def __init__(self, config: OraConfig, host: Any) -> None:
        self.config = config
        self.host = host
        self._built: dict[str, Any] = {}

    def settings(self, name: str) -> BackendConfig:
        try:
            return self.config.backends[name]
        except KeyError:
            raise ConfigError(f"backend {name!r} is not configured", field=f"backends.{name}") from None

    def get(self, name: str) -> Any:
        if name not in self._built:
            settings = self.settings(name)
            try:
                factory = self.host.get("backend", settings.type)
            except PluginError as exc:
                raise ConfigError(
                    f"backend {name!r} has type {settings.type!r}, but no installed plugin registers "
                    f"that backend type ({exc})", field=f"backends.{name}.type") from None
            self._built[name] = factory.create(settings)
        return self._built[name]

    def planned(self, role: str) -> tuple[str, BackendConfig]:
        name = getattr(self.config.roles, role)
        return name, self.settings(name)

    def params_for(self, name: str, **overrides: Any) -> CompletionParams:
        s = self.settings(name)
        values: dict[str, Any] = {"model": s.model, "max_tokens": s.max_tokens,
                                  "temperature": s.temperature, "timeout_s": s.timeout_s}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return CompletionParams(**values)

    async def aclose(self) -> None:
        for backend in self._built.values():
            closer = getattr(backend, "aclose", None)
            if closer is not None:
                await closer()


async def call_role(turn: Any, pool: BackendPool, role: str, messages: Sequence[Message], *,
                    prompt_key: str, step: str = "", **param_overrides: Any) -> Completion:
    """Call the backend planned for ``role``, falling back along its chain; record every call."""
    if not carries_directive(messages):
        raise ValueError(
            f"model call for role {role!r} ({prompt_key}) was built without the universal "
            "anti-confabulation directive; build messages with ora_core.prompts.build_messages")
    planned_name, planned = pool.planned(role)
    chain = [planned_name, *planned.fallbacks]
    flags: list[str] = []
    last_error: BackendError | None = None
    for position, name in enumerate(chain):
        settings = pool.settings(name)
        record = ModelCallRecord(role=role, prompt_key=prompt_key, planned_provider=planned.type,
                                 planned_model=planned.model, fallback_flags=list(flags))
        start = time.perf_counter()
        try:
            backend = pool.get(name)
            completion = await backend.complete(list(messages), pool.params_for(name, **param_overrides))
        except BackendError as exc:
            record.latency_s = time.perf_counter() - start
            record.effective_provider, record.effective_model = settings.type, settings.model
            record.error = exc.describe()
            turn.record_call(record, step=step)
            last_error = exc
            if position + 1 < len(chain):
                flags.append(f"fallback:{name}->{chain[position + 1]}:{exc.kind}")
                turn.contingency(f"{step or role}-backend-{exc.kind}-fallback", step or role,
                                 f"{name} failed ({exc}); falling back to {chain[position + 1]}",
                                 severity="degraded", role=role, backend=name)
            continue
        record.latency_s = completion.latency_s or (time.perf_counter() - start)
        record.effective_provider = completion.provider
        record.effective_model = completion.model
        record.prompt_tokens = completion.prompt_tokens
        record.completion_tokens = completion.completion_tokens
        turn.record_call(record, step=step)
        return completion
    assert last_error is not None
    raise last_error
