"""``ora trace export --otlp URL [TURNS]`` and ``ora trace otel [--check]``, in the ``trace`` group
the forensic trace's commands share (``ora.group("trace")``: whichever plugin asks first creates it).

The commands are defined here, at module level, on ``trace_commands`` (a group without a name of its
own: ``register`` merges it into ``ora trace``); they run on the ``CommandContext`` ``register`` was
given."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

if TYPE_CHECKING:
    from ora_core.api import CommandContext

    from .options import OtelOptions

TRACE_HELP = "The forensic trace: list, show, view and export traced turns."
ROOT_HELP = "Trace root (default: trace.root of the configuration)."

#: ``ora trace export`` and ``ora trace otel``, merged into the shared ``trace`` group by ``register``.
trace_commands = typer.Typer()

#: The ``CommandContext`` the commands run on (``ora_register_commands(cli, ora)``).
_ora: CommandContext | None = None


def register(cli: typer.Typer, ora: CommandContext) -> None:
    """Put the commands in ``ora trace`` (``ora.group``), run on ``ora``."""
    global _ora
    _ora = ora
    ora.group("trace", help=TRACE_HELP).add_typer(trace_commands)


def _context() -> CommandContext:
    if _ora is None:
        typer.echo("ora: the otel commands were registered without a command context", err=True)
        raise typer.Exit(1)
    return _ora


def _options(endpoint: Optional[str] = None, timeout_s: Optional[float] = None) -> OtelOptions:
    """``[plugins.otel]`` of the configuration in force, with ``--otlp``/``--timeout`` on top."""
    from ora_core.api import ConfigError

    from .options import TABLE, OtelOptions

    ora = _context()
    resolved = ora.config()
    try:
        found = OtelOptions.of(resolved, TABLE)
    except ConfigError as exc:  # names the table and the key
        raise ora.fail(str(exc)) from None
    if endpoint is None:
        return found
    given = {"endpoint": endpoint, "enabled": True, **({"timeout_s": timeout_s} if timeout_s is not None else {})}
    try:
        return OtelOptions.model_validate({**found.model_dump(), **given})
    except ValueError as exc:
        raise ora.fail(f"--otlp/--timeout: {exc}") from None


def _trace_root(root: Optional[str]) -> Path:
    if root:
        return Path(root).expanduser()
    return Path(_context().config().config.trace.resolved_root())


@trace_commands.command("export")
def trace_export(
    turns: Optional[list[str]] = typer.Argument(
        None, help="Turn ids, unique prefixes or directories (default: the latest turn)."),
    otlp: str = typer.Option(..., "--otlp", help="The collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318."),
    every: bool = typer.Option(False, "--all", help="Every turn under the trace root, oldest first."),
    failed: bool = typer.Option(False, "--failed", help="The turns whose live export failed and that no "
                                                        "replay has delivered since (otel-export-failures.jsonl)."),
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds one turn's export may take "
                                                                    "(default: [plugins.otel] timeout_s, 5)."),
) -> None:
    """Send traced turns from disk to an OpenTelemetry collector, as the live export would have:
    the same span tree, timestamps and ids. Exits 1 naming every turn that was not exported."""
    from . import failures
    from .replay import export_turns, resolve_turns, turn_directories

    settings = _options(otlp, timeout)
    base = _trace_root(root)
    paths: list[Path] = []
    problems: list[str] = []
    if every:
        paths = turn_directories(base)
    if failed:
        wanted, notes = failures.unreplayed(base)
        for note in notes:
            typer.echo(f"ora: warning: {note}", err=True)
        found, missing = resolve_turns(base, wanted)
        paths += found
        problems += missing
    if turns:
        found, missing = resolve_turns(base, turns)
        paths += found
        problems += missing
    if not (every or failed or turns):
        latest = turn_directories(base)[-1:]
        if not latest:
            raise _context().fail(f"no traced turns under {base}")
        paths = latest
    paths = list(dict.fromkeys(paths))
    if not paths and not problems:
        typer.echo(f"nothing to export under {base}")
        return

    def said(outcome: Any) -> None:
        if outcome.ok:
            typer.echo(f"exported {outcome.turn_id}: {outcome.spans} span(s) to {settings.traces_url}")

    outcomes = export_turns(paths, settings, progress=said)
    delivered = [o for o in outcomes if o.ok]
    pending, _ = failures.unreplayed(base)
    made_up = [o for o in delivered if o.turn_id in set(pending)]
    if made_up:
        try:
            failures.append(base, failures.FailureRecord(kind="replayed", endpoint=settings.traces_url, turns=[
                failures.FailedTurn(turn_id=o.turn_id, conversation_id=o.path.parent.name, spans=o.spans)
                for o in made_up]))
        except OSError as exc:
            problems.append(f"the replay is not recorded in {failures.log_path(base)} "
                            f"({type(exc).__name__}: {exc}): --failed will send these turns again")
    lost = [f"{o.turn_id} ({o.reason})" for o in outcomes if not o.ok] + problems
    if lost:
        raise _context().fail(f"{len(lost)} turn(s) not exported to {settings.traces_url}: " + "; ".join(lost))


@trace_commands.command("otel")
def trace_otel(
    check: bool = typer.Option(False, "--check", help="Send an empty export to the collector; exit 1 when it "
                                                      "does not take it."),
) -> None:
    """Is the OpenTelemetry export on, and where do the spans go ([plugins.otel])."""
    from .options import describe

    settings = _options()
    typer.echo(f"otel: {describe(settings)}")
    if not (check and settings.active):
        return
    from .export import ReportingExporter, otlp_exporter

    heard: list[str | None] = []
    exporter = ReportingExporter(otlp_exporter(settings.traces_url, settings), settings.traces_url,
                                 lambda spans, reason: heard.append(reason))
    try:
        exporter.export([])
    finally:
        exporter.shutdown()
    reason = heard[-1] if heard else "the exporter reported nothing"
    if reason is not None:
        raise _context().fail(f"the collector at {settings.traces_url} did not take an export: {reason}")
    typer.echo(f"otel: the collector at {settings.traces_url} takes exports")
