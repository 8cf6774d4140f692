"""Ora contrib plugin: the Anthropic Messages API over httpx.

``[backends.<name>] type = "anthropic"``, ``model = "claude-..."``, ``api_key_env =
"ANTHROPIC_API_KEY"``, ``family = "claude"``; ``base_url`` defaults to the public API. System
messages become the top-level ``system`` field; retries on 429 (honouring ``retry-after``),
529 and 5xx; every failure is a typed ``BackendError``.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl

from .backend import AnthropicBackend, AnthropicFactory

__all__ = ["AnthropicBackend", "AnthropicFactory", "ora_register_backends"]


@hookimpl
def ora_register_backends(register: Callable[..., None]) -> None:
    register(AnthropicFactory())
