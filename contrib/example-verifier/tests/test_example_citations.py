"""The example verifier: invented citations FAIL, real ones PASS, unreadable evidence raises."""

from __future__ import annotations

import ora_example_verifier
import pytest

from ora_core.api import Chunk, Provenance, VerdictStatus, VerifierError


def chunk(source: str, text: str = "text") -> Chunk:
    return Chunk(id=source, text=text, provenance=Provenance(collection="vault", source=source))


@pytest.fixture
def verifier(ora_host, register_plugin):
    register_plugin(ora_example_verifier, name="example-citations")
    return ora_host.get("verifier", "example-citations")


def test_citations_of_sources_in_the_evidence_pass(verifier) -> None:
    verdict = verifier.verify("Gear 4 runs two analysts [source: gears.md].", [chunk("gears.md")], "", None)
    assert verdict.status is VerdictStatus.PASS
    assert verdict.reasons == ["all 1 cited source(s) are in the evidence"]


def test_an_invented_citation_fails_and_is_named(verifier) -> None:
    subject = "See [source: gears.md] and [source: apple-10q-2024.pdf]."
    verdict = verifier.verify(subject, [chunk("gears.md")], "", None)
    assert verdict.status is VerdictStatus.FAIL
    assert verdict.unsupported_claims == ["apple-10q-2024.pdf"]
    assert "cites 'apple-10q-2024.pdf', which is not in the evidence" in verdict.raw_output


def test_an_answer_without_citations_passes_with_that_reason(verifier) -> None:
    verdict = verifier.verify("No sources needed.", [], "", None)
    assert (verdict.status, verdict.reasons) == (VerdictStatus.PASS, ["no citations to check"])


def test_unreadable_evidence_raises_rather_than_passing(verifier) -> None:
    with pytest.raises(VerifierError, match="cannot read citations' evidence from a int"):
        verifier.verify("[source: x]", 42, "", None)
    with pytest.raises(VerifierError, match="is not a Chunk with provenance"):
        verifier.verify("[source: x]", ["plain text"], "", None)
