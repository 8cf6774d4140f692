"""Context assembly on the real Chroma retrievers (plugins/ora-chroma): seed 000 #4 with a real
empty collection, and a real unreachable Chroma server named in rag-failures.jsonl."""

from __future__ import annotations

import socket

import pytest

from ora_core.engine import run_turn

ora_chroma = pytest.importorskip("ora_chroma", reason="plugins/ora-chroma is not installed")

CUI_BONO = "Cui bono on the harness paradigm shift in commercial AI?"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield
    from ora_chroma.retrievers import forget_stores

    forget_stores()


@pytest.mark.slow
def test_empty_real_collection_gives_index_empty_in_the_step_file(front):
    rt = front.runtime(ora_chroma, rules=[front.phase_a_rule(CUI_BONO)],
                       retrieval={"path": str(front.tmp_path / "chroma"),
                                  "streams": {"conversation": False, "relationship": False}})
    result = run_turn(rt, CUI_BONO)
    out = front.step_doc(result.trace_path, "context-assembly")["output"]
    assert out["retrievals"]["concept"]["retriever"] == "chroma-concept"
    assert out["empty_diagnosis"]["concept"]["empty_reason"] == "index_empty"
    assert front.jsonl(result.trace_path, "rag-failures.jsonl") == []


def test_unreachable_chroma_server_gives_empty_context_and_a_named_rag_failure(front):
    url = f"http://127.0.0.1:{_closed_port()}"
    rt = front.runtime(ora_chroma, rules=[front.phase_a_rule(CUI_BONO)],
                       retrieval={"server_url": url, "streams": {"conversation": False,
                                                                 "relationship": False}})
    result = run_turn(rt, CUI_BONO)
    [record] = front.jsonl(result.trace_path, "rag-failures.jsonl")
    assert record["stream"] == "concept" and record["retriever"] == "chroma-concept"
    assert record["error_class"] == "RetrievalError" and record["query"] == CUI_BONO
    assert front.step_doc(result.trace_path, "context-assembly")["output"]["retrievals"]["concept"]["chunks"] == []
    assert result.answer and result.status == "degraded"
