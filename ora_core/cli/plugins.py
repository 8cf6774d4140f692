"""``ora plugins list`` and ``ora plugins check``: the installed plugins, their components and problems."""

from __future__ import annotations

import json

import typer

from ora_core.cli.plugin_table import print_plugin_table
from ora_core.cli.state import EXIT_ERROR, get_host, options_report, print_options_problems

#: ``ora plugins``: its commands below (the root app adds it: ``ora_core/cli/app.py``).
group = typer.Typer(help="Installed plugins and their components.", no_args_is_help=True)


@group.command("list")
def plugins_list(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every plugin: distribution, version, components, hooks, layers, status."""
    host = get_host()
    rows = host.summary()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        print_plugin_table(rows)
    print_options_problems(options_report())  # tables passed on unchecked, options refused


@group.command("check")
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


# `ora plugins install|uninstall`: pip in this interpreter (their module imports nothing heavy)
from ora_core.cli.plugin_install import plugins_install, plugins_uninstall  # noqa: E402 - after `group`

group.command("install")(plugins_install)
group.command("uninstall")(plugins_uninstall)
