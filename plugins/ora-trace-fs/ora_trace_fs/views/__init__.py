"""Self-contained HTML pages rendered from the trace files: ``ora trace view`` (one turn) and
``ora health --html`` (the dashboard over many turns).

One page is one file: its CSS and its one small script are inline, nothing is fetched (no
server, no CDN, no font, no image), so it works from ``file://`` and offline. Pages are rendered
with Jinja2 with autoescaping on: every model output, retrieved chunk, prompt and name on the
page is untrusted text, escaped, never interpreted; no template marks such text ``|safe``. A
Content-Security-Policy in each page (``default-src 'none'``; styles and the script only with
the page's nonce) means even a rendering bug could neither fetch anything nor run injected
script.

The generic base (``base.html``, ``_base_macros.html`` with the inline-SVG ``chart``, the CSS)
and the chart helpers (``svg``) are Ora's HTML kit, ``ora_core.api.html``, shared with the other
reports (calibration); ``turn.html`` and ``dashboard.html`` extend it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ora_core.api.html import environment
from ora_core.api.html import render as render_page

TEMPLATES = Path(__file__).resolve().parent / "templates"


def render(template: str, **context: Any) -> str:
    """``template`` (this package's, extending the shared base of ``ora_core.api.html``) rendered
    with ``context`` and a fresh nonce for the page's style and script."""
    return render_page(environment(TEMPLATES), template, **context)


def write_page(path: Path, html: str) -> None:
    """Write the page atomically (a reader, or a browser reloading it, never sees half a page)."""
    from ..files import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, html.encode("utf-8"), fsync=False)
