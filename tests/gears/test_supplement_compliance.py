"""Seed 000 §5.3: the Supplemental RAG protocol authorises a non-confabulation path but does not
guarantee a model takes it. The three named non-compliance patterns are detected and counted in
``step-health.json`` and ``contingencies.jsonl`` on disk (seed 000 #11-style: a finding that lives
only in memory is a silent failure):

- the confident confabulator: no request, yet specifics the evidence did not supply;
- the always-requester: a request on (nearly) every step of the turn;
- the cap-forced confabulator: the cap reached, then specifics instead of a COVERAGE GAP.
"""

from __future__ import annotations

from ora_core import hookimpl
from ora_core.kernel.models import Signal

STEP = "gear2-analyst"
VERIFY = "gear2-cycle1-verify"
VAULT = [{"text": "Harness vendors bundle models with tooling; customers shift budgets to them.",
          "source": "notes/harness.md"}]
MARKET = [{"text": "In 2019 the harness market was worth 4.7 trillion dollars, 83% of it held by three vendors.",
           "source": "notes/market.md"}]
CONFAB = ("In 2019 the harness market was worth $4.7 trillion, and 83% of it sat with three vendors, "
          "according to the 14 March report.")
MODEL = {"verification": {"verifier": "model", "final_verifier": "model"},
         "retrieval": {"streams": {"conversation": False, "relationship": False}}}
RESULT = r"SUPPLEMENTAL RAG RESULT \(request"


def _request(gap: str, query: str) -> str:
    return f"## SUPPLEMENTAL RAG REQUEST\nGap: {gap}\nQuery terms: {query}\nWhy: the answer depends on it"


def _gear2(gears, rules, docs, plugins=(), **config):
    retriever = gears.Retriever(docs)
    return gears.run(rules=rules, mode="standard", plugins=[gears.Plugin(retrievers=[retriever]), *plugins],
                     **{**MODEL, **config})


def _contingency(trace, name):
    found = [c for c in trace.jsonl("contingencies.jsonl") if c["name"] == name]
    assert found, f"no contingency {name!r} in {trace.contingencies()}"
    return found[0]


# --- the confident confabulator ---------------------------------------------------------------------

def test_the_confident_confabulator_is_detected_and_counted_on_disk(gears):
    rules = gears.rules(gear2=gears.reply("CONFIDENT", extra=CONFAB))
    result, trace, _ = _gear2(gears, rules, VAULT)
    assert trace.jsonl("supplemental-rag.jsonl") == []  # it never asked
    health = trace.step_health(STEP)
    assert health["noncompliance"] == {"confident-confabulator": 1} and health["supplements"] == 0
    record = _contingency(trace, f"{STEP}-confident-confabulator")
    assert record["severity"] == "warning" and record["data"]["pattern"] == "confident-confabulator"
    missing = trace.step(STEP)["output"]["unsupported_specifics"]
    assert {"2019", "$4.7", "83%", "14 March"} <= set(missing)
    assert record["data"]["unsupported_specifics"] == missing
    assert f"{STEP}-confident-confabulator" in result.contingencies  # `ora run` prints these


def test_the_same_specifics_backed_by_the_evidence_are_not_confabulation(gears):
    rules = gears.rules(gear2=gears.reply("GROUNDED", extra=CONFAB.replace(", according to the 14 March report", "")))
    result, trace, _ = _gear2(gears, rules, MARKET)
    assert trace.step_health(STEP)["noncompliance"] == {}
    assert "unsupported_specifics" not in trace.step(STEP)["output"]
    assert not [c for c in trace.contingencies() if "confabulator" in c]


class NamesChecker:
    """A third-party evidence-checking detector (like the grounding plugin's): a name the
    evidence lacks, which the grounding plugin's check does not look for."""

    name = "names-checker"
    kind = "unsupported_specifics"
    layer = "model_output"
    assumes = frozenset({"model_generated", "evidence_available"})

    def detect(self, text, ctx):
        evidence = " ".join(c.text for c in ctx.data["evidence"].chunks)
        if "Dr. Alma Verhoeven" in text and "Verhoeven" not in evidence:
            return [Signal(detector=self.name, kind=self.kind, name="unsupported-name", matched="Dr. Alma Verhoeven",
                           data={"evidence_checked": True})]
        return []


class NamesPlugin:
    @hookimpl
    def ora_register_detectors(self, register):
        register(NamesChecker())


