"""A stream that the context budget empties is diagnosed, not left a bare empty stream (seed 000
#4: an empty retrieval must say why). Found on the default demo: SmolLM2's 2048-token window
made signal 2 drop every relationship chunk, and the step file showed ``relationship: 0
chunks, empty_diagnosis: null``."""

from __future__ import annotations

from typing import Any

from ora_core.engine import run_turn
from ora_core.kernel.models import Chunk, Provenance, Retrieval, RetrievalFilters

QUESTION = "Explain why the harness shift matters."


class FixedRetriever:
    """Returns the same chunks, with the scores given, for any query."""

    def __init__(self, name: str, stream: str, scores: list[float], words: int) -> None:
        self.name, self.stream, self.scores, self.words = name, stream, scores, words

    def retrieve(self, query: str, filters: RetrievalFilters, k: int, ctx: Any) -> Retrieval:
        chunks = [Chunk(id=f"{self.name}-{i}", text=f"harness {self.name} {i} " + "word " * self.words,
                        provenance=Provenance(collection=self.name, source=f"{self.name}-{i}.md", score=score,
                                              stream=self.stream))
                  for i, score in enumerate(self.scores)]
        return Retrieval(stream=self.stream, query=query, chunks=chunks, retriever=self.name)


def test_a_stream_emptied_by_the_context_budget_is_diagnosed_ranker_truncation(front):
    concept = FixedRetriever("concept-x", "concept", [0.9, 0.85, 0.8], words=400)
    relationship = FixedRetriever("rel-x", "relationship", [0.3, 0.2], words=400)
    rt = front.runtime(front.RetrieverPlugin(concept, relationship), rules=[front.phase_a_rule(QUESTION)],
                       backends={"local": {"context_window": 2048, "max_tokens": 128}},
                       retrieval={"streams": {"conversation": False}})
    result = run_turn(rt, QUESTION)
    out = front.step_doc(result.trace_path, "context-assembly")["output"]
    assert "context-budget-signal-2-critical_truncation" in result.contingencies
    assert set(out["budget"]["truncated_chunks"]) >= {"rel-x-0", "rel-x-1"}
    assert out["retrievals"]["concept"]["chunks"], "the best-scored stream keeps chunks"
    diag = out["retrievals"]["relationship"]["empty_diagnosis"]
    assert out["retrievals"]["relationship"]["chunks"] == []
    assert diag["empty_reason"] == "ranker_truncation" and diag["raw_chunks_returned"] == 2
    assert "context budget" in diag["detail"]
    assert out["empty_diagnosis"]["relationship"]["empty_reason"] == "ranker_truncation"
    assert "context-relationship-empty-undiagnosed" not in result.contingencies
