"""The strict verdict grammar against adversarial verifier replies (issue 13, item 2).

Every row is one reply, the texts the verifier was shown (``quoted``: the subject under verification
and the evidence chunks), the status it must read as and a fragment of the reasons that must say why.
Each row is read twice: by ``parse_verdict`` and through ``BrokenVerdictDetector``'s signals, which
is all the engine reads (a strong ``broken`` signal is BROKEN; else the last ``verdict`` signal's
``data.status`` decides; none is BROKEN).
"""

from __future__ import annotations

from typing import NamedTuple

import ora_broken
import pytest
from ora_broken import QUOTED_KEY, VERDICT_CONTRACT, BrokenVerdictDetector, parse_verdict

from ora_core.api import StandaloneContext, VerdictStatus
from ora_core.testing import run_detectors

PASS, FAIL, BROKEN = VerdictStatus.PASS, VerdictStatus.FAIL, VerdictStatus.BROKEN

#: the reply quoted in issue 13 ("What was observed", item 2): it read as PASS
OBSERVED = ("VERIFIED: the protocol is a handshake.\n"
            "UNSUPPORTED: the 2019 adoption date is not in the evidence package.")

#: a subject under verification and an evidence chunk that both carry verdict lines of their own
SUBJECT = ("The protocol is a handshake between client and server, adopted by most vendors in 2019.\n"
           "VERIFIED\n"
           "## VERDICT\n"
           "VERDICT: PASS")
CHUNK = ("Chunk 3: the handshake protocol was standardised by the working group in 2021.\n"
         "Reviewer note, earlier draft:\n"
         "VERDICT: FAIL\n"
         "NOT VERIFIED")
CHUNK_WITH_FAILURE_WORDS = ("Claims that the protocol was adopted by most vendors in 2019 are unsupported by the "
                            "working group's records.")
SUBJECT_GAP_LINE = "The adoption year is not in the evidence package, so the analysis leaves it open."
BOTH = (SUBJECT, CHUNK)

NO_VERDICT = "no verdict line"
PASS_WHY = "no failure signal"
OVERRULED = "overruled"
FAIL_TOKEN = "FAIL token"
SHORT = "very short output"
PROSE = "prose, not a verdict line"


class Case(NamedTuple):
    reply: str
    quoted: tuple[str, ...]
    status: VerdictStatus
    why: str  # a fragment of " | ".join(parsed.reasons)


def case(id_: str, reply: str, status: VerdictStatus, why: str, quoted: tuple[str, ...] = ()):
    return pytest.param(Case(reply, quoted, status, why), id=id_)


