"""Pydantic shapes for everything that crosses a boundary (plugin <-> kernel, step <-> step,
process <-> disk). Validated once, at the boundary; error messages name the field path."""

from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def assembled(cls: type[Any], fields: dict[str, Any]) -> Any:
    """An instance of the pydantic model ``cls`` from ``fields``: every field given, each value
    already of its field's type (no defaults to fill, no extras, no private attributes). What
    validating them would build, at a third of ``model_construct``'s cost, for shapes built on
    every model call or event; each caller pins it equal to the validated instance in a test."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(cls.model_fields)
    obj = object.__new__(cls)
    object.__setattr__(obj, "__dict__", fields)
    object.__setattr__(obj, "__pydantic_fields_set__", set(names))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


# --- model calls -------------------------------------------------------------------------


class Message(_Shape):
    role: Literal["system", "user", "assistant"]
    content: str


class StopUnless(_Shape):
    """A reply the caller can only use if ``text`` (case-insensitive) appears within its first
    ``within_chars`` characters. A backend that watches its reply as it is generated may stop
    there and report ``finish_reason = "stop_unless"``; one that cannot, ignores it (it is a
    saving, never a change to what a usable reply looks like)."""

    text: str = Field(min_length=1)
    within_chars: int = Field(gt=0)


class CompletionParams(_Shape):
    """What a caller asks of one model call."""

    model: str = ""
    max_tokens: int = Field(default=512, ge=1)
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    stop: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=120.0, gt=0)
    stream: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)
    stop_unless: StopUnless | None = None
    #: A JSON schema (an object schema) the reply must follow. A backend that can constrain its
    #: generation to it (``structured_output = True`` on the backend object) does, ignores
    #: ``stop_unless`` for that call, and returns ``Completion.constrained = True``; one that cannot
    #: ignores it (``constrained = False``) and the caller reads the reply as text. ``schema_name``
    #: names it where a wire format asks for a name (OpenAI's ``json_schema.name``).
    response_schema: dict[str, Any] | None = None
    schema_name: str = Field(default="reply", pattern=r"^[A-Za-z0-9_-]{1,64}$")


class Completion(_Shape):
    """A successful model call. Failures are ``BackendError`` exceptions, never a Completion."""

    text: str
    provider: str
    model: str
    family: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = ""
    cached: bool = False
    attempts: int = Field(default=1, ge=1)  # HTTP attempts the backend made (retries + 1)
    # Fallbacks the backend took that did not stop the answer (a response cache it could not write, a
    # model loaded slower than configured), one line each: the kernel names each in the turn's trace
    # (a ``<step>-backend-warning`` contingency), as a backend has no turn to record them in.
    warnings: list[str] = Field(default_factory=list)
    #: The backend constrained this reply to ``CompletionParams.response_schema`` (its text is
    #: meant to be one JSON document of that schema; the caller still validates it).
    constrained: bool = False


class ModelCallRecord(_Shape):
    """One entry of the role ledger: what was planned for a role and what actually ran."""

    role: str
    prompt_key: str
    planned_provider: str
    planned_model: str
    effective_provider: str = ""
    effective_model: str = ""
    fallback_flags: list[str] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: dict[str, str] | None = None
    attempts: int = Field(default=1, ge=1)  # retries inside the backend show here
    cached: bool = False  # answered from a response cache, not by a model call
    # --- the call itself (additive): who ran it, why, and what exactly went in and came out ------
    call: int = 0  # its number in the turn, 1-based, in the order the calls were made
    step: str = ""  # the step that made it
    step_call: int = 0  # its number within that step, 1-based (``ora trace replay --step S --call N``)
    planned_backend: str = ""  # the configured backend the role names
    backend: str = ""  # the configured backend that ran it (after fallbacks and the tokens-per-minute guard)
    family: str = ""  # that backend's declared family ("" when undeclared)
    #: Why the call was made: ``first attempt``, ``regenerate: <signals>``, ``retry <n>: <reason>``,
    #: ``verify``, ``judge``, ``phase A``, ``direct``..., with ``; supplement round <n>`` when it
    #: re-submits a package after a Supplemental RAG request.
    why: str = ""
    finish_reason: str = ""  # the backend's (``stop``, ``length``, ...), ``error`` when it failed
    #: The exact messages sent, the parameters, and the raw output (on a failure, the partial output
    #: a backend received before it failed, else None). Kept in the trace's step files; left out of
    #: dumps of the ledger (``TurnResult.runtime_role_models``, turn.json) so a result stays small.
    messages: list[Message] = Field(default_factory=list, exclude=True)
    params: dict[str, Any] = Field(default_factory=dict, exclude=True)
    output: str | None = Field(default=None, exclude=True)

    @property
    def mismatch(self) -> bool:
        return bool(self.effective_model) and (
            self.effective_provider != self.planned_provider
            or self.effective_model != self.planned_model
        )


# --- retrieval -----------------------------------------------------------------------------


#: ``Provenance.extra`` key of the instruction-like passages the engine found in a retrieved chunk
#: (``context_package`` detectors of kind ``instruction``): a list of marks, each with the
#: ``detector``, the rule ``name``, its ``strength`` and the ``matched`` text. The chunk is kept as
#: data; a verifier should not count a marked passage as support for anything.
INSTRUCTION_MARK_KEY = "instruction_like"


class Provenance(_Shape):
    """Where a chunk came from; carried by every chunk, end to end."""

    collection: str
    source: str  # a vault path or a URL
    heading: str = ""
    type: str = ""
    source_type: str = ""
    approved: bool = False
    score: float = 0.0
    weight: float = 1.0
    ingested_at: datetime | None = None
    stream: str = ""  # concept | conversation | relationship | web | supplement
    extra: dict[str, Any] = Field(default_factory=dict)


class Chunk(_Shape):
    id: str
    text: str
    provenance: Provenance


class EmptyReason(str, Enum):
    index_empty = "index_empty"
    no_match = "no_match"
    filtered_out = "filtered_out"
    ranker_truncation = "ranker_truncation"


class EmptyDiagnosis(_Shape):
    """Why a retrieval came back empty without an exception: empty is never ambiguous."""

    empty_reason: EmptyReason
    collection_total_count: int = 0
    raw_chunks_returned: int = 0
    filtered_chunks_returned: int = 0
    filters_applied: dict[str, Any] = Field(default_factory=dict)
    detail: str = ""


class Retrieval(_Shape):
    stream: str
    query: str
    chunks: list[Chunk] = Field(default_factory=list)
    empty_diagnosis: EmptyDiagnosis | None = None
    retriever: str = ""
    latency_s: float = 0.0

    @property
    def empty(self) -> bool:
        return not self.chunks


class RetrievalFilters(_Shape):
    types: list[str] = Field(default_factory=list)
    source_types: list[str] = Field(default_factory=list)
    approved_only: bool = False
    collections: list[str] = Field(default_factory=list)
    min_score: float | None = None


# --- detection and verification ---------------------------------------------------------------


class Signal(_Shape):
    """What a detector found."""

    detector: str
    kind: str  # bypass | mode_signal | unhealthy | broken | supplement_request | specifics ...
    name: str
    strength: Literal["strong", "weak"] = "strong"
    matched: str = ""
    start: int | None = None
    end: int | None = None
    mode: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class VerdictStatus(str, Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    BROKEN = "BROKEN"


class Verdict(_Shape):
    status: VerdictStatus
    verifier: str
    reasons: list[str] = Field(default_factory=list)
    raw_output: str = ""
    score: float | None = None
    unsupported_claims: list[str] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)


# --- reliability and health ---------------------------------------------------------------------


#: How bad a contingency is: ``degraded`` and ``error`` mark the step's health degraded.
Severity = Literal["info", "warning", "degraded", "error"]


class Contingency(_Shape):
    """A named fallback that fired. Graceful degradation, recorded and counted."""

    name: str
    step: str
    detail: str = ""
    severity: Severity = "warning"
    at: datetime = Field(default_factory=utc_now)
    data: dict[str, Any] = Field(default_factory=dict)


class StepHealth(_Shape):
    step: str
    verdict: Literal["PASS", "FAIL", "BROKEN", "SKIPPED", "OK", "DEGRADED"] = "OK"
    contingencies: list[str] = Field(default_factory=list)
    degraded: bool = False
    attempts: int = 1
    latency_s: float = 0.0
    # The reliability layer's per-step record (seed 003; seed 000 §5.3), for trend detection.
    kind: str = ""  # probabilistic | deterministic | verification | ""
    regenerations: int = 0
    confidence: float | None = None
    judge_score: float | None = None
    supplements: int = 0
    noncompliance: dict[str, int] = Field(default_factory=dict)


TurnStatus = Literal["ok", "degraded", "needs_clarification", "halted"]

# --- trace events ---------------------------------------------------------------------------------

EventKind = Literal[
    "turn_started",
    "step_started",
    "step_finished",
    "model_call",
    "retrieval",
    "rag_failure",
    "supplement",
    "contingency",
    "oversight",
    "turn_finished",
    "sink_failure",
    "note",
    "detection",
    "fault_injected",
    "judge",
    "retry",
]


class TraceEvent(_Shape):
    """One typed event of a turn, sent to every registered trace sink."""

    kind: EventKind
    turn_id: str
    conversation_id: str
    seq: int = 0
    at: datetime = Field(default_factory=utc_now)
    step: str = ""
    step_index: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class TurnInfo(_Shape):
    """What a sink needs to know about the turn it is recording."""

    turn_id: str
    conversation_id: str
    started_at: datetime
    prompt: str
    config_hash: str
    plugins: dict[str, str] = Field(default_factory=dict)  # plugin name -> version


# --- fact-check (seed 002: claim verification by debate, gear 5) --------------------------------

#: The verdict bands of a truth percentage (>= 86 TRUE, >= 72 MOSTLY-TRUE, >= 58 LEANING-TRUE,
#: >= 43 MIXED, >= 29 LEANING-FALSE, >= 15 MOSTLY-FALSE, else FALSE); a MIXED truth with a
#: confidence under ``fact_check.unverified_below_confidence`` (40) is UNVERIFIED, and so is a claim
#: the evidence sufficiency gate stopped.
VerdictBand = Literal["TRUE", "MOSTLY-TRUE", "LEANING-TRUE", "MIXED", "UNVERIFIED", "LEANING-FALSE",
                      "MOSTLY-FALSE", "FALSE"]
EvidenceDirection = Literal["supports", "contradicts", "neutral"]
SourceClass = Literal["institutional", "general"]

#: Warning types of a fact-check turn that count as degradations (seed 002's C18 degradation rate:
#: occurrences per 100 model calls): what went wrong with a model call, each counted once. Refusals
#: are counted apart (type ``refusal``). What a degradation led to (``challenger_unavailable``,
#: ``reconciler_unavailable``, ``self_consistency_unavailable``, ``directions_unavailable``) and
#: the controls' own findings (``insufficient_evidence``, ``evidence_pool_imbalance``,
#: ``contrarian_skipped``, ``reconciler_revert``) are warnings too, not counted here.
FACT_CHECK_DEGRADATION_TYPES: tuple[str, ...] = (
    "role_call_failed",  # the backend chain failed: no reply
    "role_call_degraded",  # unhealthy after one regeneration (stub, loop, leaked tool call, refusal)
    "role_call_halted",  # the reliability layer's retries ran out
    "role_call_fallback",  # a call ran on a fallback backend (an error, or the tokens-per-minute guard)
    "role_reply_unparsed",  # the reply did not carry the fields the role's format asks for
    "validation_failed",  # grounding FAIL or BROKEN, or a direction check failed
    "contrarian_retrieval_failed",  # a contrarian query's retriever failed (the run went on)
)


class EvidenceItem(_Shape):
    """One item of a claim's evidence pool: a retrieved chunk with the ID the debate cites it by.

    ``source_type`` is the chunk provenance's (``unknown`` when it has none); ``source_class`` its
    class under ``fact_check.source_classes`` (seed 002: institutional or general).
    ``direction_source`` says how the direction was obtained: ``model`` (the ``evidence`` role's
    labelling call), ``provenance`` (``provenance.extra["direction"]``) or ``unlabelled`` (neither:
    counted neutral, and named). ``search_strategy`` is ``contrarian`` for what the contrarian pass
    found (``provenance.extra["searchStrategy"]``)."""

    id: str
    text: str
    source: str
    source_type: str = "unknown"
    source_class: SourceClass = "general"
    direction: EvidenceDirection = "neutral"
    direction_source: Literal["model", "provenance", "unlabelled"] = "unlabelled"
    search_strategy: Literal["research", "contrarian"] = "research"
    stream: str = ""
    chunk_id: str = ""
    score: float = 0.0


class EvidenceCounts(_Shape):
    """A claim's evidence pool in numbers. ``support_ratio`` is supports / (supports + contradicts),
    ``None`` when no item is directional (seed 002's stage flag reads that as 0.5);
    ``distinct_source_types`` does not count ``unknown``."""

    total: int = 0
    by_source_type: dict[str, int] = Field(default_factory=dict)
    by_source_class: dict[str, int] = Field(default_factory=dict)
    distinct_source_types: int = 0
    supports: int = 0
    contradicts: int = 0
    neutral: int = 0
    unlabelled: int = 0  # also counted in ``neutral``
    directional: int = 0
    support_ratio: float | None = None
    contrarian: int = 0


class FactCheckWarning(_Shape):
    """A warning of a claim (or of the turn): ``type`` (``evidence_pool_imbalance``,
    ``contrarian_skipped``, ``reconciler_revert``, ``refusal``, or one of
    ``FACT_CHECK_DEGRADATION_TYPES`` ...), a message, and how many times it occurred."""

    type: str
    message: str
    occurrences: int = Field(default=1, ge=1)
    role: str = ""
    step: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class RoleReading(_Shape):
    """What one verdict-giving role call (advocate, a self-consistency re-run, reconciler) said.
    ``parsed`` False: the reply lacked a field its format asks for (``problem`` names it); the
    numbers are then None, never a default."""

    role: str
    step: str
    run: int = 0
    status: str = ""  # the step's: ok | flagged | degraded | failed | halted
    parsed: bool = False
    problem: str = ""
    truth_pct: float | None = None
    confidence: float | None = None
    cited_evidence_ids: list[str] = Field(default_factory=list)
    invalid_evidence_ids: list[str] = Field(default_factory=list)  # cited, but not shown to the role
    reasoning: str = ""


class SelfConsistency(_Shape):
    """The advocate's verdict and its re-runs: ``values`` (role step -> truth percentage, the
    advocate first), ``spread_pp`` = max - min of them, and the factor confidence is scaled by
    (``fact_check.spread_factors``). ``status``: measured (every re-run read), partial, unavailable
    (none read: the spread is unknown and ``spread_unknown_factor`` applies), disabled (0 runs)."""

    runs_requested: int
    runs: list[RoleReading] = Field(default_factory=list)
    values: dict[str, float] = Field(default_factory=dict)
    spread_pp: float | None = None
    factor: float
    status: Literal["measured", "partial", "unavailable", "disabled"]


class ChallengePoint(_Shape):
    """One point of the challenger: which way the truth percentage should move, how much (high is
    about 20 pp or more), its type and the evidence it cites. ``valid``: it cites at least one ID
    of the evidence the challenger was shown; a move based on an invalid point is reverted."""

    id: str
    direction: Literal["higher", "lower"]
    severity: Literal["high", "medium", "low"]
    type: str
    argument: str
    evidence_ids: list[str] = Field(default_factory=list)
    invalid_evidence_ids: list[str] = Field(default_factory=list)
    valid: bool = False


class PointResponse(_Shape):
    """The reconciler's answer to one challenge point; ``reverted_pp``: the part of its move the
    revert rule took back (the point cited no valid evidence)."""

    point: str
    accepted: bool
    effect_pp: float | None = None
    reason: str = ""
    reverted_pp: float = 0.0


class Reconciliation(_Shape):
    """The reconciler's verdict before and after the revert rule."""

    reading: RoleReading
    responses: list[PointResponse] = Field(default_factory=list)
    proposed_truth_pct: float | None = None
    truth_pct: float | None = None
    confidence: float | None = None
    reverted_pp: float = 0.0
    rule: str = ""  # how the revert was computed


