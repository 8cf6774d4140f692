"""Step 2: streams through the retriever hook, concurrently; budget signals against the window."""

from __future__ import annotations

import threading

from ora_core.engine import run_turn

CUI_BONO = "Cui bono on the harness paradigm shift in commercial AI?"


def test_retrievers_run_concurrently_in_threads(front):
    """Proven by overlap, not by a wall clock: each retriever waits at a barrier the three must reach
    together (within 20 s), which retrievers run one after another never do."""
    barrier = threading.Barrier(3, timeout=20.0)

    class Meeting(front.Retriever):
        def retrieve(self, query, filters, k, ctx):
            barrier.wait()  # BrokenBarrierError (a rag failure) unless all three are inside at once
            return super().retrieve(query, filters, k, ctx)

    slow = [Meeting(f"r-{s}", s, [{"text": "harness", "type": "concept"}])
            for s in ("concept", "conversation", "relationship")]
    rt = front.runtime(front.RetrieverPlugin(*slow), rules=[front.phase_a_rule(CUI_BONO)])
    result = run_turn(rt, CUI_BONO)
    assert not front.jsonl(result.trace_path, "rag-failures.jsonl"), "a retriever waited alone: not concurrent"
    assert len(set().union(*(r.threads for r in slow))) == 3
    out = front.step_doc(result.trace_path, "context-assembly")["output"]
    assert set(out["retrievals"]) == {"concept", "conversation", "relationship"}
    chunk = out["retrievals"]["concept"]["chunks"][0]
    assert chunk["provenance"]["collection"] == "r-concept" and chunk["provenance"]["source"] == "note.md"


def test_web_stream_is_off_by_default_and_a_missing_retriever_is_named(front):
    web = front.Retriever("web-x", "web", [{"text": "harness", "type": "concept"}])
    rt = front.runtime(front.RetrieverPlugin(web), rules=[front.phase_a_rule(CUI_BONO)])
    result = run_turn(rt, CUI_BONO)
    assert web.calls == []
    assert "context-concept-no-retriever" in result.contingencies
    web_on = front.Retriever("web-y", "web", [{"text": "harness", "type": "web"}])
    rt_on = front.runtime(front.RetrieverPlugin(web_on),
                          rules=[front.phase_a_rule(CUI_BONO)],
                          retrieval={"streams": {"web": True}})
    out = front.step_doc(run_turn(rt_on, CUI_BONO).trace_path, "context-assembly")["output"]
    assert out["retrievals"]["web"]["chunks"]


def test_budget_truncates_lowest_scored_chunks_against_the_context_window(front):
    docs = [{"text": f"harness note {i} " + "word " * 300, "type": "concept"} for i in range(6)]
    rt = front.runtime(front.RetrieverPlugin(front.Retriever("big", "concept", docs)),
                       rules=[front.phase_a_rule(CUI_BONO)],
                       backends={"local": {"context_window": 2048, "max_tokens": 128}},
                       retrieval={"k": 6})
    result = run_turn(rt, CUI_BONO)
    budget = front.step_doc(result.trace_path, "context-assembly")["output"]["budget"]
    codes = [s["code"] for s in budget["signals"]]
    assert 2 in codes and 4 in codes and 6 in codes
    assert budget["context_window"] == 2048 and budget["truncated_chunks"]
    assert "big-0" not in budget["truncated_chunks"], "the best-scored chunk is kept"
    assert "context-budget-signal-2-critical_truncation" in result.contingencies


def test_clean_budget_is_signal_zero(front):
    rt = front.runtime(front.RetrieverPlugin(*(front.Retriever(f"r{s}", s, [{"text": "harness", "type": "concept"}])
                                               for s in ("concept", "conversation", "relationship"))),
                       rules=[front.phase_a_rule("Explain why the harness shift matters.")],
                       backends={"local": {"context_window": 32768}})
    result = run_turn(rt, "Explain why the harness shift matters.")
    budget = front.step_doc(result.trace_path, "context-assembly")["output"]["budget"]
    assert [s["code"] for s in budget["signals"]] == [0] and budget["level"] == 0