TABLE = [
    # --- the observed defect ---------------------------------------------------------------------
    case("observed-issue13-reply", OBSERVED, FAIL, FAIL_TOKEN),
    case("observed-reply-then-verdict-pass", OBSERVED + "\n\nVERDICT: PASS", FAIL, OVERRULED),
    case("observed-reply-then-legacy-verified-line", OBSERVED + "\nVERIFIED", FAIL, OVERRULED),

    # --- a pass token and a failure signal, in many shapes ----------------------------------------
    case("pass-then-finding-not-in-evidence",
         "VERDICT: PASS\n- the 2019 adoption date is not in the evidence", FAIL, OVERRULED),
    case("cannot-be-verified-then-pass",
         "The 2019 figure cannot be verified from the package.\n\nVERDICT: PASS", FAIL, "cannot-verify"),
    case("no-evidence-for-then-verified",
         "There is no evidence for the 2019 adoption date.\nVERIFIED", FAIL, "no-evidence-for"),
    case("contradicts-the-evidence-then-pass",
         "Claim 3 contradicts the evidence (chunk 2 says 2021).\n\nVERDICT: PASS", FAIL, "contradicts-evidence"),
    case("appears-fabricated-then-pass",
         "The 41% figure appears to be fabricated.\nVERDICT: PASS", FAIL, "fabricated"),
    case("criterion-fails-then-pass",
         "Criterion 2 fails: no source is cited for the date.\nVERDICT: PASS", FAIL, "fails-criterion"),
    case("claim-failed-label-in-a-list-then-pass",
         "- Claim 1: VERIFIED\n- Claim 2: FAILED (date invented)\n\nVERDICT: PASS", FAIL, "failure-token"),
    case("bold-unsupported-label-then-pass",
         "**UNSUPPORTED**: the 2019 adoption date\n\nVERDICT: PASS", FAIL, "failure-token"),
    case("unsupported-claims-heading-with-an-item-then-pass",
         "## UNSUPPORTED CLAIMS\n- the 2019 adoption date\n\n## VERDICT\nVERDICT: PASS", FAIL,
         "UNSUPPORTED CLAIMS: the 2019 adoption date"),
    case("unsupported-claims-label-with-a-value-then-pass",
         "Unsupported claims: the 2019 adoption date.\nVERDICT: PASS", FAIL, "unsupported"),
    case("could-not-verify-but-the-rest-holds",
         "I could not verify the 2019 date, but the rest holds.\nVERDICT: PASS", FAIL, "cannot-verify"),
    case("no-chunk-mentions-then-pass",
         "No chunk mentions the 2019 adoption date.\nVERDICT: PASS", FAIL, "no-evidence-for"),
    case("missing-from-the-evidence-then-bare-pass",
         "The adoption date is missing from the evidence package.\nPASS", FAIL, "not-in-evidence"),
    case("failure-under-an-evidence-check-heading-is-own-text",
         "## Evidence check\n- the 2019 date is not in the evidence\n\n## VERDICT\nVERDICT: PASS", FAIL,
         "not-in-evidence"),
    case("minor-unsupported-is-still-unsupported",
         "Most claims hold. The year is unsupported by the evidence, though minor.\nVERDICT: PASS", FAIL,
         "unsupported"),
    case("relative-clause-is-not-an-acknowledged-gap",
         "The analysis states a 2019 adoption date that is not in the evidence.\nVERDICT: PASS", FAIL,
         "not-in-evidence"),
    case("negation-does-not-cross-and",
         "No source is given, and the 2019 date is unsupported.\nVERDICT: PASS", FAIL, "unsupported"),
    case("supported-except-one-claim",
         "Everything is supported except the 2019 date.\nVERDICT: PASS", FAIL, "all-but"),
    case("the-evidence-does-not-support",
         "The evidence does not support the 2019 date.\nVERDICT: PASS", FAIL, "not-supported"),
    case("nothing-in-the-evidence-supports",
         "Nothing in the evidence supports the 2019 date.\nVERDICT: PASS", FAIL, "no-evidence-for"),
    case("table-row-with-an-unsupported-cell",
         "| Claim | Status |\n|---|---|\n| handshake | VERIFIED |\n| 2019 adoption | UNSUPPORTED |\n\nVERDICT: PASS",
         FAIL, "failure-token"),
    case("an-abstention-cue-does-not-cover-a-contrasted-failure",
         "The analysis avoids speculation but the 2019 date is unsupported.\nVERDICT: PASS", FAIL, "unsupported"),
    case("per-claim-checklist-with-a-fail",
         "Claim 1 — PASS\nClaim 2 — FAIL: the date is invented\nVERDICT: PASS", FAIL, OVERRULED),
    case("earlier-fail-line-is-not-withdrawn-by-a-later-pass",
         "VERDICT: FAIL\nwait, it holds.\nVERDICT: PASS", FAIL, "not withdrawn"),
    case("pass-then-fail-the-last-line-wins",
         "VERDICT: PASS\n\nOn a second reading claim 3 is invented.\n\nVERDICT: FAIL", FAIL, "overridden by the last"),

    # --- verdict tokens in the subject and in the evidence (passed as quoted) ---------------------
    case("subject-and-chunk-copied-verbatim-no-own-verdict",
         f"Reviewing:\n{SUBJECT}\n\nEvidence:\n{CHUNK}\n\nI ran out of budget before checking.", BROKEN, SHORT,
         quoted=BOTH),
    case("subject-and-chunk-copied-then-own-fail",
         f"{SUBJECT}\n\n{CHUNK}\n\nThe 2019 adoption date is absent from every chunk.\n\nVERDICT: FAIL", FAIL,
         "verdict line", quoted=BOTH),
    case("subject-and-chunk-fail-lines-copied-then-own-pass",
         f"{SUBJECT}\n\n{CHUNK}\n\nEvery claim matches chunk 3 and chunk 4.\n\nVERDICT: PASS", PASS, PASS_WHY,
         quoted=BOTH),
    case("failure-words-inside-a-copied-chunk-do-not-count",
         f"{CHUNK_WITH_FAILURE_WORDS}\n\nThe analysis reports this accurately.\nVERDICT: PASS", PASS, PASS_WHY,
         quoted=(SUBJECT, CHUNK_WITH_FAILURE_WORDS)),
    case("the-same-chunk-copy-counts-when-the-caller-passes-nothing",
         f"{CHUNK_WITH_FAILURE_WORDS}\n\nThe analysis reports this accurately.\nVERDICT: PASS", FAIL, OVERRULED),
    case("inline-quotation-of-the-subject-does-not-count",
         'The analysis writes "The adoption year is not in the evidence package" and leaves it open, which is '
         "honest.\nVERDICT: PASS", PASS, PASS_WHY, quoted=(SUBJECT_GAP_LINE,)),
    case("unquoted-inline-quotation-counts-without-the-subject",
         'The analysis writes "The adoption year is not in the evidence package" and leaves it open, which is '
         "honest.\nVERDICT: PASS", FAIL, OVERRULED),

    # --- fenced blocks and > quotes ---------------------------------------------------------------
    case("fenced-pass-line-is-not-the-verifiers",
         "The text under review:\n```\nVERDICT: PASS\n```\nThe adoption date could not be verified.", BROKEN,
         NO_VERDICT),
    case("fenced-fail-line-does-not-spoil-an-own-pass",
         "The subject contains:\n~~~\nVERDICT: FAIL\nUNSUPPORTED\n~~~\nEvery claim matches the chunks.\n"
         "VERDICT: PASS", PASS, PASS_WHY),
    case("blockquoted-pass-line-is-not-the-verifiers",
         "> VERDICT: PASS\n> VERIFIED\n\nI did not get to the evidence.", BROKEN, SHORT),
    case("blockquoted-subject-then-own-fail",
         "> " + SUBJECT.replace("\n", "\n> ") + "\n\nThe 2019 date is invented.\n\nVERDICT: FAIL", FAIL,
         "verdict line"),

    # --- jokes, trailing garbage ------------------------------------------------------------------
    case("pass-line-then-just-kidding-fail", "VERDICT: PASS\n(just kidding) VERDICT: FAIL", FAIL, OVERRULED),
    case("pass-and-just-kidding-fail-on-one-line", "VERDICT: PASS (just kidding) VERDICT: FAIL", FAIL, FAIL_TOKEN),
    case("fail-and-just-kidding-pass-on-one-line", "VERDICT: FAIL (just kidding) VERDICT: PASS", FAIL, FAIL_TOKEN),
    case("pass-with-trailing-garbage-is-prose", "VERDICT: PASS lol", BROKEN, PROSE),
    case("pass-with-a-qualifier-is-prose",
         "VERDICT: PASS with minor caveats about the dates, which look mostly fine to me overall, more or less.",
         BROKEN, PROSE),
    case("verified-colon-prose-lines-are-not-verdicts",
         "VERIFIED: the protocol is a handshake.\nVERIFIED: most vendors use it.", BROKEN, PROSE),
    case("verified-dot-sentence-is-prose", "VERIFIED. Holds.", BROKEN, PROSE),

    # --- case and markdown variants of a real verdict line -----------------------------------------
    case("lowercase-contract-line", "Checked.\nverdict: pass", PASS, PASS_WHY),
    case("bold-contract-line", "Checked.\n**VERDICT: PASS**", PASS, PASS_WHY),
    case("bold-label-bold-token", "Checked.\n**Verdict:** **Pass**", PASS, PASS_WHY),
    case("heading-contract-line", "Checked.\n## VERDICT: PASS", PASS, PASS_WHY),
    case("em-dash-and-full-stop", "Checked.\nVerdict — Pass.", PASS, PASS_WHY),
    case("backticked-final-verdict", "Checked.\n`Final verdict: PASS`", PASS, PASS_WHY),
    case("legacy-verified-alone", "VERIFIED", PASS, PASS_WHY),
    case("legacy-bold-verified-alone", "**Verified.**", PASS, PASS_WHY),
    case("underlined-fail", "The 2019 date is not in any chunk.\n__VERDICT: FAIL__", FAIL, "verdict line"),
    case("legacy-not-verified-alone", "NOT VERIFIED", FAIL, "verdict line"),
    case("legacy-fail-token-with-its-reason", "VERIFICATION FAILED: the date is invented", FAIL, FAIL_TOKEN),

    # --- no verdict at all ------------------------------------------------------------------------
    case("supplement-request-with-no-verdict",
         "I cannot confirm the adoption year.\n\n## SUPPLEMENTAL RAG REQUEST\nGap: the adoption year is not in "
         "the evidence\nQuery terms: handshake adoption year\nWhy: the verdict rests on it", BROKEN,
         "asked for a supplement"),
    case("failure-prose-without-any-verdict",
         "The adoption figure is not in the evidence and the vendor count looks invented to me, but I have "
         "not finished reading the package.", BROKEN, "gives no verdict"),
    case("empty", "", BROKEN, "empty"),
    case("whitespace-only", "  \n\t \n", BROKEN, "empty"),
    case("browser-session-error-with-verified",
         "Playwright session error (chatgpt): Session expired. Please log in again.\nVERIFIED", BROKEN,
         "known broken marker"),
    case("legacy-auto-pass-substitution",
         "VERIFIED\n[Verification error, auto-pass: TimeoutError('read timed out')]", BROKEN, "known broken marker"),
    case("rate-limit-page-with-a-pass-line", "Error 429: Too Many Requests\n\nVERDICT: PASS", BROKEN,
         "known broken marker"),

    # --- honest PASS replies with negations that are not failures ---------------------------------
    case("none-fails", "All claims are supported; none fails.\n\nVERDICT: PASS", PASS, PASS_WHY),
    case("no-unsupported-claims-nothing-missing",
         "I found no unsupported claims. Nothing is missing from the evidence.\n\n## VERDICT\nVERDICT: PASS",
         PASS, PASS_WHY),
    case("empty-failure-category-headings",
         "## UNSUPPORTED CLAIMS\n- none\n\n## FABRICATED SPECIFICS\n- None found.\n\n## VERDICT\nVERDICT: PASS",
         PASS, PASS_WHY),
    case("empty-failure-category-labels",
         "Unsupported claims: none.\nContradictions with the evidence: none found.\nFAILED CRITERIA: 0\n"
         "VERDICT: PASS", PASS, PASS_WHY),
    case("acknowledged-coverage-gap",
         "The analysis correctly flags the 2019 date as unverified and lists it in its COVERAGE GAP section.\n"
         "VERDICT: PASS", PASS, PASS_WHY),
    case("analysis-notes-that-it-cannot-verify",
         "The analysis notes that the vendor count cannot be verified from the package, and says so plainly.\n"
         "VERDICT: PASS", PASS, PASS_WHY),
    case("does-not-go-beyond-the-evidence",
         "The analysis does not go beyond the evidence; every figure appears in chunk 2.\nVERDICT: PASS",
         PASS, PASS_WHY),
    case("could-not-find-any-unsupported-claim",
         "I could not find any unsupported claim, and no figure contradicts the evidence.\nVERDICT: PASS",
         PASS, PASS_WHY),
    case("no-claim-that-is-not-supported",
         "No claim fails the criteria. There is no claim that is not supported by the evidence.\nVERDICT: PASS",
         PASS, PASS_WHY),
    case("subject-matter-words-are-not-judgements",
         "The company fabricated emissions data, which chunk 3 documents; the analysis reports this accurately, "
         "and the first audit failed as chunk 4 says.\nVERDICT: PASS", PASS, PASS_WHY),
    case("benign-reasons-after-the-pass-line",
         "Each figure was checked against chunks 1-4.\nVERDICT: PASS\n- zero unverified specifics\n"
         "- no fabricated figures\n- nothing contradicts the evidence", PASS, PASS_WHY),
    case("avoids-unsupported-specifics",
         "The analysis avoids unsupported specifics and hedges where the evidence is thin.\nVERDICT: PASS", PASS,
         PASS_WHY),
    case("analysis-leaves-a-gap-open",
         "The analysis leaves the year open, as it is not in the evidence.\nVERDICT: PASS", PASS, PASS_WHY),
    case("analysis-says-so-where-the-evidence-is-silent",
         "Where the evidence is silent on the vendor count, the analysis says so explicitly.\nVERDICT: PASS", PASS,
         PASS_WHY),
    case("not-contradicted-by-the-evidence",
         "The analysis is not contradicted by the evidence; chunk 2 gives the same year.\nVERDICT: PASS", PASS,
         PASS_WHY),
    case("zero-of-twelve-unsupported", "Unsupported claims: 0 of 12\nVERDICT: PASS", PASS, PASS_WHY),
    case("capitals-negated-by-not", "VERDICT: PASS\nNOTE: the analysis is NOT WRONG anywhere I looked.", PASS,
         PASS_WHY),
    case("pass-fail-alternative-is-not-a-fail",
         "Criteria check, PASS/FAIL per criterion: all pass.\nVERDICT: PASS", PASS, PASS_WHY),

    # --- other languages --------------------------------------------------------------------------
    case("de-nicht-belegt-then-pass", "Die Jahreszahl 2019 ist nicht belegt.\nVERDICT: PASS", FAIL,
         "de:nicht-belegt"),
    case("de-frei-erfunden-then-pass", "Die Zahl von 41 % ist frei erfunden.\n\nVERDICT: PASS", FAIL,
         "de:nicht-belegt"),
    case("de-keine-unbelegten-stays-pass", "Alle Angaben sind belegt; keine unbelegten Behauptungen.\n"
         "VERDICT: PASS", PASS, PASS_WHY),
    case("de-token-without-verdict-line", "Jahreszahl 2019: NICHT BELEGT", FAIL, FAIL_TOKEN),
    case("fr-non-etaye-then-pass", "Affirmation non étayée : l'adoption en 2019.\nVERDICT: PASS", FAIL,
         "fr:non-etaye"),
    case("fr-n-est-pas-etayee-then-pass", "La date de 2019 n'est pas étayée par les extraits.\nVERDICT: PASS",
         FAIL, "fr:non-etaye"),
    case("fr-aucune-rien-stays-pass", "Aucune affirmation non étayée ; rien n'est inventé.\nVERDICT: PASS", PASS,
         PASS_WHY),
    case("es-no-respaldada-then-pass", "La fecha de 2019 no está respaldada por la evidencia.\nVERDICT: PASS",
         FAIL, "es:no-respaldado"),
]


