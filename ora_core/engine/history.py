"""The caller's own conversation as the turn's ``conversation`` stream.

An application that keeps the conversation itself (an OpenAI-style client sends every earlier
message with each request; ``ora serve`` passes them on) gives them to the turn as ``history``
(``Ora.arun(..., history=[ConversationMessage, ...])``). For that turn the ``conversation`` stream is
read from them, not from conversation memory: the messages the caller sent are what the user saw.

``HistoryRetriever`` pairs each user message with the assistant reply that follows it (one exchange,
one chunk, written as conversation memory writes it: ``User: ...`` / ``Assistant: ...``) and returns
the ``k`` exchanges that share the most words with the query (words of three letters or more,
compared on their first five), the newer first on a tie. A chunk's
provenance says where it came from (collection ``client-history``, source ``messages[i..j]``), and
like every ``conversation`` chunk it is never shown by the evidence answer and is left out of the
grounding verifier's evidence by its default ``exclude_streams``.
Messages of other roles (``system``, ``tool`` ...) are not used; the step that reads the stream names
them (contingency ``client-history-roles-unused``). With the stream switched off
(``retrieval.streams.conversation = false``) the history is unused, and that is named too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from ora_core.kernel.components import ComponentContext, Retriever
from ora_core.kernel.models import (
    Chunk,
    ConversationMessage,
    EmptyDiagnosis,
    EmptyReason,
    Provenance,
    Retrieval,
    RetrievalFilters,
)
from ora_core.kernel.stash import StashKey
from ora_core.kernel.trace import TurnContext

STREAM = "conversation"
COLLECTION = "client-history"
USED_ROLES = ("user", "assistant")
#: the caller's earlier messages, when it gave them (``run_turn_async(history=...)``)
HISTORY: StashKey[list[ConversationMessage]] = StashKey("client_history")

_WORD = re.compile(r"\w+", re.UNICODE)


def _words(text: str) -> set[str]:
    """Words of three letters or more, compared on their first five (``starters`` and ``starter`` meet)."""
    return {w[:5] for w in _WORD.findall(text.casefold()) if len(w) > 2}


def exchanges(messages: Sequence[ConversationMessage]) -> list[tuple[int, int, str]]:
    """``(first index, last index, text)`` per exchange: a user message and the assistant reply that
    follows it; an assistant message without a user message just before it stands alone."""
    found: list[tuple[int, int, str]] = []
    open_user = False  # the last exchange is a user message still waiting for its reply
    for i, message in enumerate(messages):
        text = message.content.strip()
        if message.role not in USED_ROLES or not text:
            continue
        line = f"{'User' if message.role == 'user' else 'Assistant'}: {text}"
        if message.role == "assistant" and open_user:
            first, _last, before = found[-1]
            found[-1] = (first, i, f"{before}\n\n{line}")
        else:
            found.append((i, i, line))
        open_user = message.role == "user"
    return found


def unused_roles(messages: Sequence[ConversationMessage]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for message in messages:
        if message.role not in USED_ROLES:
            counts[message.role] = counts.get(message.role, 0) + 1
    return counts


class HistoryRetriever:
    """The ``conversation`` stream of one turn, read from the messages its caller sent."""

    name = "client-history"
    stream = STREAM

    def __init__(self, messages: Sequence[ConversationMessage]) -> None:
        self.messages = list(messages)
        self._exchanges = exchanges(self.messages)

    def retrieve(self, query: str, filters: RetrievalFilters, k: int, ctx: ComponentContext) -> Retrieval:
        start = time.perf_counter()
        if not self._exchanges:
            return Retrieval(stream=STREAM, query=query, retriever=self.name, latency_s=time.perf_counter() - start,
                             empty_diagnosis=EmptyDiagnosis(
                                 empty_reason=EmptyReason.index_empty,
                                 detail=f"the caller sent {len(self.messages)} earlier message(s), none a user or "
                                        "assistant message with text"))
        asked = _words(query)
        total = len(self._exchanges)
        ranked = []
        for position, (first, last, text) in enumerate(self._exchanges):
            shared = len(asked & _words(text)) / len(asked) if asked else 0.0
            ranked.append((shared, position, first, last, text))
        ranked.sort(key=lambda row: (row[0], row[1]), reverse=True)
        chunks = []
        for shared, position, first, last, text in ranked[:max(k, 0)]:
            source = f"messages[{first}]" if first == last else f"messages[{first}..{last}]"
            chunks.append(Chunk(id=f"client-history-{first}-{last}", text=text, provenance=Provenance(
                collection=COLLECTION, source=source, heading="earlier conversation", type="conversation",
                source_type="conversation", score=round(shared, 4), stream=STREAM,
                extra={"messages": [first, last], "exchanges_from_end": total - position})))
        return Retrieval(stream=STREAM, query=query, chunks=chunks, retriever=self.name,
                         latency_s=time.perf_counter() - start)


def with_history(turn: TurnContext, retrievers: dict[str, Retriever], missing: dict[str, str],
                 *, conversation_enabled: bool) -> tuple[dict[str, Retriever], dict[str, str]]:
    """``retrievers`` and ``missing`` with the ``conversation`` stream read from the caller's messages
    when the turn has them (the memory retriever is not asked for this turn)."""
    history = turn.stash.get(HISTORY, None)
    if history is None or not conversation_enabled:
        return retrievers, missing
    found = dict(retrievers)
    found[STREAM] = HistoryRetriever(history)
    return found, {s: why for s, why in missing.items() if s != STREAM}


def note_history(turn: TurnContext, *, conversation_enabled: bool) -> None:
    """Name, once per turn, what of the caller's messages the turn will not use."""
    history = turn.stash.get(HISTORY, None)
    if history is None:
        return
    if not conversation_enabled and history:
        turn.contingency("client-history-unused", "turn",
                         f"the caller sent {len(history)} earlier message(s), but the conversation stream is "
                         "switched off (retrieval.streams.conversation = false): none is read",
                         severity="warning", messages=len(history))
    roles = unused_roles(history)
    if roles:
        turn.contingency("client-history-roles-unused", "turn",
                         "earlier messages of roles other than user and assistant are not used: "
                         + ", ".join(f"{n} {role}" for role, n in sorted(roles.items())),
                         severity="info", roles=roles)
