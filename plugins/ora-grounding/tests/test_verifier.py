"""The grounding verifier with the real MiniLM: PASS and FAIL for stated reasons."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ora_grounding import DEFAULT_THRESHOLD, GroundingVerifier

from ora_core.api import Chunk, EvidencePackage, Provenance, Retrieval, VerdictStatus, VerifierError

pytestmark = pytest.mark.slow  # loads MiniLM once per session (a few seconds)

EVIDENCE = [
    "The Eiffel Tower was completed in 1889 as the entrance arch to the World's Fair in Paris.",
    "It was designed and built by the engineering company of Gustave Eiffel. The tower is 330 metres "
    "tall and was the tallest man-made structure in the world until 1930.",
]


def chunk(i: int, text: str) -> Chunk:
    return Chunk(id=f"c{i}", text=text, provenance=Provenance(collection="vault", source=f"notes/eiffel-{i}.md",
                                                              score=0.9, stream="concept"))


def ctx(threshold: float = DEFAULT_THRESHOLD) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(verification=SimpleNamespace(threshold=threshold)))


def check(verifier, subject: str, evidence=EVIDENCE):  # noqa: ANN001, ANN201
    return verifier.verify(subject, evidence, "criteria", ctx())


def test_a_paraphrase_of_the_evidence_passes(verifier):
    verdict = check(verifier, "Gustave Eiffel's engineering company designed and built the tower, "
                              "which was finished in 1889 for the World's Fair in Paris.")
    assert verdict.status is VerdictStatus.PASS, verdict.raw_output
    assert verdict.verifier == "grounding" and verdict.unsupported_claims == []
    assert verdict.score is not None and verdict.score >= DEFAULT_THRESHOLD


def test_an_invented_number_fails_and_is_named(verifier):
    verdict = check(verifier, "The Eiffel Tower was completed in 1887 as the entrance arch to the World's Fair.")
    assert verdict.status is VerdictStatus.FAIL
    assert verdict.unsupported_claims and "1887" in verdict.unsupported_claims[0]
    assert any("'1887'" in r for r in verdict.reasons), verdict.reasons
    assert verdict.data["unsupported"][0]["missing_specifics"] == ["1887"]


def test_an_invented_name_fails_and_is_named(verifier):
    verdict = check(verifier, "The tower was designed and built by the engineering company of Alexandre Dumas.")
    assert verdict.status is VerdictStatus.FAIL
    assert any("name" in r and "Alexandre Dumas" in r for r in verdict.reasons), verdict.reasons


def test_an_invented_quotation_fails(verifier):
    verdict = check(verifier, 'Gustave Eiffel called the tower "a flagpole for the republic" when it was completed.')
    assert verdict.status is VerdictStatus.FAIL
    assert any("quotation" in r and "a flagpole for the republic" in r for r in verdict.reasons), verdict.reasons


def test_an_unsupported_sentence_without_specifics_fails_on_similarity(verifier):
    verdict = check(verifier, "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. "
                              "Critics considered the design ugly and petitioned for its demolition.")
    assert verdict.status is VerdictStatus.FAIL
    assert verdict.unsupported_claims == ["Critics considered the design ugly and petitioned for its demolition."]
    assert any("no evidence sentence says this" in r for r in verdict.reasons), verdict.reasons
    supported = [c for c in verdict.data["claims"] if c["supported"]]
    assert [c["claim"] for c in supported] == ["The Eiffel Tower was completed in 1889 for the World's Fair in Paris."]


@pytest.mark.parametrize("empty", [[], "", "   ", None, EvidencePackage(chunks=[]),
                                   Retrieval(stream="concept", query="q", chunks=[], retriever="vault")])
def test_empty_evidence_fails_with_no_evidence_never_passes(verifier, empty):
    verdict = check(verifier, "The Eiffel Tower was completed in 1889.", evidence=empty)
    assert verdict.status is VerdictStatus.FAIL
    assert verdict.score == 0.0
    assert verdict.reasons[0].startswith("no evidence")
    assert verdict.unsupported_claims == ["The Eiffel Tower was completed in 1889."]


def test_a_subject_with_no_checkable_claim_fails(verifier):
    verdict = check(verifier, "CONFIDENCE: 0.90\n\n## COVERAGE GAP\nThe evidence lacks the tower's 2024 visitor count.")
    assert verdict.status is VerdictStatus.FAIL
    assert verdict.reasons[0].startswith("nothing to verify")


@pytest.mark.parametrize("shape", ["str", "texts", "chunks", "package", "retrieval", "mapping"])
def test_every_documented_package_shape_gives_the_same_verdict(verifier, shape):
    chunks = [chunk(i, t) for i, t in enumerate(EVIDENCE)]
    package = {
        "str": "\n\n".join(EVIDENCE),
        "texts": list(EVIDENCE),
        "chunks": chunks,
        "package": EvidencePackage(chunks=chunks),
        "retrieval": Retrieval(stream="concept", query="q", chunks=chunks, retriever="vault"),
        "mapping": {"chunks": [c.model_dump() for c in chunks]},
    }[shape]
    subject = "The tower is 330 metres tall. It was built by Gustave Eiffel's company for the 1889 World's Fair."
    verdict = check(verifier, subject, evidence=package)
    assert verdict.status is VerdictStatus.PASS, verdict.raw_output
    if shape in {"chunks", "package", "retrieval", "mapping"}:
        assert verdict.data["evidence_sources"] == ["notes/eiffel-0.md", "notes/eiffel-1.md"]


def test_an_unreadable_package_raises_a_typed_error(verifier):
    with pytest.raises(VerifierError, match="cannot read int"):
        check(verifier, "The tower is 330 metres tall.", evidence=42)
    with pytest.raises(VerifierError, match="none of the keys"):
        check(verifier, "The tower is 330 metres tall.", evidence={"docs": []})


def test_threshold_comes_from_ctx_config_unless_passed(verifier):
    subject = "The tower was designed by Gustave Eiffel's company and completed in 1889."
    lenient = verifier.verify(subject, EVIDENCE, "", ctx(0.05))
    strict = verifier.verify(subject, EVIDENCE, "", ctx(0.99))
    assert (lenient.status, strict.status) == (VerdictStatus.PASS, VerdictStatus.FAIL)
    assert strict.data["threshold_from"] == "config.verification.threshold"
    overridden = verifier.verify(subject, EVIDENCE, "", ctx(0.99), threshold=0.05)
    assert overridden.status is VerdictStatus.PASS and overridden.data["threshold_from"] == "argument"
    assert verifier.verify(subject, EVIDENCE, "", None).data["threshold"] == DEFAULT_THRESHOLD
    with pytest.raises(VerifierError, match="threshold"):
        verifier.verify(subject, EVIDENCE, "", ctx(), threshold=1.5)


def test_protocol_lines_and_sections_are_not_graded(verifier):
    subject = ("The Eiffel Tower is 330 metres tall.\nCONFIDENCE: 0.87\n\n## SUPPLEMENTAL RAG REQUEST\nGap: the "
               "architect Stephen Sauvestre\nQuery terms: Sauvestre 1884\n\n## COVERAGE GAP\nThe 1884 sketch by "
               "Maurice Koechlin is not in the evidence.")
    verdict = check(verifier, subject)
    assert verdict.status is VerdictStatus.PASS, verdict.raw_output
    assert verdict.data["claims_checked"] == 1
    assert "CONFIDENCE: 0.87" in verdict.data["set_aside"]


def test_the_raw_report_lists_claims_and_ends_with_a_verdict_line_the_kernel_reads(verifier):
    verdict = check(verifier, "The Eiffel Tower was completed in 1887.")
    assert "## GROUNDING REPORT" in verdict.raw_output and "UNSUPPORTED" in verdict.raw_output
    assert "missing from the evidence: 1887" in verdict.raw_output
    # a standalone verdict line: what the engine's verdict reader (ora-broken) takes as the verdict
    assert "VERDICT: FAIL" in [line.strip() for line in verdict.raw_output.splitlines()]


def test_a_verifier_without_an_embedder_takes_the_hosts_configured_one(embedder, embedder_ctx):
    assert GroundingVerifier().embedder(embedder_ctx) is embedder


def test_a_bare_yes_is_checked_as_the_question_it_answers(verifier):
    def package(question: str) -> dict:
        return {"chunks": list(EVIDENCE), "question": question}

    grounded = verifier.verify("Yes.", package("Was the tower built by the engineering company of Gustave "
                                               "Eiffel?"), "", ctx())
    assert grounded.status is VerdictStatus.PASS and grounded.data["claims_from_question"] is True
    invented = verifier.verify("Yes.", package("Was the tower built by Alexandre Dumas?"), "", ctx())
    assert invented.status is VerdictStatus.FAIL
    assert verifier.verify("Yes.", list(EVIDENCE), "", ctx()).reasons[0].startswith("nothing to verify")
    package_prompt = EvidencePackage(chunks=[chunk(0, EVIDENCE[0])], prompt="Was the tower completed in 1889?")
    assert verifier.verify("Yes", package_prompt, "", ctx()).status is VerdictStatus.PASS


def test_telling_back_the_question_is_no_claim_and_never_passes(verifier):
    question = "Explain when the Eiffel Tower was completed and who built it."
    package = {"chunks": list(EVIDENCE), "question": question}
    echo = verifier.verify("The user's request is to know when the Eiffel Tower was completed and who built it.",
                           package, "", ctx())
    assert echo.status is VerdictStatus.FAIL, echo.raw_output
    assert "only restates the question" in echo.reasons[0]
    assert "set aside (restates the question, not a claim)" in echo.raw_output
    answered = verifier.verify("The user asks when the Eiffel Tower was completed and who built it. It was "
                               "completed in 1889 by the engineering company of Gustave Eiffel.", package, "", ctx())
    assert answered.status is VerdictStatus.PASS, answered.raw_output  # the answer is graded, the echo set aside
    assert len(answered.data["restated_question"]) == 1 and len(answered.data["claims"]) == 1
    # a partial echo is not set aside: it is graded like any claim (here: unsupported, so FAIL)
    partial = verifier.verify("The user asks when the tower was completed.", package, "", ctx())
    assert partial.status is VerdictStatus.FAIL and "restated_question" not in partial.data


def test_an_answer_that_names_an_option_of_the_question_stays_a_claim():
    from ora_grounding.text import restates_question

    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    assert not restates_question("Arthur's Magazine.", question)
    assert not restates_question("Arthur's Magazine was started before First for Women.", question)
    assert restates_question("The question asks which magazine was started first, Arthur's Magazine or First "
                             "for Women.", question)
    assert not restates_question("The user wants a figure the evidence lacks: 42 tonnes.", question)


def test_conversation_memory_is_not_evidence(verifier):
    """An answer must not be grounded in the model's own earlier answer (circular)."""
    answer = "The tower was painted gold by Ana Ruiz in 1920."
    memory = Chunk(id="m1", text=answer, provenance=Provenance(collection="conversation", source="turn-1",
                                                               score=0.99, stream="conversation"))
    only_memory = verifier.verify(answer, EvidencePackage(chunks=[memory]), "", ctx())
    assert only_memory.status is VerdictStatus.FAIL
    assert "conversation" in only_memory.reasons[0] and only_memory.reasons[0].startswith("no evidence")
    mixed = verifier.verify(answer, EvidencePackage(chunks=[memory, chunk(0, EVIDENCE[0])]), "", ctx())
    assert mixed.status is VerdictStatus.FAIL and mixed.data["evidence_set_aside"]["chunks"] == 1
    assert "evidence set aside: 1 chunk(s) from stream(s) conversation" in mixed.raw_output
    allowed = SimpleNamespace(config=SimpleNamespace(verification=SimpleNamespace(threshold=0.5),
                                                     plugins={"grounding": {"exclude_streams": []}}))
    assert verifier.verify(answer, EvidencePackage(chunks=[memory]), "", allowed).status is VerdictStatus.PASS
