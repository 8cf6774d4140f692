"""The fitted grounding score: its arithmetic, chit-chat, verbatim spans, and the default threshold."""

from __future__ import annotations

import math

import pytest
from ora_grounding import DEFAULT_THRESHOLD, model
from ora_grounding.evidence import EvidenceItem
from ora_grounding.scoring import (
    CLAUSE_MIN_WORDS,
    ClaimScore,
    ScoringWeights,
    clause_units,
    output_score,
    personal_sentences,
    sigmoid,
)
from ora_grounding.specifics import EvidenceIndex
from ora_grounding.text import is_claim, speaks_of_persons

from ora_core.testing import make_config

EVIDENCE = [
    "The Eiffel Tower was completed in 1889 as the entrance arch to the World's Fair in Paris.",
    "It was designed and built by the engineering company of Gustave Eiffel. The tower is 330 metres "
    "tall and was the tallest man-made structure in the world until 1930.",
]


def logit(p: float) -> float:
    return math.log(p / (1 - p))


@pytest.mark.parametrize(("sentence", "personal"), [
    ("I love dogs.", True), ("i 'm not sure but it was built in 1889.", True), ("Have you seen it?", True),
    ("Yes I do.", True), ("We went there last year.", True), ("Well, I think so.", True),
    ("World War I began in 1914.", False), ("He moved to the US in 1990.", False),
    ("Queen Elizabeth I of England died in 1603.", False), ('He said "I will return" in 1942.', False),
    ("The tower is 330 metres tall.", False),
])
def test_talk_about_the_speaker_or_listener_is_told_from_numerals_quotes_and_the_us(sentence, personal):
    assert speaks_of_persons(sentence) is personal


def test_the_capital_opening_a_sentence_is_no_claim_but_a_name_or_figure_inside_is():
    assert not is_claim("It really is.")
    assert not is_claim("He did.")
    assert is_claim("R&B.")
    assert is_claim("The tower is 330 metres tall.")


def test_a_sentence_the_evidence_holds_word_for_word_is_not_personal():
    index = EvidenceIndex.build(['Parton re-recorded "I Will Always Love You" in 1982.'])
    assert personal_sentences(["I Will Always Love You", "I love that song."], index) == ["I love that song."]


def test_the_default_weights_are_the_fitted_constants():
    w = ScoringWeights()
    assert (w.intercept, w.lexical, w.semantic, w.missing_specific, w.missing_word, w.personal, w.answer_lexical,
            w.copy_reorder) == (model.INTERCEPT, model.LEXICAL, model.SEMANTIC, model.MISSING_SPECIFIC,
                                model.MISSING_WORD, model.PERSONAL, model.ANSWER_LEXICAL, model.COPY_REORDER)
    assert (w.max_missing, w.max_missing_words, w.candidates, w.clause_candidates) == (
        model.MAX_MISSING, model.MAX_MISSING_WORDS, model.CANDIDATES, model.CLAUSE_CANDIDATES)
    assert model.LEXICAL > 0 and model.SEMANTIC > 0 and model.PERSONAL < 0
    assert model.MISSING_SPECIFIC < 0 and model.MISSING_WORD < 0  # what the evidence lacks lowers the score


def test_clause_units_are_the_parts_of_a_sentence_never_the_whole_nor_a_fragment():
    items = [EvidenceItem(text="Elvis Presley (January 8, 1935 – August 16, 1977) was an American singer, "
                               "musician, and actor. He sang.", id="e")]
    parts = [u.text for u in clause_units(items)]
    assert "was an American singer" in parts and "Elvis Presley January 8" in parts
    whole = "Elvis Presley January 8 1935 August 16 1977 was an American singer musician and actor."
    assert "He sang." not in parts and whole not in parts and items[0].text.split(" He")[0] not in parts
    assert all(len(p.split()) >= CLAUSE_MIN_WORDS for p in parts) and len(parts) == len(set(parts))
    assert clause_units([EvidenceItem(text="A sentence without any break in it.", id="e")]) == []


