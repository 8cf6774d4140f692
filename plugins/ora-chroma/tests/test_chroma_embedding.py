"""Vectors from the host's configured embedder: asked for by name (never imported), checked,
embedded once per turn per query; collections record which embedder built them and are never
bound to Chroma's downloading default; an embedder no plugin registers is named, with the
registered ones, in the retriever's error, the turn's rag-failures.jsonl and the CLI."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import ora_chroma
import ora_minilm.plugin
import ora_scripted
import ora_trace_fs
import pytest
from ora_chroma.embedding import EmbeddingError, embed
from ora_chroma.ingest import Ingestor
from ora_chroma.retrievers import ConceptRetriever, ConversationRetriever, RelationshipRetriever, store_for
from ora_chroma.store import get_client

import ora_modes
from ora_core import hookimpl
from ora_core.api import RetrievalError, RetrievalFilters, StandaloneContext
from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

UNREGISTERED = "e5-large"


class CountingEmbedder:
    """The real ``minilm`` embedder, counting what it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.dimension, self.normalized = inner.name, inner.dimension, inner.normalized
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> Any:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


class EmbedderPlugin:
    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    @hookimpl
    def ora_register_embedders(self, register: Any) -> None:
        register(self.embedder)


def test_vectors_are_the_embedders_checked_and_unit_length(minilm):
    vectors = embed(minilm, ["gear four cascade", "step health", "gear four cascade"], batch_size=2)
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert math.isclose(sum(x * x for x in vectors[0]), 1.0, rel_tol=1e-4)
    # the same text in two embed calls (batch_size 2): the same vector, up to float32 rounding
    assert max(abs(x - y) for x, y in zip(vectors[0], vectors[2], strict=True)) < 1e-5
    assert sum(x * y for x, y in zip(vectors[0], vectors[1], strict=True)) < 0.9
    assert embed(minilm, []) == []


def test_a_query_is_embedded_once_per_turn_across_streams(minilm, tmp_path, notes, chroma_config):
    config = chroma_config()
    Ingestor(store_for(config), minilm).add([notes(tmp_path / "v", {"a.md": "# A\nlinks to [[b]]\n",
                                                                     "b.md": "# B\nb\n"})])
    counting = CountingEmbedder(minilm)
    host = make_host(EmbedderPlugin(counting))
    ctx = StandaloneContext(config, host=host)
    for retriever in (ConceptRetriever(), RelationshipRetriever(), ConversationRetriever()):
        retriever.retrieve("the same question", RetrievalFilters(), 3, ctx)
    assert counting.calls == [["the same question"]]  # conversation memory is empty: no vector needed
    ConceptRetriever().retrieve("the same question", RetrievalFilters(), 3, StandaloneContext(config, host=host))
    assert len(counting.calls) == 2  # a new turn embeds again


def test_an_empty_store_is_index_empty_without_asking_for_an_embedder(chroma_config):
    ctx = StandaloneContext(chroma_config(), host=make_host())  # no embedder registered at all
    for retriever in (ConceptRetriever(), RelationshipRetriever(), ConversationRetriever()):
        got = retriever.retrieve("anything", RetrievalFilters(), 3, ctx)
        assert got.empty_diagnosis.empty_reason.value == "index_empty", retriever.name


def test_collections_record_their_embedder_and_the_cosine_space(minilm, chroma_config):
    store = store_for(chroma_config())
    for col in (store.vault, store.conversations):
        conf = col.configuration_json
        assert conf["embedding_function"]["name"] == "ora-minilm"
        assert conf["embedding_function"]["config"] == {"embedder": "minilm"}
        assert conf["hnsw"]["space"] == "cosine"


def test_chroma_rebuilds_the_function_by_name_and_it_refuses_to_embed(minilm, tmp_path, notes, chroma_config):
    config = chroma_config()
    store = store_for(config)
    Ingestor(store, minilm).add([notes(tmp_path / "v", {"a.md": "# A\nAbout gears.\n"})])
    rebuilt = get_client(store.location).get_collection("vault")  # as any Chroma client would, without Ora
    with pytest.raises(EmbeddingError, match="'ora-minilm' to embed 1 text.*it embeds nothing"):
        rebuilt.query(query_texts=["gears"], n_results=1)
    assert rebuilt.query(query_embeddings=embed(minilm, ["gears"]), n_results=1)["ids"][0]