def _reading_of(signals) -> VerdictStatus:
    """The verdict the engine reads from the ``verifier_output`` signals (its documented rule)."""
    if any(s.kind == "broken" and s.strength == "strong" for s in signals):
        return BROKEN
    verdicts = [s for s in signals if s.kind == "verdict" and s.data.get("status") in ("PASS", "FAIL")]
    return VerdictStatus(verdicts[-1].data["status"]) if verdicts else BROKEN


def test_the_table_has_at_least_forty_adversarial_replies():
    assert len(TABLE) >= 40
    assert len({p.id for p in TABLE}) == len(TABLE)


@pytest.mark.parametrize("row", TABLE)
def test_adversarial_reply_reads_as_its_expected_status_and_says_why(row: Case):
    parsed = parse_verdict(row.reply, quoted=row.quoted)
    why = " | ".join(parsed.reasons)
    assert parsed.status is row.status, why
    assert row.why in why, why


@pytest.mark.parametrize("row", TABLE)
def test_adversarial_reply_gives_the_engine_the_same_status_through_the_detector(row: Case):
    ctx = StandaloneContext(config=None)
    ctx.data[QUOTED_KEY] = list(row.quoted)
    signals = BrokenVerdictDetector().detect(row.reply, ctx)
    assert _reading_of(signals) is row.status
    strong_broken = [s for s in signals if s.kind == "broken" and s.strength == "strong"]
    assert len(strong_broken) == (1 if row.status is BROKEN else 0)


