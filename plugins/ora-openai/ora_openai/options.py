"""The ``options`` table of an ``openai`` backend, validated with field-named errors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from ora_core.api import ConfigError, PluginOptions


class OpenAIOptions(PluginOptions):
    """``[backends.<name>] options`` of a ``openai`` backend, declared as the factory's ``options_model``:
    the kernel refuses an unknown key or a wrong type before a turn runs."""

    model_config = ConfigDict(extra="forbid")

    connect_timeout_s: float = Field(default=10.0, gt=0)
    backoff_initial_s: float = Field(default=0.5, ge=0)  # exponential backoff with jitter, when
    backoff_max_s: float = Field(default=8.0, ge=0)  # the server gives no Retry-After
    retry_after_max_s: float = Field(default=60.0, ge=0)  # a longer Retry-After fails over instead
    retry_on_timeout: bool = False  # a timed-out generation is usually an overloaded server
    breaker_failures: int = Field(default=5, ge=1)  # consecutive failures that open the circuit
    breaker_reset_s: float = Field(default=30.0, gt=0)  # how long it stays open before one probe
    # "aiohttp": httpx requests over aiohttp's C-accelerated HTTP/1.1 client (the fast default);
    # "httpcore": httpx's own transport, its pool sharded (see ora_core/http_transport.py)
    transport: Literal["aiohttp", "httpcore"] = "aiohttp"
    max_connections: int = Field(default=100, ge=1)
    # idle connections kept for reuse; 0: a new connection per request (aiohttp keeps any idle
    # connection up to max_connections when this is above 0; httpcore caps them at this number)
    max_keepalive: int = Field(default=50, ge=0)
    keepalive_expiry_s: float = Field(default=5.0, gt=0)  # an idle pooled connection is closed after this
    pool_shard_size: int = Field(default=8, ge=1)  # connections per pool shard (httpcore only)
    cache: bool = False  # opt in: identical requests are answered from disk
    cache_dir: str | None = None  # default: <user cache dir>/ora/openai-responses
    cache_ttl_s: float | None = Field(default=None, gt=0)
    headers: dict[str, str] = Field(default_factory=dict)
    stream_usage: bool = False  # ask for usage in the final stream chunk (OpenAI, vLLM)


def parse_options(raw: dict[str, Any], backend_type: str) -> OpenAIOptions:
    try:
        return OpenAIOptions.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"options.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            + (f" (got {err['input']!r})" if err["type"] != "extra_forbidden" else "")
            for err in exc.errors())
        raise ConfigError(f"invalid options for a {backend_type!r} backend: {problems}", field="options") from None
