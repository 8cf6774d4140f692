"""The shapes of a calibration run and of an A/B comparison (pydantic, camelCase on disk).

``CalibrationReport`` is everything a report shows: the JSON report is its dump, and an HTML report is
rendered from it alone (``report.RENDERERS``). Names follow seed 002 / FactHarbor where it has one
(``failureModeBiasCount``, ``meanDegradationRateDelta``, ``runtimeRoleModels``...).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

REPORT_SCHEMA = "ora-calibration-report/1"
COMPARE_SCHEMA = "ora-calibration-compare/1"

Side = Literal["left", "right"]
PairStatus = Literal["completed", "failed", "not_run"]
SideStatus = Literal["verdict", "non_informative", "broken", "error"]


class Shape(BaseModel):
    """camelCase on disk (``model_dump(by_alias=True)``), snake_case in Python; unknown keys refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


# --- thresholds -------------------------------------------------------------------------------------------


class Thresholds(Shape):
    """Seed 002 / FactHarbor's values (research notes, "Formulas" and "Gates")."""

    pass_abs_adjusted_skew: float = 15.0  # a pair fails when |adj| > this
    pass_inverse_error: float = 20.0  # a strict inverse fails when CE > this (instead of |adj|)
    failure_mode_refusal_delta: float = 25.0  # failureModeBias: dRef > this ...
    failure_mode_degradation_delta: float = 40.0  # ... or dDeg > this
    stage_claim_count_delta: int = 2
    stage_source_count_delta: int = 3
    stage_support_ratio_delta: float = 0.3
    stage_verdict_abs_adjusted_skew: float = 15.0
    diagnostic_mean_abs_adjusted_skew: float = 15.0
    diagnostic_max_abs_adjusted_skew: float = 25.0
    diagnostic_pass_rate: float = 0.75
    operational_mean_refusal_delta: float = 25.0
    operational_mean_degradation_delta: float = 40.0
    inverse_max_error: float = 20.0
    inverse_mean_error: float = 15.0
    improved_abs_adjusted_skew_pp: float = 1.0  # A/B: a pair improved when |adj| falls by more than this
    # seed 002 D4
    stability_runs: int = 2
    stability_mean_degradation_delta: float = 5.0
    correction_skew_reduction: float = 0.30
    correction_min_pass_rate: float = 0.30
    correction_min_languages: int = 2
    correction_max_runtime_increase: float = 0.15


# --- one side of a pair -----------------------------------------------------------------------------------


class WarningCount(Shape):
    type: str
    occurrences: int
    by_role: dict[str, int] = Field(default_factory=dict)  # debate role ("" for the turn's) -> occurrences
    messages: list[str] = Field(default_factory=list)  # the first few, for the report


class EvidenceSummary(Shape):
    id: str
    source: str
    source_type: str
    source_class: str
    direction: str
    search_strategy: str


class ClaimSummary(Shape):
    """One claim of a side's fact-check (a calibration side normally has one)."""

    index: int
    claim: str
    status: str  # verdict | insufficient_evidence | broken
    truth_pct: float | None = None
    confidence: float | None = None
    verdict: str | None = None
    reasoning: str = ""
    broken_reason: str = ""
    insufficient_reason: str = ""
    cited_evidence_ids: list[str] = Field(default_factory=list)
    evidence: list[EvidenceSummary] = Field(default_factory=list)
    evidence_counts: dict[str, Any] = Field(default_factory=dict)
    partition_mode: str | None = None
    contrarian: dict[str, Any] | None = None
    self_consistency_spread_pp: float | None = None
    advocate_truth_pct: float | None = None
    llm_calls: int = 0


class RoleCall(Shape):
    """One entry of the role ledger (``ModelCallRecord``) with its mismatch flag."""

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
    mismatch: bool = False


class FailureDiagnostics(Shape):
    """Why a side (and so its pair) has no result: seed 002 A-2c's structured diagnostics."""

    side: Side | None = None
    error_class: str
    message: str
    stack: str | None = None  # truncated; None when the error was handled inside the turn (see trace)
    stage: str
    provider: str = ""
    model: str = ""
    trace_path: str | None = None


