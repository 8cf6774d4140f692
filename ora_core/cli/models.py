"""``ora models list``: the configured backends, what they run, who uses them, and with
``--check`` whether each one answers (each backend's own ``check()`` probe).

Nothing it prints carries a secret: ``base_url`` is shown with its password and credential query
values masked, and each probe's answer or error passes the configuration's redactor (credential
shapes scrubbed too) before it becomes a row."""

from __future__ import annotations

import json
from typing import Any

import typer

#: ``ora models``: its commands below (the root app adds it: ``ora_core/cli/app.py``).
group = typer.Typer(help="Configured model backends.", no_args_is_help=True)


@group.command("list")
def models_list(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    check: bool = typer.Option(False, "--check", help="Probe each backend (exit 1 if any is unreachable)."),
) -> None:
    """Every configured backend: type, model, family, the roles using it, the plugin behind it."""
    import asyncio

    from ora_core.cli.state import echo, get_config, get_host, state

    resolved = get_config()
    config, host = resolved.config, get_host()
    from ora_core.engine.backend_report import backend_rows, check_backends  # here: `ora --help` stays light

    rows = backend_rows(config, host)
    if check:
        checks = asyncio.run(check_backends(config, host, [r["backend"] for r in rows], state.redactor))
        for row in rows:
            row["check"] = checks[row["backend"]]
    if as_json:
        echo(json.dumps({"config_hash": resolved.hash, "backends": rows}, indent=2, default=str))
    else:
        _print_table(rows, check)
    if check and any(r["check"]["reachable"] is False for r in rows):
        raise typer.Exit(1)


def _check_cell(check: dict[str, Any]) -> str:
    if check["reachable"] is None:
        return "unknown (" + check["detail"] + ")"
    if check["reachable"]:
        info = check.get("info") or {}
        extra = ", ".join(f"{k}={v}" for k, v in info.items() if k in ("chat_format", "threads", "load_s",
                                                                       "model_listed", "note", "endpoint",
                                                                       "conversion", "conversion_failed"))
        return f"reachable ({check['latency_s']}s)" + (f"\n{extra}" if extra else "")
    error = check["error"]
    return f"UNREACHABLE: {error.get('kind')}: {error.get('message')}"


def _structured_cell(row: dict[str, Any]) -> str:
    """``yes`` (replies can be held to a JSON schema), ``no`` (text only), or why it is unknown."""
    if row["structured_output"] is None:
        return "unknown" + (f" ({row['structured_output_error']})" if row.get("structured_output_error") else "")
    return "yes" if row["structured_output"] else "no"


def _print_table(rows: list[dict[str, Any]], check: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Ora model backends", show_lines=True)
    columns = ["backend", "type", "model", "family", "roles", "fallbacks", "structured", "plugin"] + (
        ["check"] if check else [])
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        plugin = (f"{row['plugin']} ({row['distribution']} {row['version']})" if row["type_registered"]
                  else "NOT INSTALLED: no plugin registers this type")
        cells = [row["backend"], row["type"], row["model"] or "-", row["family"] or "-",
                 ", ".join(row["roles"]) or "-",
                 ", ".join(row["fallbacks"]) or "-", _structured_cell(row), plugin]
        if check:
            cells.append(_check_cell(row["check"]))
        table.add_row(*cells)
    Console(width=max(120, Console().width)).print(table)
