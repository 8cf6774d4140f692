"""The four unhealthy-output detectors (layer ``model_output``, kind ``unhealthy``).

Each reads the kernel's one analysis of the output (``detect_analysed``), so the masking, the
sentence split and the word count are computed once for the four; ``detect(text, ctx)`` analyses
the text for that one call and gives the same signals.

Each returns ``Signal``s named for what it found; ``strong`` means "regenerate", ``weak`` means
"worth recording". Matching is compiled, word-bounded, and never looks inside fenced code or
``>`` quotations, so an analysis that *quotes* a refusal or documents a tool-call format is not
itself unhealthy. An honest gap (``I cannot verify ...``, ``## COVERAGE GAP``) is the authorised
alternative to confabulation, never a refusal or a stub.
"""

from __future__ import annotations

import re
from typing import Any

from ora_core.api import Signal, lazy_compile

from .common import (
    ASSUMES,
    AUTHORISED_BLOCK,
    KIND,
    LAYER,
    MIN_WORDS_KEY,
    Analysis,
    ctx_data,
    has_words,
    lacks_all,
    masked,
    masked_sentences,
    masked_words,
    plugin_settings,
    word_count,
)


class _Base:
    kind = KIND
    layer = LAYER
    assumes = ASSUMES
    name = ""

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        return self.detect_analysed(Analysis(text), ctx)

    def detect_analysed(self, analysis: Any, ctx: Any) -> list[Signal]:
        raise NotImplementedError

    def _signal(self, name: str, match_text: str, start: int | None, end: int | None,
                strength: str = "strong", **data: Any) -> Signal:
        return Signal(detector=self.name, kind=self.kind, name=name, strength=strength,  # type: ignore[arg-type]
                      matched=match_text[:200], start=start, end=end, data=data)


# --- refusal ------------------------------------------------------------------------------------

_CANT = r"(?:can(?:no|')?t|cannot|won'?t|will not|am unable to|'m unable to|am not able to|'m not able to|" \
        r"must decline to|am not going to|'m not going to|am not comfortable|'m not comfortable)"
_REFUSAL = lazy_compile(
    rf"\bI(?:'m| am) (?:sorry|afraid),? (?:but )?I {_CANT}"
    rf"|\bI {_CANT} (?:help|assist|comply|provide|do that|do this|fulfil+|complete|answer|engage|"
    rf"write|create|generate|continue|support|participate|produce|carry out|perform)\b"
    rf"|\bas an AI(?: language model| assistant)?,? I (?:can(?:no|')?t|cannot|don'?t|do not|am unable|"
    rf"won'?t)\b"
    rf"|\bI must (?:respectfully )?decline\b"
    rf"|\b(?:this|that|your) request (?:violates|goes against|is against|is not something I)\b"
    rf"|\bI(?:'m| am) not (?:allowed|permitted) to\b",
    re.IGNORECASE,
)
#: Words that make "I can't provide X" an honest gap about the evidence, not a refusal.
_GAP_WORDS = lazy_compile(
    r"\b(?:verify|verified|confirm|evidence|package|source|sources|data|information|record|records|"
    r"access to|context|retriev\w*|document\w*|figure|know|knowledge|details on|gap)\b",
    re.IGNORECASE,
)


#: A refusal match holds one of these (each branch of ``_REFUSAL`` needs one; pinned against the
#: pattern by tests/test_fused_detection.py): a text without any is no refusal, unmasked.
_REFUSAL_NEEDS = ("sorry", "afraid", "can't", "cant", "cannot", "won't", "wont", "will not", "unable",
                  "not able", "decline", "not going to", "not comfortable", "as an ai", " request ",
                  "allowed", "permitted")


class RefusalDetector(_Base):
    """The model declined the task ("I'm sorry, but I can't help with that")."""

    name = "refusal"

    def detect_analysed(self, analysis: Any, ctx: Any) -> list[Signal]:
        if lacks_all(analysis, _REFUSAL_NEEDS):
            return []
        if _REFUSAL.cannot_match(masked(analysis)[0]):  # then no sentence of it can match either
            return []
        total = masked_words(analysis)
        found: list[Signal] = []
        for start, end, sentence in masked_sentences(analysis):
            match = _REFUSAL.search(sentence)
            if not match or _GAP_WORDS.search(sentence):
                continue
            early = start < 300 or total < 80
            found.append(self._signal("refusal", sentence, start, end,
                                      "strong" if early else "weak", words=total))
        return found[:1] if found and found[0].strength == "strong" else found


