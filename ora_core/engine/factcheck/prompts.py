"""The debate roles' steps: what each is told, what it is given, the exact reply format it owes.

Every role step is a ``StepSpec`` run by the reliability layer (``run_model_step``): the directive,
Phase A's assumptions, the confidence line and the quotation rule come from there; the
Supplemental RAG protocol is off (``supplements=False``), because the evidence a role sees is the
partition it was given: a supplement would bring in items outside it, without IDs. The evidence
goes in the system message (``StepSpec.evidence``), each item in the turn's data fence with its
ID; the claim and the earlier roles' output in the user message. Each step's ``purpose`` is the
one of the cascade's step it mirrors (the advocate is the turn's primary ``analyst``, the challenger
an ``evaluator``, the reconciler a ``reviser``), so fault injection (``ora run --inject``) and the
bench reach gear 5 as they reach gears 2-4. The mode file's sections guide
the roles: DEPTH ANALYSIS GUIDANCE the advocate (and its re-runs), BREADTH ANALYSIS GUIDANCE the
challenger, EVALUATION CRITERIA and REVISION GUIDANCE the reconciler, VERIFICATION CRITERIA the
validation.

A role whose backend can constrain its reply to a JSON schema (``structured_output``) is asked for
JSON instead (``structured.py``: the schema goes with the call, and the reliability layer renders the
constrained reply into the block below before anything reads it); every other role gets the block.
"""

from __future__ import annotations

from typing import Any

from ora_core.engine.context import cut_to, fence_id, item_chars, neutralise
from ora_core.engine.prompts import evidence_fence_note
from ora_core.engine.reliability import StepSpec
from ora_core.engine.turn_state import GearContext
from ora_core.kernel.models import ChallengePoint, EvidenceItem
from ora_core.kernel.trace import TurnContext

from . import structured
from .replies import POINT_TYPES

FENCE = "```"
#: Why the fields go in a fenced block: a fenced block is protocol, not prose, to the evidence checks
#: (ora-grounding's ``checkable_text`` sets it aside), so a truth percentage or an item ID is not
#: taken for an unsupported figure or name; the reasoning stays outside it, checked like any prose.
VERDICT_FIELDS = """\
TRUTH: <0-100: how true the claim is on this evidence; 100 certainly true, 0 certainly false, 50 undecided>
CERTAINTY: <0-100: how sure you are of that number, given how much evidence there is and how good it is>
CITED: <the IDs of the items your verdict rests on, e.g. E1, E3; or none>"""

VERDICT_FORMAT = f"""\
Reply with these three lines inside a fenced block (plain integers, no percent sign):
{FENCE}
{VERDICT_FIELDS}
{FENCE}
Then, below the block, your reasoning: two to five sentences that name the items by ID."""

POINTS_FORMAT = f"""\
Reply with one line per point inside a fenced block, each in this exact form:
{FENCE}
POINT: direction=<higher|lower>; severity=<high|medium|low>; type=<type>; evidence=<E2, E5>; argument=<text>
{FENCE}
direction: should the truth percentage be higher or lower than the advocate's. argument: one or two sentences.
severity: high means 20 points or more, medium 8 to 19, low under 8. type: one of {", ".join(POINT_TYPES)}.
A point must cite the IDs of items you were shown; a point without valid IDs does not count.
Argue both directions where the evidence allows. If you find nothing, the block holds one line: POINT: none"""

RESPONSES_FORMAT = f"""\
Reply with a fenced block holding first one line per challenge point, then your reconciled verdict:
{FENCE}
RESPONSE: point=<P1>; accepted=<yes|no>; effect=<signed points, e.g. -8>; reason=<one sentence>
{VERDICT_FIELDS}
{FENCE}
effect: how many points this challenge point moved your truth percentage (0 if rejected).
Then, below the block, your reasoning: two to five sentences that name the items by ID."""

VALIDATION_FORMAT = f"""\
Reply with these lines inside a fenced block:
{FENCE}
GROUNDED: <yes|no: every statement of the reasoning rests on the cited items>
DIRECTION: <consistent|inconsistent>
ISSUES: <what is wrong, separated by semicolons; or none>
{FENCE}
DIRECTION is consistent when the truth percentage is above 50 where the cited evidence mostly supports the
claim and below 50 where it mostly contradicts it."""

DIRECTIONS_FORMAT = f"""\
Reply with one line per item, for every item, inside a fenced block:
{FENCE}
E1: <supports|contradicts|neutral>
{FENCE}
supports: the item is evidence that the claim is true; contradicts: evidence that it is false;
neutral: off the point, or neither."""


