"""Conversation memory through real turns: each exchange is indexed after the turn and read
back by the conversation retriever of later turns; an indexing failure is recorded by name
(seed 000, failure #12) and never breaks the turn."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import ora_chroma
import ora_minilm.plugin
import ora_scripted
import pytest
from ora_chroma.conversation import CONTINGENCY, FAILURE_LOG
from ora_chroma.retrievers import ConversationRetriever, store_for

import ora_modes
from ora_core import hookimpl
from ora_core.api import EmptyReason, RetrievalFilters
from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

ANSWER = "At most two supplemental requests per step; after that the model writes COVERAGE GAP."
PHASE_A = {"match": "PHASE A CLEANUP", "on": "system",
           "reply": "CLEANED PROMPT:\n{prompt}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}


class RecordingSink:
    name = "recording"

    def __init__(self) -> None:
        self.events: list[Any] = []

    def open_turn(self, turn: Any, ctx: Any) -> None:
        return None

    def handle(self, event: Any) -> None:
        self.events.append(event)

    def close_turn(self, turn: Any) -> None:
        return None


class SinkPlugin:
    def __init__(self, sink: RecordingSink) -> None:
        self.sink = sink

    @hookimpl
    def ora_register_trace_sinks(self, register: Any) -> None:
        register(self.sink)


def _runtime(tmp_path: Path, *, retrieval: dict[str, Any] | None = None, prompt: str = "",
             trace_root: Path | None = None) -> tuple[Any, RecordingSink]:
    rules = [{**PHASE_A, "reply": PHASE_A["reply"].format(prompt=prompt)}] if prompt else []
    rules.append({"match": ".", "reply": ANSWER})
    resolved = scripted_config(trace_root or tmp_path / "traces", rules=rules,
                               retrieval={"path": str(tmp_path / "chroma"), **(retrieval or {})})
    sink = RecordingSink()
    host = make_host(ora_scripted, ora_modes, ora_chroma, ora_minilm.plugin, SinkPlugin(sink))
    return make_runtime(host, resolved, stderr=io.StringIO()), sink


@pytest.mark.slow
def test_an_exchange_is_indexed_and_read_back_in_its_own_conversation(minilm, tmp_path, ctx_for):
    rt, _ = _runtime(tmp_path)
    first = run_turn(rt, "What is the supplemental request cap?", conversation_id="c1", mode="simple")
    assert first.status == "ok" and CONTINGENCY not in first.contingencies

    col = store_for(rt.config).conversations
    got = col.get(where={"conversation_id": "c1"}, include=["documents", "metadatas"])
    assert len(got["ids"]) == 1
    assert got["metadatas"][0]["turn_id"] == first.turn_id
    assert got["metadatas"][0]["type"] == "chat"
    assert "What is the supplemental request cap?" in got["documents"][0] and ANSWER in got["documents"][0]

    mine = ConversationRetriever().retrieve("what is the cap on supplemental requests", RetrievalFilters(), 5,
                                            ctx_for(rt.config, "c1"))
    assert [c.provenance.extra["turn_id"] for c in mine.chunks] == [first.turn_id]
    p = mine.chunks[0].provenance
    assert (p.collection, p.stream, p.type, p.source_type) == ("conversations", "conversation", "chat",
                                                               "conversation")
    other = ConversationRetriever().retrieve("what is the cap on supplemental requests", RetrievalFilters(), 5,
                                             ctx_for(rt.config, "c2"))
    assert other.chunks == [] and other.empty_diagnosis.empty_reason is EmptyReason.index_empty
    # seed 000 #4's real signal: a mode whose type filter drops chat chunks is named, not silent
    typed = ConversationRetriever().retrieve("what is the cap on supplemental requests",
                                             RetrievalFilters(types=["concept"]), 5, ctx_for(rt.config, "c1"))
    assert typed.empty_diagnosis.empty_reason is EmptyReason.filtered_out


@pytest.mark.slow
def test_a_later_turn_of_the_conversation_retrieves_the_earlier_exchange(minilm, tmp_path):
    question = "Explain the supplemental request cap and what happens after it."
    rt, sink = _runtime(tmp_path, prompt=question, retrieval={"streams": {"relationship": False}})
    first = run_turn(rt, "What is the supplemental request cap?", conversation_id="c1", mode="simple")
    second = run_turn(rt, question, conversation_id="c1", mode="standard")
    retrievals = [e.data for e in sink.events if e.kind == "retrieval" and e.turn_id == second.turn_id]
    by_stream = {r["stream"]: r for r in retrievals}
    assert by_stream["conversation"]["retriever"] == "chroma-conversation"
    assert by_stream["conversation"]["chunks"] == 1
    assert by_stream["concept"]["empty_diagnosis"]["empty_reason"] == "index_empty"
    assert not [e for e in sink.events if e.kind == "rag_failure"]
    indexed = store_for(rt.config).conversations.get(where={"conversation_id": "c1"}, include=["metadatas"])
    assert {m["turn_id"] for m in indexed["metadatas"]} == {first.turn_id, second.turn_id}


def test_an_indexing_failure_is_recorded_and_the_turn_goes_on(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("Chroma cannot live here", encoding="utf-8")
    rt, sink = _runtime(tmp_path, retrieval={"path": str(blocker)})
    result = run_turn(rt, "Hello there, what is step health?", conversation_id="c9", mode="simple")

    assert result.status == "ok" and result.answer == ANSWER
    assert CONTINGENCY in result.contingencies
    [line] = (tmp_path / "traces" / FAILURE_LOG).read_text().splitlines()
    record = json.loads(line)
    assert record["conversation_id"] == "c9" and record["turn_id"] == result.turn_id
    assert len(record["chunk_id"]) == 32
    assert record["error_class"] == "FileExistsError"
    assert str(blocker) in record["error_message"]
    assert record["at"]
    named = [e for e in sink.events if e.kind == "contingency" and e.data["name"] == CONTINGENCY]
    assert named and named[0].step == "conversation-memory"  # in the trace: the turn was still open
    stderr = rt.stderr.getvalue()
    assert "WARNING: conversation memory" in stderr and "c9" in stderr and FAILURE_LOG in stderr


def test_when_the_failure_log_cannot_be_written_stderr_carries_the_record(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x", encoding="utf-8")
    trace_root = tmp_path / "trace-root-is-a-file"
    trace_root.write_text("x", encoding="utf-8")
    rt, _ = _runtime(tmp_path, retrieval={"path": str(blocker)}, trace_root=trace_root)
    result = run_turn(rt, "Hello, what is a contingency?", conversation_id="c3", mode="simple")
    assert result.answer == ANSWER and CONTINGENCY in result.contingencies
    stderr = rt.stderr.getvalue()
    assert f"cannot write {trace_root / FAILURE_LOG}" in stderr
    assert '"conversation_id": "c3"' in stderr and '"error_class": "FileExistsError"' in stderr
