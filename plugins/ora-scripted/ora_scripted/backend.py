"""The scripted backend, its options and its factory (``ora_scripted``'s docstring says how
rules work)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ora_core.api import (
    BackendAuthError,
    BackendBadResponse,
    BackendError,
    BackendRateLimited,
    BackendSessionExpired,
    BackendTimeout,
    BackendUnavailable,
    Completion,
    CompletionParams,
    Message,
    PluginOptions,
)

ERRORS: dict[str, type[BackendError]] = {
    "timeout": BackendTimeout,
    "rate_limited": BackendRateLimited,
    "auth": BackendAuthError,
    "session_expired": BackendSessionExpired,
    "unavailable": BackendUnavailable,
    "bad_response": BackendBadResponse,
}

DEFAULT_REPLY = "I don't know. Gap: nothing in front of me answers this."

_UNESCAPE = re.compile(r"\\([^0-9A-Za-z])")
_META = frozenset(".^$*+?{}[]\\|()")
# Characters that ``re.IGNORECASE`` matches with an ASCII letter but ``str.lower`` does not
# lower to it (dotted/dotless i, long s, Kelvin sign): a message holding one takes the regex.
_FOLDS_TO_ASCII = re.compile("[\u0130\u0131\u017f\u212a]")


def _literal(pattern: str) -> str | None:
    """The lower-cased text a rule's regex matches when it is a plain literal (escaped
    punctuation allowed; ASCII or caseless characters only), else None. Such a rule is matched
    with ``in`` on the lower-cased message: what ``re.search(pattern, re.I)`` finds, cheaper."""
    if "\x00" in pattern:
        return None
    marked = _UNESCAPE.sub(lambda m: "\x00" if m.group(1) in _META else m.group(1), pattern)
    if any(c in _META for c in marked):
        return None
    literal = _UNESCAPE.sub(r"\1", pattern)
    if not literal or not all(c.isascii() or c.lower() == c.upper() == c.casefold() for c in literal):
        return None
    return literal.lower()


class ScriptedBackend:
    provider = "scripted"

    def __init__(self, model: str = "scripted-1", family: str = "scripted", *,
                 rules: Sequence[dict[str, Any]] = (), replies: Sequence[str] = (),
                 default: str = DEFAULT_REPLY, latency_s: float = 0.0) -> None:
        self.model = model
        self.family = family
        # A rule whose reply is a template (``expand``) needs its match object: it takes the regex.
        self.rules = [(re.compile(r["match"], re.I | re.S), None if r.get("expand") else _literal(r["match"]),
                       r["reply"], r.get("on", "user"), bool(r.get("expand")))
                      for r in rules]
        self.replies = list(replies)
        self.default = default
        self.latency_s = latency_s
        self.calls: list[list[Message]] = []

    def _choose(self, messages: Sequence[Message]) -> str:
        if self.replies:
            return self.replies.pop(0)
        user = next((m.content for m in reversed(messages) if m.role == "user"), "")
        system = next((m.content for m in messages if m.role == "system"), "")
        lowered: dict[str, str | None] = {}  # per target: lower-cased, or None (take the regex)
        for pattern, literal, reply, on, expand in self.rules:
            target = {"user": user, "system": system}.get(on, system + "\n" + user)
            if expand:
                found = pattern.search(target)
                if found:
                    return found.expand(reply)
                continue
            if literal is not None and on not in lowered:
                lowered[on] = None if _FOLDS_TO_ASCII.search(target) else target.lower()
            low = lowered.get(on) if literal is not None else None
            if (literal in low) if low is not None else pattern.search(target):
                return reply
        return self.default

    async def complete(self, messages: Sequence[Message], params: CompletionParams) -> Completion:
        start = time.perf_counter()
        self.calls.append(list(messages))
        if self.latency_s:
            import asyncio  # here, not at the top: loading the plugin stays cheap

            await asyncio.sleep(self.latency_s)
        reply = self._choose(messages)
        if reply.startswith("!error:"):
            kind = reply.removeprefix("!error:").strip()
            cls = ERRORS.get(kind, BackendError)
            raise cls(f"scripted {kind}", provider=self.provider, model=self.model, detail=reply)
        finish = "stop"
        until = params.stop_unless
        if until is not None and len(reply) > until.within_chars \
                and until.text.lower() not in reply[:until.within_chars].lower():
            reply, finish = reply[:until.within_chars], "stop_unless"  # as a watching backend stops
        words = sum(len(m.content.split()) for m in messages)
        return Completion(text=reply, provider=self.provider, model=self.model, family=self.family,
                          prompt_tokens=words, completion_tokens=len(reply.split()),
                          latency_s=time.perf_counter() - start, finish_reason=finish)


class ScriptedRule(PluginOptions):
    """One of ``options.rules``."""

    match: str  # a regular expression (case-insensitive, dot matches newlines)
    reply: str
    on: Literal["user", "system", "any"] = "user"  # which message the regex reads
    #: The reply is a template of the match (``re.Match.expand``): ``\1`` / ``\g<name>`` are the text
    #: the regex captured (e.g. a model that answers from the clock reading it was given).
    expand: bool = False

    @field_validator("match")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"bad regular expression {value!r}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _template_fits(self) -> ScriptedRule:
        """An ``expand`` reply is tried on an empty match with the same groups, so a reference to a
        group the regex lacks, or a bad escape, is refused with the configuration, not mid-turn."""
        if self.expand:
            compiled = re.compile(self.match)
            names = {number: name for name, number in compiled.groupindex.items()}
            shape = "".join(f"(?P<{names[i]}>)" if i in names else "()" for i in range(1, compiled.groups + 1))
            empty = re.match(shape, "")
            assert empty is not None  # only empty groups: it matches the empty string
            try:
                empty.expand(self.reply)
            except (re.error, IndexError) as exc:
                raise ValueError(f"reply is not a template of match {self.match!r}: {exc}") from None
        return self


class ScriptedOptions(PluginOptions):
    """``[backends.<name>] options`` of a ``scripted`` backend (the factory's ``options_model``)."""

    rules: list[ScriptedRule] = Field(default_factory=list)
    replies: list[str] = Field(default_factory=list)
    default: str = DEFAULT_REPLY
    latency_s: float = Field(default=0.0, ge=0)


class ScriptedFactory:
    name = "scripted"
    options_model = ScriptedOptions

    def create(self, settings: Any) -> ScriptedBackend:
        opts = ScriptedOptions.from_table(dict(settings.options), "options")
        return ScriptedBackend(
            model=settings.model or "scripted-1",
            family=settings.family or "scripted",
            rules=[rule.model_dump() for rule in opts.rules],
            replies=opts.replies,
            default=opts.default,
            latency_s=opts.latency_s,
        )
