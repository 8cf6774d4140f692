"""The HTML kit for report plugins: the shared Jinja2 base (layout, badges, tables, collapsible
sections, inline-SVG charts), autoescaping and a per-page Content-Security-Policy nonce, so every
report is one self-contained, offline, injection-safe file. Needs jinja2 (``ora-core[html]``)."""

from __future__ import annotations

from ora_core.kits.html import TEMPLATES, environment, fmt_number, fmt_pct, fmt_seconds, render, svg

__all__ = ["TEMPLATES", "environment", "fmt_number", "fmt_pct", "fmt_seconds", "render", "svg"]
