"""Ora plugin: the ``web`` retrieval stream, over a SearxNG-style JSON search API.

Off by default: context assembly only calls it when ``[retrieval.streams] web = true``, and it
needs ``retrieval.web_endpoint`` (e.g. ``http://127.0.0.1:8888/search``). Its own settings live
in ``[plugins.web]`` (see ``ora_web.retriever.WebSettings``). httpx is imported when a search
runs, not when the plugin loads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ora_core import hookimpl

__version__ = "0.3.0"


@hookimpl
def ora_register_retrievers(register: Callable[..., Any]) -> None:
    from .retriever import WebRetriever

    register(WebRetriever())


@hookimpl
def ora_register_options(register: Callable[..., Any]) -> None:
    from .retriever import PLUGIN_NAME, WebSettings

    register(WebSettings, table=PLUGIN_NAME)
