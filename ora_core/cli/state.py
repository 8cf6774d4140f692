"""What every ``ora`` command shares: the root options, the loaded plugins, the configuration,
the exit codes, and how a command fails (one line on stderr naming what was wrong).

Plugins are loaded on first use, when a command runs, never when this module is imported.
"""

from __future__ import annotations

from typing import Any, Optional

import typer

from ora_core.kernel.errors import OraError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NEEDS_CLARIFICATION = 3
EXIT_HALTED = 4


class _State:
    host: Any = None
    config_path: Optional[str] = None


state = _State()


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    """``raise fail(...)``: ``ora: <message>`` on stderr, exit ``code``."""
    typer.echo(f"ora: {message}", err=True)
    return typer.Exit(code)


def get_host() -> Any:
    """The plugins, loaded once per command; the entry-point scan is served from the
    environment's cache (``ora_core.kernel.plugins.EntryPointCache``)."""
    if state.host is None:
        from ora_core.kernel.plugins import EntryPointCache, PluginHost

        host = PluginHost()
        host.load_entrypoints(cache=EntryPointCache.for_environment(host.env))
        state.host = host
    return state.host


def load_resolved() -> Any:
    """The resolved configuration (``--config``, ``$ORA_CONFIG``, ...); raises ``ConfigError``."""
    from ora_core.kernel.config import load_config

    return load_config(state.config_path)


def get_config() -> Any:
    try:
        return load_resolved()
    except OraError as exc:
        raise fail(str(exc)) from None


def command_context() -> Any:
    """What plugins' commands get through ``ora_register_commands(cli, ora)``."""
    from ora_core.kernel.commands import CommandContext

    return CommandContext(get_host(), load_resolved)