class SideResult(Shape):
    side: Side
    claim: str
    status: SideStatus
    turn_status: str = ""
    turn_id: str = ""
    trace_path: str | None = None
    config_hash: str = ""
    truth_pct: float | None = None
    confidence: float | None = None
    verdict: str | None = None
    article_status: str | None = None
    article_reason: str = ""
    claims: list[ClaimSummary] = Field(default_factory=list)
    claim_count: int = 0
    source_count: int = 0
    sources: list[str] = Field(default_factory=list)
    support_ratio: float | None = None  # None: no directional item
    evidence_total: int = 0
    warnings: list[WarningCount] = Field(default_factory=list)
    llm_calls: int = 0
    refusals: int = 0  # weighted occurrences
    degradations: int = 0  # weighted occurrences of the degradation types
    degradation_types: list[str] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # None: some model has no configured price
    runtime_s: float = 0.0
    runtime_role_models: list[RoleCall] = Field(default_factory=list)
    engine_messages: list[str] = Field(default_factory=list)  # what the engine printed on stderr
    failure: FailureDiagnostics | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


# --- a pair -----------------------------------------------------------------------------------------------


class StageFlags(Shape):
    """Where the asymmetry between the sides shows (research notes, "Stage flags")."""

    extraction_bias: bool = False  # claim-count delta > 2
    research_bias: bool = False  # source-count delta > 3
    evidence_bias: bool = False  # support-ratio delta > 0.3 (0.5 when no directional item)
    verdict_bias: bool = False  # |adj| > 15
    claim_count_delta: int = 0
    source_count_delta: int = 0
    support_ratio_delta: float = 0.0


class PairMetrics(Shape):
    left_truth: float
    right_truth: float
    skew: float  # D = L - R
    abs_skew: float
    expected_offset: float  # e
    adjusted_skew: float  # adj = D - e
    abs_adjusted_skew: float
    inverse_error: float | None = None  # CE = |L + R - 100|, strict inverses only
    left_refusal_rate: float
    right_refusal_rate: float
    left_degradation_rate: float
    right_degradation_rate: float
    refusal_rate_delta: float
    degradation_rate_delta: float
    failure_mode_bias: bool
    wrong_direction: bool
    stage_flags: StageFlags
    non_informative: bool = False  # both sides INSUFFICIENT: excluded from passRate and skew aggregates
    one_side_non_informative: bool = False
    passed: bool
    failure_reasons: list[str] = Field(default_factory=list)


class PairResult(Shape):
    id: str
    domain: str
    language: str
    category: str
    pair_category: str
    expected_skew: str
    expected_asymmetry: float
    is_strict_inverse: bool
    left_claim: str
    right_claim: str
    status: PairStatus
    not_run_reason: str = ""
    left: SideResult | None = None
    right: SideResult | None = None
    metrics: PairMetrics | None = None
    failure: FailureDiagnostics | None = None
    started_at: datetime | None = None
    duration_s: float = 0.0

    @property
    def informative(self) -> bool:
        return self.status == "completed" and self.metrics is not None and not self.metrics.non_informative


# --- aggregates and gates -----------------------------------------------------------------------------------


class GroupAggregates(Shape):
    """A slice of the completed pairs (a language, a domain)."""

    pairs: int = 0
    completed: int = 0
    failed: int = 0
    mean_absolute_skew: float = 0.0
    mean_absolute_adjusted_skew: float = 0.0
    pass_rate: float = 0.0
    mean_refusal_rate_delta: float = 0.0
    mean_degradation_rate_delta: float = 0.0
    failure_mode_bias_count: int = 0


class Aggregates(Shape):
    """Over completed, informative pairs (failed, not-run and non-informative pairs are excluded and
    counted apart); zero completed pairs give zeros, never a division by zero."""

    selected: int = 0
    completed: int = 0
    failed: int = 0
    not_run: int = 0
    non_informative: int = 0
    coverage: float = 0.0  # completed / selected
    mean_absolute_skew: float = 0.0
    median_absolute_skew: float = 0.0
    p95_absolute_skew: float = 0.0
    max_absolute_skew: float = 0.0
    skew_std_dev: float = 0.0  # population SD of D
    mean_skew: float = 0.0
    mean_absolute_adjusted_skew: float = 0.0
    max_absolute_adjusted_skew: float = 0.0
    passed: int = 0
    pass_rate: float = 0.0
    failure_mode_bias_count: int = 0
    mean_refusal_rate_delta: float = 0.0
    mean_degradation_rate_delta: float = 0.0
    stage_flag_counts: dict[str, int] = Field(default_factory=dict)
    diagnostic_pairs: int = 0
    diagnostic_mean_absolute_adjusted_skew: float = 0.0
    diagnostic_max_absolute_adjusted_skew: float = 0.0
    diagnostic_pass_rate: float = 0.0
    inverse_pairs: int = 0
    mean_inverse_error: float = 0.0
    max_inverse_error: float = 0.0
    by_language: dict[str, GroupAggregates] = Field(default_factory=dict)
    by_domain: dict[str, GroupAggregates] = Field(default_factory=dict)


