"""The OpenAI wire shapes: a chat request read and checked (``read_chat``), the responses, chunks and
error bodies written (``completion``, ``chunk``, ``error_body``), and what the ``ora`` object of an
answer carries (``ora_object``).

A request's unknown fields are ignored, as OpenAI's servers do; a known field of the wrong type is a
``RequestError`` (400) naming the field's path (``stream_options.include_usage``, ``messages.1.content``).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

AUTO_MODEL = "ora/auto"
MODEL_PREFIX = "ora/"


class RequestError(Exception):
    """A request the server refuses: its HTTP status and the OpenAI-shaped error it answers with."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",  # noqa: A002
                 param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, param=self.param, code=self.code)


def error_body(message: str, *, type: str, param: str | None = None, code: str | None = None,  # noqa: A002
               **more: Any) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code", ...}}``: what OpenAI's servers and clients use."""
    return {"error": {"message": message, "type": type, "param": param, "code": code, **more}}


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TextPart(_Lenient):
    type: StrictStr
    text: StrictStr | None = None


class ChatMessage(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: StrictStr | list[TextPart] | None = None
    name: StrictStr | None = None

    def text(self, where: str) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        texts = []
        for i, part in enumerate(self.content):
            if part.type != "text" or part.text is None:
                raise RequestError(400, f"{where}.content.{i}: only text content parts are taken "
                                        f"(this one is of type {part.type!r})", param=f"{where}.content")
            texts.append(part.text)
        return "\n".join(texts)


class StreamOptions(_Lenient):
    include_usage: StrictBool = False


class ChatRequest(_Lenient):
    model: StrictStr
    messages: list[ChatMessage]
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    user: StrictStr | None = None


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and (p in ("str", "list[TextPart]")
                                                                 or p.startswith(("function-", "union["))))]
    return ".".join(parts) or "body"


