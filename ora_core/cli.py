"""The ``ora`` command line.

Plugins are loaded inside ``main()``, when the command runs, never when this module is
imported; a plugin that fails to load is recorded and shown by ``ora plugins list`` while
``ora --help`` keeps working. Heavy libraries are imported inside the commands that use them.

Exit codes of ``ora run``: 0 ok or degraded, 1 configuration or plugin error,
2 usage error, 3 needs_clarification (the question is printed), 4 halted (the diagnostic
is printed).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

import typer

from .errors import OraError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_NEEDS_CLARIFICATION = 3
EXIT_HALTED = 4


class _State:
    host: Any = None
    config_path: Optional[str] = None


state = _State()


def _fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    typer.echo(f"ora: {message}", err=True)
    return typer.Exit(code)


def get_host() -> Any:
    if state.host is None:
        from .plugins import PluginHost

        state.host = PluginHost()
        state.host.load_entrypoints()
    return state.host


def get_config() -> Any:
    from .config import load_config

    try:
        return load_config(state.config_path)
    except OraError as exc:
        raise _fail(str(exc)) from None


def get_runtime() -> Any:
    from .pipeline import Runtime

    return Runtime(host=get_host(), resolved=get_config())


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="ora",
        help="Multi-step LLM pipelines whose failures are never silent.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )

    @app.callback()
    def root(
        config: Optional[str] = typer.Option(
            None, "--config", "-c", help="Configuration file (else $ORA_CONFIG, ./ora.toml, user config dir)."
        ),
    ) -> None:
        state.config_path = config

    @app.command()
    def run(
        prompt: str = typer.Argument(..., help="The prompt to answer."),
        as_json: bool = typer.Option(False, "--json", help="Print the result object as JSON."),
        conversation: Optional[str] = typer.Option(None, "--conversation", help="Conversation id."),
        mode: Optional[str] = typer.Option(None, "--mode", help="Force a mode (skips pre-routing)."),
        best_guess: bool = typer.Option(
            False, "--best-guess", help="Continue on the best candidate mode instead of asking."
        ),
        inject: Optional[str] = typer.Option(None, "--inject", help="Fault-injection mode (tests, benches)."),
        progress: bool = typer.Option(True, "--progress/--no-progress",
                                      help="Print each step on stderr as it runs."),
    ) -> None:
        """Run one turn on the configured pipeline; print the answer, its status and its trace."""
        from .pipeline import run_turn

        runtime = get_runtime()
        if inject:
            from .faults import resolve_injector

            try:
                resolve_injector(runtime.host, inject)
            except OraError as exc:
                raise _fail(str(exc), code=2) from None
        try:
            result = run_turn(runtime, prompt, conversation_id=conversation, mode=mode,
                              best_guess=best_guess, inject=inject,
                              on_event=_progress_printer() if progress else None)
        except OraError as exc:
            raise _fail(str(exc)) from None
        if as_json:
            typer.echo(result.model_dump_json(indent=2))
        else:
            _print_result(result)
        if result.status == "needs_clarification":
            raise typer.Exit(EXIT_NEEDS_CLARIFICATION)
        if result.status == "halted":
            raise typer.Exit(EXIT_HALTED)

    plugins_app = typer.Typer(help="Installed plugins and their components.", no_args_is_help=True)
    app.add_typer(plugins_app, name="plugins")

    @plugins_app.command("list")
    def plugins_list(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Every plugin: distribution, version, components, hooks, layers, status."""
        host = get_host()
        rows = host.summary()
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        _print_plugin_table(rows)

    @plugins_app.command("check")
    def plugins_check() -> None:
        """Exit non-zero when any plugin failed to load or is incompatible."""
        host = get_host()
        problems = host.problems()
        for record in problems:
            typer.echo(f"{record.name} ({record.distribution} {record.version}): {record.status}: "
                       + "; ".join(record.errors), err=True)
        loaded = sum(1 for r in host.records.values() if r.status == "ok")
        typer.echo(f"{loaded} plugin(s) ok, {len(problems)} with problems")
        if problems:
            raise typer.Exit(EXIT_ERROR)

    config_app = typer.Typer(help="The resolved configuration.", no_args_is_help=True)
    app.add_typer(config_app, name="config")

    @config_app.command("show")
    def config_show(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Print the resolved configuration (secrets masked) and its hash."""
        from .config import render_config

        typer.echo(render_config(get_config(), "json" if as_json else "toml"))

    __import__("ora_core.cli_modes", fromlist=["register"]).register(app)
    __import__("ora_core.cli_models", fromlist=["register"]).register(app)
    return app


def _progress_printer() -> Any:
    """A trace-event observer printing one line per step (and per retry, injection and
    degrading contingency) on stderr while the turn runs."""
    marks = {"OK": "✓", "PASS": "✓", "FAIL": "✗", "BROKEN": "✗", "DEGRADED": "!", "SKIPPED": "-"}

    def on_event(event: Any) -> None:
        data = event.data
        if event.kind == "step_started":
            line = f"  → {event.step}"
        elif event.kind == "step_finished":
            health = data.get("health") or {}
            verdict = health.get("verdict", "OK")
            attempts = health.get("attempts", 1)
            line = (f"  {marks.get(verdict, '?')} {event.step:<40} {verdict:<8} "
                    f"{health.get('latency_s', 0.0):7.2f}s" + (f"  attempts={attempts}" if attempts > 1 else ""))
        elif event.kind == "retry":
            line = f"    ↻ {event.step}: {'regenerate, ' if data.get('regenerate') else ''}{data.get('reason')}"
        elif event.kind == "fault_injected":
            line = f"    ⚡ injected ({data.get('mode')}) at {data.get('point', {}).get('site')}: {data.get('effect')}"
        elif event.kind == "contingency" and data.get("severity") in ("degraded", "error"):
            line = f"    ! {data.get('name')}"
        else:
            return
        print(line, file=sys.stderr, flush=True)

    return on_event


def _print_result(result: Any) -> None:
    if result.status == "needs_clarification":
        typer.echo(f"Clarification needed: {result.question}")
    elif result.answer:
        typer.echo(result.answer)
    if result.diagnostic:
        typer.echo("Diagnostic:\n" + json.dumps(result.diagnostic, indent=2), err=True)
    typer.echo("")
    typer.echo(f"status: {result.status}   mode: {result.mode or '-'}   gear: {result.gear or '-'}")
    if result.verdicts:
        typer.echo("verification: " + ", ".join(f"{step} {v}" for step, v in result.verdicts.items()))
    if result.contingencies:
        typer.echo("contingencies: " + ", ".join(dict.fromkeys(result.contingencies)))
    if result.signals:
        counts: dict[str, int] = {}
        for signal in result.signals:
            key = f"{signal.detector}:{signal.name}"
            counts[key] = counts.get(key, 0) + 1
        typer.echo("signals: " + ", ".join(f"{k} x{n}" if n > 1 else k for k, n in counts.items()))
    if result.tracing_degraded:
        typer.echo("tracing: degraded (see stderr)")
    typer.echo(f"trace: {result.trace_path or '(none written)'}")


def _print_plugin_table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Ora plugins", show_lines=True)
    for col in ("plugin", "distribution", "version", "components", "hooks", "layer / assumes", "status"):
        table.add_column(col, overflow="fold")
    for row in rows:
        comps = "\n".join(f"{kind}: {', '.join(names)}" for kind, names in sorted(row["components"].items()))
        layers = "\n".join(
            f"{c['name']}: {c['layer'] or '?'}" + (f" [{', '.join(c['assumes'])}]" if c["assumes"] else "")
            for c in row["layers"]
        )
        status = row["status"] + (f"\n{row['error']}" if row["error"] else "")
        hooks = "\n".join(h.removeprefix("ora_") for h in row["hooks"])
        table.add_row(row["name"], row["distribution"], row["version"], comps or "-", hooks or "-",
                      layers or "-", status)
    Console(width=max(120, Console().width)).print(table)


def main(argv: list[str] | None = None) -> None:
    """Entry point: load plugins (isolated), let them add commands, then run the app."""
    app = build_app()
    try:
        host = get_host()
        host.register_commands(app)
    except OraError as exc:  # strict mode: a plugin failure is fatal
        typer.echo(f"ora: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    app(args=argv, prog_name="ora")


if __name__ == "__main__":
    main()
