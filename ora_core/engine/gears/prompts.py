"""The tasks and packages of the analytical gears' steps, and how their outputs are read.

Each step is a bounded call assembled here: the analysts never see the evaluator's
instructions, the evaluator never sees the consolidator's (seed 001). Every system prompt is
built by ``ora_core.engine.prompts`` (the anti-confabulation directive and Phase A's assumptions come
from there); the reliability layer adds the confidence line, quotation and Supplemental RAG
protocol instructions. The wording of every text here is the prompt profile's of the backend serving
the step's role (``ora_core.engine.profiles``: ``full`` or ``compact``, the same rules in fewer words);
the mode's guidance sections are the mode file's own words in both.
"""

from __future__ import annotations

import re
from typing import Any

from ora_core.engine import profiles
from ora_core.engine.profiles import ProfileName
from ora_core.engine.reliability import StepSpec
from ora_core.engine.turn_state import GearContext
from ora_core.kernel.models import Verdict
from ora_core.kernel.trace import StepRecorder

#: The universal seven-section evaluation contract of Step 4 (seed 001).
EVALUATION_SECTIONS: tuple[str, ...] = profiles.EVALUATION_SECTIONS
EVALUATION_CONTRACT = profiles.EVALUATION_CONTRACT.full

ACCEPTED = "CRITICISMS ACCEPTED"
REJECTED = "CRITICISMS REJECTED"
REVISION_RECORD = profiles.REVISION_RECORD.full

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*(?:\d+\.\s*)?(?P<title>[^\n#]+?)\s*#*\s*$", re.MULTILINE)


def _guidance(gc: GearContext, *names: str) -> str:
    parts = []
    for name in names:
        text = gc.section(name)
        if text:
            parts.append(f"## {name} ({gc.package.mode} mode)\n{text}")
    return "\n\n".join(parts)


def _task(head: str, gc: GearContext, *sections: str, tail: str = "") -> str:
    return "\n\n".join(p for p in (head, _guidance(gc, *sections), tail) if p)


def request_block(gc: GearContext) -> str:
    return f"## THE USER'S REQUEST (cleaned by Phase A)\n{gc.package.cleaned_prompt}"


def profile_for(gc: GearContext, role: str) -> ProfileName:
    """The prompt profile of the backend serving ``role`` in this turn."""
    return profiles.profile_of(gc.runtime.config, gc.backend_for(role))


def evidence_block(gc: GearContext) -> str:
    """The turn's shared evidence, the same text under either profile (the compact profile fits the
    chunks themselves, at context assembly): every step of the turn shares it as a prompt prefix."""
    return gc.evidence_block()


def _spec(gc: GearContext, **fields: Any) -> StepSpec:
    """An analytical step: its own package plus the turn's shared evidence."""
    return StepSpec(evidence=evidence_block(gc), **fields)


def package(gc: GearContext, *parts: str) -> str:
    """A step's own package (the user message): its inputs, then the request. The evidence
    goes separately (``StepSpec.evidence``, from ``evidence_block``) into the system message."""
    return "\n\n".join(p for p in (*parts, request_block(gc)) if p)


# --- analysts ---------------------------------------------------------------------------------------

def analyst_spec(gc: GearContext, *, name: str, role: str, kind: str, primary: bool, stream: str = "") -> StepSpec:
    """``kind``: depth | breadth (independent analysts) | single (gear 2, both guidances)."""
    profile = profile_for(gc, role)
    sections: tuple[str, ...]
    if kind == "single":
        head = profiles.ANALYST.text(profile, gear=gc.gear)
        sections = ("DEPTH ANALYSIS GUIDANCE", "BREADTH ANALYSIS GUIDANCE", "OUTPUT FORMAT GUIDANCE")
    else:
        label = kind.upper()
        head = profiles.INDEPENDENT_ANALYST.text(profile, label=label, gear=gc.gear)
        sections = (f"{label} ANALYSIS GUIDANCE",)
    return _spec(gc, name=name, role=role, purpose="analyst", prompt_key=f"gear{gc.gear}.{kind}-analyst",
                    task=_task(head, gc, *sections), package=package(gc), stream=stream, primary=primary,
                    inputs={"analyst": kind})


def breadth_review_spec(gc: GearContext, *, name: str, role: str, depth_text: str) -> StepSpec:
    head = profiles.BREADTH_REVIEWER.text(profile_for(gc, role))
    return _spec(gc, name=name, role=role, purpose="reviser", prompt_key="gear3.breadth-review",
                    task=_task(head, gc, "BREADTH ANALYSIS GUIDANCE", "EVALUATION CRITERIA",
                               "OUTPUT FORMAT GUIDANCE"),
                    package=package(gc, f"## DEPTH ANALYSIS UNDER REVIEW\n{depth_text}"), stream="breadth")


# --- cross-evaluation --------------------------------------------------------------------------------

def evaluator_spec(gc: GearContext, *, name: str, role: str, target: str, text: str) -> StepSpec:
    profile = profile_for(gc, role)
    head = profiles.EVALUATOR.text(profile, target=target.upper())
    return _spec(gc, name=name, role=role, purpose="evaluator", prompt_key=f"gear4.evaluate-{target}",
                    task=_task(head, gc, "EVALUATION CRITERIA", tail=profiles.EVALUATION_CONTRACT.text(profile)),
                    package=package(gc, f"## {target.upper()} ANALYSIS UNDER REVIEW\n{text}"), stream=target,
                    postprocess=_check_contract)


def present_sections(text: str) -> list[str]:
    titles = {m.group("title").strip().upper() for m in _HEADING.finditer(text)}
    return [s for s in EVALUATION_SECTIONS if any(s in t for t in titles)]


def _check_contract(text: str, step: StepRecorder) -> str:
    present = present_sections(text)
    missing = [s for s in EVALUATION_SECTIONS if s not in present]
    step.output["contract_sections_present"] = present
    step.output["contract_sections_missing"] = missing
    if missing:
        step.contingency(f"{step.name}-evaluation-contract-incomplete",
                         f"{len(missing)} of 7 contract section(s) missing: {', '.join(missing)}",
                         severity="warning", missing=missing)
    return text


# --- revisers ------------------------------------------------------------------------------------------

def reviser_spec(gc: GearContext, *, name: str, role: str, slot: str, own: str, critique: str, critic: str) -> StepSpec:
    profile = profile_for(gc, role)
    head = profiles.REVISER.text(profile, slot=slot.upper())
    return _spec(gc, name=name, role=role, purpose="reviser", prompt_key=f"gear4.revise-{slot}",
                    task=_task(head, gc, "REVISION GUIDANCE", "OUTPUT FORMAT GUIDANCE",
                               tail=profiles.REVISION_RECORD.text(profile)),
                    package=package(gc, f"## YOUR ANALYSIS ({slot} stream)\n{own}",
                                    f"## CRITIQUE RECEIVED (from the {critic} model)\n{critique}"),
                    stream=slot, postprocess=_record_revision)


#: A reason's closing parenthesis (``(best similarity 0.31, 29% of its content words in the evidence;
#: not in the evidence: looking, tool)``): its parts of figures are a measurement for the trace, not a
#: finding a reviser can act on; a labelled part (``not in the evidence: ...``) is kept.
_CLOSING = re.compile(r"\s*\(([^()]*)\)\s*$")
_WORDS = re.compile(r"[a-z0-9]+")


def _without_figures(reason: str) -> str:
    """``reason`` without the parts of its closing parenthesis that are figures and no label."""
    match = _CLOSING.search(reason)
    if match is None:
        return reason
    kept = [p.strip() for p in match.group(1).split(";") if ":" in p or not re.search(r"\d", p)]
    return reason[:match.start()] + (f" ({'; '.join(kept)})" if kept else "")


def _findings(verdict: Verdict, profile: ProfileName = "full") -> str:
    """What a reviser is told a failed verification found: the reasons, the unsupported claims
    the reasons do not already quote, and the verifier's report when its prose is the finding
    (a model verifier, or a verifier that gave neither reasons nor claims). A non-LLM verifier's
    full report (every claim, supported ones too, with its best evidence) stays in the trace:
    repeating it cost a small local model ~700 prompt tokens per re-revision. Under the compact
    profile each reason is said once and without its closing parenthesis of figures (the verify
    step keeps them), and a claim a reason already quotes is not listed again however its quotes
    were escaped: ~20 tokens per unsupported claim."""
    reasons = list(verdict.reasons)
    said = "\n".join(reasons)
    claims = [c for c in verdict.unsupported_claims if c[:160] not in said]
    if profile == "compact":
        reasons = list(dict.fromkeys(_without_figures(r) for r in reasons))
        words = " ".join(_WORDS.findall(said.lower()))
        claims = [c for c in claims if " ".join(_WORDS.findall(c.lower()))[:160] not in words]
    lines = [f"- {r}" for r in reasons] or ["- (no reasons given)"]
    if claims:
        lines += ["Unsupported claims:", *(f"- {c}" for c in claims)]
    prose = verdict.verifier == "model" or not (verdict.reasons or verdict.unsupported_claims)
    if prose and verdict.raw_output.strip():
        raw = verdict.raw_output.strip()
        lines += ["Verifier report:", "```", raw if len(raw) <= 3000 else raw[:3000] + "…", "```"]
    return "\n".join(lines)


def re_revision_spec(gc: GearContext, name: str, slot: str, role: str, text: str, verdict: Verdict,
                     cycle: int) -> StepSpec:
    who = f"the {slot.upper()} stream" if slot else "the analysis"
    profile = profile_for(gc, role)
    head = profiles.RE_REVISER.text(profile, cycle=cycle, who=who)
    return _spec(gc, name=name, role=role, purpose="reviser", prompt_key=f"gear{gc.gear}.re-revise",
                    task=_task(head, gc, "VERIFICATION CRITERIA", "REVISION GUIDANCE",
                               tail=profiles.REVISION_RECORD.text(profile)),
                    package=package(gc, f"## ANALYSIS THAT FAILED VERIFICATION\n{text}",
                                    f"## VERIFIER FINDINGS (cycle {cycle}: FAIL, verifier {verdict.verifier})\n"
                                    + _findings(verdict, profile)),
                    stream=slot, postprocess=_record_revision)


def _section_items(text: str, title: str) -> tuple[list[str], tuple[int, int] | None]:
    heads = list(_HEADING.finditer(text))
    for i, head in enumerate(heads):
        if title in head.group("title").upper():
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            body = text[head.end():end]
            items = [ln.strip().lstrip("-*•").strip() for ln in body.splitlines() if ln.strip()]
            return [i for i in items if i], (head.start(), end)
    return [], None


def split_revision(text: str) -> str:
    """The revised analysis without its accepted/rejected record (already in the step output)."""
    spans = [s for s in (_section_items(text, ACCEPTED)[1], _section_items(text, REJECTED)[1]) if s]
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return text.strip()


def _record_revision(text: str, step: StepRecorder) -> str:
    accepted, a_span = _section_items(text, ACCEPTED)
    rejected, r_span = _section_items(text, REJECTED)
    step.output["criticisms_accepted"] = accepted
    step.output["criticisms_rejected"] = rejected
    if a_span is None and r_span is None:
        step.contingency(f"{step.name}-revision-record-missing",
                         "the reviser did not record which criticisms it accepted and rejected",
                         severity="warning")
        return text
    revised = split_revision(text)
    return revised or text


# --- consolidation and the final gate -------------------------------------------------------------------

def consolidator_spec(gc: GearContext, *, name: str, streams: dict[str, tuple[str, str]]) -> StepSpec:
    head = profiles.CONSOLIDATOR.text(profile_for(gc, "consolidator"))
    parts = [f"## {slot.upper()} ANALYSIS (verification: {status})\n{text}" for slot, (text, status) in streams.items()]
    return _spec(gc, name=name, role="consolidator", purpose="consolidator", prompt_key="gear4.consolidate",
                    task=_task(head, gc, "CONSOLIDATION GUIDANCE", "OUTPUT FORMAT GUIDANCE"),
                    package=package(gc, *parts))


def corrective_spec(gc: GearContext, name: str, role: str, text: str, verdict: Verdict) -> StepSpec:
    profile = profile_for(gc, role)
    head = profiles.CORRECTIVE.text(profile)
    return _spec(gc, name=name, role=role, purpose="consolidator" if role == "consolidator" else "reviser",
                    prompt_key=f"gear{gc.gear}.corrective-revision",
                    task=_task(head, gc, "VERIFICATION CRITERIA", "OUTPUT FORMAT GUIDANCE"),
                    package=package(gc, f"## ANSWER THAT FAILED FINAL VERIFICATION\n{text}",
                                    f"## VERIFIER FINDINGS ({verdict.verifier})\n" + _findings(verdict, profile)))
