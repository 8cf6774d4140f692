"""``ora modes list`` and ``ora modes check``: the loaded modes and the problems of their files."""

from __future__ import annotations

import json
from typing import Any

import typer


def _library() -> Any:
    from ora_core.cli.state import get_config, get_host
    from ora_core.kernel.modes import load_modes

    return load_modes(get_host(), get_config().config)


#: ``ora modes``: its commands below (the root app adds it: ``ora_core/cli/app.py``).
group = typer.Typer(help="Modes: the Markdown files that steer each turn.", no_args_is_help=True)


@group.command("list")
def modes_list(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every loaded mode: name, gear, signals, retrieval filters, pack and file."""
    library = _library()
    rows = [
        {
            "name": m.name,
            "gear": m.gear,
            "title": m.title,
            "signals": m.signals.model_dump(),
            "examples": len(m.examples),
            "retrieval": m.retrieval.model_dump(mode="json"),
            "pack": m.pack,
            "path": m.path,
            "empty_sections": m.empty_sections,
        }
        for m in library
    ]
    if as_json:
        typer.echo(json.dumps({"modes": rows, "problems": [p.model_dump() for p in library.problems]},
                              indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Ora modes")
    for col in ("mode", "gear", "strong signals", "weak signals", "examples", "types", "pack"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(row["name"], str(row["gear"]), ", ".join(row["signals"]["strong"]) or "-",
                      ", ".join(row["signals"]["weak"]) or "-", str(row["examples"]),
                      ", ".join(row["retrieval"]["types"]) or "-", row["pack"])
    Console(width=max(120, Console().width)).print(table)
    if library.problems:
        typer.echo(f"{len(library.problems)} problem(s); run `ora modes check`", err=True)


@group.command("check")
def modes_check() -> None:
    """Check every mode file: front matter, gear, examples, the seven required sections. Exit 1
    on problems. Modes that declare no ``examples`` are named (a note, not a problem): pre-routing
    scores them by their vocabulary only."""
    library = _library()
    for problem in library.problems:
        typer.echo(f"error: {problem}", err=True)
    directories = dict(library.sources)
    for pack, names in sorted(library.without_examples().items()):
        typer.echo(f"note: pack {pack} ({directories.get(pack, '?')}): mode(s) without examples, routed by "
                   f"vocabulary only: {', '.join(names)}", err=True)
    typer.echo(f"{len(library.modes)} mode(s) loaded from {len(library.sources)} source(s), "
               f"{len(library.problems)} problem(s)")
    if library.problems:
        raise typer.Exit(1)
