"""The per-step reliability layer (seed 001's contingency layer + seed 003's skill loop).

Every model step of gears 2-4 runs through ``run_model_step``:

1. **Call, with the Supplemental RAG protocol** (``ora_core.engine.supplement``): a request in the
   model's own output is answered and the whole package re-submitted, at most
   ``pipeline.max_supplements`` times per step. Every model output goes through the
   ``model_output`` detectors (all of them, third-party ones included).
2. **Regenerate once on unhealthy output**: a strong signal of kind ``unhealthy`` (refusal,
   clarification loop, brief stub, leaked tool call, prompt echo: the detectors of
   ora-health-detectors, which read what the model was given and what the orchestrator added to
   its prompt from ``ctx.data["material"]``, a ``StepMaterial``) re-runs the call once; unhealthy again is
   a *degraded* step (``<step>-unhealthy-after-regenerate``) the gear handles (one stream
   degraded, both degraded, consolidation degraded). A backend failure is a degraded step too.
3. **Probabilistic steps** (every model step) then pass three gates:
   - *confidence routing*: the model ends with a ``CONFIDENCE: 0.xx`` line (the prompt asks for
     it). >= ``confidence_proceed`` (0.85) proceed; >= ``confidence_retry`` (0.65) proceed and
     flag (``<step>-confidence-review``); below, retry. A missing or unreadable line is the
     contingency ``<step>-confidence-missing``: the step proceeds *flagged* (band
     ``unreported``), never on a silent default;
   - *assertions*: the output is not empty once the confidence line is removed, and does not
     leak the system prompt; plus the step's own;
   - *the judge* over the step's judge blocks (verbatim quotations: ``"..."`` of four words or
     more, and ``>`` lines): the offline heuristic scores the share found verbatim in the
     package the model was sent (its supplement results included, a retry's negative context
     excluded); ``pipeline.judge = "model"`` asks the ``verifier`` role with
     golden anchors in the prompt. Below ``pipeline.judge_threshold`` (0.80) is a failure.
   A failure re-invokes the step with negative context ``{attempt, previous_summary,
   failure_reason}``, up to ``pipeline.retries`` (2) more times; then ``StepHalted`` carries the
   full diagnostic and the turn halts.

Deterministic steps (``run_deterministic_step``: no model) run once, check their assertions
and halt at once on a failure: never retried, never judged, no confidence.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ora_core.engine import faults, lineage, profiles, supplement
from ora_core.engine.backends import call_role
from ora_core.engine.lineage import LineageCheck, ModelIdentity
from ora_core.engine.prompts import DIRECTIVE_MARKER, build_turn_messages
from ora_core.engine.turn_state import GearContext
from ora_core.kernel.ctx_data import EVIDENCE, EXPECTED_MIN_WORDS, MATERIAL, VERIFIER_QUOTED
from ora_core.kernel.errors import BackendError
from ora_core.kernel.models import (
    Completion,
    FaultPoint,
    Message,
    ModelReply,
    ModelRequest,
    Retrieval,
    Signal,
    StepMaterial,
    assembled,
)
from ora_core.kernel.trace import CallContext, StepRecorder, TurnContext

Band = Literal["high", "review", "low", "unreported"]
T = TypeVar("T")

#: The confidence and quotation instructions (full wording; ``profiles.CONFIDENCE`` / ``profiles.QUOTE``
#: hold both wordings, and a step gets the one of the backend serving its role).
CONFIDENCE_INSTRUCTION = profiles.CONFIDENCE.full
QUOTE_INSTRUCTION = profiles.QUOTE.full

#: Worked examples of acceptable output, threaded into the model judge's prompt (seed 003).
GOLDEN_ANCHORS: tuple[dict[str, str], ...] = (
    {"id": "grounded-quote",
     "evidence": "The committee approved the budget on 3 March after two readings.",
     "output": '> "The committee approved the budget on 3 March"',
     "score": "1.00", "why": "the quotation is verbatim in the evidence"},
    {"id": "honest-gap",
     "evidence": "The committee approved the budget after two readings.",
     "output": "COVERAGE GAP: the package does not give the date of the approval.",
     "score": "1.00", "why": "a named gap instead of an invented date"},
    {"id": "fabricated-quote",
     "evidence": "The committee approved the budget after two readings.",
     "output": '> "The committee approved the budget unanimously on 3 March 2021"',
     "score": "0.00", "why": "'unanimously' and the date are not in the evidence"},
)

_CONFIDENCE = re.compile(r"^[\s>*_#-]*confidence[\s*_]*[:=]\s*[*_`]*\s*(?P<value>[0-9]*\.?[0-9]+)\s*(?P<pct>%)?"
                         r"[\s*_`.]*$", re.IGNORECASE | re.MULTILINE)
_QUOTED = re.compile(r"\"([^\"\n]{8,400})\"|“([^”\n]{8,400})”")
_WORDS = re.compile(r"[a-z0-9]+")


class StepHalted(Exception):  # noqa: N818 - names what happened, like the seed's "halt"
    """A probabilistic step failed every attempt, or a deterministic assertion failed."""

    def __init__(self, step: str, diagnostic: dict[str, Any]) -> None:
        self.step = step
        self.diagnostic = diagnostic
        super().__init__(f"step {step!r} halted: {diagnostic.get('final_failure', '')}")


class RetryContext(BaseModel):
    """Negative context for a retry (seed 003)."""

    model_config = ConfigDict(extra="forbid")

    attempt: int
    previous_summary: str
    failure_reason: str

    def block(self, max_attempts: int, profile: str = "full") -> str:
        """The retry's block of the step's package. Under the ``compact`` profile it names the
        failure without repeating the failed text (no summary, no quoted material from the
        reason): a small model copies what its prompt shows it, so a failed quotation shown back
        came back word for word in every retry (measured: the README prompt halted that way)."""
        if profile == "compact":
            return ("## RETRY CONTEXT (NEGATIVE FEEDBACK)\n"
                    f"Attempt {self.attempt} of {max_attempts}. Your previous attempt failed: "
                    f"{without_quoted(self.failure_reason)}\n"
                    "Write a new answer from the evidence only; quote nothing the evidence does not say; "
                    "where it lacks something, name the gap.")
        return ("## RETRY CONTEXT (NEGATIVE FEEDBACK)\n"
                f"This is attempt {self.attempt} of {max_attempts}. Your previous attempt failed: "
                f"{self.failure_reason}\nPrevious attempt (summary): {self.previous_summary}\n"
                "Do not repeat that failure; where the package lacks something, name the gap.")


#: Where a failure reason starts listing the failed text (``...: 'quoted'``, ``...: "quoted"``).
_QUOTED_TAIL = re.compile(r":\s*['\"‘“].*\Z", re.S)


def without_quoted(reason: str) -> str:
    """``reason`` without the failed text it lists after a colon (the kind of failure stays)."""
    return _QUOTED_TAIL.sub(": (the failed text is not repeated here)", reason)


class JudgeResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    judge: str  # heuristic | model
    score: float | None  # None: no judge blocks to score
    threshold: float
    passed: bool
    blocks: list[str] = Field(default_factory=list)
    unsupported: list[str] = Field(default_factory=list)
    anchors: list[str] = Field(default_factory=list)
    detail: str = ""
    lineage: dict[str, Any] | None = None  # the model judge's edge (``lineage.LineageCheck``)


class Attempt(BaseModel):
    """One attempt of a step, as the trace shows it."""

    model_config = ConfigDict(extra="forbid")

    attempt: int
    calls: int = 0
    regenerated: bool = False
    unhealthy: list[str] = Field(default_factory=list)
    confidence: float | None = None
    band: Band | None = None
    assertions_failed: list[str] = Field(default_factory=list)
    judge: JudgeResult | None = None
    failure_reason: str | None = None
    retry_context: RetryContext | None = None
    text: str = ""
    #: The turn's numbers (``ModelCallRecord.call``) of the calls whose output a regeneration threw
    #: away; their messages and raw outputs are in the step's ``calls``.
    discarded_calls: list[int] = Field(default_factory=list)


class StepOutcome(BaseModel):
    """What a model step hands to its gear."""

    model_config = ConfigDict(extra="forbid")

    step: str
    text: str = ""
    status: Literal["ok", "flagged", "degraded"] = "ok"
    degraded_reason: str = ""  # unhealthy:<signals> | backend:<kind>
    backend_failed: bool = False
    unhealthy_signals: int = 0
    confidence: float | None = None
    band: Band | None = None
    judge_score: float | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    supplements: list[supplement.SupplementRecord] = Field(default_factory=list)
    noncompliance: dict[str, int] = Field(default_factory=dict)
    model: str = ""
    provider: str = ""
    error: dict[str, str] | None = None
    #: The model whose output the step handed on (its last call that answered; ``lineage.author_of``).
    author: ModelIdentity | None = None
    #: A step that judges another model's output (``StepSpec.judges``): that edge's lineage.
    lineage: LineageCheck | None = None

    @property
    def degraded(self) -> bool:
        return self.status == "degraded"

    @property
    def usable(self) -> bool:
        return bool(self.text.strip()) and not self.backend_failed


@dataclass
class Assertion(Generic[T]):
    """A named check of a step's output (a model step's: its text; a deterministic step's: its
    subject); ``check`` returns None or what is wrong."""

    name: str
    check: Callable[[T], str | None]


@dataclass
class StepSpec:
    """One model step: who runs it, what it is told, what it is given, how it is checked."""

    name: str
    role: str
    purpose: str  # analyst | evaluator | reviser | consolidator | verifier
    prompt_key: str
    task: str
    package: str  # what this step alone is given (its inputs, the request): the user message
    #: What the turn's analytical steps share (the evidence package): sent ahead of the protocol
    #: and the task in the system message, so a prompt-caching backend re-reads only the tail.
    evidence: str = ""
    stream: str = ""
    primary: bool = False
    min_words: int | None = None
    supplements: bool = True
    layer: str = "model_output"
    quoted: list[str] = field(default_factory=list)  # texts a verifier was shown (not its own words)
    assertions: list[Assertion[str]] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    #: Runs inside the step on an accepted output: ``postprocess(text, step) -> text`` (e.g. a
    #: reviser's accepted/rejected record moved from the text into the step output).
    postprocess: Callable[[str, StepRecorder], str] | None = None
    #: The step judges another model's output (the cascade's cross-evaluation, the fact-check
    #: reconciler): that output's author, checked against the models that ran here by the lineage
    #: rule (``ora_core.engine.lineage``); ``edge`` names the edge, ``routed_to`` the backend the
    #: caller re-routed the role to for it (``judged_context``).
    judges: ModelIdentity | list[ModelIdentity] | None = None
    edge: str = ""
    routed_to: str = ""
    #: A JSON schema for the reply (``CompletionParams.response_schema``), sent with each call of the
    #: step. A backend that constrained its reply to it returns ``Completion.constrained``, and then
    #: ``render_structured(text) -> text`` turns the reply into the step's canonical text before
    #: anything reads it (detectors, the confidence line, the judge, supplements, ``postprocess``). A
    #: backend without the capability ignores the schema and its text goes on as it came.
    response_schema: dict[str, Any] | None = None
    schema_name: str = "reply"
    render_structured: Callable[[str], str] | None = None

    @property
    def given(self) -> str:
        """Everything the model is given as material: the step's own package, then the evidence."""
        return "\n\n".join(p for p in (self.package, self.evidence) if p)


