"""The caller's own conversation (``Ora.arun(..., history=...)``): the turn's ``conversation`` stream
is read from the messages the caller sent — each user message with the reply after it, the exchanges
nearest the prompt, newer first on a tie — instead of conversation memory; other roles, a switched-off
stream and a malformed entry are named, never dropped silently."""

from __future__ import annotations

import json
from pathlib import Path

import ora_scripted
import ora_trace_fs
import pytest

import ora_modes
from ora_core.api import ConversationMessage, EmptyDiagnosis, EmptyReason, Ora, Retrieval, UsageError, hookimpl
from ora_core.engine.history import HistoryRetriever, exchanges
from ora_core.testing import make_host, scripted_config

PROMPT = "Compare PostgreSQL and MySQL for the app we discussed."
BAKERY = [{"role": "system", "content": "Be brief."},
          {"role": "user", "content": "We are building a small web app for a bakery."},
          {"role": "assistant", "content": "A bakery app: orders, stock and opening hours."}]


class MemoryRecorder:
    """A conversation-memory retriever that records whether the turn asked it."""

    def __init__(self) -> None:
        self.asked = 0

    @hookimpl
    def ora_register_retrievers(self, register):
        recorder = self

        class Memory:
            name = "recorded-memory"
            stream = "conversation"

            def retrieve(self, query, filters, k, ctx):
                recorder.asked += 1
                return Retrieval(stream="conversation", query=query, retriever=self.name,
                                 empty_diagnosis=EmptyDiagnosis(empty_reason=EmptyReason.index_empty))

        register(Memory())


def make_ora(tmp_path: Path, *plugins, conversation: bool = True) -> Ora:
    resolved = scripted_config(tmp_path / "traces", default="An answer.\nCONFIDENCE: 0.9",
                               pipeline={"phase_a": "skip"},
                               retrieval={"streams": {"concept": False, "conversation": conversation,
                                                      "relationship": False}},
                               verification={"verifier": "model", "final_verifier": "model"})
    return Ora(host=make_host(ora_scripted, ora_modes, ora_trace_fs, *plugins), config=resolved)


def step(result, name: str) -> dict:
    (path,) = Path(result.trace_path).glob(f"*-{name}.json")
    return json.loads(path.read_text(encoding="utf-8"))


def test_history_is_the_conversation_stream_and_reaches_the_analyst_instead_of_memory(tmp_path):
    memory = MemoryRecorder()
    result = make_ora(tmp_path, memory).run(PROMPT, history=BAKERY)
    conversation = step(result, "context-assembly")["output"]["retrievals"]["conversation"]
    assert conversation["retriever"] == "client-history" and memory.asked == 0
    (chunk,) = conversation["chunks"]
    assert chunk["text"] == ("User: We are building a small web app for a bakery.\n\n"
                             "Assistant: A bakery app: orders, stock and opening hours.")
    assert chunk["provenance"]["collection"] == "client-history"
    assert chunk["provenance"]["source"] == "messages[1..2]"
    assert "opening hours" in json.dumps(step(result, "gear2-analyst"))  # the model was given it
    assert "client-history-roles-unused" in result.contingencies  # the system message


def test_without_history_the_memory_retriever_is_asked_as_before(tmp_path):
    memory = MemoryRecorder()
    result = make_ora(tmp_path, memory).run(PROMPT)
    assert memory.asked == 1
    assert step(result, "context-assembly")["output"]["retrievals"]["conversation"]["retriever"] == "recorded-memory"
    assert not [c for c in result.contingencies if c.startswith("client-history")]


def test_history_with_the_conversation_stream_off_is_named_unused(tmp_path):
    result = make_ora(tmp_path, conversation=False).run(PROMPT, history=BAKERY[1:])
    assert "client-history-unused" in result.contingencies
    assert "conversation" not in step(result, "context-assembly")["output"]["retrievals"]


@pytest.mark.parametrize(("history", "message"), [
    ([{"role": "user", "content": "hi"}, {"content": "no role"}], "history[1].role: Field required"),
    ([{"role": "user", "content": 7}], "history[0].content: Input should be a valid string"),
    ({"role": "user", "content": "hi"}, "history: a sequence of messages is expected, got dict"),
])
def test_a_malformed_history_is_a_usage_error_naming_the_entry_and_field(tmp_path, history, message):
    with pytest.raises(UsageError) as caught:
        make_ora(tmp_path).run(PROMPT, history=history)
    assert message in str(caught.value)


def test_exchanges_pair_each_user_message_with_the_reply_after_it():
    messages = [ConversationMessage(role=r, content=c) for r, c in [
        ("assistant", "Welcome."), ("user", "first"), ("assistant", "reply one"), ("user", "second"),
        ("user", "third"), ("tool", "ignored"), ("assistant", "reply three"), ("user", "  ")]]
    assert exchanges(messages) == [
        (0, 0, "Assistant: Welcome."),
        (1, 2, "User: first\n\nAssistant: reply one"),
        (3, 3, "User: second"),
        (4, 6, "User: third\n\nAssistant: reply three"),
    ]


def test_the_k_exchanges_sharing_most_words_with_the_prompt_come_first_newer_on_a_tie():
    said = [("user", "Tell me about sourdough starters."), ("assistant", "Flour, water, time."),
            ("user", "And the oven temperature?"), ("assistant", "Around 250 degrees."),
            ("user", "What about rye bread?"), ("assistant", "Rye needs a stiffer starter.")]
    retriever = HistoryRetriever([ConversationMessage(role=r, content=c) for r, c in said])
    found = retriever.retrieve("How long should the sourdough starter rest?", None, 2, None)
    assert [c.provenance.source for c in found.chunks] == ["messages[0..1]", "messages[4..5]"]
    tie = retriever.retrieve("nothing in common here", None, 2, None)
    assert [c.provenance.source for c in tie.chunks] == ["messages[4..5]", "messages[2..3]"]


def test_a_history_of_no_usable_message_is_an_empty_stream_with_its_diagnosis():
    found = HistoryRetriever([ConversationMessage(role="system", content="Be brief.")]).retrieve("q", None, 3, None)
    assert found.chunks == [] and found.empty_diagnosis is not None
    assert "none a user or assistant message" in found.empty_diagnosis.detail
