"""Ora plugin: the Anthropic Messages API over httpx.

``[backends.<name>] type = "anthropic"``, ``model = "claude-..."``, ``api_key_env =
"ANTHROPIC_API_KEY"``, ``family = "claude"``; ``base_url`` defaults to the public API. System
messages become the top-level ``system`` field; retries on 429 (honouring ``retry-after``),
529 and 5xx; every failure is a typed ``BackendError``.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl
from ora_core.api import LazyBackendFactory, lazy_exports

#: Public names, imported on first access (PEP 562) so that loading the plugin stays cheap.
_LAZY = {"AnthropicBackend": "backend", "AnthropicFactory": "backend"}

__all__ = [*sorted(_LAZY), "ora_register_backends"]


__getattr__ = lazy_exports(__name__, _LAZY)


@hookimpl
def ora_register_backends(register: Callable[..., None]) -> None:
    register(LazyBackendFactory("anthropic", "ora_anthropic.backend:AnthropicFactory",
                                options="ora_anthropic.options:AnthropicOptions"))
