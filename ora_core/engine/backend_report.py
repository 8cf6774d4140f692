"""What ``ora models list`` and a server's health check report about the configured backends:
one row per backend (``backend_rows``) and, probed, whether each one answers (``check_backends``,
each backend's own ``check()``). Nothing here carries a secret: ``base_url`` is masked and every
probe's answer or error passes the configuration's redactor (credential shapes scrubbed too)."""

from __future__ import annotations

from typing import Any

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
