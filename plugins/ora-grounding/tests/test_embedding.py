"""The model is loaded lazily, offline, once per process, and shared with ora-chroma."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_importing_and_registering_the_plugin_loads_no_heavy_module():
    code = ("import sys, ora_grounding; from ora_core.testing import make_host; make_host(ora_grounding); "
            "heavy = [m for m in ('torch', 'numpy', 'sentence_transformers', 'chromadb') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_one_model_per_process_shared_with_ora_chroma(embedder):
    from ora_grounding.embedding import get_embedder

    assert get_embedder() is embedder
    chroma = pytest.importorskip("ora_chroma.embedding")
    assert embedder.origin == "ora_chroma.embedding"
    assert embedder._model is chroma.get_model()  # one MiniLM in memory, not two


@pytest.mark.slow
def test_vectors_are_normalised_and_cached(embedder):
    import numpy as np

    vectors = embedder.encode(["The tower is 330 metres tall.", "The tower is 330 metres tall.", "Cats purr."])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert np.array_equal(vectors[0], vectors[1])
    assert float(vectors[0] @ vectors[2]) < 0.5


def test_a_missing_model_file_is_a_verifier_error_naming_the_path(tmp_path, monkeypatch):
    from ora_grounding import embedding

    from ora_core.api import VerifierError

    monkeypatch.setattr(embedding, "model_path", lambda: str(tmp_path))  # a directory with no model in it
    with pytest.raises(VerifierError) as err:
        embedding._load_own_model()
    assert f"could not load the MiniLM model from {tmp_path}" in str(err.value)
    assert "MiniLMError" in str(err.value)