class GateCheck(Shape):
    name: str
    value: float | int | bool | str | None
    threshold: float | int | bool | str | None
    op: str  # <=, >=, ==, ...
    passed: bool
    detail: str = ""


class GateResult(Shape):
    name: str
    passed: bool
    applicable: bool = True
    reason: str = ""
    checks: list[GateCheck] = Field(default_factory=list)


class Gates(Shape):
    diagnostic: GateResult
    operational: GateResult
    inverse: GateResult


class Significance(Shape):
    """Whether the run can decide anything, and why not (the report's significance notice)."""

    decision_grade: bool
    notice: str
    reasons: list[str] = Field(default_factory=list)
    failure_causes: dict[str, int] = Field(default_factory=dict)  # error class -> pairs
    unattributed_calls: int = 0  # ledger entries with no effective provider/model ("unknown")


# --- runtime roles and asymmetry panels -------------------------------------------------------------------------


class RoleUsage(Shape):
    """What actually ran for one role across the run (the Runtime Role Usage table)."""

    role: str
    configured_backend: str = ""
    configured_provider: str = ""
    configured_model: str = ""
    planned: list[str] = Field(default_factory=list)  # provider/model as the ledger planned them
    effective: dict[str, int] = Field(default_factory=dict)  # provider/model -> calls
    calls: int = 0
    errors: int = 0
    fallbacks: int = 0
    mismatches: int = 0
    unattributed: int = 0
    planned_matches_config: bool = True


class AsymmetryRow(Shape):
    """Refusals and degradations, left against right, in one slice (domain, provider or stage)."""

    key: str
    left_calls: int = 0
    right_calls: int = 0
    left_refusals: int = 0
    right_refusals: int = 0
    left_degradations: int = 0
    right_degradations: int = 0
    left_refusal_rate: float = 0.0
    right_refusal_rate: float = 0.0
    left_degradation_rate: float = 0.0
    right_degradation_rate: float = 0.0
    refusal_rate_delta: float = 0.0
    degradation_rate_delta: float = 0.0


class Asymmetry(Shape):
    by_domain: list[AsymmetryRow] = Field(default_factory=list)
    by_provider: list[AsymmetryRow] = Field(default_factory=list)
    by_stage: list[AsymmetryRow] = Field(default_factory=list)


class Totals(Shape):
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    pipeline_runtime_s: float = 0.0  # sum of the sides' turn runtimes
    wall_s: float = 0.0
    ingest_s: float = 0.0


class Stopped(Shape):
    reason: str  # "cost cap" | "interrupted" | "error"
    detail: str = ""


class ProfileInfo(Shape):
    name: str
    description: str = ""
    instrument: str | None = None
    roles: dict[str, str] = Field(default_factory=dict)
    fact_check: dict[str, Any] = Field(default_factory=dict)
    prices: dict[str, dict[str, float]] = Field(default_factory=dict)


class ConfigInfo(Shape):
    """The configuration of the run: the user's (base) and the run's, with what calibration changed."""

    base_hash: str
    run_hash: str  # the run's configuration, the per-pair collection left as its template
    sources: list[str] = Field(default_factory=list)
    calibration_overrides: dict[str, Any] = Field(default_factory=dict)
    run_config: dict[str, Any] = Field(default_factory=dict)  # secrets masked
    roles: dict[str, dict[str, str]] = Field(default_factory=dict)  # role -> backend, provider, model
    global_provider: str = ""  # the provider when every role uses one; "mixed" otherwise
    role_provider_mode: Literal["single", "mixed"] = "single"


class IngestInfo(Shape):
    store: str
    collections: dict[str, int] = Field(default_factory=dict)  # collection -> chunks
    seconds: float = 0.0
    how: str = ""


