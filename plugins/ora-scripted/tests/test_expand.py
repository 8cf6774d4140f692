"""A rule with ``expand = true`` answers with a template of its match: the scripted model can say
back what it was sent (a clock reading, a chunk, the prompt); a template that does not fit its regex
is refused with the configuration, never mid-turn."""

from __future__ import annotations

import pytest
from ora_scripted import ScriptedBackend, ScriptedOptions
from pydantic import ValidationError

from ora_core.api import CompletionParams, Message

CLOCK_RULE = {"match": r"- Local: (?P<when>[^\n]+?) \(([^)]*)\)", "on": "system", "expand": True,
              "reply": r"It is \g<when> (\2)."}


def _reply(rules: list[dict[str, object]], system: str, user: str) -> str:
    options = ScriptedOptions.model_validate({"rules": rules, "default": "default"})
    backend = ScriptedBackend(rules=[r.model_dump() for r in options.rules], default=options.default)
    return backend._choose([Message(role="system", content=system), Message(role="user", content=user)])


def test_an_expand_rule_answers_with_what_its_groups_captured() -> None:
    system = "## SYSTEM CLOCK READING\n- Local: Friday, 27 November 2026, 16:15 (UTC, UTC+0000)\n"
    assert _reply([CLOCK_RULE], system, "what time is it?") == "It is Friday, 27 November 2026, 16:15 (UTC, UTC+0000)."


def test_without_expand_the_reply_is_literal_and_a_rule_that_does_not_match_falls_through() -> None:
    literal = dict(CLOCK_RULE, expand=False)
    system = "- Local: Friday (UTC)"
    assert _reply([literal], system, "hi") == r"It is \g<when> (\2)."
    assert _reply([CLOCK_RULE, {"match": "hi", "reply": "next rule"}], "no clock here", "hi") == "next rule"
    assert _reply([CLOCK_RULE], "no clock here", "nothing") == "default"


def test_on_any_reads_the_system_message_then_the_user_message() -> None:
    rule = {"match": r"(?s)TASK X.*\n([^\n]+)\Z", "on": "any", "expand": True, "reply": r"echo: \1"}
    assert _reply([rule], "TASK X: clean the prompt", "the user's prompt") == "echo: the user's prompt"


@pytest.mark.parametrize(("reply", "problem"), [
    (r"\3", "invalid group reference 3"),
    (r"\g<missing>", "unknown group name 'missing'"),
    (r"\q", r"bad escape \q"),
])
def test_a_template_that_does_not_fit_its_regex_is_refused_with_the_configuration(reply: str, problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ScriptedOptions.model_validate({"rules": [dict(CLOCK_RULE, reply=reply)]})
    assert "is not a template of match" in str(caught.value) and problem in str(caught.value)


def test_an_expanded_error_reply_still_raises_its_typed_error() -> None:
    import asyncio

    from ora_core.api import BackendTimeout

    backend = ScriptedBackend(rules=[{"match": r"(timeout)", "expand": True, "reply": r"!error:\1"}])
    with pytest.raises(BackendTimeout):
        asyncio.run(backend.complete([Message(role="user", content="please timeout")], CompletionParams()))
