"""The verifier's vectors come from the host's configured embedder (asked for by name, never
imported), behind a bounded per-text cache; one model per process; whatever is missing (no
embedder on the ctx, a name no plugin registers) is a VerifierError naming it, and at ``ora run``
a BROKEN verification whose record carries that message."""

from __future__ import annotations

import io
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import ora_grounding
import ora_minilm.plugin
import pytest
from ora_grounding import GroundingVerifier
from ora_grounding.embedding import CachedEmbedder, cached, get_embedder

from ora_core import hookimpl
from ora_core.api import Chunk, Provenance, Retrieval, StandaloneContext, VerifierError
from ora_core.testing import RecordingSink, make_config, make_host, make_runtime, scripted_config

UNREGISTERED = "e5-large"
EVIDENCE = ["The Eiffel Tower was completed in 1889.", "The tower is 330 metres tall."]


class CountingEmbedder:
    """A real embedder, counting the texts it is asked to embed."""

    def __init__(self, inner: Any, *, normalized: bool = True, scale: float = 1.0) -> None:
        self.inner, self.name, self.dimension, self.normalized = inner, "counting", inner.dimension, normalized
        self.scale = scale
        self.embedded: list[str] = []

    def embed(self, texts: list[str]) -> Any:
        self.embedded.extend(texts)
        return self.inner.embed(texts) * self.scale


