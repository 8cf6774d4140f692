"""Issue 25's copy-reorder term: a claim that copies an evidence sentence's words but changes who
or what it is about ("red was associated with merchants" of "green was associated with merchants,
while red was reserved for the nobility") keeps every word and loses their order."""

from __future__ import annotations

import pytest
from ora_grounding import model
from ora_grounding.evidence import EvidenceItem
from ora_grounding.scoring import (
    ORDER_WINDOW,
    copy_reorder,
    evidence_units,
    focus_support,
    order_support,
    ordered_pairs,
)
from ora_grounding.text import content_stems

EVIDENCE = ("In the Middle Ages green was the colour associated with merchants and bankers, "
            "while red was reserved for the nobility.")
ITEMS = [EvidenceItem(text=EVIDENCE, id="e")]


def order_of(claim: str) -> float:
    return order_support(content_stems(claim), ordered_pairs(ITEMS))


def test_a_faithful_copy_keeps_the_evidence_order_and_a_swapped_subject_does_not():
    assert order_of("Green was the colour associated with merchants.") == 1.0
    swapped = order_of("Red was the colour associated with merchants.")
    assert swapped < 1.0  # (red, colour) is in no evidence sentence in that order
    assert order_of("Merchants were associated with the nobility.") < 1.0  # reversed: (merchants, ...) later


def test_pairs_are_counted_within_the_window_and_within_one_sentence_only():
    far = " ".join(f"filler{i}" for i in range(ORDER_WINDOW))
    items = [EvidenceItem(text=f"alpha {far} omega. beta gamma.", id="e")]
    pairs = ordered_pairs(items)
    assert ("alpha", "filler0") in pairs and ("alpha", "omega") not in pairs  # omega is window + 1 away
    assert ("omega", "beta") not in pairs  # across a sentence boundary
    assert order_support(["beta"], pairs) == 1.0  # one content word: nothing to order


def test_copy_reorder_is_one_minus_order_only_when_every_content_word_is_in_the_evidence():
    assert copy_reorder(1.0, 0.25) == 0.75
    assert copy_reorder(1.0, 1.0) == 0.0
    assert copy_reorder(0.8, 0.25) == 0.0  # a claim with new words is charged by lexical and missing words
    assert model.COPY_REORDER < 0  # the fit's sign: a reordered copy is less likely supported


def test_focus_is_the_share_of_the_claims_words_in_its_best_single_unit():
    items = [EvidenceItem(text="Apples grow on trees. Whales swim in the ocean. Deserts are dry.", id="e")]
    units = evidence_units(items)
    assert focus_support(set(content_stems("apples grow on trees")), units) == 1.0
    assert focus_support(set(content_stems("apples in deserts")), units) == 0.5  # no unit holds both


@pytest.mark.slow
def test_the_term_enters_the_claims_logit_and_the_reason_names_it(verifier):
    verdict = verifier.verify("Red was the colour associated with merchants.", [EVIDENCE])
    (c,) = verdict.data["claims"]
    assert c["lexical"] == 1.0 and c["order"] < 1.0
    assert c["copy_reorder"] == pytest.approx(1.0 - c["order"], abs=1e-4)
    expected = model.INTERCEPT + model.LEXICAL * c["lexical"] + model.SEMANTIC * c["semantic"] \
        + model.ANSWER_LEXICAL * verdict.data["answer_lexical"] + model.COPY_REORDER * c["copy_reorder"]
    assert c["logit"] == pytest.approx(expected, abs=1e-3)
    faithful = verifier.verify("Green was the colour associated with merchants.", [EVIDENCE]).data["claims"][0]
    assert faithful["copy_reorder"] == 0.0 and faithful["logit"] > c["logit"]
    if not c["supported"]:
        assert any("in no evidence sentence in that order" in r for r in verdict.reasons)
    assert any("copy-reorder" in check for check in verdict.data["checks"])
