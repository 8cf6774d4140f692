"""Ora plugin: chat web UIs as model backends, driven by Playwright on Debian's Chromium.

``[backends.<name>] type = "playwright"`` with ``options.profile`` = ``chatgpt``, ``claude``,
``gemini``, or ``generic`` plus ``options.profile_file`` (a TOML selector profile you write).
A persistent user-data dir keeps the login between runs. Login walls, expired sessions,
rate-limit banners, empty replies, error text in the reply bubble and hangs are typed
``BackendError``s: a browser error is never returned as model text (seed 000, failure #9).

This module stays light: playwright is imported when a browser is first needed.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl
from ora_core.api import LazyBackendFactory, lazy_exports

#: Public names, imported on first access (PEP 562) so that loading the plugin stays cheap.
_LAZY = {"BrowserBackend": "backend", "BrowserFactory": "backend", "BUILTIN_PROFILES": "profiles",
         "SelectorProfile": "profiles", "load_profile": "profiles"}

__all__ = [*sorted(_LAZY), "ora_register_backends"]


__getattr__ = lazy_exports(__name__, _LAZY)


@hookimpl
def ora_register_backends(register: Callable[..., None]) -> None:
    register(LazyBackendFactory("playwright", "ora_playwright.backend:BrowserFactory",
                                options="ora_playwright.options:BrowserOptions"))