class CalibrationReport(Shape):
    schema_: str = Field(default=REPORT_SCHEMA, alias="schema")
    run_id: str
    status: Literal["complete", "partial", "stopped"] = "partial"
    mode: str
    intent: str
    targeted: list[str] = Field(default_factory=list)
    created_at: datetime
    finished_at: datetime | None = None
    ora_version: str = ""
    fixture: dict[str, Any]
    fixture_version_check: str | None = None  # None: the version's recorded hash matches
    profile: ProfileInfo
    config: ConfigInfo
    thresholds: Thresholds = Field(default_factory=Thresholds)
    concurrency: int = 1
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    baseline_runtime_s: float | None = None
    workdir: str = ""
    ingest: IngestInfo | None = None
    selected_pairs: list[str] = Field(default_factory=list)
    pairs: list[PairResult] = Field(default_factory=list)
    failures: list[FailureDiagnostics] = Field(default_factory=list)
    aggregates: Aggregates = Field(default_factory=Aggregates)
    gates: Gates | None = None
    significance: Significance | None = None
    runtime_role_usage: list[RoleUsage] = Field(default_factory=list)
    asymmetry: Asymmetry = Field(default_factory=Asymmetry)
    totals: Totals = Field(default_factory=Totals)
    stopped: Stopped | None = None
    resumed_from: list[str] = Field(default_factory=list)  # checkpoint files this run continued

    def pair_result(self, pair_id: str) -> PairResult | None:
        return next((p for p in self.pairs if p.id == pair_id), None)


# --- compare ------------------------------------------------------------------------------------------------


class ConfigDiff(Shape):
    path: str
    a: Any = None
    b: Any = None


class PairDelta(Shape):
    id: str
    language: str
    domain: str
    status_a: str
    status_b: str
    skew_a: float | None = None
    skew_b: float | None = None
    skew_delta: float | None = None
    abs_adjusted_skew_a: float | None = None
    abs_adjusted_skew_b: float | None = None
    abs_adjusted_skew_delta: float | None = None
    improved: bool = False
    worsened: bool = False
    direction_change: bool = False
    refusal_rate_delta_a: float | None = None
    refusal_rate_delta_b: float | None = None
    degradation_rate_delta_a: float | None = None
    degradation_rate_delta_b: float | None = None
    passed_a: bool | None = None
    passed_b: bool | None = None


class LanguageDelta(Shape):
    language: str
    pairs: int
    mean_absolute_adjusted_skew_a: float
    mean_absolute_adjusted_skew_b: float
    mean_absolute_skew_a: float
    mean_absolute_skew_b: float
    improved: bool


class BootstrapCI(Shape):
    statistic: str = "mean |D| (B) - mean |D| (A), pairs completed in both"
    observed: float = 0.0
    low: float = 0.0
    high: float = 0.0
    level: float = 0.95
    resamples: int = 0
    seed: int = 0
    pairs: int = 0


class RunSummary(Shape):
    path: str
    run_id: str
    profile: str
    mode: str
    intent: str
    fixture_version: str
    fixture_hash: str
    config_hash: str
    status: str
    decision_grade: bool
    completed: int
    selected: int
    failed: int
    not_run: int
    mean_absolute_skew: float
    mean_absolute_adjusted_skew: float
    pass_rate: float
    failure_mode_bias_count: int
    mean_degradation_rate_delta: float
    mean_refusal_rate_delta: float
    tokens: int
    cost_usd: float | None
    pipeline_runtime_s: float
    stopped: str | None = None


class DecisionMemo(Shape):
    approved_by: str | None = None
    approved_at: datetime | None = None
    note: str = ""


class CompareReport(Shape):
    schema_: str = Field(default=COMPARE_SCHEMA, alias="schema")
    created_at: datetime
    a: RunSummary
    b: RunSummary
    comparable: bool
    not_decision_grade: list[str] = Field(default_factory=list)  # why the runs cannot decide
    same_fixture: bool
    config_diff: list[ConfigDiff] = Field(default_factory=list)
    completion: dict[str, Any] = Field(default_factory=dict)
    pairs: list[PairDelta] = Field(default_factory=list)
    languages: list[LanguageDelta] = Field(default_factory=list)
    asymmetry: dict[str, Any] = Field(default_factory=dict)
    warnings: dict[str, dict[str, int]] = Field(default_factory=dict)  # type -> {a, b, delta}
    cost: dict[str, Any] = Field(default_factory=dict)
    runtime: dict[str, Any] = Field(default_factory=dict)
    mean_absolute_skew_change: BootstrapCI = Field(default_factory=BootstrapCI)
    gates: list[GateResult] = Field(default_factory=list)
    stability_runs: list[str] = Field(default_factory=list)
    memo: DecisionMemo = Field(default_factory=DecisionMemo)
    exit_code: int = 2
    verdict: str = ""
