"""Prompt profiles: every text the engine adds to a model's prompt, in two wordings side by side.

A backend's ``prompt_profile`` (``[backends.<name>] prompt_profile = "full" | "compact"``) decides
the wording of every call that backend serves: the profile of the backend planned for a step's
role picks that step's texts (roles may sit on different backends; a fallback backend receives
the messages as built for the planned one).

- ``full``: the wording the engine always had (the default of the model; any capable model).
- ``compact``: the same rules in fewer words, for a small model on a CPU, where every prompt token
  costs time (the bundled SmolLM2-135M evaluates ~300 prompt tokens/s on 2 cores). Each sentence
  of a full text is kept only if it carries an instruction; explanations are dropped, and so are
  repeated words. Compact also fits the turn to the model's budget (``CompactFit``): fewer, shorter
  evidence chunks, a ``max_tokens`` per step kind, and a verifier's findings told to a reviser
  without their figures (``gears.prompts._findings``), recorded as budget signal 4 (hardware
  constraint) in the context-assembly step with the numbers (``ora_core.engine.context``). The mode
  files' guidance sections are the mode's own words and go in unchanged under either profile.

Compact never removes a step: verification, the revision after a FAIL and the Supplemental RAG
path run exactly as under ``full``.

Every wording (``Wording``) names the rules it carries (``RULES``, by id); each rule lists the
words any wording of it must contain (``Rule.marks``). ``tests/test_prompt_profile.py`` pins that
both wordings of every part carry the same rules, that every mark is in both, and that the
protocol's machine-read tokens (``## SUPPLEMENTAL RAG REQUEST``, ``Gap:``, ``Query terms:``,
``## COVERAGE GAP``, ``CONFIDENCE:``) survive. The ``full`` texts are the ones the engine's modules
export under their old names (``prompts.ANTI_CONFABULATION_DIRECTIVE``,
``reliability.CONFIDENCE_INSTRUCTION``, ``supplement.protocol_text`` ...), unchanged.
"""

from __future__ import annotations

import string
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ora_core.kernel.config import OraConfig

ProfileName = Literal["full", "compact"]
PROFILES: tuple[ProfileName, ...] = ("full", "compact")


class Rule(BaseModel):
    """One instruction a prompt carries, and the words every wording of it must contain."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    says: str
    marks: tuple[str, ...]  # case-insensitive substrings, after the wording's fields are filled in


class Wording(BaseModel):
    """One part of a prompt in both profiles. ``{name}`` fields are filled in by ``text``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    part: str
    rules: tuple[str, ...]
    full: str
    compact: str

    def template(self, profile: ProfileName) -> str:
        return self.compact if profile == "compact" else self.full

    def text(self, profile: ProfileName = "full", **values: Any) -> str:
        template = self.template(profile)
        return template.format(**values) if values else template

    def fields(self) -> set[str]:
        return {f for text in (self.full, self.compact) for _, f, _, _ in string.Formatter().parse(text) if f}


# --- the rules ----------------------------------------------------------------------------------------