def test_an_evidence_checking_detectors_signal_counts_too(gears):
    rules = gears.rules(gear2=gears.reply("NAMED", extra="Dr. Alma Verhoeven designed the first harness."))
    result, trace, _ = _gear2(gears, rules, VAULT, plugins=[NamesPlugin()])
    assert trace.step_health(STEP)["noncompliance"] == {"confident-confabulator": 1}
    assert "Dr. Alma Verhoeven" in trace.step(STEP)["output"]["unsupported_specifics"]  # the third party's finding


# --- the cap-forced confabulator --------------------------------------------------------------------

def _cap_rules(gears, final: str):
    return gears.rules(first=[gears.role("SUPPLEMENT CAP REACHED", final),
                              gears.role(r"ROLE: ANALYST \(gear 2\)",
                                         _request("no figure for the harness market size", "harness market size"))])


def test_the_cap_forced_confabulator_is_detected_after_two_unresolved_supplements(gears):
    result, trace, _ = _gear2(gears, _cap_rules(gears, gears.reply("CAP-FORCED", extra=CONFAB)), [])
    lines = trace.jsonl("supplemental-rag.jsonl")
    assert [(line["step"], line["n"], line["resolved"]) for line in lines] == [(STEP, 1, False), (STEP, 2, False)]
    health = trace.step_health(STEP)
    assert health["supplements"] == 2 and health["noncompliance"] == {"cap-forced-confabulator": 1}
    record = _contingency(trace, f"{STEP}-cap-forced-confabulator")
    assert "$4.7" in record["data"]["unsupported_specifics"]
    assert "confident-confabulator" not in health["noncompliance"]  # it did ask


def test_a_coverage_gap_after_the_cap_is_compliance(gears):
    gap = gears.reply("CAP-HONEST", extra="## COVERAGE GAP\nThe package holds no figure for the market size.")
    result, trace, _ = _gear2(gears, _cap_rules(gears, gap), [])
    assert trace.step_health(STEP)["supplements"] == 2
    assert trace.step_health(STEP)["noncompliance"] == {}
    assert not [c for c in trace.contingencies() if "confabulator" in c]


# --- the always-requester ---------------------------------------------------------------------------

def _asking_rules(gears, *, verifier_asks: bool, analyst_query: str = "harness consortium funding"):
    rules = [
        gears.role(rf"(?s)ANALYSIS UNDER REVIEW.*{RESULT}", gears.PASS, on="user"),
        gears.role(RESULT, gears.reply("ANSWERED-AFTER-SUPPLEMENT"), on="user"),
        gears.role("ROLE: VERIFIER", _request("who audits the vendors", "vendor audit") if verifier_asks
                   else gears.PASS),
        gears.role(r"ROLE: ANALYST \(gear 2\)", _request("the package lacks it", analyst_query)),
    ]
    return gears.rules(first=rules)


def test_the_always_requester_is_counted_for_the_turn(gears):
    docs = [*VAULT, {"text": "The harness consortium is funded by three cloud vendors; an audit firm audits "
                             "each vendor.", "source": "notes/consortium.md"}]
    result, trace, _ = _gear2(gears, _asking_rules(gears, verifier_asks=True), docs)
    assert result.status != "halted" and result.verdicts == {VERIFY: "PASS"}
    lines = trace.jsonl("supplemental-rag.jsonl")
    assert [line["step"] for line in lines] == [STEP, VERIFY]
    final = trace.step_health("final-output")
    assert final["noncompliance"] == {"always-requester": 2}
    record = _contingency(trace, "turn-always-requester")
    assert record["step"] == "final-output" and record["severity"] == "warning"
    assert (record["data"]["steps"], record["data"]["requesting_steps"], record["data"]["rate"]) == (2, 2, 1.0)
    assert trace.step("final-output")["output"]["always_requester"]["step_names"] == [STEP, VERIFY]


def test_one_request_in_a_turn_is_not_the_always_requester(gears):
    result, trace, _ = _gear2(gears, _asking_rules(gears, verifier_asks=False), VAULT)
    assert len(trace.jsonl("supplemental-rag.jsonl")) == 1
    assert trace.step_health("final-output")["noncompliance"] == {}
    assert "turn-always-requester" not in trace.contingencies()


def test_a_request_for_what_the_package_already_holds_is_counted_unneeded(gears):
    result, trace, _ = _gear2(gears, _asking_rules(gears, verifier_asks=False,
                                                    analyst_query="harness vendors tooling"), VAULT)
    (line,) = trace.jsonl("supplemental-rag.jsonl")
    assert line["package_had_terms"] is True
    assert trace.step_health(STEP)["noncompliance"] == {"unneeded-request": 1}
    assert _contingency(trace, f"{STEP}-unneeded-request")["severity"] == "info"
