"""``ora plugins list`` and ``ora plugins check``: the installed plugins, their components and problems."""

from __future__ import annotations

import json
from typing import Any

import typer

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


def print_plugin_table(rows: list[dict[str, Any]]) -> None:
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


# `ora plugins install|uninstall`: pip in this interpreter (their module imports nothing heavy)
from ora_core.cli.plugin_install import plugins_install, plugins_uninstall  # noqa: E402 - after `group`

group.command("install")(plugins_install)
group.command("uninstall")(plugins_uninstall)
