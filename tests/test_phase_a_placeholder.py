"""Phase A's reply is parsed only when it fills the template in: a CLEANED PROMPT that is the
template's own placeholder (``<the cleaned prompt>``, any case, with or without brackets, or another
template line echoed back) is unparseable, named ``phase-a-placeholder-used-raw-prompt``, and the raw
prompt goes on; template lines echoed as corrections or inferred items are left out, named."""

from __future__ import annotations

import asyncio

import ora_scripted
import pytest

from ora_core.engine.backends import BackendPool
from ora_core.engine.phase_a import (
    PLACEHOLDER_CONTINGENCY,
    PLACEHOLDER_ITEMS_CONTINGENCY,
    echoed_placeholder,
    parse_phase_a,
    run_phase_a,
)
from ora_core.kernel.trace import TurnContext
from ora_core.testing import RecordingSink, make_host, scripted_config

PROMPT = "why is the sky blue"


def reply(cleaned: str, corrections: str = "- none", inferred: str = "- none") -> str:
    return f"CLEANED PROMPT:\n{cleaned}\nCORRECTIONS:\n{corrections}\nINFERRED ITEMS:\n{inferred}"


@pytest.mark.parametrize("cleaned", [
    "<the cleaned prompt>", "<THE CLEANED PROMPT>", "the cleaned prompt", "The cleaned prompt.", "[the cleaned prompt]",
    '- <one line per correction, or "- none">',
    '- <one line per assumption you had to make to interpret the prompt, or "- none">',
])
def test_the_templates_own_placeholder_is_no_cleaned_prompt(cleaned: str) -> None:
    text = reply(cleaned)
    assert parse_phase_a(text) is None
    assert echoed_placeholder(text) == cleaned


def test_a_real_cleaned_prompt_mentioning_the_words_still_parses() -> None:
    parsed = parse_phase_a(reply("Explain what the cleaned prompt of Phase A is for."))
    assert parsed is not None and parsed["cleaned_prompt"].startswith("Explain what the cleaned prompt")


def run(reply_text: str) -> tuple[object, TurnContext, RecordingSink]:
    resolved = scripted_config(default=reply_text)
    sink = RecordingSink()
    turn = TurnContext(prompt=PROMPT, config=resolved.config, config_hash=resolved.hash, sinks=[sink],
                       host=make_host(ora_scripted))
    pool = BackendPool(resolved.config, turn.host)
    return asyncio.run(run_phase_a(turn, pool, PROMPT)), turn, sink


def test_a_placeholder_reply_is_named_and_the_raw_prompt_goes_on() -> None:
    result, turn, sink = run(reply("<the cleaned prompt>"))
    assert result.cleaned_prompt == PROMPT and result.used_raw_prompt and not result.parsed
    assert [c.name for c in turn.contingencies] == [PLACEHOLDER_CONTINGENCY]
    assert "<the cleaned prompt>" in turn.contingencies[0].detail
    assert any(e.kind == "contingency" and e.data["name"] == PLACEHOLDER_CONTINGENCY for e in sink.events)


def test_template_lines_echoed_as_items_are_left_out_and_named() -> None:
    result, turn, _ = run(reply("Why is the sky blue?", '- <one line per correction, or "- none">',
                                "- <one line per assumption you had to make to interpret the prompt, or \"- none\">\n"
                                "- the sky seen from Earth by day"))
    assert result.parsed and result.cleaned_prompt == "Why is the sky blue?"
    assert result.corrections == [] and result.inferred_items == ["the sky seen from Earth by day"]
    assert [c.name for c in turn.contingencies] == [PLACEHOLDER_ITEMS_CONTINGENCY]
    assert len(turn.contingencies[0].data["lines"]) == 2