def read_chat(raw: bytes) -> ChatRequest:
    """The request body as a ``ChatRequest``; a ``RequestError`` naming what is wrong: not JSON, not an
    object, a missing or mistyped field (its path), no message at all."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RequestError(400, f"the request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RequestError(400, f"the request body must be a JSON object, not {type(data).__name__}")
    try:
        request = ChatRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _field(tuple(first["loc"]))
        got = first.get("input")
        shown = type(got).__name__ if got is not None else "nothing"
        message = f"{field}: {first['msg']} (got {shown})" if first["type"] != "missing" else \
            f"{field}: this field is required"
        raise RequestError(400, message, param=field.split(".")[0]) from None
    if not request.messages:
        raise RequestError(400, "messages: must hold at least one message (the last user message is the prompt)",
                           param="messages")
    return request


class Conversation(BaseModel):
    """What a chat request asks: the prompt (the last user message), what came before it, and, when
    the message before the prompt is a question this server asked (``needs_clarification``), that
    question, its options and the prompt it was asked about."""

    prompt: str
    prompt_index: int
    earlier: list[dict[str, str]] = Field(default_factory=list)
    question: str | None = None
    options: list[str] = Field(default_factory=list)
    asked_about: str | None = None
    asked_about_index: int | None = None
    asked_in_turn: str = ""


OPTIONS_HEADER = "Options:"
_OPTION_LINE = re.compile(r"^\s*(\d+)\.\s+(\S.*?)\s*$")
_ASKED_IN = re.compile(r"\(ora turn ([A-Za-z0-9._-]+)\)\s*$")


def clarification_text(question: str, options: list[str], turn_id: str) -> str:
    """The content of a ``needs_clarification`` answer: the question, the numbered options and "just
    answer" (as ``ora run`` asks it), and the turn that asked. The client answers with its next message
    (a number, a mode name or "just answer"); ``read_conversation`` finds the question there again."""
    lines = [question, "", OPTIONS_HEADER]
    lines += [f"  {i}. {mode}" for i, mode in enumerate(options, 1)]
    lines += [f"  {len(options) + 1}. just answer", "",
              f"Reply with a number or a name. (ora turn {turn_id})"]
    return "\n".join(lines)


def read_conversation(request: ChatRequest, *, max_prompt_chars: int) -> Conversation:
    """The prompt and its conversation; a ``RequestError`` when no user message holds text, or the
    prompt is longer than ``max_prompt_chars``."""
    texts = [m.text(f"messages.{i}") for i, m in enumerate(request.messages)]
    users = [i for i, m in enumerate(request.messages) if m.role == "user" and texts[i].strip()]
    if not users:
        raise RequestError(400, "messages: there is no user message with text (the last user message is the "
                                "prompt)", param="messages")
    last = users[-1]
    prompt = texts[last]
    if len(prompt) > max_prompt_chars:
        raise RequestError(400, f"messages.{last}.content: the prompt is {len(prompt)} characters, over this "
                                f"server's limit of {max_prompt_chars} (--max-prompt-chars)",
                           param="messages", code="prompt_too_long")
    earlier = [{"role": m.role, "content": texts[i]} for i, m in enumerate(request.messages[:last])]
    found = Conversation(prompt=prompt, prompt_index=last, earlier=earlier)
    before = request.messages[last - 1] if last >= 1 else None
    if before is not None and before.role == "assistant":
        asked = _parse_clarification(texts[last - 1])
        if asked is not None:
            earlier_users = [i for i in users if i < last - 1]
            if earlier_users:
                found.question, found.options, found.asked_in_turn = asked
                found.asked_about = texts[earlier_users[-1]]
                found.asked_about_index = earlier_users[-1]
    return found


def _parse_clarification(content: str) -> tuple[str, list[str], str] | None:
    if f"\n{OPTIONS_HEADER}\n" not in content:
        return None
    question, _, rest = content.partition(f"\n\n{OPTIONS_HEADER}\n")
    options = []
    for line in rest.splitlines():
        match = _OPTION_LINE.match(line)
        if match:
            options.append(match.group(2))
    if not question.strip() or len(options) < 2 or options[-1] != "just answer":
        return None
    asked_in = _ASKED_IN.search(rest)
    return question.strip(), options[:-1], asked_in.group(1) if asked_in else ""


# --- responses ---------------------------------------------------------------------------------


def usage_of(result: Any) -> dict[str, int]:
    """The turn's tokens over every model call it made (the role ledger)."""
    prompt = sum(int(getattr(c, "prompt_tokens", 0) or 0) for c in result.runtime_role_models)
    completion = sum(int(getattr(c, "completion_tokens", 0) or 0) for c in result.runtime_role_models)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def ora_object(result: Any, *, journal_error: str | None = None) -> dict[str, Any]:
    """What travels with every answer: status, verdicts, contingencies, the trace (id, path), and
    ``event_journal_error`` when the turn's event journal could not be written (its events then stream
    from its own worker only, while it runs)."""
    data: dict[str, Any] = {
        "status": result.status,
        "trace_id": result.turn_id,
        "conversation_id": result.conversation_id,
        "mode": result.mode,
        "gear": result.gear,
        "verdicts": dict(result.verdicts),
        "contingencies": list(dict.fromkeys(result.contingencies)),
        "trace_path": result.trace_path,
        "tracing_degraded": result.tracing_degraded,
    }
    if journal_error is not None:
        data["event_journal_error"] = journal_error
    if result.status == "needs_clarification":
        data["question"] = result.question
        data["options"] = [*result.options, "just answer"]
    if result.withheld_answer is not None:
        data["answer_withheld"] = True
    if result.diagnostic:
        data["diagnostic"] = result.diagnostic
    if result.interruption is not None:
        data["interruption"] = result.interruption.model_dump(mode="json")
    return data


def content_of(result: Any) -> str:
    """The message content: the answer as ``ora run`` prints it (its warning header included), or for
    ``needs_clarification`` the question with its numbered options."""
    if result.status == "needs_clarification":
        return clarification_text(result.question or "", list(result.options), result.turn_id)
    return str(result.answer)


def completion(result: Any, model: str, *, journal_error: str | None = None) -> dict[str, Any]:
    return {
        "id": result.turn_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content_of(result)},
                     "finish_reason": "stop", "logprobs": None}],
        "usage": usage_of(result),
        "ora": ora_object(result, journal_error=journal_error),
    }


def chunk(turn_id: str, model: str, created: int, delta: dict[str, Any], finish_reason: str | None = None,
          **more: Any) -> dict[str, Any]:
    return {"id": turn_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}], **more}


def sse_data(payload: dict[str, Any] | str) -> bytes:
    """One ``data:`` event (JSON on one line), as OpenAI's streams carry them."""
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()