_RULES = (
    # the universal anti-confabulation directive (seed 000, failure #5)
    Rule(id="directive.no-invention", says="never invent specific facts the material does not let you verify",
         marks=("## UNIVERSAL ANTI-CONFABULATION DIRECTIVE", "never invent", "cannot verify", "material")),
    Rule(id="directive.high-risk-class", says="the high-risk class of specifics",
         marks=("names", "dates", "times", "numbers", "statistics", "quotations", "citations", "urls", "state")),
    Rule(id="directive.clock-unknown", says="the model does not know the current date and time",
         marks=("current date and time", "do not know")),
    Rule(id="directive.name-the-gap", says="when the material lacks it, name the gap", marks=("name the gap",)),
    Rule(id="directive.honest-unknown", says="an honest 'I don't know' beats a confident wrong answer",
         marks=("i don't know", "confident wrong answer")),
    # Phase A's assumptions (seed 000, failure #10)
    Rule(id="assumptions.not-user-stated", says="Phase A inferred these; the user did not state them",
         marks=("phase a inferred", "the user did not state them")),
    Rule(id="assumptions.name-where-used", says="name each assumption wherever the answer depends on it",
         marks=("assumption", "name", "where", "depends on it")),
    # the confidence line (reliability layer)
    Rule(id="confidence.line", says="end with one CONFIDENCE line between 0.00 and 1.00",
         marks=("## CONFIDENCE", "line", "`CONFIDENCE: 0.00`", "1.00")),
    Rule(id="confidence.meaning", says="the confidence is how far the package supports the reply",
         marks=("how far the package supports", "every claim")),
    # quotations (the judge reads them)
    Rule(id="quote.exact", says="when relying on the package word for word, quote it exactly, in double quotes "
                                "or a '> ' line",
         marks=("when you", "word for word", "quote it exactly", "double quotes", "`> `")),
    Rule(id="quote.checked", says="quotations are checked against the package", marks=("quotations are checked",)),
    # the Supplemental RAG protocol (seed 000 §5.2)
    Rule(id="protocol.when", says="when the package does not support a needed specific you cannot verify",
         marks=("## SUPPLEMENTAL RAG PROTOCOL", "fact", "name, date, statistic or relationship", "does not support",
                "cannot verify")),
    Rule(id="protocol.not-from-memory", says="do not supply it from memory", marks=("do not supply it from memory",)),
    Rule(id="protocol.request-block", says="reply with only the request block: gap, query terms, why",
         marks=("only this block", "## SUPPLEMENTAL RAG REQUEST", "\nGap: <", "\nQuery terms: <", "\nWhy: <")),
    Rule(id="protocol.resubmission", says="the package comes back with a RESULT block",
         marks=("package again", "## SUPPLEMENTAL RAG RESULT")),
    Rule(id="protocol.cap", says="at most {cap} requests in this step", marks=("at most {cap}", "in this step")),
    Rule(id="protocol.coverage-gap", says="what is still lacking goes into a COVERAGE GAP section, never invented",
         marks=("## COVERAGE GAP", "section naming", "invent")),
    # the cap reached (seed 000 §5.2)
    Rule(id="cap.no-more-requests", says="the cap is used up: no further request",
         marks=("## SUPPLEMENT CAP REACHED", "{cap}", "request(s)", "another SUPPLEMENTAL RAG REQUEST")),
    Rule(id="cap.complete-from-package", says="complete the task from the package as it stands",
         marks=("from the package as it stands",)),
    Rule(id="cap.coverage-gap", says="every fact still lacking: a COVERAGE GAP section; do not invent it",
         marks=("every fact", "## COVERAGE GAP", "section naming", "do not invent it")),
    # the roles (seed 001)
    Rule(id="role.analyst", says="the single analyst answers from the evidence, central question first, then "
                                 "what a careful reader would raise",
         marks=("ROLE: ANALYST (gear {gear})", "request", "evidence", "central question first", "careful reader")),
    Rule(id="role.independent-analyst", says="an independent analyst works alone, commits, and will be critiqued",
         marks=("ROLE: {label} ANALYST (gear {gear})", "evidence", "commit to your analysis", "independently",
                "critique yours")),
    Rule(id="role.breadth-reviewer", says="review the depth analysis and write the complete improved analysis",
         marks=("ROLE: BREADTH REVIEWER (gear 3, sequential)", "depth", "breadth and soundness", "improved analysis",
                "not a", "critique", "keep what the evidence supports", "correct what it does not",
                "add what is missing")),
    Rule(id="role.evaluator", says="critique another model's analysis; never summarise, refine or rewrite it",
         marks=("ROLE: EVALUATOR (gear 4, step 4)", "{target} analysis", "another model", "unsupported claims",
                "skipped inferential steps", "confidence the evidence does not warrant", "do not summarise",
                "refine", "rewrite it")),
    Rule(id="role.reviser", says="revise your own analysis in light of the critique; output it whole",
         marks=("ROLE: REVISER (gear 4, step 5)", "{slot} stream", "revise your analysis", "critique", "right",
                "off-target", "output the full revised analysis")),
    Rule(id="role.re-reviser", says="fix what the verifier found, keep what holds, output the whole analysis",
         marks=("ROLE: RE-REVISER (verification cycle {cycle} FAILED)", "{who}", "verifier", "fix what",
                "keep what holds", "output the full revised analysis")),
    Rule(id="role.consolidator", says="merge the analyses into one answer; keep disagreements; no concatenation",
         marks=("ROLE: CONSOLIDATOR (gear 4, step 7)", "merge the analyses below into one irreducible answer",
                "overlap", "disagreements visible", "concatenation")),
    Rule(id="role.corrective", says="fix exactly what the final verifier found; unsupported: a COVERAGE GAP",
         marks=("ROLE: CORRECTIVE REVISER (final verification FAILED)", "fix exactly what the verifier found",
                "change nothing else", "COVERAGE GAP", "output the full corrected answer")),
    # the evaluation contract (seed 001, step 4)
    Rule(id="contract.seven-headings", says="exactly these seven headings, in order; 'None found.' when empty",
         marks=("exactly these seven headings, in", "order", "'None found.'", "## 1. UNSUPPORTED CLAIMS",
                "## 2. SKIPPED INFERENTIAL STEPS", "## 3. MISPLACED CONFIDENCE", "## 4. CONFABULATED SPECIFICS",
                "## 5. MISSING CONSIDERATIONS", "## 6. CRITERIA CHECK", "## 7. REQUIRED CHANGES")),
    Rule(id="contract.heading-contents", says="what goes under the headings that need saying",
         marks=("evidence", "names, dates, figures", "quotations", "stakeholders", "alternatives",
                "boundary conditions", "criteria", "met or not", "numbered", "specific", "actionable")),
    # the revision record
    Rule(id="revision.record", says="record each criticism accepted (what changed) or rejected (why)",
         marks=("record", "each criticism", "## CRITICISMS ACCEPTED", "## CRITICISMS REJECTED",
                "- <criticism> — <what changed>", "- <criticism> — <why")),
)
RULES: dict[str, Rule] = {r.id: r for r in _RULES}


