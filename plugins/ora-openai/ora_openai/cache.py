"""The opt-in response cache: identical requests (URL and the whole JSON body) answered from disk.

The key is a SHA-256 of the canonical request; no header (so no API key) is part of it or of
what is stored. Only successful, complete, non-streamed completions are stored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any


def default_cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("ora", appauthor=False)) / "openai-responses"


def request_key(url: str, body: dict[str, Any]) -> str:
    canonical = json.dumps({"url": url, "body": body}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class ResponseCache:
    def __init__(self, directory: Path, ttl_s: float | None = None) -> None:
        import diskcache

        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.ttl_s = ttl_s
        self._cache = diskcache.Cache(str(directory))

    async def get(self, key: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self._cache.get, key)

    async def put(self, key: str, value: dict[str, Any]) -> None:
        await asyncio.to_thread(self._cache.set, key, value, self.ttl_s)

    def close(self) -> None:
        self._cache.close()