@dataclass
class StepState:
    """What a step accumulates across its calls: supplements fetched, blocks to re-submit."""

    used: int = 0
    blocks: list[str] = field(default_factory=list)
    records: list[supplement.SupplementRecord] = field(default_factory=list)
    retrievals: list[Retrieval] = field(default_factory=list)


@dataclass
class _CallResult:
    text: str
    signals: list[Signal]
    calls: int
    sent: str
    completion: Completion | None = None
    call_numbers: list[int] = field(default_factory=list)  # the turn's numbers of the calls made


# --- small pure helpers -------------------------------------------------------------------------


def parse_confidence(text: str) -> tuple[float | None, str, str | None]:
    """``(confidence, text without the confidence lines, problem)``; the last line wins."""
    own = supplement.own_lines(text)
    value: float | None = None
    problem: str | None = None
    keep: list[str] = []
    for line, mine in zip(text.split("\n"), own, strict=True):
        match = _CONFIDENCE.match(line) if mine is not None else None
        if match is None:
            keep.append(line)
            continue
        raw = float(match.group("value"))
        if match.group("pct"):
            raw /= 100
        if 0.0 <= raw <= 1.0:
            value, problem = raw, None
        else:
            problem = f"confidence {match.group(0).strip()!r} is outside 0..1"
    return value, "\n".join(keep).strip(), problem


