"""``ora config show`` and ``ora config check``: the resolved configuration, and the verification
edges it plans."""

from __future__ import annotations

import json
from typing import Any

import typer

from ora_core.cli.state import EXIT_ERROR, check_plugin_options, echo, get_config, get_host, print_options_problems

#: ``ora config``: its commands below (the root app adds it: ``ora_core/cli/app.py``).
group = typer.Typer(help="The resolved configuration.", no_args_is_help=True)


@group.command("show")
def config_show(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Print the resolved configuration (secrets masked) and its hash; exit 1 when a plugin's table
    or a backend's options break the model its plugin declares (each table and key named)."""
    from ora_core.kernel.config import render_config

    resolved = get_config()
    warnings = check_plugin_options(resolved)
    echo(render_config(resolved, "json" if as_json else "toml"))
    print_options_problems(warnings)


@group.command("check")
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
        print_edges(edges, resolved.config.verification.same_lineage)
    if any(e.outcome.startswith(("refused", "BROKEN")) for e in edges):
        raise typer.Exit(EXIT_ERROR)


def print_edges(edges: list[Any], policy: str) -> None:
    """One block per edge: gear, edge, author -> judge, relation and why, what the policy does."""
    echo(f"verification edges (same_lineage = {policy!r}):")
    for e in edges:
        judge = e.judge.label() if e.judge is not None else e.judge_kind
        flag = "!" if e.relation in ("same", "unknown") else " "
        echo(f"{flag} gear {e.gear:<3} {e.edge}")
        echo(f"    {e.author_role}: {e.author.label()}  ->  {e.judge_role}: {judge}")
        echo(f"    lineage: {e.relation} ({e.reason}); {e.outcome}")