# --- the wordings ---------------------------------------------------------------------------------------
# Each part: the full wording (the engine's text as it always was), then the compact one.

DIRECTIVE = Wording(
    part="directive",
    rules=("directive.no-invention", "directive.high-risk-class", "directive.clock-unknown",
           "directive.name-the-gap", "directive.honest-unknown"),
    full="""\
## UNIVERSAL ANTI-CONFABULATION DIRECTIVE
Never invent specific facts you cannot verify from the material in front of you. The high-risk
class is names, dates, times, numbers and statistics, quotations, citations, URLs and the state
of any system (including the current date and time, which you do not know). When the material
does not contain what you need, say so plainly: name the gap. The honest "I don't know" beats
the confident wrong answer.""",
    compact="""\
## UNIVERSAL ANTI-CONFABULATION DIRECTIVE
Never invent specifics you cannot verify from the material: names, dates, times, numbers, statistics, quotations,
citations, URLs, system state (you do not know the current date and time). If it is missing, name the gap: "I
don't know" beats a confident wrong answer.""")

ASSUMPTIONS = Wording(
    part="assumptions",
    rules=("assumptions.not-user-stated", "assumptions.name-where-used"),
    full=("Phase A inferred these; the user did not state them. Treat each as a working assumption,\n"
          "and name it explicitly wherever your answer depends on it so the user can correct it."),
    compact="Phase A inferred these; the user did not state them. Name each assumption where your answer "
            "depends on it.")