def band_of(value: float | None, proceed: float, retry: float) -> Band:
    if value is None:
        return "unreported"
    if value >= proceed:
        return "high"
    if value >= retry:
        return "review"
    return "low"


def judge_blocks(text: str) -> list[str]:
    """The step's judge blocks: verbatim quotations of four words or more, and ``>`` lines."""
    blocks: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(">"):
            body = stripped.lstrip("> ").strip().strip("\"“”'")
            if len(_WORDS.findall(body.lower())) >= 4:
                blocks.append(body)
            continue
        for match in _QUOTED.finditer(line):
            body = (match.group(1) or match.group(2)).strip()
            if len(_WORDS.findall(body.lower())) >= 4:
                blocks.append(body)
    return list(dict.fromkeys(blocks))


def _norm(text: str) -> str:
    return " " + " ".join(_WORDS.findall(text.lower())) + " "


def heuristic_judge(text: str, evidence: str, threshold: float) -> JudgeResult:
    blocks = judge_blocks(text)
    anchors = [a["id"] for a in GOLDEN_ANCHORS]
    if not blocks:
        return JudgeResult(judge="heuristic", score=None, threshold=threshold, passed=True, anchors=anchors,
                           detail="no judge blocks (no verbatim quotations) to score")
    haystack = _norm(evidence)
    unsupported = [b for b in blocks if _norm(b) not in haystack]
    score = round(1 - len(unsupported) / len(blocks), 4)
    return JudgeResult(judge="heuristic", score=score, threshold=threshold, passed=score >= threshold,
                       blocks=blocks, unsupported=unsupported, anchors=anchors,
                       detail=f"{len(blocks) - len(unsupported)} of {len(blocks)} quotation(s) are "
                              "verbatim in the package")


def summary(text: str, limit: int = 400) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def base_assertions() -> list[Assertion[str]]:
    return [
        Assertion("non-empty", lambda t: None if t.strip() else "the output is empty"),
        Assertion("no-prompt-leak",
                  lambda t: "the output repeats the system prompt's directive" if DIRECTIVE_MARKER in t else None),
    ]


# --- the model step ---------------------------------------------------------------------------------


