"""``[backends.<name>] options`` of an ``anthropic`` backend: a light module (no httpx), so the kernel
can import it to validate a configuration without loading the backend."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from ora_core.api import PluginOptions

API_VERSION = "2023-06-01"


class AnthropicOptions(PluginOptions):
    """Declared as the factory's ``options_model``: an unknown key or a wrong type is refused before a
    turn runs."""

    model_config = ConfigDict(extra="forbid")

    api_version: str = API_VERSION
    connect_timeout_s: float = Field(default=10.0, gt=0)
    backoff_initial_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=8.0, ge=0)
    retry_after_max_s: float = Field(default=60.0, ge=0)
    headers: dict[str, str] = Field(default_factory=dict)
    # "aiohttp" (default) or "httpcore": the httpx transport underneath (ora_core/http_transport.py)
    transport: Literal["aiohttp", "httpcore"] = "aiohttp"
    max_connections: int = Field(default=100, ge=1)
    max_keepalive: int = Field(default=20, ge=0)  # 0: a new connection per request
    keepalive_expiry_s: float = Field(default=5.0, gt=0)
