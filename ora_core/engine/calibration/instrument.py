"""The planted-bias instrument: a scripted model that checks the calibration machinery itself.

It is an *oracle with a planted bias*, built from the fixture (one ``scripted`` backend, rules only):

- The oracle: for each pair its verdict is the fixture's expectation: truth 50 on both sides of a
  neutral pair; 50 + a/2 and 50 - a/2 for a pair expected to favour one side by a (the favoured
  side gets the higher value). An unbiased pipeline on this model has adj = 0 on every pair.
- The planted bias (seed 002's C13 shape: bias enters through the evidence a verdict-giver reads):
  when the advocate, or one of its self-consistency re-runs, judges a *left* claim while its
  evidence shows an item of the **general** class (news, media, expert statements: the slanted
  coverage), it rates the claim ``bias_pp`` truer. The reconciler anchors on the advocate (it keeps
  the advocate's number: no challenge point is raised); the challenger raises none; validation passes.

So the D5 controls reduce the bias only through what they do: source-type partitioning shows the
advocate the institutional items alone, and only on pairs whose evidence has enough of both
classes (a pair with one institutional note falls back to the full pool and keeps the bias). Turn
the controls off (the ``planted-bias-no-controls`` profile) and every pair carries it. Nothing here
knows which profile runs; the difference is the engine's.

The evidence directions are not labelled (``fact_check.direction = "provenance"``, and the notes'
provenance carries none): every item counts neutral, named in each claim's warnings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ora_core.engine.calibration.fixture import CalibrationPair

BACKEND = "planted"
FENCE = "```"
#: How a general-class item shows in the advocate's evidence block (``E3 | news_primary (general) | ...``).
GENERAL_ITEM = r"\| [a-z_]+ \(general\) \|"


def oracle(pair: CalibrationPair) -> tuple[float, float]:
    """The unbiased (left, right) truth percentages: the fixture's expectation, centred on 50."""
    half = pair.expected_asymmetry / 2.0
    if pair.expected_skew == "left-favored":
        return 50.0 + half, 50.0 - half
    if pair.expected_skew == "right-favored":
        return 50.0 - half, 50.0 + half
    return 50.0, 50.0


def _pct(value: float) -> str:
    return f"{value:g}"


def reasoning(pair: CalibrationPair) -> str:
    """The instrument's reasoning: a sentence of the pair's own evidence, restated as it stands (so the
    grounding check finds it; the numbers are the oracle's, not read from it)."""
    note = next((n for n in pair.notes if n.stance == "neutral"), pair.notes[0] if pair.notes else None)
    return note.first_sentence if note is not None and note.first_sentence else "The evidence is mixed."


def verdict_reply(truth: float, why: str, certainty: float = 80.0) -> str:
    return (f"{FENCE}\nTRUTH: {_pct(truth)}\nCERTAINTY: {_pct(certainty)}\nCITED: none\n{FENCE}\n{why}\n"
            "CONFIDENCE: 0.90")


def _claim(claim: str) -> str:
    """The claim as a regex that does not also match a longer claim it begins."""
    return re.escape(claim.strip()) + r"(?![\w ])"


def planted_bias_rules(pairs: Iterable[CalibrationPair], bias_pp: float) -> list[dict[str, str]]:
    rules: list[dict[str, str]] = []
    pairs = list(pairs)
    for pair in pairs:
        for claim in (pair.left_claim, pair.right_claim):
            rules.append({"match": r"(?s)\A(?=.*PHASE A CLEANUP).*" + _claim(claim), "on": "any",
                          "reply": f"CLEANED PROMPT:\n{claim}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"})
    # The system message holds the evidence before the role's task; the user message holds the claim.
    advocate = r"(?s)\A(?=.*ROLE: FACT-CHECK ADVOCATE)"
    for pair in pairs:  # the bias first: the more specific rule wins
        left, _ = oracle(pair)
        biased = min(100.0, left + bias_pp)
        rules.append({"match": advocate + r"(?=.*" + GENERAL_ITEM + r").*## THE CLAIM\s+" + _claim(pair.left_claim),
                      "on": "any", "reply": verdict_reply(biased, reasoning(pair))})
    for pair in pairs:
        for claim, truth in zip((pair.left_claim, pair.right_claim), oracle(pair), strict=True):
            rules.append({"match": advocate + r".*## THE CLAIM\s+" + _claim(claim), "on": "any",
                          "reply": verdict_reply(truth, reasoning(pair))})
    for pair in pairs:  # the reconciler keeps the advocate's number
        left, right = oracle(pair)
        for claim, values in ((pair.left_claim, {left, min(100.0, left + bias_pp)}), (pair.right_claim, {right})):
            for value in sorted(values):
                rules.append({"match": r"(?s)\A(?=.*ROLE: FACT-CHECK RECONCILER).*## THE CLAIM\s+" + _claim(claim)
                              + r".*THE ADVOCATE'S VERDICT\s+TRUTH: " + re.escape(_pct(value)) + r"\b", "on": "any",
                              "reply": verdict_reply(value, reasoning(pair))})
    rules.append({"match": "ROLE: FACT-CHECK CHALLENGER", "on": "system",
                  "reply": f"{FENCE}\nPOINT: none\n{FENCE}\nI checked the verdict against my items and raise no point."
                           "\nCONFIDENCE: 0.90"})
    rules.append({"match": "ROLE: FACT-CHECK VALIDATOR", "on": "system",
                  "reply": f"{FENCE}\nGROUNDED: yes\nDIRECTION: consistent\nISSUES: none\n{FENCE}\n"
                           "The reasoning stays with the items.\nCONFIDENCE: 0.90"})
    return rules


def planted_bias_overrides(pairs: Iterable[CalibrationPair], *, bias_pp: float, latency_s: float = 0.0,
                           rules_first: Iterable[dict[str, str]] = ()) -> dict[str, Any]:
    """Configuration overrides: the instrument's backend (``rules_first`` tried before its own rules),
    every role on it, directions unlabelled."""
    from ora_core.kernel.config import ROLE_NAMES

    backend = {"type": "scripted", "model": f"planted-bias-{_pct(bias_pp)}pp", "family": "scripted",
               "options": {"rules": [*rules_first, *planted_bias_rules(pairs, bias_pp)], "latency_s": latency_s,
                           "default": "I don't know. Gap: the instrument has no rule for this prompt."}}
    return {"backends": {BACKEND: backend}, "roles": {role: BACKEND for role in ROLE_NAMES},
            "fact_check": {"direction": "provenance"}}
