"""Vectors for Chroma, from the embedder the host registers under the configured name.

This plugin has no model of its own and imports none: ``ctx.embedder()`` (``[embedding]
embedder``, ``minilm`` by default, registered by ora-minilm) gives the embedder, whoever
supplies it, and the model behind it loads once per process however many components use it. A
name no plugin registers is a ``PluginError`` listing the registered embedders.

Ora passes vectors explicitly on every add and query. The embedding function recorded in each
collection's configuration only *names* the embedder (``ora-<embedder>``): a collection is never
bound to Chroma's default (which downloads a model at run time), Chroma can rebuild the function
by name without Ora, and a store built with one embedder is never searched with another's
vectors. Vectors from a normalising embedder are unit length, so Chroma's cosine distance is
``1 - similarity``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ora_core.api import OraError

QUERY_CACHE_KEY = "ora_chroma.query_embeddings"
#: Chroma's name for the embedding function of a collection built with embedder ``<name>``.
CHROMA_NAME_PREFIX = "ora-"


class EmbeddingError(OraError):
    """The embedder failed, returned vectors of the wrong shape, or a collection was built with
    another embedder than the configured one."""


def chroma_name(embedder_name: str) -> str:
    return f"{CHROMA_NAME_PREFIX}{embedder_name}"


def embedder_of(ctx: Any) -> Any:
    """The configured embedder from ``ctx`` (a turn, a ``StandaloneContext``): ``ctx.embedder()``.

    Raises the host's ``PluginError`` (naming ``embedding.embedder`` and the registered
    embedders) when the configured name is not registered, and ``EmbeddingError`` when ``ctx``
    cannot give embedders at all."""
    get = getattr(ctx, "embedder", None)
    if not callable(get):
        raise EmbeddingError(f"no embedder: the context ({type(ctx).__name__}) has no embedder() to ask the plugin "
                             "host for the configured one ([embedding] embedder)")
    return get()


def embed(embedder: Any, texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
    """``texts`` as vectors, ``batch_size`` texts per ``embedder.embed`` call; checked: one row per
    text, ``embedder.dimension`` wide. A failure is an ``EmbeddingError`` naming the embedder."""
    import numpy as np

    texts = list(texts)
    if not texts:
        return []
    name = getattr(embedder, "name", type(embedder).__name__)
    dimension = getattr(embedder, "dimension", None)
    rows: list[list[float]] = []
    for start in range(0, len(texts), max(1, batch_size)):
        part = texts[start:start + max(1, batch_size)]
        try:
            vectors = np.asarray(embedder.embed(part), dtype=np.float32)
        except Exception as exc:  # noqa: BLE001 - re-raised typed, with the embedder named
            raise EmbeddingError(f"embedder {name!r} failed on {len(part)} text(s): "
                                 f"{type(exc).__name__}: {exc}") from exc
        if vectors.shape != (len(part), dimension):
            raise EmbeddingError(f"embedder {name!r} returned vectors of shape {vectors.shape} for {len(part)} "
                                 f"text(s); its dimension is {dimension}, so ({len(part)}, {dimension}) was due")
        rows.extend(vectors.tolist())
    return rows


def embed_query(query: str, ctx: Any) -> list[float]:
    """Embed one query with ``ctx``'s embedder, cached in the turn's scratch space (``ctx.data``)
    so the concept, relationship and conversation retrievers of one turn embed a query once."""
    embedder = embedder_of(ctx)
    key = (getattr(embedder, "name", ""), query)
    cache: dict[tuple[str, str], list[float]] | None = None
    data = getattr(ctx, "data", None)
    if isinstance(data, dict):
        cache = data.setdefault(QUERY_CACHE_KEY, {})
        hit = cache.get(key)
        if hit is not None:
            return hit
    vector = embed(embedder, [query], batch_size=1)[0]
    if cache is not None:
        cache[key] = vector
    return vector


def _function_class(embedder_name: str) -> Any:
    """The Chroma embedding-function class named ``ora-<embedder_name>``, registered with Chroma
    so it can rebuild a collection's function from the stored configuration."""
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import known_embedding_functions, register_embedding_function

    function_name = chroma_name(embedder_name)
    if function_name in known_embedding_functions:
        return known_embedding_functions[function_name]

    class OraEmbedderFunction(EmbeddingFunction[Documents]):
        embedder = embedder_name

        def __init__(self) -> None:
            pass

        def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - chroma's signature
            raise EmbeddingError(
                f"Chroma asked the embedding function {function_name!r} to embed {len(input)} text(s); it embeds "
                f"nothing: Ora passes vectors on every add and query, from the host's embedder {embedder_name!r} "
                "(pass embeddings= / query_embeddings= when using this collection outside Ora)")

        @staticmethod
        def name() -> str:
            return function_name

        def default_space(self) -> str:  # type: ignore[override]
            return "cosine"

        def supported_spaces(self) -> list[str]:  # type: ignore[override]
            return ["cosine"]

        def get_config(self) -> dict[str, Any]:
            return {"embedder": embedder_name}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> OraEmbedderFunction:
            return OraEmbedderFunction()

    OraEmbedderFunction.__name__ = OraEmbedderFunction.__qualname__ = f"OraEmbedderFunction[{embedder_name}]"
    register_embedding_function(OraEmbedderFunction)
    return OraEmbedderFunction


_classes_lock = threading.Lock()


def chroma_embedding_function(embedder_name: str) -> Any:
    """The embedding function a collection built with embedder ``embedder_name`` records."""
    with _classes_lock:
        cls = _function_class(embedder_name)
    return cls()
