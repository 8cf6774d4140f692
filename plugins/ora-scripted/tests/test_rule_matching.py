"""The scripted backend's literal fast path picks the same rule as the rule's regex would."""

from __future__ import annotations

import re

import pytest
from ora_scripted import ScriptedBackend, _literal

from ora_core.api import Message

RULES = [
    {"match": r"ROLE: REVISER \(gear 4, step 5\) — the DEPTH", "on": "system", "reply": "revise-depth"},
    {"match": "role: verifier", "on": "system", "reply": "verify"},
    {"match": r"(?s)ROLE: ANALYST.*EVIDENCE", "on": "system", "reply": "regex-rule"},
    {"match": "kelvin", "on": "user", "reply": "kelvin"},
]


def _reply(system: str, user: str) -> str:
    backend = ScriptedBackend(rules=RULES, default="none")
    return backend._choose([Message(role="system", content=system), Message(role="user", content=user)])


def _regex_reply(system: str, user: str) -> str:
    for rule in RULES:
        target = system if rule["on"] == "system" else user
        if re.search(rule["match"], target, re.I | re.S):
            return rule["reply"]
    return "none"


@pytest.mark.parametrize(("system", "user"), [
    ("x\nrole: reviser (GEAR 4, STEP 5) — THE depth\ny", "hi"),
    ("ROLE: REVISER (gear 4, step 5) - the DEPTH", "hi"),  # a hyphen is not the em dash
    ("intro ROLE: Verifier", "hi"),
    ("ROLE: ANALYST\nthen\nEVIDENCE", "hi"),
    ("nothing here", "the \u212aELVIN sign folds to k under re.IGNORECASE"),
    ("nothing here", "KELVIN"),
    ("nothing here", "nothing"),
])
def test_literal_rules_choose_what_the_regex_chooses(system: str, user: str) -> None:
    assert _reply(system, user) == _regex_reply(system, user)


def test_only_plain_literals_take_the_fast_path() -> None:
    assert _literal(r"ROLE: REVISER \(gear 4\)") == "role: reviser (gear 4)"
    assert _literal("a.b") is None
    assert _literal(r"\d+") is None
    assert _literal("(?s)x") is None
    assert _literal("é") is None  # cased non-ASCII: the regex decides