async def run_model_step(gc: GearContext, spec: StepSpec) -> StepOutcome:
    """Run one probabilistic model step under the whole reliability layer (module docstring)."""
    turn, config = gc.turn, gc.runtime.config
    pipeline = config.pipeline
    max_attempts = 1 + pipeline.retries
    outcome = StepOutcome(step=spec.name)
    state = StepState()
    with turn.step(spec.name, role=spec.role, purpose=spec.purpose, kind="probabilistic", stream=spec.stream,
                   prompt_key=spec.prompt_key, task=spec.task, package=spec.package, evidence=spec.evidence,
                   backend=gc.backend_for(spec.role), **spec.inputs) as step:
        step.health.kind = "probabilistic"
        retry: RetryContext | None = None
        profile = profiles.profile_of(config, gc.backend_for(spec.role))  # the retry block's wording
        regenerated = False
        halted: dict[str, Any] | None = None
        made = len(turn.calls)
        for number in range(1, max_attempts + 1):
            attempt = Attempt(attempt=number, retry_context=retry)
            outcome.attempts.append(attempt)
            package = spec.package + ("\n\n" + retry.block(max_attempts, profile) if retry else "")
            why = "first attempt" if retry is None else f"retry {number - 1}: {retry.failure_reason}"
            try:
                result = await call_with_supplements(gc, spec, state, package, number, why=why)
                attempt.calls += result.calls
                unhealthy = _unhealthy(result.signals)
                if unhealthy and not regenerated:
                    regenerated = attempt.regenerated = True
                    attempt.unhealthy = [s.name for s in unhealthy]
                    attempt.discarded_calls = list(result.call_numbers)
                    step.health.regenerations += 1
                    turn.emit("retry", step=spec.name, reason="unhealthy", regenerate=True,
                              signals=[s.name for s in unhealthy], attempt=number,
                              discarded_calls=list(result.call_numbers))
                    result = await call_with_supplements(
                        gc, spec, state, package, number, regenerating=True,
                        why=f"regenerate: {', '.join(s.name for s in unhealthy)} (the output of call(s) "
                            f"{', '.join(map(str, result.call_numbers))} was unhealthy and is discarded)")
                    attempt.calls += result.calls
                    unhealthy = _unhealthy(result.signals)
            except BackendError as exc:
                outcome.error = exc.describe()
                outcome.status, outcome.backend_failed = "degraded", True
                outcome.degraded_reason = f"backend:{exc.kind}"
                attempt.failure_reason = f"backend {exc.kind}: {exc}"
                step.health.verdict = "BROKEN"
                step.contingency(f"{spec.name}-backend-{exc.kind}", str(exc), severity="degraded",
                                 role=spec.role, error=exc.describe())
                break
            outcome.model = getattr(result.completion, "model", "")
            outcome.provider = getattr(result.completion, "provider", "")
            confidence, text, problem = parse_confidence(result.text)
            attempt.text = text
            outcome.text = text
            if unhealthy:
                names = sorted({s.name for s in unhealthy})
                attempt.unhealthy = names
                outcome.status, outcome.degraded_reason = "degraded", "unhealthy:" + ",".join(names)
                outcome.unhealthy_signals = len(unhealthy)
                step.health.verdict = "DEGRADED"
                step.contingency(f"{spec.name}-unhealthy-after-regenerate",
                                 f"still unhealthy after one regeneration: {', '.join(names)}",
                                 severity="degraded", signals=names)
                break
            # The judge reads what the model was given as evidence: the package and its supplement
            # results, never the negative context of a retry (a quotation parroted from the
            # previous attempt's summary is not grounded by being in the retry block).
            failure = await _gates(gc, spec, step, attempt, text, confidence, problem,
                                   spec.given + "".join(state.blocks))
            outcome.confidence, outcome.band = attempt.confidence, attempt.band
            outcome.judge_score = attempt.judge.score if attempt.judge else None
            if failure is None:
                if attempt.band in ("review", "unreported"):
                    outcome.status = "flagged"
                if number > 1:
                    step.contingency(f"{spec.name}-recovered-on-attempt-{number}",
                                     f"recovered after {number - 1} retr{'y' if number == 2 else 'ies'}",
                                     severity="info")
                break
            attempt.failure_reason = failure
            if number < max_attempts:
                retry = RetryContext(attempt=number + 1, previous_summary=summary(text), failure_reason=failure)
                turn.emit("retry", step=spec.name, reason=failure, attempt=number + 1,
                          negative_context=retry.model_dump(mode="json"))
                continue
            halted = _diagnostic(gc, spec, outcome, failure)
            step.health.verdict = "FAIL"
            step.contingency(f"{spec.name}-halted-retries-exhausted",
                             f"{number} attempt(s) failed; last: {failure}", severity="error",
                             attempts=number)
        if not outcome.backend_failed:  # the last attempt's output, assessed once
            outcome.noncompliance = _compliance(gc, spec, step, state, outcome.text, result.signals)
            outcome.author = lineage.author_of(turn, spec.name)
        if spec.judges:
            _judged_edge(gc, spec, step, outcome, made)
        if spec.supplements:
            supplement.note_step(turn, spec.name, state.records)
        if spec.postprocess is not None and halted is None and outcome.text.strip() and not outcome.backend_failed:
            outcome.text = spec.postprocess(outcome.text, step)
        step.health.attempts = len(outcome.attempts)
        step.health.confidence = outcome.confidence
        step.health.judge_score = outcome.judge_score
        step.health.supplements = state.used
        step.health.noncompliance = dict(outcome.noncompliance)
        outcome.supplements = list(state.records)
        step.output.update(text=outcome.text, status=outcome.status, degraded_reason=outcome.degraded_reason,
                           confidence=outcome.confidence, band=outcome.band, judge_score=outcome.judge_score,
                           attempts=[a.model_dump(mode="json") for a in outcome.attempts],
                           supplements=[r.model_dump(mode="json") for r in state.records],
                           noncompliance=outcome.noncompliance, model=outcome.model, error=outcome.error,
                           author=outcome.author.model_dump(mode="json") if outcome.author else None)
        if halted is not None:
            step.output["diagnostic"] = halted
    if halted is not None:
        raise StepHalted(spec.name, halted)
    return outcome