CONFIDENCE = Wording(
    part="confidence",
    rules=("confidence.line", "confidence.meaning"),
    full="""\
## CONFIDENCE
End your reply with one line of the form `CONFIDENCE: 0.00` to `CONFIDENCE: 1.00`: how far the
package supports what you wrote (1.00 = every claim rests on it).""",
    compact="""\
## CONFIDENCE
Last line: `CONFIDENCE: 0.00` to 1.00, how far the package supports your reply (1.00: every claim).""")

QUOTE = Wording(
    part="quote",
    rules=("quote.exact", "quote.checked"),
    full="""\
When you rely on the package word for word, quote it exactly, in double quotes or on a line
starting with `> `; quotations are checked against the package.""",
    compact="When you use the package word for word, quote it exactly, in double quotes or a `> ` line; quotations "
            "are checked.")

PROTOCOL = Wording(
    part="protocol",
    rules=("protocol.when", "protocol.not-from-memory", "protocol.request-block", "protocol.resubmission",
           "protocol.cap", "protocol.coverage-gap"),
    full="""\
## SUPPLEMENTAL RAG PROTOCOL
When the task needs a factual claim, name, date, statistic or relationship that the package in
front of you does not support and that you cannot verify, do not supply it from memory. Reply
instead with only this block:

{request}
Gap: <what is missing, in one sentence>
Query terms: <the search terms that would find it>
Why: <why the answer needs it>

The orchestrator searches the knowledge vault and sends you the whole package again with a
{result} block. You may ask at most {cap} time(s) in this step. Where the package
still lacks what you need, write a {gap} section naming what is missing
instead of inventing it.""",
    compact="""\
## SUPPLEMENTAL RAG PROTOCOL
Needing a fact (name, date, statistic or relationship) the package does not support and you cannot verify? Do not
supply it from memory; reply with only this block:

{request}
Gap: <what is missing>
Query terms: <search terms>
Why: <why it is needed>

You get the package again with a {result}. At most {cap} time(s) in this step. Still missing: a {gap}
section naming it; never invent it.""")

CAP_REACHED = Wording(
    part="cap_reached",
    rules=("cap.no-more-requests", "cap.complete-from-package", "cap.coverage-gap"),
    full="""\
## SUPPLEMENT CAP REACHED
You have used all {cap} supplemental request(s) of this step. Do not emit another
SUPPLEMENTAL RAG REQUEST. Complete the task from the package as it stands, and for every fact
it still lacks write a {gap} section naming what is missing. Do not invent it.""",
    compact="""\
## SUPPLEMENT CAP REACHED
All {cap} request(s) used: not another SUPPLEMENTAL RAG REQUEST. Finish from the package as it stands; every fact
still missing: a {gap} section naming it. Do not invent it.""")

ANALYST = Wording(
    part="role.analyst",
    rules=("role.analyst",),
    full=("ROLE: ANALYST (gear {gear}). Answer the user's request from the evidence package: "
          "central question first, then the considerations a careful reader would raise."),
    compact="ROLE: ANALYST (gear {gear}). Answer the request from the evidence: central question first, then what a "
            "careful reader would raise.")

INDEPENDENT_ANALYST = Wording(
    part="role.independent-analyst",
    rules=("role.independent-analyst",),
    full=("ROLE: {label} ANALYST (gear {gear}). Work the user's request from the evidence package, "
          "on your own: commit to your analysis; another model analyses the same request "
          "independently and will critique yours."),
    compact="ROLE: {label} ANALYST (gear {gear}). Work the request from the evidence alone; commit to your analysis: "
            "another model works it independently and will critique yours.")

BREADTH_REVIEWER = Wording(
    part="role.breadth-reviewer",
    rules=("role.breadth-reviewer",),
    full=("ROLE: BREADTH REVIEWER (gear 3, sequential). A depth analyst wrote the analysis below. "
          "Review it for breadth and soundness, then write the complete improved analysis (not a "
          "critique): keep what the evidence supports, correct what it does not, add what is missing."),
    compact="ROLE: BREADTH REVIEWER (gear 3, sequential). Review the depth analysis below for breadth and "
            "soundness, then write the improved analysis, not a critique: keep what the evidence supports, correct "
            "what it does not, add what is missing.")

