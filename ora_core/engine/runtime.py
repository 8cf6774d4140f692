"""What a turn runs on: ``Runtime``, the loaded plugins and the resolved configuration, with the
backend pool, the mode library and the redactor built from them on first use.

It sits beneath every module that takes a runtime (context assembly, the gears, the runner), so
they can name its type without an import cycle.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO

from ora_core.engine.backends import BackendPool
from ora_core.kernel.components import TraceSink
from ora_core.kernel.config import OraConfig, ResolvedConfig
from ora_core.kernel.errors import ConfigError
from ora_core.kernel.modes import ModeLibrary, load_modes
from ora_core.kernel.plugins import PluginHost
from ora_core.kernel.redaction import Redactor
from ora_core.kernel.trace import TurnContext

__all__ = ["Runtime", "check_shared_pool"]


class Runtime:
    """What a turn runs on: the loaded plugins and the resolved configuration.

    ``pool``: a ``BackendPool`` shared with other runtimes (turns of one run on configurations that
    differ elsewhere, e.g. a calibration's per-pair collection): its tokens-per-minute budget and its
    built backends then span them all. It must have been built on ``host`` and a configuration with
    the same ``[backends]`` and ``[roles]`` as ``resolved``'s (else a turn would run on backends its
    own configuration does not name): a ``ConfigError`` names the difference. Without it, the
    runtime builds its own pool on first use.
    """

    def __init__(self, host: PluginHost, resolved: ResolvedConfig, stderr: IO[str] | None = None, *,
                 pool: BackendPool | None = None) -> None:
        self.host = host
        self.resolved = resolved
        self.stderr: IO[str] = stderr if stderr is not None else sys.stderr
        if pool is not None:
            check_shared_pool(pool, host, resolved)
        self._pool: BackendPool | None = pool
        self._modes: ModeLibrary | None = None
        self._redactor: Redactor | None = None

    def __repr__(self) -> str:
        return f"Runtime(config {self.resolved.hash}, {len(self.host.plugin_versions())} plugin(s))"

    @property
    def config(self) -> OraConfig:
        return self.resolved.config

    @property
    def pool(self) -> BackendPool:
        if self._pool is None:
            self._pool = BackendPool(self.config, self.host)
        return self._pool

    @property
    def redactor(self) -> Redactor:
        """The configuration's secrets, as every output replaces them; rebuilt when an environment
        variable a secret comes from (``api_key_env``) has changed since."""
        if self._redactor is None or self._redactor.stale():
            self._redactor = Redactor.for_config(self.resolved)
        return self._redactor

    @property
    def modes(self) -> ModeLibrary:
        """The modes of every registered pack and configured directory (loaded once)."""
        if self._modes is None:
            self._modes = load_modes(self.host, self.config)
        return self._modes

    def sinks(self) -> list[TraceSink]:
        if not self.config.trace.enabled:
            return []
        available = self.host.components("trace_sink")
        wanted = self.config.trace.sinks or sorted(available)
        missing = [n for n in wanted if n not in available]
        if missing:
            print(f"ora: configured trace sink(s) {', '.join(missing)} not installed "
                  f"(installed: {', '.join(sorted(available)) or 'none'})", file=self.stderr)
        return [available[n] for n in wanted if n in available]

    def new_turn(self, prompt: str, conversation_id: str | None = None,
                 observers: Sequence[TraceSink] = (), *, turn_id: str | None = None) -> TurnContext:
        return TurnContext(
            prompt=prompt,
            config=self.config,
            config_hash=self.resolved.hash,
            sinks=[*self.sinks(), *observers],
            host=self.host,
            conversation_id=conversation_id or self.config.pipeline.conversation_id,
            plugins=self.host.plugin_versions(),
            stderr=self.stderr,
            redactor=self.redactor,
            turn_id=turn_id,
        )


def check_shared_pool(pool: BackendPool, host: PluginHost, resolved: ResolvedConfig) -> None:
    """A pool shared into a runtime must build the backends its configuration names, for the roles it
    names, through the same plugins; a ``ConfigError`` says which part differs."""
    config = resolved.config
    problems = []
    if pool.host is not host:
        problems.append("it was built on another plugin host")
    if pool.config.backends != config.backends:
        names = sorted(n for n in set(pool.config.backends) | set(config.backends)
                       if pool.config.backends.get(n) != config.backends.get(n))
        problems.append(f"its [backends] differ ({', '.join(names)})")
    if pool.config.roles != config.roles:
        roles = sorted(r for r in type(config.roles).model_fields
                       if getattr(pool.config.roles, r) != getattr(config.roles, r))
        problems.append(f"its [roles] differ ({', '.join(roles)})")
    if problems:
        raise ConfigError(f"the shared backend pool does not fit this configuration: {'; '.join(problems)}",
                          field="backends")