def _judged_edge(gc: GearContext, spec: StepSpec, step: StepRecorder, outcome: StepOutcome, made: int) -> None:
    """The lineage of a step that judges another model's output, by the models that ran in it."""
    policy = lineage.policy_of(gc.runtime.config)
    judged = lineage.check(spec.edge or f"{spec.role} ({spec.name})", spec.judges,
                           lineage.ran_in(gc.turn, spec.name, made), policy, routed_to=spec.routed_to)
    outcome.lineage = judged
    step.output["lineage"] = judged.model_dump(mode="json")
    lineage.record(gc.turn, spec.name, judged)
    if judged.flagged and policy == "refuse" and not outcome.backend_failed:
        outcome.status, outcome.degraded_reason = "degraded", "lineage-refused"


def judged_context(gc: GearContext, role: str, author: ModelIdentity | list[ModelIdentity] | None, step: str,
                   prefer: str | None = None) -> tuple[GearContext, str, str]:
    """The gear context a step judging ``author``'s output runs in: ``(gc, routed_to, refused)``.
    Under ``same_lineage = "refuse"`` (or with a ``prefer``red backend of another lineage) the
    role is re-routed for this step only (``lineage.route``); ``refused`` says why no backend of
    another lineage exists (the caller does not run the step then)."""
    if not author:
        return gc, "", ""
    routed, refused = lineage.route(gc.runtime.config, gc.turn.host, gc.pool, role, author,
                                    lineage.policy_of(gc.runtime.config), prefer)
    if not routed:
        return gc, "", refused
    if routed != prefer:
        gc.turn.contingency("lineage-rerouted", step, f"{role} re-routed from {gc.backend_for(role)} to {routed}: "
                            f"its lineage is not different from {lineage.label(author)}'s", severity="info", role=role,
                            chosen=routed)
    return replace(gc, overrides={**gc.overrides, role: routed}), routed, ""


def refused_outcome(gc: GearContext, spec: StepSpec, refused: str) -> StepOutcome:
    """A judging step ``refuse`` did not run (no backend of another lineage): degraded, named, in a
    step of its own so the trace shows it."""
    outcome = StepOutcome(step=spec.name, status="degraded", degraded_reason="lineage-refused")
    with gc.turn.step(spec.name, role=spec.role, purpose=spec.purpose, kind="probabilistic", stream=spec.stream,
                      prompt_key=spec.prompt_key, backend=gc.backend_for(spec.role)) as step:
        step.health.kind = "probabilistic"
        step.health.verdict = "BROKEN"
        judged = lineage.refused(spec.edge or spec.name, spec.judges, gc.runtime.config, gc.backend_for(spec.role),
                                 spec.role, refused)
        outcome.lineage = judged
        step.output.update(status="degraded", degraded_reason="lineage-refused", lineage=judged.model_dump(mode="json"))
        step.contingency(f"{spec.name}-lineage-refused", refused, severity="degraded", edge=judged.edge)
    return outcome


def _unhealthy(signals: list[Signal]) -> list[Signal]:
    return [s for s in signals if s.kind == "unhealthy" and s.strength == "strong"]


async def _gates(gc: GearContext, spec: StepSpec, step: StepRecorder, attempt: Attempt, text: str,
                 confidence: float | None, problem: str | None, sent: str) -> str | None:
    """Confidence routing, assertions, judge, in that order; the first failure, or None."""
    pipeline = gc.runtime.config.pipeline
    attempt.confidence = confidence
    attempt.band = band_of(confidence, pipeline.confidence_proceed, pipeline.confidence_retry)
    if attempt.band == "unreported":
        step.contingency(f"{spec.name}-confidence-missing",
                         problem or "the output has no 'CONFIDENCE: 0.xx' line; proceeding flagged "
                                    "(band 'unreported')", severity="warning")
    elif attempt.band == "review":
        step.contingency(f"{spec.name}-confidence-review",
                         f"confidence {confidence:.2f} is in the review band "
                         f"[{pipeline.confidence_retry}, {pipeline.confidence_proceed}): proceeding, flagged",
                         severity="info", confidence=confidence)
    elif attempt.band == "low":
        return f"confidence {confidence:.2f} below {pipeline.confidence_retry}"
    for assertion in [*base_assertions(), *spec.assertions]:
        wrong = assertion.check(text)
        if wrong:
            attempt.assertions_failed.append(assertion.name)
            return f"assertion {assertion.name!r} failed: {wrong}"
    attempt.judge = await judge(gc, spec, text, sent)
    gc.turn.emit("judge", step=spec.name, attempt=attempt.attempt, **attempt.judge.model_dump(mode="json"))
    if not attempt.judge.passed:
        shown = "; ".join(repr(u[:80]) for u in attempt.judge.unsupported[:3])
        return (f"judge score {attempt.judge.score:.2f} below {attempt.judge.threshold:.2f}: "
                f"quotation(s) not in the package: {shown}")
    return None


JUDGE_TASK = """\
ROLE: BOUNDARY JUDGE. Score how well the quotations below are grounded in the package: the
share of them that appear in the package word for word. Worked examples (golden anchors):
{anchors}
Reply with one line `SCORE: 0.00` to `SCORE: 1.00` and one line per unsupported quotation."""
_SCORE = re.compile(r"^[\s*_#-]*score[\s*_]*[:=]\s*(?P<value>[0-9]*\.?[0-9]+)", re.IGNORECASE | re.MULTILINE)