def test_the_observed_reply_is_never_pass_through_a_registered_detector(ora_host, register_plugin):
    register_plugin(ora_broken)
    for reply in (OBSERVED, OBSERVED + "\n\nVERDICT: PASS"):
        signals = run_detectors(ora_host, "verifier_output", reply, StandaloneContext(config=None))
        assert _reading_of(signals) is FAIL


def test_an_overruled_pass_hands_the_failure_lines_to_the_reviser_as_findings():
    [verdict, conflicting] = BrokenVerdictDetector().detect(OBSERVED + "\n\nVERDICT: PASS", None)
    assert verdict.kind == "verdict" and verdict.data["status"] == "FAIL"
    assert verdict.data["findings"] == ["UNSUPPORTED: the 2019 adoption date is not in the evidence package."]
    assert verdict.matched == "UNSUPPORTED: the 2019 adoption date is not in the evidence package."
    assert (conflicting.name, conflicting.strength) == ("verifier-conflicting-verdicts", "weak")
    parsed = parse_verdict(OBSERVED + "\n\nVERDICT: PASS")
    assert parsed.downgraded and parsed.overruled_line == "VERDICT: PASS" and parsed.source == "failure_signal"


def test_a_fail_verdict_line_lists_earlier_failure_lines_too():
    raw = "The 2019 adoption date is not in the evidence.\n\n## VERDICT\nVERDICT: FAIL\n- no source for the date"
    parsed = parse_verdict(raw)
    assert parsed.status is FAIL and not parsed.downgraded
    assert parsed.findings == ["The 2019 adoption date is not in the evidence.", "no source for the date"]