EVALUATOR = Wording(
    part="role.evaluator",
    rules=("role.evaluator",),
    full=("ROLE: EVALUATOR (gear 4, step 4) — critiquing the {target} analysis, written by "
          "another model. Find what is wrong with it: unsupported claims, skipped inferential steps, "
          "confidence the evidence does not warrant. Do not summarise it, do not refine it, do not "
          "rewrite it."),
    compact="ROLE: EVALUATOR (gear 4, step 4) of another model's {target} analysis. Find its unsupported claims, "
            "skipped inferential steps, confidence the evidence does not warrant. Do not summarise, refine or "
            "rewrite it.")

REVISER = Wording(
    part="role.reviser",
    rules=("role.reviser",),
    full=("ROLE: REVISER (gear 4, step 5) — the {slot} stream. Revise YOUR analysis in light of "
          "the critique it received. Some criticisms are right and the analysis changes; some are "
          "off-target and it stands. Output the full revised analysis."),
    compact="ROLE: REVISER (gear 4, step 5), {slot} stream. Revise your analysis by its critique: change what a "
            "right criticism hits, keep what an off-target one does. Output the full revised analysis.")

RE_REVISER = Wording(
    part="role.re-reviser",
    rules=("role.re-reviser",),
    full=("ROLE: RE-REVISER (verification cycle {cycle} FAILED) — {who}. A verifier failed the analysis "
          "below against the verification criteria. Fix what it found; keep what holds. Output the "
          "full revised analysis."),
    compact="ROLE: RE-REVISER (verification cycle {cycle} FAILED), {who}. Fix what the verifier found in the "
            "analysis below; keep what holds. Output the full revised analysis.")

CONSOLIDATOR = Wording(
    part="role.consolidator",
    rules=("role.consolidator",),
    full=("ROLE: CONSOLIDATOR (gear 4, step 7). Merge the analyses below into one irreducible answer: a "
          "synthesis that resolves their overlap and keeps their genuine disagreements visible, not a "
          "concatenation."),
    compact="ROLE: CONSOLIDATOR (gear 4, step 7). Merge the analyses below into one irreducible answer: resolve "
            "their overlap, keep disagreements visible; no concatenation.")

CORRECTIVE = Wording(
    part="role.corrective",
    rules=("role.corrective",),
    full=("ROLE: CORRECTIVE REVISER (final verification FAILED). Correct the answer below so that it "
          "passes: fix exactly what the verifier found, change nothing else, and name as a COVERAGE GAP "
          "whatever the evidence cannot support. Output the full corrected answer."),
    compact="ROLE: CORRECTIVE REVISER (final verification FAILED). Fix exactly what the verifier found in the "
            "answer below, change nothing else, name as a COVERAGE GAP what the evidence cannot support. Output "
            "the full corrected answer.")

