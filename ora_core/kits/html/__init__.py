"""The HTML kit: self-contained report pages (one file, CSS and one small script inline, nothing
fetched: no server, no CDN, no font, no image), shared by every Ora report — the trace view and
the health dashboard (ora-trace-fs), the calibration reports — so they look and behave alike.

Pages are rendered with Jinja2 with autoescaping on for every template and undefined names an
error: every model output, retrieved chunk, prompt and name on a page is untrusted text, escaped,
never interpreted; no template marks such text ``|safe``. A Content-Security-Policy in each page
(``default-src 'none'``; styles and the script only with the page's nonce) means even a rendering
bug could neither fetch anything nor run injected script.

``templates/base.html`` (layout, badges, tables, collapsible sections, a filter box) and
``templates/_base_macros.html`` (the macros, the inline-SVG ``chart`` among them, drawn from
``svg``'s charts) are generic: a report's own templates ``{% extends "base.html" %}`` and
``{% import "_base_macros.html" as ui %}``; ``environment(TEMPLATE_DIR)`` finds both. Needs
jinja2 (``pip install "ora-core[html]"``).
"""

from __future__ import annotations

import secrets
from functools import lru_cache
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).resolve().parent / "templates"


def fmt_seconds(value: Any) -> str:
    if not isinstance(value, int | float):
        return "—"
    if value >= 100:
        return f"{value:,.0f} s"
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 0.001:
        return f"{value * 1000:.1f} ms"
    return f"{value * 1e6:.0f} µs"


def fmt_pct(value: Any) -> str:
    return f"{value:g} %" if isinstance(value, int | float) else "—"


def fmt_number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


@lru_cache(maxsize=8)
def environment(*template_dirs: Path | str) -> Any:
    """A Jinja2 environment: the report's own ``template_dirs`` first, then the shared base;
    autoescaping on for every template (whatever its name), undefined names an error."""
    from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined

    loader = ChoiceLoader([*(FileSystemLoader(str(d)) for d in template_dirs), FileSystemLoader(str(TEMPLATES))])
    env = Environment(loader=loader, autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["seconds"] = fmt_seconds
    env.filters["pct"] = fmt_pct
    env.filters["num"] = fmt_number
    return env


def render(env: Any, template: str, **context: Any) -> str:
    """``template`` rendered with ``context`` and a fresh nonce for the page's style and script."""
    return env.get_template(template).render(nonce=secrets.token_urlsafe(18), **context)