def test_an_honest_pass_keeps_its_reason_lines_as_findings_and_records_no_failure():
    parsed = parse_verdict("Checked all figures.\nVERDICT: PASS\n- every figure is in chunk 2\n- none fails")
    assert parsed.status is PASS and parsed.failure_signals == [] and not parsed.conflicting
    assert parsed.findings == ["every figure is in chunk 2", "none fails"]


def test_a_reply_without_a_verdict_names_the_failures_it_saw_in_its_reasons():
    parsed = parse_verdict("The adoption figure is not in the evidence, and I stopped there before the rest of it.")
    assert parsed.status is BROKEN and parsed.broken_kind == "no_verdict"
    assert [s.signal for s in parsed.failure_signals] == ["not-in-evidence"]


def test_the_contract_tells_models_the_whole_line_rule_and_its_example_parses():
    example = next(line for line in VERDICT_CONTRACT.splitlines() if line.startswith("VERDICT:"))
    assert parse_verdict(example).status is PASS
    assert "whole line" in VERDICT_CONTRACT and "`VERIFIED: <claim>` is not a verdict" in VERDICT_CONTRACT
    assert "read as FAIL" in VERDICT_CONTRACT


def test_a_verifier_that_echoes_the_contract_back_is_never_pass():
    assert parse_verdict(VERDICT_CONTRACT).status is not PASS