class ValidationReport(_Shape):
    """The validation role's checks of the reconciled verdict: ``grounding`` by the project's
    verifier (``verification.verifier``, the non-LLM grounding verifier by default) over the
    reasoning against the claim's evidence; ``direction`` by a deterministic check of the truth
    percentage against the cited items' directions; ``model_*`` by the ``validation`` role."""

    grounding: Literal["PASS", "FAIL", "BROKEN", "SKIPPED"] = "SKIPPED"
    grounding_verifier: str = ""
    grounding_score: float | None = None
    grounding_reasons: list[str] = Field(default_factory=list)
    direction: Literal["consistent", "inconsistent", "undetermined"] = "undetermined"
    direction_detail: str = ""
    model_grounded: bool | None = None
    model_direction_consistent: bool | None = None
    model_issues: list[str] = Field(default_factory=list)
    model_status: str = "skipped"  # ok | unparsed | failed | halted | skipped


class EvidencePartition(_Shape):
    """Which evidence IDs each debate role saw (seed 002 D5 source-type partitioning)."""

    mode: Literal["partitioned", "full-pool"]
    reason: str
    advocate: list[str] = Field(default_factory=list)
    challenger: list[str] = Field(default_factory=list)
    reconciler: list[str] = Field(default_factory=list)
    validation: list[str] = Field(default_factory=list)