def test_importing_and_registering_the_plugin_loads_no_heavy_module():
    code = ("import sys, ora_grounding; from ora_core.testing import make_host; make_host(ora_grounding); "
            "heavy = [m for m in ('torch', 'numpy', 'sentence_transformers', 'chromadb') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_verifier_takes_the_configured_embedder_from_the_ctx(embedder_host, embedder_ctx, embedder):
    got = GroundingVerifier().embedder(embedder_ctx)
    assert isinstance(got, CachedEmbedder) and got is embedder  # one cache per embedder per process
    assert got.embedder is embedder_host.embedder("minilm") and got.name == "minilm" and got.dimension == 384


@pytest.mark.slow
def test_one_model_per_process_whichever_host_or_component_asks(embedder, embedder_host):
    other_host = make_host(ora_minilm.plugin)
    mine = get_embedder(StandaloneContext(make_config().config, host=other_host))
    assert mine is not embedder  # another host's embedder object, another cache ...
    mine.encode(["warm"])
    embedder.encode(["warm"])
    assert mine.embedder.encoder() is embedder.embedder.encoder()  # ... and still one model


@pytest.mark.slow
def test_vectors_are_normalised_and_each_text_is_embedded_once(embedder_host):
    import numpy as np

    counting = CountingEmbedder(embedder_host.embedder("minilm"))
    cache = CachedEmbedder(counting, cache_size=3)
    vectors = cache.encode(["The tower is 330 metres tall.", "The tower is 330 metres tall.", "Cats purr."])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert np.array_equal(vectors[0], vectors[1]) and float(vectors[0] @ vectors[2]) < 0.5
    assert counting.embedded == ["The tower is 330 metres tall.", "Cats purr."]
    again = cache.encode(["Cats purr.", "Dogs bark.", "Birds sing."])  # one hit, two new; the cache holds 3
    assert np.array_equal(again[0], vectors[2])
    assert counting.embedded[2:] == ["Dogs bark.", "Birds sing."]
    cache.encode(["The tower is 330 metres tall."])  # the least recently used was evicted: embedded again
    assert counting.embedded[-1] == "The tower is 330 metres tall." and len(counting.embedded) == 5


@pytest.mark.slow
def test_rows_of_an_embedder_that_does_not_normalise_are_normalised(embedder_host):
    import numpy as np

    loose = CachedEmbedder(CountingEmbedder(embedder_host.embedder("minilm"), normalized=False, scale=7.0))
    assert np.allclose(np.linalg.norm(loose.encode(["Cats purr.", "Dogs bark."]), axis=1), 1.0, atol=1e-5)


def test_a_failing_embedder_is_a_verifier_error_naming_it():
    class Broken:
        name, dimension = "broken", 384

        def embed(self, texts: list[str]) -> Any:
            raise OSError("model.safetensors: cannot be read")

    with pytest.raises(VerifierError, match=r"embedder 'broken' failed on 1 text\(s\): OSError: model.safetensors"):
        cached(Broken()).encode(["x"])


@pytest.mark.parametrize("ctx", [None, SimpleNamespace(config=None)], ids=["no ctx", "ctx without embedder()"])
def test_a_ctx_that_cannot_give_an_embedder_is_a_verifier_error_naming_what_is_missing(ctx):
    with pytest.raises(VerifierError) as err:
        GroundingVerifier().verify("The tower is 330 metres tall.", list(EVIDENCE), "", ctx)
    assert "grounding: no embedder" in str(err.value)
    assert f"this ctx ({type(ctx).__name__}) has none" in str(err.value)
    assert "GroundingVerifier(embedder=...)" in str(err.value)


def test_an_embedder_no_plugin_registers_is_a_verifier_error_listing_the_registered_ones(embedder_host):
    config = make_config({"embedding": {"embedder": UNREGISTERED}}).config
    with pytest.raises(VerifierError) as err:
        GroundingVerifier().verify("The tower is 330 metres tall.", list(EVIDENCE), "",
                                   StandaloneContext(config, host=embedder_host))
    assert f"embedding.embedder names {UNREGISTERED!r}, which no plugin registers" in str(err.value)
    assert "(registered embedders: minilm)" in str(err.value)


class EvidenceRetriever:
    name, stream = "evidence", "concept"

    def retrieve(self, query: str, filters: Any, k: int, ctx: Any) -> Retrieval:
        chunks = [Chunk(id=f"e{i}", text=text, provenance=Provenance(collection="notes", source=f"notes/{i}.md",
                                                                    score=0.9, stream=self.stream))
                  for i, text in enumerate(EVIDENCE)]
        return Retrieval(stream=self.stream, query=query, chunks=chunks, retriever=self.name)


class EvidencePlugin:
    def __init__(self) -> None:
        self.sink = RecordingSink()

    @hookimpl
    def ora_register_retrievers(self, register: Any) -> None:
        register(EvidenceRetriever())

    @hookimpl
    def ora_register_trace_sinks(self, register: Any) -> None:
        register(self.sink)


@pytest.mark.slow
def test_at_ora_run_an_unregistered_embedder_makes_the_verification_broken_naming_the_registered_ones(tmp_path):
    import ora_broken
    import ora_scripted

    import ora_modes
    from ora_core.testing import run_turn

    answer = "The Eiffel Tower was completed in 1889. The tower is 330 metres tall."
    rules = [{"match": "PHASE A CLEANUP", "on": "system",
              "reply": "CLEANED PROMPT:\nHow tall is the Eiffel Tower?\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"},
             {"match": ".", "reply": answer + "\nCONFIDENCE: 0.90"}]
    resolved = scripted_config(tmp_path / "traces", rules=rules, embedding={"embedder": UNREGISTERED},
                               verification={"verifier": "grounding", "final_verifier": "grounding"},
                               retrieval={"streams": {"conversation": False, "relationship": False}})
    evidence = EvidencePlugin()
    host = make_host(ora_scripted, ora_modes, ora_broken, ora_grounding, ora_minilm.plugin, evidence)
    result = run_turn(make_runtime(host, resolved, stderr=io.StringIO()), "How tall is the Eiffel Tower?",
                      mode="standard")
    assert result.verdicts and set(result.verdicts.values()) == {"BROKEN"}, result.verdicts
    named = [e.data for e in evidence.sink.events
             if e.kind == "contingency" and e.data["name"].endswith("-verifier-exception")]
    assert named, [e.data for e in evidence.sink.events if e.kind == "contingency"]
    for record in named:
        assert record["detail"].startswith("VerifierError: grounding: embedding.embedder names 'e5-large'")
        assert "(registered embedders: minilm)" in record["detail"]
    verdicts = [e.data["output"]["verdict"] for e in evidence.sink.events
                if e.kind == "step_finished" and "verdict" in (e.data.get("output") or {})]
    assert verdicts and all(v["status"] == "BROKEN" for v in verdicts)
    assert all("(registered embedders: minilm)" in " ".join(v["reasons"]) for v in verdicts)
