"""The HTTP kit for backend plugins: one aiohttp (or httpcore) transport under httpx's API,
deadlines that cost no timer per call, and ``Retry-After`` parsing.

Needs httpx (and aiohttp for the default transport): install ``ora-core[http]``, which every
HTTP backend plugin depends on. Importing this module imports httpx; import it inside the
functions that call a model, never at a plugin's top level, so ``ora --help`` stays fast.
"""

from __future__ import annotations

from ora_core.kits.deadlines import Deadline, deadline
from ora_core.kits.http_transport import (
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
from ora_core.kits.retry_after import parse_retry_after, retry_after_note

__all__ = [
    "READ_BODY",
    "TRANSPORT_KINDS",
    "AiohttpTransport",
    "Deadline",
    "ShardedTransport",
    "WholeResponse",
    "deadline",
    "env_proxy_applies",
    "make_client",
    "make_transport",
    "parse_retry_after",
    "retry_after_note",
    "shared_ssl_context",
    "wire_headers",
]