class ContrarianReport(_Shape):
    """The contrarian pass of a claim: whether the imbalance warning triggered it, whether it ran
    (or why it was skipped), its queries, and how many of its items survived the evidence filter."""

    triggered: bool = False
    ran: bool = False
    skipped_reason: str = ""
    seeking: EvidenceDirection | None = None
    queries: list[str] = Field(default_factory=list)
    retrieved: int = 0
    survived: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)  # filter reason -> count
    failures: list[str] = Field(default_factory=list)


class ClaimVerdict(_Shape):
    """The verdict on one claim. ``status``: ``verdict`` (the debate ran), ``insufficient_evidence``
    (the gate stopped it: UNVERIFIED, truth 50, confidence 0, no debate call, weight 0) or
    ``broken`` (no truth percentage could be computed: ``truth_pct`` is None, never a silent 50).
    ``weight`` is what the claim counts in aggregates (its confidence / 100; 0 when insufficient or
    broken). ``refusals`` and ``degradations`` are occurrences among the claim's ``llm_calls``."""

    index: int
    claim: str
    status: Literal["verdict", "insufficient_evidence", "broken"]
    truth_pct: float | None = None
    confidence: float | None = None
    verdict: VerdictBand | None = None
    reasoning: str = ""
    cited_evidence_ids: list[str] = Field(default_factory=list)
    insufficient_evidence: bool = False
    insufficient_reason: str = ""
    broken_reason: str = ""
    evidence: list[EvidenceItem] = Field(default_factory=list)
    evidence_counts: EvidenceCounts = Field(default_factory=EvidenceCounts)
    sources: list[str] = Field(default_factory=list)
    warnings: list[FactCheckWarning] = Field(default_factory=list)
    partition: EvidencePartition | None = None
    contrarian: ContrarianReport | None = None
    advocate: RoleReading | None = None
    self_consistency: SelfConsistency | None = None
    challenges: list[ChallengePoint] = Field(default_factory=list)
    reconciliation: Reconciliation | None = None
    validation: ValidationReport | None = None
    weight: float = 0.0
    counts_in_aggregates: bool = False
    llm_calls: int = 0
    refusals: int = 0
    degradations: int = 0


