"""Sentence vectors for the grounding verifier, from the embedder the host registers.

The verifier asks the turn for the configured embedder (``ctx.embedder()``: ``[embedding]
embedder``, ``minilm`` from ora-minilm by default); it imports no model and no other plugin, so
one model serves every component of the process. An embedder no plugin registers is a
``VerifierError`` carrying the host's message (``embedding.embedder`` and the registered names):
the kernel records the verification as BROKEN with it, never PASS.

``CachedEmbedder`` puts a bounded per-text cache in front of that embedder (claims and evidence
sentences recur across the verifications of a turn and across turns), one per embedder per
process, and L2-normalises rows unless the embedder promises ``normalized = True``, so cosine
similarity stays a dot product. Nothing here imports numpy until the first ``encode``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ora_core.api import OraError, VerifierError

CACHE_SIZE = 20_000


class CachedEmbedder:
    """Unit-length sentence vectors from ``embedder`` (an ``ora_core.api.Embedder``), with a
    bounded in-memory cache keyed by text."""

    def __init__(self, embedder: Any, *, cache_size: int = CACHE_SIZE) -> None:
        self.embedder = embedder
        self.name = str(getattr(embedder, "name", type(embedder).__name__))
        self.dimension = int(embedder.dimension)
        self._normalized = getattr(embedder, "normalized", False) is True
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), dimension)`` float32 array of unit-length rows.

        The cache is touched only under the lock, and the texts it lacks are embedded under it
        too, so two concurrent verifications never embed the same text twice. A failing or
        misshapen embedder is a ``VerifierError`` naming it."""
        import numpy as np

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if missing:
                for text, vector in zip(missing, self._embed(missing), strict=True):
                    self._cache[text] = vector
            for i, text in enumerate(texts):
                out[i] = self._cache[text]
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return out

    def _embed(self, texts: list[str]) -> Any:
        import numpy as np

        try:
            vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        except Exception as exc:  # noqa: BLE001 - re-raised as the verifier's typed error, embedder named
            raise VerifierError(f"grounding: embedder {self.name!r} failed on {len(texts)} text(s): "
                                f"{type(exc).__name__}: {exc}") from exc
        if vectors.shape != (len(texts), self.dimension):
            raise VerifierError(f"grounding: embedder {self.name!r} returned vectors of shape {vectors.shape} for "
                                f"{len(texts)} text(s); its dimension is {self.dimension}")
        if not self._normalized:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), np.float32(1e-12))
        return vectors

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.embedder!r}, cached={len(self._cache)})"


_cached: dict[int, tuple[Any, CachedEmbedder]] = {}
_cached_lock = threading.Lock()


def cached(embedder: Any) -> CachedEmbedder:
    """The process-wide ``CachedEmbedder`` of ``embedder`` (one cache per embedder object)."""
    key = id(embedder)
    with _cached_lock:
        entry = _cached.get(key)
        if entry is None or entry[0] is not embedder:  # the embedder is kept, so its id is never reused
            entry = _cached[key] = (embedder, CachedEmbedder(embedder))
    return entry[1]


def get_embedder(ctx: Any) -> CachedEmbedder:
    """The configured embedder of ``ctx`` (the turn, a ``StandaloneContext``), cached.

    A ``VerifierError`` names what is missing: a ``ctx`` with no ``embedder()`` (outside a turn,
    pass ``GroundingVerifier(embedder=...)`` or a ``StandaloneContext`` over a plugin host), or
    an ``embedding.embedder`` no plugin registers (with the registered names)."""
    get = getattr(ctx, "embedder", None)
    if not callable(get):
        raise VerifierError(
            f"grounding: no embedder: the verifier asks ctx.embedder() for the configured one ([embedding] "
            f"embedder), and this ctx ({type(ctx).__name__}) has none; pass a turn or a StandaloneContext over a "
            "plugin host, or construct GroundingVerifier(embedder=...)")
    try:
        embedder = get()
    except OraError as exc:
        raise VerifierError(f"grounding: {exc}") from exc
    return cached(embedder)