#: The seven sections of seed 001's evaluation contract, and what goes under each (full wording).
EVALUATION_SECTIONS: tuple[str, ...] = (
    "UNSUPPORTED CLAIMS", "SKIPPED INFERENTIAL STEPS", "MISPLACED CONFIDENCE", "CONFABULATED SPECIFICS",
    "MISSING CONSIDERATIONS", "CRITERIA CHECK", "REQUIRED CHANGES",
)
_EVALUATION_HELP = {
    "UNSUPPORTED CLAIMS": "claims the evidence package does not support",
    "SKIPPED INFERENTIAL STEPS": "places where the reasoning jumps to a conclusion that does not follow",
    "MISPLACED CONFIDENCE": "certainty the evidence does not warrant",
    "CONFABULATED SPECIFICS": "names, dates, figures or quotations absent from the evidence",
    "MISSING CONSIDERATIONS": "stakeholders, alternatives or boundary conditions left out",
    "CRITERIA CHECK": "each of the mode's evaluation criteria: met or not, and where",
    "REQUIRED CHANGES": "numbered, each one specific and actionable",
}
#: Compact: only the headings whose name does not already say what goes under them.
_EVALUATION_HELP_COMPACT = {
    "UNSUPPORTED CLAIMS": "not in the evidence",
    "CONFABULATED SPECIFICS": "names, dates, figures, quotations absent from the evidence",
    "MISSING CONSIDERATIONS": "stakeholders, alternatives, boundary conditions",
    "CRITERIA CHECK": "each criterion: met or not",
    "REQUIRED CHANGES": "numbered, specific, actionable",
}
EVALUATION_CONTRACT = Wording(
    part="evaluation_contract",
    rules=("contract.seven-headings", "contract.heading-contents"),
    full="Answer under exactly these seven headings, in this order (write 'None found.' under a heading with "
         "nothing to report):\n" + "\n".join(f"## {i}. {name}\n<{_EVALUATION_HELP[name]}>"
                                             for i, name in enumerate(EVALUATION_SECTIONS, 1)),
    compact="Use exactly these seven headings, in order ('None found.' if empty):\n" + "\n".join(
        f"## {i}. {name}" + (f" ({_EVALUATION_HELP_COMPACT[name]})" if name in _EVALUATION_HELP_COMPACT else "")
        for i, name in enumerate(EVALUATION_SECTIONS, 1)))

REVISION_RECORD = Wording(
    part="revision_record",
    rules=("revision.record",),
    full="""\
After the revised analysis, record how you handled each criticism:
## CRITICISMS ACCEPTED
- <criticism> — <what changed>
## CRITICISMS REJECTED
- <criticism> — <why it does not hold>""",
    compact="""\
Then record each criticism:
## CRITICISMS ACCEPTED
- <criticism> — <what changed>
## CRITICISMS REJECTED
- <criticism> — <why not>""")


#: Every part, in prompt order (the directive first, the role task last).
WORDINGS: tuple[Wording, ...] = (
    DIRECTIVE, ASSUMPTIONS, CONFIDENCE, QUOTE, PROTOCOL, CAP_REACHED, ANALYST, INDEPENDENT_ANALYST,
    BREADTH_REVIEWER, EVALUATOR, REVISER, RE_REVISER, CONSOLIDATOR, CORRECTIVE, EVALUATION_CONTRACT,
    REVISION_RECORD,
)

#: Sample values for the fields of the wordings (the tests render every part with them).
SAMPLE_FIELDS: dict[str, Any] = {
    "gear": 2, "label": "DEPTH", "target": "DEPTH", "slot": "DEPTH", "who": "the analysis", "cycle": 1, "cap": 2,
    "request": "## SUPPLEMENTAL RAG REQUEST", "result": "## SUPPLEMENTAL RAG RESULT", "gap": "## COVERAGE GAP",
}


# --- fitting a turn to a small model's budget (compact only) -----------------------------------------