class FactCheckResult(_Shape):
    """A fact-check turn's structured payload (``TurnResult.fact_check``).

    ``article_truth_pct``: the weighted mean of the claims' truth percentages (weights: the claims'
    ``weight``, which includes confidence; insufficient claims weigh 0). ``article_status``:
    ``verdict``; ``non_informative`` (no claim carries weight, e.g. every claim insufficient: truth
    50, confidence 0, UNVERIFIED); ``broken`` (a claim is broken, so no article value is given).
    ``llm_calls`` counts every model call of the turn (the role ledger); ``refusals`` and
    ``degradations`` are weighted occurrences over the claims' warnings (``degradation_types``)."""

    claim_verdicts: list[ClaimVerdict] = Field(default_factory=list)
    article_truth_pct: float | None = None
    article_confidence: float | None = None
    article_verdict: VerdictBand | None = None
    article_status: Literal["verdict", "non_informative", "broken"] = "broken"
    article_reason: str = ""
    llm_calls: int = 0
    refusals: int = 0
    degradations: int = 0
    degradation_types: list[str] = Field(default_factory=lambda: list(FACT_CHECK_DEGRADATION_TYPES))
    settings: dict[str, Any] = Field(default_factory=dict)  # the [fact_check] section in force


class ConversationMessage(_Shape):
    """One earlier message of the conversation as the caller holds it (an OpenAI-style ``messages``
    entry before the prompt): ``Ora.arun(..., history=[...])`` makes them the turn's ``conversation``
    stream in place of conversation memory. ``role`` is ``user`` or ``assistant`` (others are kept in
    the trace and named, not used as evidence)."""

    role: str
    content: str


