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

from .backend import BrowserBackend, BrowserFactory
from .profiles import BUILTIN_PROFILES, SelectorProfile, load_profile

__all__ = ["BUILTIN_PROFILES", "BrowserBackend", "BrowserFactory", "SelectorProfile", "load_profile",
           "ora_register_backends"]


@hookimpl
def ora_register_backends(register: Callable[..., None]) -> None:
    register(BrowserFactory())
