"""``ora models list``: the configured backends, what they run, who uses them, and with
``--check`` whether each one answers (each backend's own ``check()`` probe).

Nothing it prints carries a secret: ``base_url`` is shown with its password and credential query
values masked, and each probe's answer or error passes the configuration's redactor (credential
shapes scrubbed too) before it becomes a row."""

from __future__ import annotations

import json
from typing import Any

import typer

from ora_core.kernel.errors import OraError


def structured_output(host: Any, settings: Any) -> tuple[bool | None, str]:
    """Whether a backend of ``settings`` constrains a reply to a JSON schema (its ``structured_output``
    attribute; a backend without one cannot), built here without calling it; ``(None, why)`` when it
    cannot be built (no plugin for its type, invalid options, a factory that raises)."""
    try:
        backend = host.get("backend", settings.type).create(settings)
    except OraError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a plugin's factory that breaks its contract: named in the row
        return None, f"creating the backend raised {type(exc).__name__}: {exc}"
    return getattr(backend, "structured_output", False) is True, ""


def backend_rows(config: Any, host: Any) -> list[dict[str, Any]]:
    """One row per configured backend: type, model, family, roles, fallbacks, the plugin
    (distribution and version) that registers its type, and whether it can constrain a reply to a
    JSON schema (``structured_output``: true, false, or null with ``structured_output_error``)."""
    from ora_core.kernel.config import ROLE_NAMES
    from ora_core.kernel.redaction import mask_url

    roles_by_backend: dict[str, list[str]] = {}
    for role in ROLE_NAMES:
        roles_by_backend.setdefault(getattr(config.roles, role), []).append(role)
    fallback_for: dict[str, list[str]] = {}
    for name, settings in config.backends.items():
        for fb in settings.fallbacks:
            fallback_for.setdefault(fb, []).append(name)
    rows = []
    for name, settings in config.backends.items():
        component = host.registry["backend"].get(settings.type)
        record = host.records.get(component.plugin) if component is not None else None
        structured, why_unknown = structured_output(host, settings) if component is not None else (None, "")
        rows.append({
            "backend": name,
            "type": settings.type,
            "model": settings.model,
            "family": settings.family,
            "base_url": mask_url(settings.base_url) if settings.base_url else settings.base_url,
            "roles": roles_by_backend.get(name, []),
            "fallbacks": list(settings.fallbacks),
            "fallback_for": fallback_for.get(name, []),
            "tokens_per_minute": settings.tokens_per_minute,
            "plugin": component.plugin if component is not None else None,
            "distribution": record.distribution if record is not None else None,
            "version": record.version if record is not None else None,
            "type_registered": component is not None,
            "structured_output": structured,
            **({"structured_output_error": why_unknown} if why_unknown else {}),
        })
    return rows


async def check_backends(config: Any, host: Any, names: list[str],
                         redactor: Any = None) -> dict[str, dict[str, Any]]:
    """Probe each backend; a failure is reported by its error kind, never raised. Every answer and
    error has ``redactor``'s secrets (default: the configuration's) and credential shapes replaced,
    and the URLs in it their passwords and credential parameters masked."""
    import asyncio
    import time

    from ora_core.engine.backends import BackendPool
    from ora_core.kernel.errors import BackendError
    from ora_core.kernel.redaction import Redactor, mask_secrets

    redactor = redactor if redactor is not None else Redactor.for_config(config)

    pool = BackendPool(config, host)
    results: dict[str, dict[str, Any]] = {}
    try:
        for name in names:
            start = time.perf_counter()
            try:
                backend = pool.get(name)
                probe = getattr(backend, "check", None)
                if probe is None:
                    results[name] = {"reachable": None, "detail": "this backend type has no check()"}
                    continue
                async with asyncio.timeout(pool.deadline_s(name)):
                    info = await probe()
                results[name] = {"reachable": True, "info": info,
                                 "latency_s": round(time.perf_counter() - start, 3)}
            except BackendError as exc:
                results[name] = {"reachable": False, "error": exc.describe()}
            except TimeoutError:
                results[name] = {"reachable": False, "error": {"kind": "timeout", "message": "check() did not "
                                 f"return within {pool.deadline_s(name):.0f}s"}}
            except OraError as exc:  # configuration: no plugin for the type, bad options
                results[name] = {"reachable": False, "error": {"kind": "config", "message": str(exc)}}
            except Exception as exc:  # noqa: BLE001 - a plugin's check() that breaks its contract: named, no crash
                results[name] = {"reachable": False, "error": {
                    "kind": "plugin_fault", "message": f"check() raised {type(exc).__name__}: {exc}",
                    "error_class": type(exc).__name__}}
    finally:
        await pool.aclose()
    return {name: redactor.error_data(mask_secrets(result)) for name, result in results.items()}


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