async def judge(gc: GearContext, spec: StepSpec, text: str, sent: str) -> JudgeResult:
    """The automatic judge over the step's judge blocks (heuristic offline, or the model)."""
    threshold = gc.runtime.config.pipeline.judge_threshold
    heuristic = heuristic_judge(text, sent, threshold)
    if gc.runtime.config.pipeline.judge != "model" or not heuristic.blocks:
        return heuristic
    anchors = "\n".join(f"- evidence: {a['evidence']}\n  output: {a['output']}\n  SCORE: {a['score']} ({a['why']})"
                        for a in GOLDEN_ANCHORS)
    user = "## JUDGE BLOCKS\n" + "\n".join(f"- {b}" for b in heuristic.blocks) + "\n\n## PACKAGE\n" + sent
    messages = build_turn_messages(gc.turn, JUDGE_TASK.format(anchors=anchors), user)
    turn = gc.turn
    author = lineage.author_of(turn, spec.name)  # the output being judged: the step's last answer so far
    judge_gc, routed, refused = judged_context(gc, "verifier", author, spec.name)
    edge = f"model judge (verifier role) on {spec.name}"
    if refused:
        judged = lineage.refused(edge, author, gc.runtime.config, gc.backend_for("verifier"), "verifier", refused)
        turn.contingency(f"{spec.name}-judge-lineage-refused-used-heuristic", spec.name, refused, severity="degraded")
        return heuristic.model_copy(update={"lineage": judged.model_dump(mode="json")})
    made = len(turn.calls)
    try:
        completion = await call_role(turn, judge_gc.pool, "verifier", messages, prompt_key=lineage.JUDGE_PROMPT_KEY,
                                     step=spec.name, why=f"judge: the quotations of {spec.name}")
    except BackendError as exc:
        turn.contingency(f"{spec.name}-judge-model-failed-used-heuristic", spec.name, str(exc),
                         severity="warning")
        return heuristic
    policy = lineage.policy_of(gc.runtime.config)
    judged = lineage.check(edge, author, lineage.ran_in(turn, spec.name, made, judge=True), policy, routed_to=routed)
    lineage.record(turn, spec.name, judged)
    if judged.flagged and policy == "refuse":
        return heuristic.model_copy(update={"lineage": judged.model_dump(mode="json")})
    scores = [float(m.group("value")) for m in _SCORE.finditer(completion.text)]
    if not scores or not 0.0 <= scores[-1] <= 1.0:
        gc.turn.contingency(f"{spec.name}-judge-model-unparseable-used-heuristic", spec.name,
                            f"no 'SCORE: 0.xx' line in {summary(completion.text, 160)!r}", severity="warning")
        return heuristic
    return JudgeResult(judge="model", score=scores[-1], threshold=threshold, passed=scores[-1] >= threshold,
                       blocks=heuristic.blocks, unsupported=heuristic.unsupported, anchors=heuristic.anchors,
                       detail=summary(completion.text, 600), lineage=judged.model_dump(mode="json"))


def _compliance(gc: GearContext, spec: StepSpec, step: StepRecorder, state: StepState, text: str,
                signals: list[Signal]) -> dict[str, int]:
    """Seed 000 §5.3's per-step patterns, from the supplement records and the ``unsupported_specifics``
    signals of the evidence-checking detectors (ora-grounding's ``unsupported-specifics``)."""
    flagged = supplement.unsupported_specifics(signals)
    missing = list(dict.fromkeys(str(m) for s in flagged for m in (s.data.get("missing") or [s.matched])))
    found = supplement.assess_compliance(state.records, text, signals, gc.runtime.config.pipeline.max_supplements)
    for name, count in found.items():
        severity = "info" if name == "unneeded-request" else "warning"
        step.contingency(f"{step.name}-{name}", f"supplement protocol non-compliance: {name} (x{count})",
                         severity=severity, pattern=name, count=count,
                         unsupported_specifics=missing[:10] if name.endswith("confabulator") else [])
    if missing:
        step.output["unsupported_specifics"] = missing
    return found


def _diagnostic(gc: GearContext, spec: StepSpec, outcome: StepOutcome, failure: str) -> dict[str, Any]:
    return {
        "step": spec.name, "role": spec.role, "purpose": spec.purpose, "gear": gc.gear,
        "mode": gc.package.mode, "backend": gc.backend_for(spec.role), "final_failure": failure,
        "attempts": [{"attempt": a.attempt, "failure_reason": a.failure_reason, "confidence": a.confidence,
                      "band": a.band, "judge_score": a.judge.score if a.judge else None,
                      "unsupported_quotations": a.judge.unsupported if a.judge else [],
                      "assertions_failed": a.assertions_failed,
                      "negative_context": a.retry_context.model_dump(mode="json") if a.retry_context else None,
                      "output_summary": summary(a.text, 600)} for a in outcome.attempts],
        "retries": len(outcome.attempts) - 1,
    }


