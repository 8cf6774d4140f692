"""A connection pool split into small shards.

httpcore's pool re-scans every connection for every queued request (quadratic in the number
of connections; encode/httpcore#1035, still open in httpcore 1.0.9): at 50 concurrent
requests one pool spends more time assigning connections than the server spends answering.
Several small pools, each request sent to the least busy one, keep every scan short while each
shard still reuses its keep-alive connections.
"""

from __future__ import annotations

import functools
import math
import ssl

import httpx


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """Loading the CA bundle costs tens of milliseconds: once per process, not per shard."""
    return httpx.create_ssl_context()


class ShardedTransport(httpx.AsyncBaseTransport):
    def __init__(self, max_connections: int, max_keepalive: int, shard_size: int) -> None:
        shards = max(1, math.ceil(max_connections / shard_size))
        per_shard = max(1, math.ceil(max_connections / shards))
        keepalive = max(0, math.ceil(max_keepalive / shards))
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=keepalive)
        self.shards = [httpx.AsyncHTTPTransport(limits=limits, verify=shared_ssl_context()) for _ in range(shards)]
        self.in_flight = [0] * shards

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = min(range(len(self.shards)), key=self.in_flight.__getitem__)
        self.in_flight[index] += 1
        try:
            return await self.shards[index].handle_async_request(request)
        finally:
            self.in_flight[index] -= 1

    async def aclose(self) -> None:
        for shard in self.shards:
            await shard.aclose()