class CompactFit(BaseModel):
    """How the compact profile fits the evidence and the replies to a small model on a CPU.

    The evidence gets ``min(context_window * evidence_window_share, prompt_tokens_per_s *
    evidence_seconds)`` tokens (estimated at 4 characters a token, as the context budget counts):
    at most ``k_per_stream`` chunks of each stream (the highest scored), each cut at a sentence end
    to its share of that budget (never below ``min_chunk_tokens``). ``prompt_tokens_per_s`` is the
    bundled model's measured prompt evaluation on a 2-core CPU (SmolLM2-135M, Q8_0 copy: 293-353
    tokens/s), so 1.5 s of evidence is ~450 tokens: about what a 4096-token window's eighth holds.
    ``max_tokens`` caps each step kind's reply below the backend's ``max_tokens`` (an analyst or a
    reviser writes a whole analysis, ~120 words; an evaluator or a consolidator more): the bundled
    model's healthy answers ran 50-190 tokens, and its re-revisions ran to the 256 cap nearly every
    time, repeating themselves (benchmarks/backends.py (b)); at ~72 generated tokens/s each 100
    tokens cost ~1.4 s."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_tokens_per_s: float = 300.0
    evidence_seconds: float = 1.5
    evidence_window_share: float = 0.125
    k_per_stream: int = 2
    min_chunk_tokens: int = 60
    fence_tokens: int = 24  # the fence lines and the provenance of one chunk (as the context budget counts)
    max_tokens: dict[str, int] = Field(default_factory=lambda: {
        "analyst": 160, "reviser": 160, "consolidator": 224, "evaluator": 224, "verifier": 160})
    #: Verifications per answer when ``[pipeline] verification_cycles`` is unset: one, so a FAIL is not
    #: re-revised. The bundled model's re-revisions passed the grounding check 0 of 40 times
    #: (benchmarks/prompt_profile.py: the final answers of 20 prompts under each profile) while costing
    #: 4-9 s each; its FAIL goes to ``on_fail`` at once (under compact: the evidence answer).
    verification_cycles: int = 1

    def evidence_tokens(self, context_window: int) -> int:
        return int(min(context_window * self.evidence_window_share, self.prompt_tokens_per_s * self.evidence_seconds))

    def chunk_tokens(self, context_window: int, chunks: int) -> int:
        """Each of ``chunks`` texts' share of the evidence budget, its fence and provenance lines
        taken off (never below ``min_chunk_tokens``)."""
        return max(self.min_chunk_tokens, self.evidence_tokens(context_window) // max(chunks, 1) - self.fence_tokens)


COMPACT_FIT = CompactFit()


def profile_of(config: OraConfig, backend: str) -> ProfileName:
    """The prompt profile of the backend named ``backend`` (``full`` when it is not configured)."""
    settings = config.backends.get(backend)
    return getattr(settings, "prompt_profile", "full") if settings is not None else "full"


FULL_VERIFICATION_CYCLES = 2


def verification_cycles(config: OraConfig, backend: str) -> tuple[int, str]:
    """Verifications per answer, and why: ``[pipeline] verification_cycles`` when set, else by the
    prompt profile of ``backend`` (the one that writes the re-revision): 2 under ``full``, the compact
    fit's under ``compact``."""
    chosen = config.pipeline.verification_cycles
    if chosen is not None:
        return chosen, "[pipeline] verification_cycles"
    if profile_of(config, backend) == "compact":
        return COMPACT_FIT.verification_cycles, (f"the compact profile of {backend!r}: its re-revisions did not pass "
                                                 "(profiles.CompactFit.verification_cycles)")
    return FULL_VERIFICATION_CYCLES, "the full profile's default"


def max_tokens_cap(config: OraConfig, backend: str, purpose: str) -> int | None:
    """The reply cap of a ``purpose`` step served by ``backend``: None under ``full`` (the backend's
    own ``max_tokens`` stands), the compact cap for the step kind otherwise (never above the
    backend's ``max_tokens``: ``call_role`` only lowers)."""
    if profile_of(config, backend) != "compact":
        return None
    return COMPACT_FIT.max_tokens.get(purpose)


def _flat(text: str) -> str:
    return " ".join(text.split()).lower()


def missing_marks(wording: Wording, profile: ProfileName, values: dict[str, Any] | None = None) -> list[str]:
    """The marks of ``wording``'s rules that its ``profile`` text lacks (case and line breaks aside)."""
    values = SAMPLE_FIELDS if values is None else values
    text = _flat(wording.text(profile, **{k: v for k, v in values.items() if k in wording.fields()}))
    missing = []
    for rule_id in wording.rules:
        for mark in RULES[rule_id].marks:
            if _flat(mark.format(**values)) not in text:
                missing.append(f"{rule_id}: {mark!r}")
    return missing