async def call_with_supplements(gc: GearContext, spec: StepSpec, state: StepState, package: str, attempt: int, *,
                regenerating: bool = False, why: str = "first attempt") -> _CallResult:
    """One answer from the model, through the supplement loop; raises ``BackendError``. ``why``:
    why the first call is made (a re-submission after a supplement adds ``; supplement round n``)."""
    turn, config = gc.turn, gc.runtime.config
    cap = config.pipeline.max_supplements if spec.supplements else 0
    profile = profiles.profile_of(config, gc.backend_for(spec.role))  # the wording of this step's texts
    calls = 0
    numbers: list[int] = []
    pending: supplement.SupplementRecord | None = None
    while True:
        extra = ([profiles.CONFIDENCE.text(profile), profiles.QUOTE.text(profile)]
                 if spec.purpose != "verifier" else [])
        if spec.supplements:
            extra.append(supplement.protocol_text(cap, profile))
            if state.used >= cap and state.used > 0:
                extra.append(supplement.coverage_gap_text(cap, profile))
        user = package + "".join(state.blocks)
        messages = build_turn_messages(turn, spec.task, user, extra_system="\n\n".join(extra),
                                       context=spec.evidence, profile=profile)
        calls += 1
        reason = why if calls == 1 else f"{why}; supplement round {state.used}"
        made = len(turn.calls)
        try:
            text, completion = await _model_call(gc, spec, messages, attempt, calls, regenerating, reason)
        except BackendError:
            if pending is not None:
                supplement.finish(turn, pending, None, False)
            raise
        finally:
            numbers += [c.call for c in turn.calls[made:] if c.step == spec.name]
        # what the model was given, minus a retry's negative context: text found there is not an echo
        given = spec.given + "".join(state.blocks)
        signals = _detect(gc, spec, text, given)
        request, notes = (supplement.parse_request(text, sent=package + "\n\n" + spec.evidence
                                                   + supplement.fetched_text(state.retrievals))
                          if spec.supplements else (None, []))
        if pending is not None:
            supplement.finish(turn, pending, text, request is not None)
            pending = None
        for note in notes:
            turn.contingency(f"{spec.name}-supplement-request-ignored", spec.name, note, severity="info")
        if request is None:
            return _CallResult(text=text, signals=signals, calls=calls, sent=user, completion=completion,
                               call_numbers=numbers)
        if state.used >= cap:
            turn.contingency(f"{spec.name}-supplement-request-over-cap", spec.name,
                             f"a request after the cap of {cap} was not run: {request.gap[:160]}",
                             severity="warning", query=request.query)
            rest = supplement.strip_request(text)
            return _CallResult(text=rest, signals=_detect(gc, spec, rest, given) if rest != text else signals,
                               calls=calls, sent=user, completion=completion, call_numbers=numbers)
        state.used += 1
        if request.malformed:
            turn.contingency(f"{spec.name}-supplement-request-malformed", spec.name,
                             f"request lacks {', '.join(request.malformed)}; ran with what it had",
                             severity="info")
        # "Did the package already hold these terms?" is asked of the evidence the model had (the
        # step's package and what earlier supplements fetched), not of the protocol's own blocks
        # (a repeated request would find its own query terms in them).
        had = spec.given + "".join("\n" + c.text for r in state.retrievals for c in r.chunks)
        record, retrievals, block = await supplement.fetch(gc.runtime, turn, spec.name, request, state.used, had)
        state.records.append(record)
        state.retrievals.extend(retrievals)
        gc.add_supplements(retrievals)
        state.blocks.append(f"\n\n{request.block}\n\n{block}")
        pending = record


async def _model_call(gc: GearContext, spec: StepSpec, messages: list[Message], attempt: int, call: int,
                      regenerating: bool, why: str) -> tuple[str, Completion]:
    # The fault points are built only when an injector is active: without one ``faults.inject``
    # returns what it is given, and the two shapes per call would be built for nothing.
    def model_call_point() -> FaultPoint:
        return FaultPoint(site="model_call", step=spec.name, role=spec.role, purpose=spec.purpose,
                          primary=spec.primary, step_kind="verification" if spec.purpose == "verifier"
                          else "probabilistic", attempt=attempt, call=call, stream=spec.stream, gear=gc.gear)

    point: FaultPoint | None = None
    if faults.active(gc.turn) is not None:
        point = model_call_point()
        faults.inject(gc.turn, point)
    # The compact profile's reply cap for this kind of step (``profiles.CompactFit.max_tokens``,
    # named in the context step's budget signal 4); None under ``full``.
    cap = profiles.max_tokens_cap(gc.runtime.config, gc.backend_for(spec.role), spec.purpose)
    # only a step with a schema passes one: call_role's fast path (no overrides) stays the usual call's
    schema = ({"response_schema": spec.response_schema, "schema_name": spec.schema_name}
              if spec.response_schema is not None else {})
    completion = await call_role(gc.turn, gc.pool, spec.role, messages,
                                 prompt_key=spec.prompt_key + (".regenerate" if regenerating else ""),
                                 step=spec.name, max_tokens_cap=cap, why=why, **schema)
    text = completion.text
    if completion.constrained and spec.render_structured is not None:
        text = spec.render_structured(text)  # the raw JSON stays the call record's output
    if faults.active(gc.turn) is None:
        return text, completion
    point = point or model_call_point()
    return faults.inject(gc.turn, point.model_copy(update={"site": "model_output"}), text), completion