def evidence_block(turn: TurnContext, items: list[EvidenceItem], title: str, *, role: str = "") -> str:
    """``items`` in the turn's data fence, each opening line carrying its ID, source type and source.
    ``role``: the role the prompt goes to; on a ``compact`` backend each item is cut at a sentence
    end to its share of the profile's evidence budget (``context.item_chars``): the pool keeps
    every item the sufficiency gate counted, each shorter."""
    fence = fence_id(turn)
    config = getattr(turn, "config", None)
    limit = item_chars(config, role, len(items)) if role and config is not None else None
    lines = [f"## EVIDENCE ITEMS ({title})", evidence_fence_note(fence)]
    for item in items:
        where = neutralise(" ".join(f"{item.id} | {item.source_type} ({item.source_class}) | {item.source}".split()),
                           fence)
        text = cut_to(item.text, limit) if limit is not None else item.text.strip()
        lines.append(f"<data {fence}>[{where}]\n{neutralise(text, fence)}\n</data {fence}>")
    if not items:
        lines.append("(no evidence items)")
    lines.append("Cite items by their IDs. Use only these items for facts; where they are silent, say so.")
    return "\n".join(lines)


def _guidance(gc: GearContext, *names: str) -> str:
    parts = [f"## {name} ({gc.package.mode} mode)\n{gc.section(name)}" for name in names if gc.section(name)]
    return "\n\n".join(parts)


def _task(head: str, gc: GearContext, sections: tuple[str, ...], form: str) -> str:
    return "\n\n".join(p for p in (head, _guidance(gc, *sections), form) if p)


def claim_block(claim: str) -> str:
    return f"## THE CLAIM\n{claim}"


def verdict_block(title: str, truth: float | None, certainty: float | None, cited: list[str], reasoning: str) -> str:
    return (f"## {title}\nTRUTH: {truth:g}\nCERTAINTY: {certainty:g}\nCITED: {', '.join(cited) or 'none'}\n"
            f"REASONING: {reasoning or '(none given)'}")


def _spec(fmt: structured.StructuredFormat | None, **fields: Any) -> StepSpec:
    """A role's step; with ``fmt`` (its backend can constrain a reply) it asks for ``fmt``'s JSON."""
    spec = StepSpec(supplements=False, **fields)
    return structured.apply(spec, fmt) if fmt is not None else spec


def _format(gc: GearContext, role: str, fmt: structured.StructuredFormat, text_form: str) -> tuple[
        structured.StructuredFormat | None, str]:
    """The role's reply format: ``fmt`` and its JSON wording where the role's backend declares
    ``structured_output``, else no schema and the text block ``text_form``."""
    return (fmt, fmt.form) if structured.structured_role(gc, role) else (None, text_form)


def directions_spec(gc: GearContext, *, name: str, claim: str, items: list[EvidenceItem], stage: str) -> StepSpec:
    head = ("ROLE: EVIDENCE DIRECTION LABELLER (fact-check). For each evidence item below, say whether it "
            "supports the claim, contradicts it, or is neutral. Judge each item on its own text only.")
    fmt, form = _format(gc, "evidence", structured.directions_format([i.id for i in items]), DIRECTIONS_FORMAT)
    return _spec(fmt, name=name, role="evidence", purpose="evidence",
                 prompt_key=f"factcheck.evidence-directions.{stage}",
                 task=_task(head, gc, (), form), package=claim_block(claim),
                 evidence=evidence_block(gc.turn, items, f"{len(items)} to label", role="evidence"), min_words=2,
                 inputs={"claim": claim, "items": [i.id for i in items], "stage": stage})


def advocate_spec(gc: GearContext, *, name: str, claim: str, items: list[EvidenceItem], run: int = 0,
                  runs: int = 0) -> StepSpec:
    """The advocate (``run`` 0) or one of its self-consistency re-runs (``run`` 1..``runs``): the same
    task and evidence, on the ``self_consistency`` role, with one line saying it is a re-run."""
    if run:
        head = (f"ROLE: FACT-CHECK ADVOCATE — SELF-CONSISTENCY RUN {run} OF {runs}. Give the first verdict on "
                "the claim from the evidence items below, independently, as if no one had answered before.")
        role, key = "self_consistency", f"factcheck.self-consistency.run{run}"
    else:
        head = ("ROLE: FACT-CHECK ADVOCATE. Give the first verdict on the claim from the evidence items below: "
                "weigh what each item says for and against the claim, then commit to a truth percentage.")
        role, key = "advocate", "factcheck.advocate"
    fmt, form = _format(gc, role, structured.VERDICT, VERDICT_FORMAT)
    return _spec(fmt, name=name, role=role, purpose="analyst", prompt_key=key, primary=not run,
                 task=_task(head, gc, ("DEPTH ANALYSIS GUIDANCE",), form), package=claim_block(claim),
                 evidence=evidence_block(gc.turn, items, "the advocate's evidence", role=role), min_words=8,
                 inputs={"claim": claim, "evidence_ids": [i.id for i in items], "run": run})


