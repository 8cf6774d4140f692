"""The ``ora`` command line.

Plugins are loaded inside ``main()``, when the command runs, never when this module is
imported; a plugin that fails to load is recorded and shown by ``ora plugins list`` while
``ora --help`` keeps working. Heavy libraries are imported inside the commands that use them.

While a command runs, standard output and standard error are guarded (``state.guard_output``):
every write passes the redactor, so neither our commands nor a plugin's can print a secret of
the configuration (nor, on standard error, a credential shape).

Exit codes of ``ora run``: 0 ok or degraded, 1 configuration or plugin error,
2 usage error, 3 needs_clarification (the question is printed), 4 halted (the diagnostic
is printed).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

import typer

from ora_core.cli import models as models_commands
from ora_core.cli import modes as modes_commands
from ora_core.cli import run as run_command
from ora_core.cli.state import (
    EXIT_ERROR,
    begin_invocation,
    check_plugin_options,
    command_context,
    echo,
    echo_err,
    get_config,
    get_host,
    options_report,
    print_options_problems,
)
from ora_core.kernel.errors import OraError


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
        ctx: typer.Context,
        config: Optional[str] = typer.Option(
            None, "--config", "-c", help="Configuration file (else $ORA_CONFIG, ./ora.toml, user config dir)."
        ),
    ) -> None:
        begin_invocation(config, ctx)

    run_command.register(app)

    plugins_app = typer.Typer(help="Installed plugins and their components.", no_args_is_help=True)
    app.add_typer(plugins_app, name="plugins")

    @plugins_app.command("list")
    def plugins_list(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Every plugin: distribution, version, components, hooks, layers, status."""
        host = get_host()
        rows = host.summary()
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
        else:
            _print_plugin_table(rows)
        print_options_problems(options_report())  # tables passed on unchecked, options refused

    @plugins_app.command("check")
    def plugins_check() -> None:
        """Exit non-zero when any plugin failed to load or is incompatible."""
        host = get_host()
        problems = host.problems()
        for record in problems:
            typer.echo(f"{record.name} ({record.distribution} {record.version}): {record.status}: "
                       + "; ".join(record.errors), err=True)
        print_options_problems(options_report())
        loaded = sum(1 for r in host.records.values() if r.status == "ok")
        typer.echo(f"{loaded} plugin(s) ok, {len(problems)} with problems")
        if problems:
            raise typer.Exit(EXIT_ERROR)

    config_app = typer.Typer(help="The resolved configuration.", no_args_is_help=True)
    app.add_typer(config_app, name="config")

    @config_app.command("show")
    def config_show(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Print the resolved configuration (secrets masked) and its hash; exit 1 when a plugin's table
        or a backend's options break the model its plugin declares (each table and key named)."""
        from ora_core.kernel.config import render_config

        resolved = get_config()
        warnings = check_plugin_options(resolved)
        echo(render_config(resolved, "json" if as_json else "toml"))
        print_options_problems(warnings)

    @config_app.command("check")
    def config_check(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """The lineage of every verification edge the configuration plans, before any turn runs: who
        judges whose output, whether they share a lineage, and what [verification] same_lineage does
        with it. Exit 1 when an edge would be refused (same_lineage = "refuse" and no backend of
        another lineage)."""
        from ora_core.engine.gears.edges import planned_edges

        resolved = get_config()
        edges = planned_edges(resolved.config, get_host())
        if as_json:
            echo(json.dumps([e.model_dump(mode="json") for e in edges], indent=2))
        else:
            _print_edges(edges, resolved.config.verification.same_lineage)
        if any(e.outcome.startswith(("refused", "BROKEN")) for e in edges):
            raise typer.Exit(EXIT_ERROR)

    modes_commands.register(app)
    models_commands.register(app)
    from ora_core.cli import bench, probe  # light modules: the work is imported inside the commands
    bench.register_grounding(app)
    probe.register(app)
    bench.register_pipeline(app)
    from ora_core.cli import calibrate  # light: the work is imported inside its commands
    calibrate.register(app)
    return app


def _print_edges(edges: list[Any], policy: str) -> None:
    """One block per edge: gear, edge, author -> judge, relation and why, what the policy does."""
    echo(f"verification edges (same_lineage = {policy!r}):")
    for e in edges:
        judge = e.judge.label() if e.judge is not None else e.judge_kind
        flag = "!" if e.relation in ("same", "unknown") else " "
        echo(f"{flag} gear {e.gear:<3} {e.edge}")
        echo(f"    {e.author_role}: {e.author.label()}  ->  {e.judge_role}: {judge}")
        echo(f"    lineage: {e.relation} ({e.reason}); {e.outcome}")


def _print_plugin_table(rows: list[dict[str, Any]]) -> None:
    """The plugins as a plain text table: one block of lines per plugin, every name whole (rich's
    boxed table broke names mid-word and cost ~50 ms of the command's 0.4 s)."""
    header = ("plugin", "distribution", "version", "components", "hooks", "layer / assumes", "status")
    table: list[list[list[str]]] = []
    for row in rows:
        comps = [f"{kind}: {name}" for kind, names in sorted(row["components"].items()) for name in names]
        layers = [f"{c['name']}: {c['layer'] or '?'}" + (f" [{', '.join(c['assumes'])}]" if c["assumes"] else "")
                  for c in row["layers"]]
        status = [row["status"], *([row["error"]] if row["error"] else [])]
        hooks = [h.removeprefix("ora_") for h in row["hooks"]]
        table.append([[row["name"]], [row["distribution"]], [row["version"]], comps or ["-"], hooks or ["-"],
                      layers or ["-"], status])
    widths = [max([len(h), *(len(line) for cells in table for line in cells[i][:1 if i == 6 else None])])
              for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for cells in table:
        for depth in range(max(len(c) for c in cells)):
            parts = [(c[depth] if depth < len(c) else "") for c in cells]
            lines.append("  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip())
        lines.append("")
    typer.echo("\n".join(lines).rstrip("\n"))


#: pydantic scans every installed distribution's entry points for its own plugins the first time
#: a model's schema is built (~20 ms of `ora plugins list`'s 0.4 s budget). The ``ora`` command
#: does not use pydantic plugins (Ora's trace records every validation it cares about), so it
#: turns the scan off unless the variable is set; ``PYDANTIC_DISABLE_PLUGINS=`` (empty) keeps them.
PYDANTIC_PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"


def main(argv: list[str] | None = None) -> None:
    """Entry point: load plugins (isolated), let them add commands, then run the app."""
    import os

    from ora_core.kernel.commands import CommandFailed

    os.environ.setdefault(PYDANTIC_PLUGINS_VARIABLE, "__all__")
    app = build_app()
    try:
        host = get_host()
        host.register_commands(app, command_context(app))
    except OraError as exc:  # strict mode: a plugin failure is fatal
        echo_err(f"ora: {exc}")
        sys.exit(EXIT_ERROR)
    try:
        app(args=argv, prog_name="ora")
    except CommandFailed as exc:  # a plugin's command failed through CommandContext.fail
        echo_err(f"ora: {exc.message}")
        sys.exit(exc.code)


if __name__ == "__main__":
    main()
