"""The httpx transports of the ``openai`` backend (option ``transport``).

They live in ``ora_core.kits.http_transport`` because the ``anthropic`` backend uses them too:
``AiohttpTransport`` (the default: httpx over aiohttp's HTTP/1.1 client, a fraction of
httpcore's CPU per request) and ``ShardedTransport`` (``transport = "httpcore"``: httpx's own
transport with its pool split into shards, encode/httpcore#1035).
"""

from __future__ import annotations

from ora_core.api.http import (
    READ_BODY,
    TRANSPORT_KINDS,
    AiohttpTransport,
    ShardedTransport,
    WholeResponse,
    env_proxy_applies,
    make_client,
    make_transport,
    shared_ssl_context,
    wire_headers,
)

__all__ = ["READ_BODY", "TRANSPORT_KINDS", "AiohttpTransport", "ShardedTransport", "env_proxy_applies", "make_client",
           "make_transport", "shared_ssl_context", "WholeResponse", "wire_headers"]