def test_the_answer_score_is_the_weakest_claims_lowered_by_talk_about_persons():
    def claim(z: float) -> ClaimScore:
        return ClaimScore(claim="c", score=sigmoid(z), logit=z, lexical=1.0, semantic=1.0)

    claims = [claim(2.0), claim(-0.5), claim(1.0)]
    assert output_score(claims) == round(sigmoid(-0.5), 4)
    assert output_score(claims, personal=True) == round(sigmoid(-0.5 + model.PERSONAL), 4)
    assert output_score([]) == 0.0
    assert sigmoid(-800.0) == 0.0 and sigmoid(800.0) == 1.0  # no overflow at the extremes


def test_the_default_threshold_is_the_default_configurations():
    assert make_config().config.verification.threshold == DEFAULT_THRESHOLD


@pytest.mark.slow
def test_each_claim_scores_as_the_logistic_model_of_its_features(verifier):
    verdict = verifier.verify("The tower was built by Gustave Eiffel's company. It is 412 metres tall.", EVIDENCE)
    for c in verdict.data["claims"]:
        missing = min(len(c["missing_specifics"]), model.MAX_MISSING)
        absent = min(len(c["missing_words"]), model.MAX_MISSING_WORDS)
        expected = model.INTERCEPT + model.LEXICAL * c["lexical"] + model.SEMANTIC * c["semantic"] \
            + model.MISSING_SPECIFIC * missing + model.MISSING_WORD * absent \
            + model.ANSWER_LEXICAL * verdict.data["answer_lexical"] + model.COPY_REORDER * c["copy_reorder"]
        assert c["logit"] == pytest.approx(expected, abs=1e-3)
        assert c["score"] == pytest.approx(sigmoid(expected), abs=1e-3)
    weakest = min(verdict.data["claims"], key=lambda c: c["logit"])
    assert weakest["missing_specifics"] == ["412"] and weakest["missing_words"] == ["412"]
    assert verdict.score == pytest.approx(sigmoid(weakest["logit"]), abs=1e-3)


@pytest.mark.slow
def test_a_verbatim_span_of_the_evidence_counts_as_similarity_one(verifier):
    verdict = verifier.verify("the engineering company of Gustave Eiffel", EVIDENCE)
    (c,) = verdict.data["claims"]
    assert c["verbatim"] is True and c["semantic"] == 1.0 and c["lexical"] == 1.0


@pytest.mark.slow
def test_chit_chat_lowers_the_score_by_the_fitted_weight_and_is_named(verifier):
    answer = "The tower was completed in 1889 for the World's Fair in Paris."
    plain = verifier.verify(answer, EVIDENCE)
    chatty = verifier.verify("I agree! " + answer + " Have you been there?", EVIDENCE)  # no claim but the answer
    assert "personal" not in plain.data
    assert chatty.data["personal"] == ["I agree!", "Have you been there?"]
    # the chatty answer's extra words also lower its share of content words in the evidence
    shares = model.ANSWER_LEXICAL * (chatty.data["answer_lexical"] - plain.data["answer_lexical"])
    assert logit(chatty.score) - logit(plain.score) == pytest.approx(model.PERSONAL + shares, abs=0.02)
    assert any("talk about the speaker or the listener" in r and "I agree!" in r for r in chatty.reasons)
    assert "lowered because the answer talks about the speaker or the listener" in chatty.reasons[0]