# --- clarification loop ---------------------------------------------------------------------------

_ASKS_USER = lazy_compile(
    r"\b(?:could|can|would|will) you (?:please )?(?:clarify|specify|provide|tell|share|elaborate|"
    r"confirm|explain|let me know|give)\b"
    r"|\bplease (?:clarify|specify|provide|confirm|let me know|tell me|elaborate)\b"
    r"|\bwhat (?:exactly )?do you mean\b|\bwhat are you (?:trying|looking|hoping|referring)\b"
    r"|\b(?:which|what) (?:\w+ ){0,3}(?:are|were|did) you (?:referring|thinking|looking|asking|mean)"
    r"|\bdo you (?:want|mean|prefer|need)\b|\bwould you (?:like|prefer)\b|\bare you (?:asking|referring|"
    r"looking|trying)\b"
    r"|\bbefore I (?:proceed|begin|start|answer|continue|can)\b"
    r"|\bI need (?:more|additional|some) (?:information|details|context) (?:from you|before|about what)\b"
    r"|\bcan you (?:say|be) more specific\b",
    re.IGNORECASE,
)


#: A match of ``_ASKS_USER`` holds one of these (pinned by tests/test_fused_detection.py).
_ASKS_NEEDS = ("you", "please", "before i", "i need")


class ClarificationLoopDetector(_Base):
    """The model asked the user a question instead of doing the task.

    Fires when clarifying questions addressed to the user make up the reply: the rest of it
    carries fewer than ``body_words`` words (default 60). A long analysis that ends with "Would
    you like me to expand on any point?" has done its task and does not fire.
    """

    name = "clarification-loop"

    def detect_analysed(self, analysis: Any, ctx: Any) -> list[Signal]:
        if lacks_all(analysis, _ASKS_NEEDS):  # before masking: most outputs ask nothing
            return []
        if _ASKS_USER.cannot_match(masked(analysis)[0]):  # then no sentence of it asks the user anything
            return []
        body_limit = plugin_settings(ctx).clarification_body_words
        asks: list[tuple[int, int, str]] = []
        body_words = 0
        for start, end, sentence in masked_sentences(analysis):
            is_question = sentence.endswith("?")
            if _ASKS_USER.search(sentence) and (is_question or re.search(r"\bplease\b|\bbefore I\b|\bI need\b",
                                                                          sentence, re.IGNORECASE)):
                asks.append((start, end, sentence))
            elif not is_question:
                body_words += word_count(sentence)
        if not asks or body_words >= body_limit:
            return []
        start, end, first = asks[0]
        strength = "strong" if body_words < body_limit // 2 else "weak"
        return [self._signal("clarification-loop", first, start, end, strength,
                             questions=[a[2] for a in asks], body_words=body_words)]


# --- brief stub ---------------------------------------------------------------------------------------

_PLACEHOLDER = lazy_compile(
    r"\bTODO\b|\bTBD\b|\bFIXME\b|\[(?:insert|placeholder|your|add|fill)[^\]\n]{0,60}\]"
    r"|<(?:insert|placeholder|fill)[^>\n]{0,60}>|\{\{[^}\n]{0,60}\}\}|\blorem ipsum\b"
    r"|\((?:to be (?:completed|continued|written|added)|details to follow)\)"
    r"|\b(?:analysis|content|details|text) (?:goes|will go) here\b",
    re.IGNORECASE,
)


#: A placeholder match holds one of these (pinned against ``_PLACEHOLDER`` by
#: tests/test_fused_detection.py); the pattern's own prefilter admits common words ("add", "your").
_PLACEHOLDER_NEEDS = ("todo", "tbd", "fixme", "[", "<", "{{", "lorem ipsum", "(to be", "(details", "goes here",
                      "go here")