class Interruption(_Shape):
    """Why a turn stopped before its end: it was cancelled from outside (``Ora.stream``'s consumer
    went away, a server's client disconnected, a shutdown, Ctrl-C in ``ora run``). Its turn ends
    ``halted`` with this record, the trace closed: never left ``running``."""

    #: ``client-disconnected``, ``shutdown``, ``user-interrupt``, ``consumer-closed`` or the cancel
    #: message a caller gave (``task.cancel("...")``); ``cancelled`` when none was given
    reason: str
    #: the innermost step that was running when the cancellation arrived ("" before the first step)
    step: str = ""
    #: every step that was running (Gear 4's streams run side by side), outermost first
    steps: list[str] = Field(default_factory=list)
    at: datetime = Field(default_factory=utc_now)


class TurnResult(_Shape):
    """What ``ora run`` returns (and prints with ``--json``)."""

    status: TurnStatus
    answer: str = ""
    question: str | None = None  # set when status is needs_clarification
    options: list[str] = Field(default_factory=list)  # needs_clarification: the modes offered ("just answer": simple)
    mode: str = ""
    gear: int = 0
    turn_id: str = ""
    conversation_id: str = ""
    trace_path: str | None = None
    tracing_degraded: bool = False
    contingencies: list[str] = Field(default_factory=list)
    diagnostic: dict[str, Any] | None = None
    runtime_role_models: list[ModelCallRecord] = Field(default_factory=list)
    signals: list[Signal] = Field(default_factory=list)  # every detector signal of the turn
    verdicts: dict[str, str] = Field(default_factory=dict)  # verification step -> PASS|FAIL|BROKEN
    fact_check: FactCheckResult | None = None  # a fact-check turn's claims and article verdict
    #: The model's answer when it failed verification and was withheld (``[verification] on_fail =
    #: "evidence"``): ``answer`` is then what the retrieved evidence says.
    withheld_answer: str | None = None
    #: Set when the turn was cancelled from outside (status ``halted``): the reason and the step.
    interruption: Interruption | None = None

    @property
    def claim_verdicts(self) -> list[ClaimVerdict]:
        """The fact-check payload's claims (empty for other turns)."""
        return list(self.fact_check.claim_verdicts) if self.fact_check is not None else []

    # Serialised results carry a ``mismatch`` flag per role-ledger entry and an overall
    # ``runtime_role_models_mismatch`` (what ran differs from the resolved configuration); the
    # flags are derived, so validating a dumped result drops them instead of refusing them.
    @model_validator(mode="before")
    @classmethod
    def _drop_derived_mismatch_flags(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {k: v for k, v in data.items() if k != "runtime_role_models_mismatch"}
        calls = data.get("runtime_role_models")
        if isinstance(calls, list):
            data["runtime_role_models"] = [
                {k: v for k, v in c.items() if k != "mismatch"} if isinstance(c, dict) else c for c in calls]
        return data

    @model_serializer(mode="wrap")
    def _with_mismatch_flags(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and isinstance(data.get("runtime_role_models"), list):
            for entry, call in zip(data["runtime_role_models"], self.runtime_role_models, strict=False):
                if isinstance(entry, dict):
                    entry["mismatch"] = call.mismatch
            data["runtime_role_models_mismatch"] = any(c.mismatch for c in self.runtime_role_models)
        return data


# --- the front of the pipeline (Stage 0, Phase A, pre-routing, context assembly) ----------------


class PhaseAResult(_Shape):
    """Phase A's package: the cleaned prompt, what was corrected, and what was inferred.

    ``inferred_items`` are assumptions, never user-stated facts: every later prompt carries
    them inside a ``PHASE A ASSUMPTIONS (NOT USER-STATED FACTS)`` block (seed 000, #10).
    """

    cleaned_prompt: str
    corrections: list[str] = Field(default_factory=list)
    inferred_items: list[str] = Field(default_factory=list)
    raw_output: str = ""
    parsed: bool = True
    used_raw_prompt: bool = False  # Phase A failed or was unparseable: the raw prompt went on


class NearestExample(_Shape):
    """One of the texts a mode file declares (an example prompt or its description) that the
    semantic signal found nearest to the prompt, with its cosine similarity."""

    text: str
    similarity: float
    source: Literal["example", "description"] = "example"


class ModeCandidate(_Shape):
    """One mode pre-routing scored, with the evidence behind the score.

    ``score`` is the combined score Stage 2 dispatches on: ``semantic`` (the embedder's
    similarity of the prompt to the mode's examples and description; ``None`` when the semantic
    signal did not run) plus the vocabulary's share (``vocabulary``, from the ``strong`` and
    ``weak`` phrases that matched)."""

    mode: str
    gear: int | None = None
    score: float = 0.0
    vocabulary: float = 0.0
    semantic: float | None = None
    strong: list[str] = Field(default_factory=list)
    weak: list[str] = Field(default_factory=list)
    nearest: list[NearestExample] = Field(default_factory=list)
    #: The request shapes of the prompt the mode claims (front matter ``shapes.claims``): each counts
    #: as a strong phrase in ``vocabulary``.
    shapes: list[str] = Field(default_factory=list)
    #: The shapes the mode requires (``shapes.requires``) that the prompt lacks: the mode stands aside.
    unmet: list[str] = Field(default_factory=list)


class SignalStrengthSummary(_Shape):
    """The friction-reducer audit (seed 000, #13): how much signal supported the dispatch."""

    total_matches: int = 0
    strong_matches: int = 0
    weak_matches: int = 0
    dispatched_mode: str | None = None
    strong_signals_for_dispatched: list[str] = Field(default_factory=list)
    weak_signals_for_dispatched: list[str] = Field(default_factory=list)
    single_signal_high_confidence: bool = False


#: ``high``: a clear leader; ``medium``: a leader by less than the clear margin over a mode it does
#: not compete with (the general or a direct mode); ``default``: a clear request no specific mode
#: claims, run by the general mode; ``best-guess`` / ``fallback``: a pending clarification the
#: caller chose to continue past (kept in the trace); ``forced``; ``bypass``; ``pending``.
ClassificationConfidence = Literal["high", "medium", "default", "best-guess", "fallback", "forced", "bypass",
                                   "pending"]


class RoutingAudit(_Shape):
    """How Stage 2 reached its decision, for the trace: which signals ran, the per-mode scores
    (``RoutingDecision.candidates``), the leader's margin, the rule that decided and the weights
    it used. ``semantic_status`` says whether the semantic signal ran (``ok``) or why not
    (``missing``: no embedder registered; ``failed``: the embedder raised or returned something
    unusable; ``no-examples``: no loaded mode declares examples; ``not-run``:
    the decision needed no scores, e.g. a forced mode)."""

    method: Literal["combined", "vocabulary-only", "forced", "bypass-rescan"]
    rule: str
    semantic_status: Literal["ok", "missing", "failed", "no-examples", "not-run"] = "not-run"
    semantic_detail: str = ""
    embedder: str | None = None
    general_mode: str | None = None
    leader: str | None = None
    runner_up: str | None = None
    margin: float | None = None
    competing: list[str] = Field(default_factory=list)
    request_form: str | None = None  # why the text reads as a request by its form, or None
    #: The prompt's request shapes (``request_shape`` signals: shape -> the words that show it); None
    #: when no detector of that kind ran (then no mode's ``shapes.requires`` is enforced).
    shapes: dict[str, str] | None = None
    language: str | None = None  # the language the prompt was compared in (its examples' language)
    modes_without_examples: list[str] = Field(default_factory=list)
    weights: dict[str, float] = Field(default_factory=dict)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    #: Where the example vectors came from: computed (and written to the disk cache, or why not), read
    #: from the disk cache, or already in this process.
    example_index: str = ""


class RoutingDecision(_Shape):
    """Stage 1 + Stage 2's package. A pending clarification is never dropped: either the turn
    stops with it, or ``pending_clarification_swallowed`` keeps it beside a best guess.
    ``candidates`` are the per-mode scores, best first; ``audit`` how the decision was reached."""

    mode: str | None = None
    requested_gear: int | None = None
    classification_confidence: ClassificationConfidence
    candidates: list[ModeCandidate] = Field(default_factory=list)
    pending_clarification: str | None = None
    clarification_options: list[str] = Field(default_factory=list)  # the modes the question offers
    pending_clarification_swallowed: str | None = None
    signal_strength_summary: SignalStrengthSummary = Field(default_factory=SignalStrengthSummary)
    reasoning: str = ""
    audit: RoutingAudit | None = None


BUDGET_SIGNAL_NAMES: dict[int, str] = {
    0: "clean",
    1: "compression_warning",
    2: "critical_truncation",
    3: "analytical_floor_breach",
    4: "hardware_constraint",
    5: "rag_planner_fallback",
    6: "spawning_constraint",
}


class BudgetSignal(_Shape):
    code: int = Field(ge=0, le=6)
    name: str
    detail: str = ""


class BudgetReport(_Shape):
    """Budget signals 0-6, computed against the target model's context window."""

    target_role: str
    target_backend: str
    context_window: int
    reserved_output_tokens: int
    estimated_input_tokens: int
    utilization: float
    level: int = Field(ge=0, le=6)
    signals: list[BudgetSignal] = Field(default_factory=list)
    truncated_chunks: list[str] = Field(default_factory=list)
    token_estimate: str = "chars/4"


class RagFailure(_Shape):
    """One retriever failure: the context for that stream is empty, and this says why."""

    stream: str
    query: str
    retriever: str
    error_class: str
    message: str
    at: datetime = Field(default_factory=utc_now)


class ContextPackage(_Shape):
    """Step 2's package: the mode's guidance, the cleaned prompt, the assumptions, every
    stream's retrieval (chunks with provenance, or a diagnosis of the emptiness, or a named
    failure) and the budget signals."""

    mode: str
    requested_gear: int
    mode_sections: dict[str, str] = Field(default_factory=dict)
    cleaned_prompt: str
    inferred_items: list[str] = Field(default_factory=list)
    retrievals: dict[str, Retrieval] = Field(default_factory=dict)
    rag_failures: list[RagFailure] = Field(default_factory=list)
    missing_streams: list[str] = Field(default_factory=list)
    budget: BudgetReport

    def chunks(self) -> list[Chunk]:
        return [c for r in self.retrievals.values() for c in r.chunks]


# --- gears, verification and fault injection --------------------------------------------------


class EvidencePackage(_Shape):
    """What a verifier checks a subject against: the context package's chunks plus every
    supplement result of the turn so far. ``chunks`` is a plain list (an attribute, not a
    method), so a verifier can read it like a ``Retrieval``; ``context`` is the whole Step 2
    package for verifiers that want provenance, budget or the mode's sections."""

    chunks: list[Chunk] = Field(default_factory=list)
    context: ContextPackage | None = None
    supplements: list[Retrieval] = Field(default_factory=list)
    prompt: str = ""


FaultSite = Literal["model_call", "model_output", "verify", "verifier_output", "retrieve", "package"]


class FaultPoint(_Shape):
    """Where a fault injector is being asked to act (see ``ora_register_fault_injectors``).

    ``purpose`` is the step's job (``analyst``, ``evaluator``, ``reviser``, ``consolidator``,
    ``verifier``, ``retrieval``, ``context``); ``primary`` marks the turn's first analyst (the
    depth stream in gears 3-4, the analyst in gear 2); ``attempt`` counts the reliability layer's
    attempts at the step (1 = first), ``call`` the model calls within that attempt.
    """

    site: FaultSite
    step: str
    turn_id: str = ""
    role: str = ""
    purpose: str = ""
    primary: bool = False
    step_kind: str = ""  # probabilistic | deterministic | verification
    attempt: int = 1
    call: int = 1
    stream: str = ""
    gear: int = 0


# --- what the engine offers a component during a turn --------------------------------------------


class StepMaterial(_Shape):
    """What a detector on ``model_output``/``verifier_output`` may know of the step whose output it
    reads (``ctx.data["material"]``, set by the engine around each detection):

    - ``given``: everything the model was given as material (its package and the evidence), so a
      phrase found there is material, never an echo;
    - ``instructions``: the texts the orchestrator itself added to the prompt (the confidence,
      quotation and Supplemental RAG instructions), which an answer must never parrot;
    - ``retry_phrases``: fixed phrases of a retry's negative context (never to come back);
    - ``expected_min_words``: how long a healthy answer of this step is at least;
    - ``quoted``: texts a verifier was shown (the subject, the chunks), never its own words.
    """

    step: str = ""
    purpose: str = ""
    given: str = ""
    instructions: list[str] = Field(default_factory=list)
    retry_phrases: list[str] = Field(default_factory=list)
    expected_min_words: int = 40
    quoted: list[str] = Field(default_factory=list)


class ModelRequest(_Shape):
    """A model step a component asks the engine to run for it (``await ctx.ask_model(request)``),
    under the same rules as every analytical step: the anti-confabulation directive, Phase A's
    assumptions, the Supplemental RAG protocol (when ``supplements``), the role ledger, the
    detectors of ``layer`` on every output."""

    task: str
    package: str
    evidence: str | None = None  # None: the turn's evidence block (shared with the analysts: prompt-cached)
    role: str = ""  # empty: the role of the call the component is serving (e.g. the verifier's)
    prompt_key: str = ""
    purpose: str = "verifier"
    layer: str = "verifier_output"
    quoted: list[str] = Field(default_factory=list)
    supplements: bool = True
    #: A JSON schema for the reply (``CompletionParams.response_schema``): the role's backend
    #: constrains the reply to it where it can; elsewhere the reply is text as usual. The caller
    #: tells the two apart by the reply (a constrained one is one JSON object) and validates it.
    response_schema: dict[str, Any] | None = None
    schema_name: str = Field(default="reply", pattern=r"^[A-Za-z0-9_-]{1,64}$")


class ModelReply(_Shape):
    """What the engine hands back for a ``ModelRequest``: the final text (after any supplement
    round-trips), the detectors' signals on it, and who answered."""

    text: str
    signals: list[Signal] = Field(default_factory=list)
    provider: str = ""
    model: str = ""
    calls: int = 1
    supplements: int = 0


class ClarificationAnswer(_Shape):
    """The user's answer to a turn's pending clarification, carried into the turn that follows it
    (``ora run`` on a terminal asks; an application passes it to ``Ora.run``): the question asked,
    the options offered, the choice, and the turn that asked."""

    question: str
    options: list[str] = Field(default_factory=list)
    chosen: str  # a mode name ("just answer" is the simple mode)
    asked_in_turn: str = ""


class VerificationCall(_Shape):
    """Which verification a verifier is serving (``ctx.verification``): the step, the role whose
    backend a model verifier should use (``verifier`` or ``final_verifier``), the stream slot and
    the cycle."""

    step: str
    role: Literal["verifier", "final_verifier"] = "verifier"
    slot: str = ""
    cycle: int = 0
    gear: int = 0