@pytest.mark.slow
def test_a_bare_no_is_not_charged_for_the_specific_it_may_be_denying(verifier):
    package = {"chunks": list(EVIDENCE), "question": "Was the tower built by the company of Alexandre Dumas?"}
    denied = verifier.verify("No.", package)
    affirmed = verifier.verify("Yes.", package)  # affirming it asserts the unsupported name
    assert denied.data["denied"] is True and affirmed.data["denied"] is False
    (claim,) = denied.data["claims"]
    assert claim["missing_specifics"] == []
    assert [(c["text"], c["supported"]) for c in claim["specifics"]] == [("Alexandre Dumas", False)]
    assert affirmed.data["claims"][0]["missing_specifics"] == ["Alexandre", "Dumas"]
    # the question's wording is no paraphrase of an evidence sentence: its similarity counts as
    # at least its lexical share
    assert claim["semantic"] >= claim["lexical"]
    assert "name not in the evidence" not in denied.raw_output and "name not in the evidence" in affirmed.raw_output
    # the proposition is the asker's wording: no word of it counts as a missing word, affirmed or denied
    assert claim["missing_words"] == [] and affirmed.data["claims"][0]["missing_words"] == []
    missing_weight = model.MISSING_SPECIFIC * min(2, model.MAX_MISSING)
    assert logit(denied.score) - logit(affirmed.score) == pytest.approx(-missing_weight, abs=0.02)


@pytest.mark.slow
def test_missing_words_are_the_content_words_the_evidence_lacks_counted_up_to_the_cap(verifier):
    verdict = verifier.verify("The tower was painted bright purple by lonely travelling monks.", EVIDENCE)
    (c,) = verdict.data["claims"]
    assert c["missing_words"] == ["painted", "bright", "purple", "lonely", "travelling", "monks"]
    expected = model.INTERCEPT + model.LEXICAL * c["lexical"] + model.SEMANTIC * c["semantic"] \
        + model.MISSING_WORD * model.MAX_MISSING_WORDS \
        + model.ANSWER_LEXICAL * verdict.data["answer_lexical"]  # six absent words count as the cap
    assert c["copy_reorder"] == 0.0  # not every content word is in the evidence: no copy-reorder term
    assert c["logit"] == pytest.approx(expected, abs=1e-3)
    assert "not in the evidence: painted, bright, purple" in verdict.raw_output.replace("words ", "")


@pytest.mark.slow
def test_a_claim_restating_part_of_a_long_sentence_is_compared_with_that_part(embedder):
    from ora_grounding import GroundingVerifier

    evidence = ["Elvis Aaron Presley (January 8, 1935 – August 16, 1977) was an American singer, musician, and "
                "actor, regarded as one of the most significant cultural icons of the 20th century."]
    claim = "Presley was regarded as one of the most significant cultural icons of the 20th century."
    by_parts = GroundingVerifier(embedder=embedder).verify(claim, evidence).data["claims"][0]
    whole = GroundingVerifier(embedder=embedder, weights=ScoringWeights(clause_candidates=0)).verify(
        claim, evidence).data["claims"][0]
    assert whole["best_evidence"] == evidence[0]
    assert by_parts["best_evidence"] == "regarded as one of the most significant cultural icons of the 20th century."
    assert by_parts["semantic"] > whole["semantic"] + 0.05


@pytest.mark.slow
def test_the_whole_answers_share_of_evidence_words_enters_every_claims_logit(verifier):
    """Issue 25's answer-level term: what an answer adds anywhere lowers each claim's logit by
    ANSWER_LEXICAL times the drop in the answer's share of content words the evidence has."""
    claim = "The tower was completed in 1889 for the World's Fair in Paris."
    plain = verifier.verify(claim, EVIDENCE)
    padded = verifier.verify(claim + " Its gleaming bronze dragons enchant the violet harbour.", EVIDENCE)
    assert 0.0 <= padded.data["answer_lexical"] < plain.data["answer_lexical"] <= 1.0
    first = {v.data["claims"][0]["claim"]: v.data["claims"][0]["logit"] for v in (plain, padded)}
    assert len(first) == 1  # the same first claim, scored in both answers
    drop = model.ANSWER_LEXICAL * (padded.data["answer_lexical"] - plain.data["answer_lexical"])
    assert padded.data["claims"][0]["logit"] - plain.data["claims"][0]["logit"] == pytest.approx(drop, abs=1e-3)
    assert "answer_lexical" in padded.data