class BriefStubDetector(_Base):
    """The reply is too short for the step, or a template left unfilled.

    The minimum is ``ctx.data["expected_min_words"]`` (the step says what it expects), else
    ``[plugins.health-detectors] min_words``, else 40 words. A ``## COVERAGE GAP`` or
    ``## SUPPLEMENTAL RAG REQUEST`` reply is an authorised path, not a stub.
    """

    name = "brief-stub"

    def min_words(self, ctx: Any) -> int:
        value = ctx_data(ctx).get(MIN_WORDS_KEY, plugin_settings(ctx).min_words)
        return int(value)

    def detect_analysed(self, analysis: Any, ctx: Any) -> list[Signal]:
        text = analysis.text
        if AUTHORISED_BLOCK.search(text):
            return []
        found: list[Signal] = []
        minimum = self.min_words(ctx)
        words = word_count(text) if not has_words(text, minimum) else None
        if words is not None:
            found.append(self._signal("brief-stub", text.strip(), 0, len(text), "strong",
                                      words=words, min_words=minimum))
        if lacks_all(analysis, _PLACEHOLDER_NEEDS):
            return found
        for match in _PLACEHOLDER.finditer(masked(analysis)[0]):
            found.append(self._signal("stub-placeholder", match.group(0), match.start(), match.end(),
                                      "strong", words=word_count(text) if words is None else words))
            break
        return found


# --- leaked tool call -------------------------------------------------------------------------------

_TOOL_MARKUP = lazy_compile(
    r"</?tool_call>|</?tool_use>|</?function_calls>|<invoke\s+name=|<function=[\w.-]+>|</?tool_response>"
    r"|<\|(?:tool_call|tool_calls|python_tag|plugin|recipient|call)\|>|\[TOOL_CALLS\]|\[TOOL_REQUEST\]"
    r"|<\|(?:im_start|im_end|eot_id|start_header_id|end_header_id)\|>",
    re.IGNORECASE,
)
_TOOL_JSON = lazy_compile(
    r"\{\s*\"(?:name|function|tool|tool_name)\"\s*:\s*\"[\w.\-]+\"\s*,\s*"
    r"\"(?:arguments|parameters|args|input|tool_input)\"\s*:"
    r"|\"(?:tool_calls|function_call|tool_use)\"\s*:\s*[\[{]"
    r"|\{\s*\"type\"\s*:\s*\"(?:function|tool_use)\"",
)
_REACT = lazy_compile(r"^\s*Action:\s*[\w.\-]+\s*\n\s*Action Input:", re.MULTILINE)


#: A match of any of the three holds one of these: markup a ``<`` or ``[``, JSON a ``"``, ReAct its
#: ``Action Input:`` (pinned by tests/test_fused_detection.py).
_TOOL_NEEDS = ("<", "[", '"', "action input:")


class LeakedToolCallDetector(_Base):
    """Tool-call syntax (JSON, XML tags, chat-template tokens, ReAct lines) in what should be prose.

    Strong in the prose; weak inside a fenced block, where an answer may legitimately show the
    format as an example.
    """

    name = "leaked-tool-call"

    def detect_analysed(self, analysis: Any, ctx: Any) -> list[Signal]:
        if lacks_all(analysis, _TOOL_NEEDS):
            return []
        text = analysis.text
        found: list[Signal] = []
        for label, pattern in (("tool-markup", _TOOL_MARKUP), ("tool-json", _TOOL_JSON), ("react-action", _REACT)):
            for match in pattern.finditer(text):
                fence = _in_fence(analysis, match.start())
                found.append(self._signal("leaked-tool-call", match.group(0), match.start(), match.end(),
                                          "weak" if fence else "strong", syntax=label, in_fence=fence))
        found.sort(key=lambda s: (s.strength != "strong", s.start or 0))
        return found


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    return starts


def _in_fence(analysis: Any, offset: int) -> bool:
    """Whether the line holding ``offset`` lies inside a fenced block."""
    fenced = masked(analysis)[1]
    starts = analysis.view("health.line_starts", _line_starts)
    line = next(i for i in range(len(fenced)) if offset < starts[i + 1])
    return fenced[line]