def _detect(gc: GearContext, spec: StepSpec, text: str, sent: str = "") -> list[Signal]:
    """Every detector of the step's layer over one output, told what the model was given
    (``sent``, without a retry's negative context) and what the orchestrator added to its prompt
    (``ctx.data["material"]``, a ``StepMaterial``: the prompt-echo detector reads it)."""
    data = gc.turn.data
    min_words = spec.min_words if spec.min_words is not None else 40
    EXPECTED_MIN_WORDS.put(data, min_words)
    EVIDENCE.put(data, gc.evidence())
    MATERIAL.put(data, step_material(spec, sent, control_texts(gc.runtime.config.pipeline.max_supplements),
                                     min_words))
    if spec.quoted:
        VERIFIER_QUOTED.put(data, spec.quoted)
    try:
        return gc.turn.detect(spec.layer, text, step=spec.name)
    finally:
        EXPECTED_MIN_WORDS.drop(data)
        VERIFIER_QUOTED.drop(data)
        MATERIAL.drop(data)


def step_material(spec: StepSpec, sent: str, instructions: tuple[str, ...], min_words: int) -> StepMaterial:
    """The ``StepMaterial`` of one detection, built from its typed parts without a validation
    pass (pinned equal to the validated shape by ``tests/test_step_material.py``); parts of
    other types take the validating path."""
    given, quoted = list(instructions), list(spec.quoted)
    fields = {"step": spec.name, "purpose": spec.purpose, "given": sent, "instructions": given,
              "retry_phrases": list(RETRY_PHRASES), "expected_min_words": min_words, "quoted": quoted}
    if (type(spec.name) is str and type(spec.purpose) is str and type(sent) is str and type(min_words) is int
            and all(type(t) is str for t in given) and all(type(q) is str for q in quoted)):
        return assembled(StepMaterial, fields)
    return StepMaterial(**fields)


#: Fixed phrases of the retry block (``RetryContext.block``): the negative context goes in the
#: prompt and must never come back in an answer.
RETRY_PHRASES = ("retry context negative feedback", "your previous attempt failed",
                 "previous attempt summary", "do not repeat that failure")


@functools.cache
def control_texts(cap: int) -> tuple[str, ...]:
    """The instructions the reliability layer adds to a step's prompt (never to be parroted), in
    both profiles' wordings: an echo of either is an echo. Cached by ``cap`` (the wordings are
    frozen module constants)."""
    return tuple(text for profile in profiles.PROFILES
                 for text in (profiles.CONFIDENCE.text(profile), profiles.QUOTE.text(profile),
                              supplement.protocol_text(cap, profile), supplement.coverage_gap_text(cap, profile)))


# --- a model step on a component's behalf -------------------------------------------------------


async def ask_model(gc: GearContext, request: ModelRequest, ctx: CallContext) -> ModelReply:
    """Run a component's ``ModelRequest`` (``ctx.ask_model``) as a model call of this turn: the
    directive and Phase A's assumptions, the Supplemental RAG protocol, the role ledger, the
    layer's detectors. The role is the request's, else the one of the verification the component
    serves (``ctx.verification``). Raises ``BackendError`` when every backend of the role failed."""
    call = ctx.verification
    role = request.role or (call.role if call is not None else "verifier")
    step = call.step if call is not None else f"{role}-call"
    evidence = request.evidence if request.evidence is not None else gc.evidence_block()
    spec = StepSpec(name=step, role=role, purpose=request.purpose,
                    prompt_key=request.prompt_key or f"verify.{role}", task=request.task,
                    package=request.package, evidence=evidence, stream=call.slot if call is not None else "",
                    layer=request.layer, quoted=list(request.quoted), supplements=request.supplements,
                    response_schema=request.response_schema, schema_name=request.schema_name)
    state = StepState()
    try:
        result = await call_with_supplements(gc, spec, state, request.package, 1,
                                             why=f"{request.purpose}: {step}" if call is None
                                             else f"verify: {call.step}")
    finally:
        if spec.supplements:
            supplement.note_step(gc.turn, step, state.records)
    completion = result.completion
    return ModelReply(text=result.text, signals=result.signals, provider=getattr(completion, "provider", ""),
                      model=getattr(completion, "model", ""), calls=result.calls, supplements=state.used)


# --- deterministic steps ----------------------------------------------------------------------------


def run_deterministic_step(turn: TurnContext, name: str, subject: T, assertions: Sequence[Assertion[T]],
                           **inputs: Any) -> T:
    """Check ``subject`` once against ``assertions``; a failure halts at once (no retry, no judge).

    ``assertions`` take the subject (not text) here: ``Assertion(name, check)`` with
    ``check(subject) -> None | what is wrong``."""
    with turn.step(name, kind="deterministic", **inputs) as step:
        step.health.kind = "deterministic"
        results = []
        failed: tuple[str, str] | None = None
        for assertion in assertions:
            wrong = assertion.check(subject)
            results.append({"assertion": assertion.name, "ok": wrong is None, "detail": wrong})
            if wrong and failed is None:
                failed = (assertion.name, wrong)
        step.output.update(assertions=results, attempts=1)
        if failed is not None:
            step.health.verdict = "FAIL"
            step.contingency(f"{name}-assertion-{failed[0]}-failed-halted", failed[1], severity="error")
            diagnostic = {"step": name, "kind": "deterministic", "final_failure":
                          f"assertion {failed[0]!r} failed: {failed[1]}", "assertions": results,
                          "retries": 0}
            step.output["diagnostic"] = diagnostic
    if failed is not None:
        raise StepHalted(name, diagnostic)
    return subject