def test_a_store_built_with_another_embedder_is_refused_naming_both(minilm, tmp_path, notes, chroma_config):
    Ingestor(store_for(chroma_config()), minilm).add([notes(tmp_path / "v", {"a.md": "# A\nAbout gears.\n"})])
    switched = chroma_config()
    switched = switched.model_copy(update={"embedding": switched.embedding.model_copy(update={"embedder": "bge"})})
    with pytest.raises(EmbeddingError) as err:
        store_for(switched).collection("vault")
    message = str(err.value)
    assert "holds vectors of embedder 'minilm'" in message and "embedding.embedder is 'bge'" in message
    with pytest.raises(RetrievalError, match="holds vectors of embedder 'minilm'"):
        ConceptRetriever().retrieve("gears", RetrievalFilters(), 3, StandaloneContext(switched, host=make_host()))


def test_a_model_that_will_not_load_is_an_embedding_error_naming_the_embedder_and_the_file(tmp_path, monkeypatch):
    import shutil

    from ora_minilm import default_model_dir
    from ora_minilm import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "_encoders", {})  # the broken copy stays out of the session's cache
    broken = tmp_path / "model"
    shutil.copytree(default_model_dir(), broken, ignore=shutil.ignore_patterns("model.safetensors"))
    (broken / "model.safetensors").write_bytes(b"not safetensors at all")
    with pytest.raises(EmbeddingError) as err:
        embed(ora_minilm.plugin.MiniLMEmbedder(broken), ["x"])
    assert "embedder 'minilm' failed on 1 text(s): MiniLMError" in str(err.value)
    assert f"{broken / 'model.safetensors'}: cannot be read as safetensors" in str(err.value)


def test_vectors_of_the_wrong_width_are_refused_naming_the_embedder(minilm):
    class Truncating:
        name, dimension = "truncating", 384

        def embed(self, texts: list[str]) -> Any:
            return minilm.embed(texts)[:, :100]

    with pytest.raises(EmbeddingError, match=r"embedder 'truncating' returned vectors of shape \(2, 100\)"):
        embed(Truncating(), ["a", "b"])


def _unregistered(config: Any) -> Any:
    """``config`` naming an embedder no plugin registers (as after uninstalling its plugin)."""
    return config.model_copy(update={"embedding": config.embedding.model_copy(update={"embedder": UNREGISTERED})})


def test_an_embedder_no_plugin_registers_fails_the_retrieval_naming_the_registered_ones(minilm, tmp_path, notes,
                                                                                         chroma_config):
    config = _unregistered(chroma_config())
    # the vault was built while that embedder's plugin was installed
    Ingestor(store_for(config), minilm).add([notes(tmp_path / "v", {"a.md": "# A\nAbout gears.\n"})])
    ctx = StandaloneContext(config, host=make_host(ora_minilm.plugin))
    with pytest.raises(RetrievalError) as err:
        ConceptRetriever().retrieve("gears", RetrievalFilters(), 3, ctx)
    assert f"embedding.embedder names {UNREGISTERED!r}, which no plugin registers" in str(err.value)
    assert "(registered embedders: minilm)" in str(err.value)


@pytest.mark.slow
def test_at_ora_run_an_unregistered_embedder_is_a_rag_failure_record_naming_the_registered_ones(
        minilm, tmp_path, notes):
    question = "How many supplemental requests may a step make?"
    phase_a = {"match": "PHASE A CLEANUP", "on": "system",
               "reply": f"CLEANED PROMPT:\n{question}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}
    resolved = scripted_config(tmp_path / "traces", rules=[phase_a, {"match": ".", "reply": "Two."}],
                               retrieval={"path": str(tmp_path / "chroma"),
                                          "streams": {"conversation": False, "relationship": False}},
                               embedding={"embedder": UNREGISTERED}, plugins={"trace-fs": {"fsync": False}})
    Ingestor(store_for(resolved.config), minilm).add([notes(tmp_path / "v", {"cap.md": "# Cap\nTwo requests.\n"})])
    rt = make_runtime(make_host(ora_scripted, ora_modes, ora_trace_fs, ora_chroma, ora_minilm.plugin), resolved,
                      stderr=io.StringIO())
    result = run_turn(rt, question, mode="standard")
    assert result.trace_path, rt.stderr.getvalue()
    [record] = [json.loads(line) for line in (Path(result.trace_path) / "rag-failures.jsonl").read_text().splitlines()]
    assert (record["stream"], record["retriever"], record["error_class"]) == ("concept", "chroma-concept",
                                                                              "RetrievalError")
    assert f"embedding.embedder names {UNREGISTERED!r}, which no plugin registers" in record["message"]
    assert "(registered embedders: minilm)" in record["message"]
    assert "context-concept-rag-failure-empty-context" in result.contingencies
