"""The numpy encoder gives sentence-transformers' vectors for the same model, text by text."""

from __future__ import annotations

import os
from typing import Any

import pytest


@pytest.mark.slow
def test_vectors_match_sentence_transformers_on_varied_texts(encoder: Any, varied_texts: list[str]) -> None:
    import numpy as np

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    st = pytest.importorskip("sentence_transformers", reason="the `dev` extra installs sentence-transformers")
    reference = st.SentenceTransformer(str(encoder.model_dir), device="cpu")
    assert reference.max_seq_length == encoder.max_seq_length == 256

    expected = reference.encode(varied_texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True,
                                show_progress_bar=False)
    got = encoder.encode(varied_texts, batch_size=16)

    assert len(varied_texts) >= 40
    lengths = [len(e.ids) for e in encoder.tokenize(varied_texts)]
    assert max(lengths) == 256 and min(lengths) == 2  # truncated texts and empty ones are both covered
    assert got.shape == expected.shape and got.dtype == np.float32
    cosine = (got * expected).sum(axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
    worst = int(np.argmin(cosine))
    assert cosine.min() >= 0.99999, f"text {worst} {varied_texts[worst][:60]!r}: cosine {cosine[worst]}"
    diff = np.abs(got - expected).max(axis=1)
    worst = int(np.argmax(diff))
    assert diff.max() <= 2e-4, f"text {worst} {varied_texts[worst][:60]!r}: max abs difference {diff[worst]}"