def challenger_spec(gc: GearContext, *, name: str, claim: str, items: list[EvidenceItem],
                    advocate: Any) -> StepSpec:
    head = ("ROLE: FACT-CHECK CHALLENGER. An advocate gave the verdict below on the claim. Challenge it in both "
            "directions: what in your evidence says the claim is truer than the advocate found, and what says "
            "it is less true. Do not give a verdict of your own.")
    package = "\n\n".join([claim_block(claim), verdict_block("THE ADVOCATE'S VERDICT", advocate.truth,
                                                             advocate.certainty, advocate.cited, advocate.reasoning)])
    fmt, form = _format(gc, "challenger", structured.POINTS, POINTS_FORMAT)
    return _spec(fmt, name=name, role="challenger", purpose="evaluator", prompt_key="factcheck.challenger",
                 task=_task(head, gc, ("BREADTH ANALYSIS GUIDANCE",), form), package=package,
                 evidence=evidence_block(gc.turn, items, "the challenger's evidence", role="challenger"), min_words=2,
                 inputs={"claim": claim, "evidence_ids": [i.id for i in items]})


def points_block(points: list[ChallengePoint]) -> str:
    if not points:
        return "## THE CHALLENGER'S POINTS\n(none)"
    lines = ["## THE CHALLENGER'S POINTS"]
    lines += [f"{p.id}: direction={p.direction}; severity={p.severity}; type={p.type}; "
              f"evidence={', '.join(p.evidence_ids) or 'none'}; argument={p.argument}" for p in points]
    return "\n".join(lines)


def reconciler_spec(gc: GearContext, *, name: str, claim: str, items: list[EvidenceItem], advocate: Any,
                    points: list[ChallengePoint]) -> StepSpec:
    head = ("ROLE: FACT-CHECK RECONCILER. You see every evidence item, the advocate's verdict and the "
            "challenger's points. Answer each point on the evidence, then give the reconciled verdict. Move the "
            "truth percentage only for points whose cited items bear them out.")
    package = "\n\n".join([claim_block(claim), verdict_block("THE ADVOCATE'S VERDICT", advocate.truth,
                                                             advocate.certainty, advocate.cited, advocate.reasoning),
                           points_block(points)])
    fmt, form = _format(gc, "reconciler", structured.RESPONSES, RESPONSES_FORMAT)
    return _spec(fmt, name=name, role="reconciler", purpose="reviser", prompt_key="factcheck.reconciler",
                 task=_task(head, gc, ("EVALUATION CRITERIA", "REVISION GUIDANCE"), form),
                 package=package, evidence=evidence_block(gc.turn, items, "the full pool", role="reconciler"),
                 min_words=8,
                 inputs={"claim": claim, "evidence_ids": [i.id for i in items], "points": [p.id for p in points]})


def validation_spec(gc: GearContext, *, name: str, claim: str, items: list[EvidenceItem], truth: float,
                    certainty: float, cited: list[str], reasoning: str) -> StepSpec:
    head = ("ROLE: FACT-CHECK VALIDATOR. Check the reconciled verdict below against the evidence items: is its "
            "reasoning grounded in the items it cites, and does its truth percentage point the way they point?")
    package = "\n\n".join([claim_block(claim), verdict_block("THE VERDICT UNDER VALIDATION", truth, certainty,
                                                             cited, reasoning)])
    fmt, form = _format(gc, "validation", structured.VALIDATION, VALIDATION_FORMAT)
    return _spec(fmt, name=name, role="validation", purpose="validation", prompt_key="factcheck.validation",
                 task=_task(head, gc, ("VERIFICATION CRITERIA",), form), package=package,
                 evidence=evidence_block(gc.turn, items, "the full pool", role="validation"), min_words=2,
                 inputs={"claim": claim, "evidence_ids": [i.id for i in items]})
