"""``ora serve``: the command, at module level (``serve_commands``, merged into the root app by
``register``). It resolves the settings (``[plugins.serve]`` under the flags), checks the configuration
once (a malformed one fails here, exit 1, naming the file and the field), and runs uvicorn on the app
factory ``ora_serve.app:create_app`` with ``--workers`` processes on one port."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional

import typer

if TYPE_CHECKING:
    from ora_core.api import CommandContext

#: ``ora serve`` (a group without a name of its own: ``register`` merges it into the root app).
serve_commands = typer.Typer()

_ora: CommandContext | None = None


def register(cli: typer.Typer, ora: CommandContext) -> None:
    global _ora
    _ora = ora
    cli.add_typer(serve_commands)


def _context() -> CommandContext:
    if _ora is None:
        typer.echo("ora: the serve command was registered without a command context", err=True)
        raise typer.Exit(1)
    return _ora


def settings_for(resolved: Any, flags: dict[str, Any]) -> Any:
    """``ServeSettings`` from ``[plugins.serve]`` of ``resolved`` with the given flags (not None) on top."""
    from ora_core.api import ConfigError

    from .settings import TABLE, ServeOptions, ServeSettings

    try:
        options = ServeOptions.of(resolved, TABLE)
    except ConfigError as exc:
        raise _context().fail(str(exc)) from None
    merged = {k: v for k, v in options.model_dump().items() if v is not None}
    merged.update({k: v for k, v in flags.items() if v is not None})
    try:
        return ServeSettings.model_validate(merged)
    except ValueError as exc:
        raise _context().fail(f"ora serve: {exc}", code=2) from None


@serve_commands.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: this machine only)."),
    port: int = typer.Option(8000, "--port", help="Port to bind (0: any free port)."),
    workers: int = typer.Option(1, "--workers", help="Worker processes sharing the port."),
    config: Optional[str] = typer.Option(None, "--config", help="Ora configuration file (default: as `ora` "
                                                                "finds it: -c, $ORA_CONFIG, ./ora.toml ...)."),
    api_key: Optional[str] = typer.Option(None, "--api-key", help="Require 'Authorization: Bearer <key>' "
                                          "(prefer the ORA_SERVE_API_KEY environment variable: a flag shows in ps)."),
    max_turns: Optional[int] = typer.Option(None, "--max-turns", help="Concurrent turns per worker (default: "
                                            "4 per core); past it: 429 with Retry-After."),
    max_prompt_chars: Optional[int] = typer.Option(None, "--max-prompt-chars", help="Longest prompt taken."),
    max_body_bytes: Optional[int] = typer.Option(None, "--max-body-bytes", help="Largest request body taken."),
    shutdown_grace: Optional[float] = typer.Option(None, "--shutdown-grace", help="Seconds the turns in flight "
                                                   "get to finish on SIGTERM before they are cancelled."),
    log_prompts: Optional[bool] = typer.Option(None, "--log-prompts/--no-log-prompts", help="Put the prompt "
                                               "(redacted) in the access lines (off by default)."),
) -> None:
    """Serve the configured pipeline as an OpenAI-compatible endpoint (docs/serve.md)."""
    ora = _context()
    if config is not None:
        os.environ["ORA_CONFIG"] = os.path.abspath(config)
    resolved = ora.config()  # the configuration in force: a malformed one fails here, exit 1
    # the file it came from (`ora -c FILE serve`, $ORA_CONFIG, ./ora.toml ...): what every worker opens
    files = [s for s in resolved.sources[1:] if os.path.isfile(s)]
    flags = {"host": host, "port": port, "workers": workers, "config": os.path.abspath(files[-1]) if files else None,
             "max_turns": max_turns, "max_prompt_chars": max_prompt_chars, "max_body_bytes": max_body_bytes,
             "shutdown_grace_s": shutdown_grace, "log_prompts": log_prompts}
    settings = settings_for(resolved, flags)
    if api_key is not None:
        if not api_key.strip():
            raise ora.fail("--api-key is empty", code=2)
        os.environ[settings.api_key_env] = api_key
    from .server import run_server

    try:
        run_server(settings)
    except Exception as exc:  # noqa: BLE001 - opening Ora or binding the port: named, exit 1
        from ora_core.api import redact_text

        raise ora.fail(f"ora serve: {redact_text(str(exc), [api_key] if api_key else [])}") from None
