"""Gear 5: a claim, its evidence and a debate about it (seed 002), every step traced.

The turn: ``factcheck-claims`` (the claims of the prompt, verbatim by default: a mirrored claim's
wording is the point of a calibration pair, so Phase A's rewrite is not used unless
``fact_check.claims_from = "cleaned"``), then per claim N (steps ``factcheck-claimN-*``):

1. ``research``: the evidence pool. One claim: the context package's chunks (context assembly
   already searched for it); several: a retrieval per claim through the same retrievers. The
   evidence filter keeps items of the evidence streams (``fact_check.evidence_streams``) with at
   least ``min_item_chars`` characters and no duplicate text; each item gets an ID (E1, ...),
   its provenance ``source_type`` and that type's class (institutional | general).
2. ``sufficiency``: the gate. Too few items or source types -> ``INSUFFICIENT_EVIDENCE``
   (UNVERIFIED, truth 50, confidence 0, weight 0) and no model call for the claim at all.
3. ``directions``: supports | contradicts | neutral per item. A label in the chunk's provenance
   (``provenance.extra["direction"]``, a pre-labelled fixture) is used as is; the rest are
   labelled by one model call per claim on the ``evidence`` role (``fact_check.direction =
   "model"``, the seed's evidence-extraction step, one call for all items rather than one per
   item) or stay unlabelled, counted neutral and named (``"provenance"``).
4. ``balance``: the ``evidence_pool_imbalance`` warning, its message carrying the sample size.
5. ``partition``: which IDs each role sees.
6. ``contrarian``: only after the warning: at most ``contrarian_max_queries`` inverted queries
   (templates, no model call) for the minority direction through the evidence streams' retrievers;
   results tagged ``searchStrategy: contrarian``, through the same evidence filter (each survival
   recorded), labelled, and fed to the challenger (and every role that sees the full pool).
   Skipped, named, when its estimated time (the claim's research retrieval per query, plus one
   labelling call) would push the turn past ``runtime_ceiling`` x the baseline. The baseline is
   ``fact_check.baseline_runtime_s`` when set (a calibration run sets it to its canonical baseline
   run's time per turn, so the per-turn ceilings add up to the run's), else this turn's projected
   runtime without the pass (time so far plus its remaining debate calls at the turn's mean model
   call latency). A retriever failure is a named contingency; the run goes on.
7. The debate, each role a ``run_model_step`` (so traced, in the role ledger, under the TPM guard)
   run one after another (the seed runs self-consistency and the challenger side by side; here
   each call's detector signals, a refusal among them, are attributed to it exactly, and a local
   model serialises them anyway): ``advocate`` (first verdict), ``self-consistency-1..k`` (the
   advocate's task again on the ``self_consistency`` role; the spread of the truth values scales
   confidence), ``challenger`` (typed points in both directions with severity and cited IDs),
   ``reconciler`` (answers each point; the share of its move that rests on a point citing no valid
   ID is reverted), ``validation`` (the ``validation`` role's grounding/direction reading and the
   project's verifier, ``verification.verifier``: the non-LLM grounding verifier by default, over
   the reasoning against the claim's evidence) and ``verdict`` (the numbers, a deterministic
   direction check, the band).

Then ``factcheck-article`` (the weighted mean) and ``final-output``. A role whose reply cannot be
read is a named contingency: the advocate's makes the claim BROKEN (truth None), a challenger's
leaves the reconciler without challenges, a reconciler's leaves the advocate's verdict standing;
each is a degradation warning on the claim, countable per 100 model calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Literal

from ora_core.engine.context import UNFITTED, retrieve_bounded, screen_chunks, turn_retrievers
from ora_core.engine.gears.common import finish
from ora_core.engine.lineage import ModelIdentity, author_of
from ora_core.engine.reliability import (
    StepHalted,
    StepOutcome,
    StepSpec,
    judged_context,
    refused_outcome,
    run_model_step,
    summary,
)
from ora_core.engine.turn_state import GearContext
from ora_core.engine.verification import verify
from ora_core.kernel.config import FactCheckConfig
from ora_core.kernel.models import (
    FACT_CHECK_DEGRADATION_TYPES,
    Chunk,
    ClaimVerdict,
    ContextPackage,
    ContrarianReport,
    EvidenceItem,
    EvidencePartition,
    FactCheckResult,
    FactCheckWarning,
    Reconciliation,
    Retrieval,
    RetrievalFilters,
    RoleReading,
    SelfConsistency,
    TurnResult,
    ValidationReport,
    VerdictStatus,
)
from ora_core.kernel.signals import SignalKind
from ora_core.kernel.stash import StashKey
from ora_core.kernel.trace import StepRecorder, TurnContext

from . import prompts
from .evidence import (
    CONTRARIAN,
    STRATEGY_KEY,
    build_items,
    count_evidence,
    extract_claims,
    imbalance,
    partition,
    sufficiency,
    with_contrarian,
)
from .replies import parse_directions, parse_points, parse_responses, parse_validation, parse_verdict
from .scoring import article_value, revert_invalid_moves, spread_factor, verdict_band

GEAR = 5
STEP_CLAIMS = "factcheck-claims"
STEP_ARTICLE = "factcheck-article"
#: Seconds the contrarian passes of this turn took so far (the runtime ceiling counts them).
SPENT: StashKey[float] = StashKey("factcheck_contrarian_spent_s")


@dataclasses.dataclass
class RoleCall:
    """A debate role's step: its outcome (None when it halted), status and parsed reply."""

    outcome: StepOutcome | None
    status: str  # ok | flagged | degraded | failed | halted
    parsed: Any = None

    @property
    def usable(self) -> bool:
        return self.outcome is not None and self.outcome.usable

    @property
    def healthy(self) -> bool:
        """A reply came back healthy: if it cannot be read, that is a degradation of its own (an
        unhealthy, failed or halted step is counted as such, once)."""
        return self.usable and self.status in ("ok", "flagged")


@dataclasses.dataclass
class ClaimRun:
    """One claim's way through the gear."""

    gc: GearContext
    index: int
    claim: str
    total: int
    items: list[EvidenceItem] = dataclasses.field(default_factory=list)
    chunks: dict[str, Chunk] = dataclasses.field(default_factory=dict)
    warnings: list[FactCheckWarning] = dataclasses.field(default_factory=list)
    research_latency_s: float = 0.0
    calls_before: int = 0

    @property
    def prefix(self) -> str:
        return f"factcheck-claim{self.index}"

    @property
    def turn(self) -> TurnContext:
        return self.gc.turn

    @property
    def fc(self) -> FactCheckConfig:
        return self.gc.runtime.config.fact_check

    def warn(self, type_: str, message: str, *, occurrences: int = 1, role: str = "", step: str = "",
             **data: Any) -> None:
        self.warnings.append(FactCheckWarning(type=type_, message=message, occurrences=occurrences, role=role,
                                              step=step, data=data))

    def subset(self, ids: list[str]) -> list[EvidenceItem]:
        wanted = set(ids)
        return [i for i in self.items if i.id in wanted]

    def scoped(self) -> GearContext:
        """The gear context with this claim's pool as its package: detectors, the judge and the
        verifier read the claim's evidence, not the turn's."""
        base = self.gc.package
        # Each chunk's text carries its ID, as the roles see it: an ID in a reply is then found in
        # the evidence by the detectors and the verifier, never taken for an unsupported name.
        chunks = [self.chunks[i.id].model_copy(update={"text": f"[{i.id}] {self.chunks[i.id].text}"})
                  for i in self.items if i.id in self.chunks]
        retrieval = Retrieval(stream="evidence", query=self.claim, retriever="factcheck-pool", chunks=chunks)
        package = ContextPackage(mode=base.mode, requested_gear=base.requested_gear, mode_sections=base.mode_sections,
                                 cleaned_prompt=self.claim, inferred_items=list(base.inferred_items),
                                 retrievals={"evidence": retrieval}, budget=base.budget)
        return dataclasses.replace(self.gc, package=package)


# --- the gear ----------------------------------------------------------------------------------------


async def run_gear5(gc: GearContext) -> TurnResult:
    claims = claims_step(gc)
    if not claims:
        detail = "the prompt holds no claim to check once its 'fact-check:' prefix is set aside"
        gc.turn.contingency("factcheck-no-claim-halted", STEP_CLAIMS, detail, severity="error")
        return TurnResult(status="halted", mode=gc.package.mode, gear=GEAR, verdicts=dict(gc.verdicts),
                          diagnostic={"step": STEP_CLAIMS, "final_failure": detail, "mode": gc.package.mode,
                                      "gear": GEAR})
    verdicts = [await check_claim(gc, index, claim, len(claims)) for index, claim in enumerate(claims, 1)]
    payload = article_step(gc, verdicts)
    result = finish(gc, render_answer(payload), gear=GEAR)
    result.fact_check = payload
    return result


def claims_step(gc: GearContext) -> list[str]:
    fc = gc.runtime.config.fact_check
    text = gc.turn.prompt if fc.claims_from == "prompt" else gc.package.cleaned_prompt
    with gc.turn.step(STEP_CLAIMS, kind="deterministic", claims_from=fc.claims_from, text=text,
                      cleaned_prompt=gc.package.cleaned_prompt, max_claims=fc.max_claims) as step:
        step.health.kind = "deterministic"
        claims = extract_claims(text)
        over = claims[fc.max_claims:]
        if over:
            step.contingency("factcheck-claims-over-cap-not-checked",
                             f"{len(claims)} claims, fact_check.max_claims is {fc.max_claims}: {len(over)} not "
                             f"checked: {'; '.join(c[:80] for c in over)}", severity="degraded", not_checked=over)
        claims = claims[:fc.max_claims]
        step.output.update(claims=claims, not_checked=over)
    return claims


async def check_claim(gc: GearContext, index: int, claim: str, total: int) -> ClaimVerdict:
    run = ClaimRun(gc=gc, index=index, claim=claim, total=total, calls_before=len(gc.turn.calls))
    await research_step(run)
    reasons = gate_step(run)
    if reasons:
        return insufficient(run, reasons)
    await label_directions(run, run.items, stage="research")
    warning = balance_step(run)
    part = partition_step(run)
    contrarian, new_ids = await contrarian_step(run, warning)
    if new_ids:
        part = with_contrarian(part, new_ids)
    return await debate(run, part, contrarian)


# --- evidence ----------------------------------------------------------------------------------------


def _with_stream(chunk: Chunk, stream: str) -> Chunk:
    if chunk.provenance.stream or not stream:
        return chunk
    return chunk.model_copy(update={"provenance": chunk.provenance.model_copy(update={"stream": stream})})


async def retrieve_evidence(gc: GearContext, query: str, step: str) -> tuple[list[Chunk], float, list[str]]:
    """``query`` through the retrievers of the evidence streams, side by side: the chunks (screened
    for instruction-like text), the slowest stream's latency, and the named failures."""
    turn, config = gc.turn, gc.runtime.config
    retrievers, _ = turn_retrievers(turn, config)
    wanted = {s: r for s, r in retrievers.items() if s in config.fact_check.evidence_streams}
    if not wanted:
        return [], 0.0, [f"no installed retriever serves the evidence streams "
                         f"({', '.join(config.fact_check.evidence_streams)})"]
    mode = gc.mode
    jobs = [retrieve_bounded(r, s, query,
                              mode.retrieval.filters_for(s) if mode is not None else RetrievalFilters(),
                              config.retrieval.k, turn) for s, r in wanted.items()]
    chunks: list[Chunk] = []
    failures: list[str] = []
    latency = 0.0
    for retrieval, failure in await asyncio.gather(*jobs):
        latency = max(latency, retrieval.latency_s)
        if failure is not None:
            turn.emit("rag_failure", step=step, **failure.model_dump(mode="json"))
            failures.append(f"{failure.stream}: {failure.retriever}: {failure.error_class}: {failure.message}")
            continue
        screened = screen_chunks(turn, retrieval.chunks, step=step, stream=retrieval.stream)
        chunks += [_with_stream(c, retrieval.stream) for c in screened]
        turn.emit("retrieval", step=step, stream=retrieval.stream, retriever=retrieval.retriever, query=query,
                  chunks=len(retrieval.chunks), latency_s=retrieval.latency_s,
                  empty_diagnosis=retrieval.empty_diagnosis.model_dump(mode="json")
                  if retrieval.empty_diagnosis else None)
    return chunks, latency, failures


async def research_step(run: ClaimRun) -> None:
    gc, fc, turn = run.gc, run.fc, run.turn
    name = f"{run.prefix}-research"
    with turn.step(name, kind="deterministic", claim=run.claim, evidence_streams=list(fc.evidence_streams),
                   min_item_chars=fc.min_item_chars) as step:
        step.health.kind = "deterministic"
        if run.total == 1:
            failures: list[str] = []
            source, query = "context-package", gc.package.cleaned_prompt
            # the package as retrieved: a compact fit kept k_per_stream chunks for the analyst's budget,
            # but the gate counts items (the debate prompts cut each item instead, prompts.evidence_block)
            unfitted = turn.stash.get(UNFITTED) or {}
            chunks = [_with_stream(c, stream) for stream, r in gc.package.retrievals.items()
                      for c in unfitted.get(stream, r.chunks)]
            if unfitted:
                source = "context-package-unfitted"
            latencies = [r.latency_s for s, r in gc.package.retrievals.items() if s in fc.evidence_streams]
            run.research_latency_s = max(latencies, default=0.0)
        else:
            source, query = "per-claim-retrieval", run.claim
            chunks, run.research_latency_s, failures = await retrieve_evidence(gc, run.claim, name)
            for failure in failures:
                step.contingency(f"{name}-retrieval-failed", failure, severity="degraded")
        kept = build_items(chunks, fc)
        run.items, run.chunks = kept.items, kept.chunks
        if kept.unmapped_source_types:
            step.contingency(f"{name}-source-types-unmapped",
                             f"source type(s) {', '.join(kept.unmapped_source_types)} are not in "
                             f"fact_check.source_classes: counted {fc.unmapped_source_class}", severity="info",
                             source_types=kept.unmapped_source_types)
        if kept.unreadable_directions:
            shown = ", ".join(f"{i}: {v!r}" for i, v in kept.unreadable_directions.items())
            step.contingency(f"{name}-direction-labels-unreadable",
                             f"provenance direction label(s) that are none of supports|contradicts|neutral ({shown}): "
                             "those items count as unlabelled", severity="warning",
                             labels=kept.unreadable_directions)
        step.output.update(source=source, query=query, retrieval_latency_s=run.research_latency_s,
                           items=[i.model_dump(mode="json") for i in run.items], dropped=kept.dropped,
                           dropped_by_reason=kept.dropped_by_reason(), failures=failures,
                           counts=count_evidence(run.items).model_dump(mode="json"))


def gate_step(run: ClaimRun) -> list[str]:
    """The evidence sufficiency gate: the reasons the pool is insufficient (empty: it passes)."""
    fc = run.fc
    counts = count_evidence(run.items)
    with run.turn.step(f"{run.prefix}-sufficiency", kind="deterministic", min_items=fc.min_items,
                       min_source_types=fc.min_source_types) as step:
        step.health.kind = "deterministic"
        reasons = sufficiency(counts, fc.min_items, fc.min_source_types)
        step.output.update(decision="insufficient_evidence" if reasons else "sufficient", reasons=reasons,
                           items=counts.total, distinct_source_types=counts.distinct_source_types,
                           by_source_type=counts.by_source_type)
        if reasons:
            step.contingency(f"{run.prefix}-insufficient-evidence",
                             "; ".join(reasons) + ": INSUFFICIENT_EVIDENCE (UNVERIFIED, truth 50, confidence 0, "
                             "weight 0), no debate call", severity="info", reasons=reasons)
    return reasons


def insufficient(run: ClaimRun, reasons: list[str]) -> ClaimVerdict:
    run.warn("insufficient_evidence", "; ".join(reasons), step=f"{run.prefix}-sufficiency")
    counts = count_evidence(run.items)
    return ClaimVerdict(
        index=run.index, claim=run.claim, status="insufficient_evidence", truth_pct=50.0, confidence=0.0,
        verdict="UNVERIFIED", reasoning="insufficient evidence: " + "; ".join(reasons), insufficient_evidence=True,
        insufficient_reason="; ".join(reasons), evidence=list(run.items), evidence_counts=counts,
        sources=sorted({i.source for i in run.items}), warnings=list(run.warnings), weight=0.0,
        counts_in_aggregates=False, llm_calls=len(run.turn.calls) - run.calls_before)


async def label_directions(run: ClaimRun, items: list[EvidenceItem], *, stage: str) -> None:
    """Each item's direction: its provenance label, else (``direction = "model"``) the ``evidence``
    role's, else unlabelled (counted neutral, named)."""
    fc, turn = run.fc, run.turn
    name = f"{run.prefix}-directions" if stage == "research" else f"{run.prefix}-contrarian-directions"
    need = [i for i in items if i.direction_source != "provenance"]
    if fc.direction == "provenance" or not need:
        with turn.step(name, kind="deterministic", strategy=fc.direction, stage=stage) as step:
            step.health.kind = "deterministic"
            step.output.update(labels={i.id: i.direction for i in items},
                               from_provenance=[i.id for i in items if i.direction_source == "provenance"],
                               unlabelled=[i.id for i in need])
            if need:
                detail = (f"{len(need)} item(s) ({', '.join(i.id for i in need)}) carry no direction label in their "
                          "provenance (fact_check.direction = \"provenance\"): counted neutral")
                step.contingency(f"{name}-unlabelled-counted-neutral", detail, severity="warning")
                run.warn("directions_unavailable", detail, step=name)
        return
    shown = {i.id for i in need}

    def parse(text: str, step: StepRecorder) -> Any:
        reply = parse_directions(text, shown)
        step.output["labels"] = reply.labels
        if reply.unknown_ids:
            step.contingency(f"{name}-labels-for-unknown-items",
                             f"labels for item(s) it was not shown set aside: {', '.join(reply.unknown_ids)}",
                             severity="info")
        return reply

    spec = prompts.directions_spec(run.scoped(), name=name, claim=run.claim, items=need, stage=stage)
    call = await role_call(run, spec, parse)
    labels = call.parsed.labels if call.usable and call.parsed is not None else {}
    for item in need:
        if item.id in labels:
            item.direction, item.direction_source = labels[item.id], "model"
    missing = [i.id for i in need if i.id not in labels]
    if call.healthy and not labels:
        turn.contingency(f"{name}-reply-unparsed", name, f"no 'E1: supports' line in "
                         f"{summary(call.outcome.text if call.outcome else '', 200)!r}", severity="degraded")
        run.warn("role_reply_unparsed", "the evidence directions reply could not be read", role="evidence", step=name)
    if missing:
        why = "no reply" if not call.usable else ("no label could be read" if not labels
                                                  else "the reply left them out")
        detail = f"{len(missing)} of {len(need)} item(s) unlabelled ({why}): counted neutral"
        turn.contingency(f"{name}-unlabelled-counted-neutral", name, detail, severity="warning", items=missing)
        run.warn("directions_unavailable", detail, role="evidence", step=name, items=missing)


def balance_step(run: ClaimRun) -> Any:
    fc = run.fc
    counts = count_evidence(run.items)
    name = f"{run.prefix}-balance"
    with run.turn.step(name, kind="deterministic", threshold=fc.imbalance_threshold,
                       min_directional=fc.imbalance_min_directional) as step:
        step.health.kind = "deterministic"
        found = imbalance(counts.supports, counts.contradicts, fc.imbalance_threshold, fc.imbalance_min_directional)
        step.output.update(supports=counts.supports, contradicts=counts.contradicts, neutral=counts.neutral,
                           unlabelled=counts.unlabelled, support_ratio=counts.support_ratio,
                           directions={i.id: f"{i.direction} ({i.direction_source})" for i in run.items},
                           disabled=fc.imbalance_threshold >= 1.0,
                           warning=found.message if found else None)
        if found is not None:
            step.contingency(f"{run.prefix}-evidence-pool-imbalance", found.message, severity="warning",
                             majority=found.majority, share=round(found.share, 4), directional=found.directional)
            run.warn("evidence_pool_imbalance", found.message, step=name, majority=found.majority,
                     share=round(found.share, 4), majority_count=found.majority_count, directional=found.directional)
    return found


def partition_step(run: ClaimRun) -> EvidencePartition:
    with run.turn.step(f"{run.prefix}-partition", kind="deterministic", enabled=run.fc.partition,
                       min_side=run.fc.partition_min_side) as step:
        step.health.kind = "deterministic"
        part = partition(run.items, run.fc.partition_min_side, enabled=run.fc.partition)
        step.output.update(part.model_dump(mode="json"))
    return part


# --- the contrarian pass -------------------------------------------------------------------------------


def ceiling_check(run: ClaimRun, queries: int) -> dict[str, Any]:
    """Whether the contrarian pass fits under the runtime ceiling, with the numbers it rests on."""
    fc, turn = run.fc, run.turn
    elapsed = (datetime.now(timezone.utc) - turn.started_at).total_seconds()
    answered = [c.latency_s for c in turn.calls if c.error is None]
    mean_call = sum(answered) / len(answered) if answered else 0.0
    debate_calls = 3 + fc.self_consistency_runs + (1 if "model" in fc.validation else 0)
    per_claim = debate_calls + (1 if fc.direction == "model" else 0)
    projected = elapsed + (debate_calls + (run.total - run.index) * per_claim) * mean_call
    if fc.baseline_runtime_s is not None:
        baseline, source = fc.baseline_runtime_s, "configured (fact_check.baseline_runtime_s)"
    else:
        baseline, source = projected, "projected runtime of this turn without the pass"
    estimate = queries * run.research_latency_s + (mean_call if fc.direction == "model" else 0.0)
    spent = turn.stash.get(SPENT, 0.0)
    ceiling = fc.runtime_ceiling * baseline
    return {"allowed": spent + estimate <= ceiling, "baseline_s": round(baseline, 4), "baseline_source": source,
            "ceiling_s": round(ceiling, 4), "runtime_ceiling": fc.runtime_ceiling, "estimate_s": round(estimate, 4),
            "spent_s": round(spent, 4), "elapsed_s": round(elapsed, 4), "mean_call_latency_s": round(mean_call, 4)}


async def contrarian_step(run: ClaimRun, warning: Any) -> tuple[ContrarianReport, list[str]]:
    """The contrarian pass (only after the imbalance warning); the IDs of the items that survived."""
    fc, turn = run.fc, run.turn
    name = f"{run.prefix}-contrarian"
    report = ContrarianReport(triggered=warning is not None)
    survivors: list[EvidenceItem] = []
    with turn.step(name, kind="deterministic", triggered=report.triggered, enabled=fc.contrarian,
                   max_queries=fc.contrarian_max_queries) as step:
        step.health.kind = "deterministic"
        skip = ""
        if warning is None:
            report.skipped_reason = "not triggered: no evidence_pool_imbalance warning"
        elif not fc.contrarian:
            skip = "disabled (fact_check.contrarian = false)"
        elif fc.contrarian_max_queries == 0:
            skip = "fact_check.contrarian_max_queries is 0"
        if warning is not None and not skip:
            report.seeking = warning.minority
            templates = fc.contrarian_queries.get(warning.minority, [])[:fc.contrarian_max_queries]
            report.queries = [t.replace("{claim}", run.claim) for t in templates]
            budget = ceiling_check(run, len(report.queries))
            step.output["ceiling"] = budget
            if not report.queries:
                skip = f"no query template for the {warning.minority!r} direction (fact_check.contrarian_queries)"
            elif not budget["allowed"]:
                skip = (f"runtime ceiling: ~{budget['estimate_s']:.2f} s more would pass {fc.runtime_ceiling:.0%} of "
                        f"the baseline ({budget['baseline_s']:.2f} s, {budget['baseline_source']}; "
                        f"{budget['spent_s']:.2f} s spent on earlier passes)")
        if skip:
            report.skipped_reason = skip
            step.contingency(f"{name}-skipped", skip, severity="info")
            run.warn("contrarian_skipped", skip, step=name)
        elif warning is not None:
            survivors = await _contrarian_queries(run, report, step, name)
        step.output.update(report.model_dump(mode="json"),
                           items=[i.model_dump(mode="json") for i in survivors])
    if survivors:
        await label_directions(run, survivors, stage="contrarian")
    return report, [i.id for i in survivors]


async def _contrarian_queries(run: ClaimRun, report: ContrarianReport, step: StepRecorder,
                              name: str) -> list[EvidenceItem]:
    fc, turn = run.fc, run.turn
    started = datetime.now(timezone.utc)
    found: list[Chunk] = []
    for query in report.queries:
        chunks, _, failures = await retrieve_evidence(run.gc, query, name)
        for failure in failures:
            report.failures.append(failure)
            step.contingency(f"{name}-retrieval-failed", f"{failure} (the run goes on without it)",
                             severity="warning", query=query)
            run.warn("contrarian_retrieval_failed", failure, step=name, query=query)
        for chunk in chunks:
            p = chunk.provenance
            found.append(chunk.model_copy(update={"provenance": p.model_copy(
                update={"extra": {**p.extra, STRATEGY_KEY: CONTRARIAN}})}))
    report.ran = True
    report.retrieved = len(found)
    kept = build_items(found, fc, first_id=len(run.items) + 1, existing=run.items, strategy=CONTRARIAN)
    report.survived, report.dropped = len(kept.items), kept.dropped_by_reason()
    run.items += kept.items
    run.chunks.update(kept.chunks)
    spent = (datetime.now(timezone.utc) - started).total_seconds()
    turn.stash[SPENT] = turn.stash.get(SPENT, 0.0) + spent
    step.output.update(dropped=kept.dropped, spent_s=round(spent, 4))
    return kept.items


# --- the debate -----------------------------------------------------------------------------------------


async def role_call(run: ClaimRun, spec: StepSpec, parse: Callable[[str, Any], Any], *,
                    judges: list[ModelIdentity] | None = None, edge: str = "") -> RoleCall:
    """One debate role's step under the reliability layer; ``parse(text, step)`` reads the reply
    inside the step (its result and problems land in the step's output). A halt (retries run out)
    is this claim's, named, never the turn's; refusals, fallbacks and degradations become warnings.
    ``judges``: the models whose replies this role judges (the reconciler: the advocate's and the
    challenger's), checked by the lineage rule (re-routed, or not run, under ``refuse``)."""
    turn = run.turn
    parsed: list[Any] = []

    def post(text: str, step: StepRecorder) -> str:
        parsed.append(parse(text, step))
        return text

    spec.postprocess = post
    signals_before, calls_before = len(turn.signals), len(turn.calls)
    outcome: StepOutcome | None = None
    status: str
    gc, refused = run.scoped(), ""
    if judges:
        gc, spec.routed_to, refused = judged_context(gc, spec.role, judges, spec.name)
        spec.judges, spec.edge = judges, edge
    try:
        outcome = refused_outcome(gc, spec, refused) if refused else await run_model_step(gc, spec)
        status = "failed" if outcome.backend_failed else outcome.status
    except StepHalted as halt:
        status = "halted"
        turn.contingency(f"{spec.name}-halted-claim-goes-on", spec.name,
                         f"{halt.diagnostic.get('final_failure', '')}: this role's reply is lost; the claim goes on "
                         "without it", severity="degraded", role=spec.role)
    refusals = sum(1 for s in turn.signals[signals_before:]
                   if s.kind == SignalKind.UNHEALTHY and s.name == "refusal" and s.strength == "strong")
    if refusals:
        run.warn("refusal", f"the {spec.role} role refused ({refusals} call(s))", occurrences=refusals,
                 role=spec.role, step=spec.name)
    fallbacks = [c for c in turn.calls[calls_before:] if c.fallback_flags]
    if fallbacks:
        flags = [f for c in fallbacks for f in c.fallback_flags]
        run.warn("role_call_fallback", f"the {spec.role} role ran on a fallback: {', '.join(flags)}",
                 occurrences=len(fallbacks), role=spec.role, step=spec.name, flags=flags)
    reason = outcome.degraded_reason if outcome is not None else "retries exhausted"
    kinds = {"failed": "role_call_failed", "degraded": "role_call_degraded", "halted": "role_call_halted"}
    if status in kinds:
        run.warn(kinds[status], f"the {spec.role} role's step {status} ({reason})", role=spec.role, step=spec.name)
    return RoleCall(outcome, status, parsed[-1] if parsed else None)


def _verdict_parser(allowed: set[str], responses: bool = False) -> Callable[[str, Any], Any]:
    def parse(text: str, step: StepRecorder) -> Any:
        reply = parse_verdict(text)
        invalid = [i for i in reply.cited if i not in allowed]
        step.output["parsed"] = {"truth": reply.truth, "certainty": reply.certainty, "cited": reply.cited,
                                 "invalid_cited": invalid, "reasoning": reply.reasoning, "problems": reply.problems,
                                 "notes": reply.notes, "format": reply.source}
        if not reply.parsed:
            step.contingency(f"{step.name}-reply-unparsed", "; ".join(reply.problems) + f" in {summary(text, 200)!r}",
                             severity="degraded", problems=reply.problems)
        if invalid:
            step.contingency(f"{step.name}-cited-unknown-evidence",
                             f"cited {', '.join(invalid)}, not among the item(s) it was shown: set aside",
                             severity="warning", invalid=invalid)
        if not responses:
            return reply
        answers = parse_responses(text)
        step.output["responses"] = [r.model_dump(mode="json") for r in answers.responses]
        if answers.unreadable:
            step.contingency(f"{step.name}-responses-unreadable", "; ".join(answers.unreadable)[:400],
                             severity="warning")
        return reply, answers
    return parse


def reading(call: RoleCall, reply: Any, *, role: str, step: str, allowed: set[str], run_no: int = 0) -> RoleReading:
    if reply is None:
        return RoleReading(role=role, step=step, run=run_no, status=call.status, parsed=False,
                           problem=f"no usable reply (the step {call.status})")
    valid = [i for i in reply.cited if i in allowed]
    return RoleReading(role=role, step=step, run=run_no, status=call.status, parsed=reply.parsed,
                       problem="; ".join(reply.problems), truth_pct=reply.truth if reply.parsed else None,
                       confidence=reply.certainty if reply.parsed else None, cited_evidence_ids=valid,
                       invalid_evidence_ids=[i for i in reply.cited if i not in allowed], reasoning=reply.reasoning)


def _unparsed(run: ClaimRun, read: RoleReading, call: RoleCall) -> None:
    if not read.parsed and call.healthy:
        run.warn("role_reply_unparsed", f"the {read.role} reply could not be read: {read.problem}", role=read.role,
                 step=read.step)


async def debate(run: ClaimRun, part: EvidencePartition, contrarian: ContrarianReport) -> ClaimVerdict:
    fc, prefix = run.fc, run.prefix
    advocate_ids = set(part.advocate)
    base: dict[str, Any] = {"partition": part, "contrarian": contrarian}

    # 1. the advocate
    name = f"{prefix}-advocate"
    call = await role_call(run, prompts.advocate_spec(run.gc, name=name, claim=run.claim,
                                                      items=run.subset(part.advocate)), _verdict_parser(advocate_ids))
    advocate = reading(call, call.parsed if call.usable else None, role="advocate", step=name, allowed=advocate_ids)
    _unparsed(run, advocate, call)
    base["advocate"] = advocate
    if not advocate.parsed:
        return broken(run, f"the advocate gave no readable verdict ({advocate.problem})", **base)
    adv_reply = call.parsed

    # 2. self-consistency: the advocate's task again, for the spread
    runs: list[RoleReading] = []
    for number in range(1, fc.self_consistency_runs + 1):
        name = f"{prefix}-self-consistency-{number}"
        spec = prompts.advocate_spec(run.gc, name=name, claim=run.claim, items=run.subset(part.advocate), run=number,
                                     runs=fc.self_consistency_runs)
        sc_call = await role_call(run, spec, _verdict_parser(advocate_ids))
        runs.append(reading(sc_call, sc_call.parsed if sc_call.usable else None, role="self_consistency", step=name,
                            allowed=advocate_ids, run_no=number))
        _unparsed(run, runs[-1], sc_call)
    consistency = self_consistency(run, advocate, runs)
    base["self_consistency"] = consistency

    # 3. the challenger
    name = f"{prefix}-challenger"
    challenger_ids = set(part.challenger)

    def parse_challenge(text: str, step: StepRecorder) -> Any:
        reply = parse_points(text, challenger_ids)
        step.output["points"] = [p.model_dump(mode="json") for p in reply.points]
        step.output["none_declared"] = reply.none_declared
        if reply.unreadable:
            step.contingency(f"{name}-points-unreadable", "; ".join(reply.unreadable)[:400], severity="warning")
        invalid = [p.id for p in reply.points if not p.valid]
        if invalid:
            step.contingency(f"{name}-points-without-valid-evidence",
                             f"point(s) {', '.join(invalid)} cite no evidence ID the challenger was shown: a move "
                             "based on them will be reverted", severity="info", points=invalid)
        if not reply.parsed:
            step.contingency(f"{name}-reply-unparsed", f"no readable POINT line in {summary(text, 200)!r}",
                             severity="degraded")
        return reply

    ch_call = await role_call(run, prompts.challenger_spec(run.gc, name=name, claim=run.claim,
                                                           items=run.subset(part.challenger), advocate=adv_reply),
                              parse_challenge)
    points = list(ch_call.parsed.points) if ch_call.usable and ch_call.parsed is not None else []
    if not (ch_call.usable and ch_call.parsed is not None and ch_call.parsed.parsed):
        detail = "the challenger gave no readable point: the reconciler runs without challenges"
        run.turn.contingency(f"{prefix}-challenger-unavailable", name, detail, severity="degraded")
        run.warn("challenger_unavailable", detail, role="challenger", step=name)
        if ch_call.healthy:
            run.warn("role_reply_unparsed", "the challenger reply could not be read", role="challenger", step=name)
    base["challenges"] = points

    # 4. the reconciler
    authors = [c.outcome.author for c in (call, ch_call) if c.outcome is not None and c.outcome.author is not None]
    reconciliation = await reconcile(run, part, adv_reply, advocate, points, authors)
    base["reconciliation"] = reconciliation
    truth = reconciliation.truth_pct if reconciliation.truth_pct is not None else advocate.truth_pct
    raw_confidence = reconciliation.confidence if reconciliation.confidence is not None else advocate.confidence
    read = reconciliation.reading if reconciliation.reading.parsed else advocate
    assert truth is not None and raw_confidence is not None  # the advocate parsed
    confidence = round(raw_confidence * consistency.factor, 1)
    truth = round(truth, 1)

    # 5. validation
    validation = await validate(run, part, truth, confidence, read)
    base["validation"] = validation
    return verdict_step(run, truth=truth, raw_confidence=raw_confidence, confidence=confidence, read=read, **base)


def self_consistency(run: ClaimRun, advocate: RoleReading, runs: list[RoleReading]) -> SelfConsistency:
    fc = run.fc
    read = {advocate.step: advocate.truth_pct} | {r.step: r.truth_pct for r in runs if r.parsed}
    values = {k: float(v) for k, v in read.items() if v is not None}
    if fc.self_consistency_runs == 0:
        return SelfConsistency(runs_requested=0, values=values, factor=1.0, status="disabled")
    if len(values) < 2:
        detail = (f"none of the {fc.self_consistency_runs} self-consistency re-run(s) could be read: the spread is "
                  f"unknown, confidence x {fc.spread_unknown_factor} (fact_check.spread_unknown_factor)")
        run.turn.contingency(f"{run.prefix}-self-consistency-unavailable", f"{run.prefix}-self-consistency-1", detail,
                             severity="degraded")
        run.warn("self_consistency_unavailable", detail, role="self_consistency")
        return SelfConsistency(runs_requested=fc.self_consistency_runs, runs=runs, values=values,
                               factor=fc.spread_unknown_factor, status="unavailable")
    spread = round(max(values.values()) - min(values.values()), 1)
    return SelfConsistency(runs_requested=fc.self_consistency_runs, runs=runs, values=values, spread_pp=spread,
                           factor=spread_factor(spread, fc.spread_factors, fc.spread_factor_beyond),
                           status="measured" if len(values) == len(runs) + 1 else "partial")


async def reconcile(run: ClaimRun, part: EvidencePartition, adv_reply: Any, advocate: RoleReading,
                    points: list[Any], authors: list[ModelIdentity] | None = None) -> Reconciliation:
    """The reconciler weighs the advocate's verdict against the challenger's points; ``authors``:
    the models that wrote them (its lineage edge)."""
    prefix, turn = run.prefix, run.turn
    name = f"{prefix}-reconciler"
    allowed = set(part.reconciler)
    call = await role_call(run, prompts.reconciler_spec(run.gc, name=name, claim=run.claim,
                                                        items=run.subset(part.reconciler), advocate=adv_reply,
                                                        points=points), _verdict_parser(allowed, responses=True),
                           judges=authors, edge="reconciler judges the advocate and the challenger")
    reply, answers = call.parsed if call.usable and call.parsed is not None else (None, None)
    read = reading(call, reply, role="reconciler", step=name, allowed=allowed)
    _unparsed(run, read, call)
    if not read.parsed:
        detail = (f"the reconciler gave no readable verdict ({read.problem}): the advocate's verdict stands "
                  "(truth, confidence, reasoning), unreconciled")
        turn.contingency(f"{prefix}-reconciler-unavailable-advocate-verdict-kept", name, detail, severity="degraded")
        run.warn("reconciler_unavailable", detail, role="reconciler", step=name)
        return Reconciliation(reading=read, truth_pct=None, confidence=None, rule="no reconciled verdict")
    by_id = {p.id: p for p in points}
    responses = answers.responses if answers is not None else []
    unknown = [r.point for r in responses if r.point not in by_id]
    if unknown:
        turn.contingency(f"{name}-answered-unknown-points", name,
                         f"answers to point(s) the challenger never made set aside: {', '.join(unknown)}",
                         severity="info")
    unanswered = [p.id for p in points if p.id not in {r.point for r in responses}]
    if unanswered:
        turn.contingency(f"{name}-points-unanswered", name, f"point(s) left unanswered: {', '.join(unanswered)}",
                         severity="info", points=unanswered)
    assert advocate.truth_pct is not None and read.truth_pct is not None
    reverted = revert_invalid_moves(advocate.truth_pct, read.truth_pct, responses, by_id)
    if reverted.reverted_pp:
        turn.contingency(f"{prefix}-reconciler-revert", name, reverted.rule, severity="warning",
                         reverted_pp=reverted.reverted_pp)
        run.warn("reconciler_revert", reverted.rule, role="reconciler", step=name, reverted_pp=reverted.reverted_pp)
    return Reconciliation(reading=read, responses=reverted.responses, proposed_truth_pct=read.truth_pct,
                          truth_pct=reverted.truth, confidence=read.confidence, reverted_pp=reverted.reverted_pp,
                          rule=reverted.rule)


async def validate(run: ClaimRun, part: EvidencePartition, truth: float, confidence: float,
                   read: RoleReading) -> ValidationReport:
    fc, prefix = run.fc, run.prefix
    report = ValidationReport()
    items = run.subset(part.validation)
    if "model" in fc.validation:
        name = f"{prefix}-validation"

        def parse(text: str, step: StepRecorder) -> Any:
            reply = parse_validation(text)
            step.output["parsed"] = {"grounded": reply.grounded, "direction_consistent": reply.direction_consistent,
                                     "issues": reply.issues}
            if not reply.parsed:
                step.contingency(f"{name}-reply-unparsed", f"no GROUNDED/DIRECTION lines in {summary(text, 200)!r}",
                                 severity="degraded")
            return reply

        call = await role_call(run, prompts.validation_spec(run.gc, name=name, claim=run.claim, items=items,
                                                            truth=truth, certainty=confidence,
                                                            cited=read.cited_evidence_ids, reasoning=read.reasoning),
                               parse)
        reply = call.parsed if call.usable else None
        if reply is None:
            report.model_status = call.status
        elif not reply.parsed:
            report.model_status = "unparsed"
            if call.healthy:
                run.warn("role_reply_unparsed", "the validation reply could not be read", role="validation",
                         step=name)
        else:
            report.model_status = "ok"
            report.model_grounded, report.model_direction_consistent = reply.grounded, reply.direction_consistent
            report.model_issues = reply.issues
            for ok, what in ((reply.grounded, "ungrounded"), (reply.direction_consistent, "pointing the wrong way")):
                if not ok:
                    run.warn("validation_failed", f"the validation role finds the verdict {what}: "
                             + ("; ".join(reply.issues) or "no issue named"), role="validation", step=name)
    if "verifier" in fc.validation:
        name = f"{prefix}-validation-grounding"
        if not read.reasoning.strip():
            run.turn.contingency(f"{name}-skipped-no-reasoning", f"{prefix}-validation",
                                 "the verdict carries no reasoning to check against the evidence", severity="warning")
        else:
            verdict = await verify(run.scoped(), step=name, subject=read.reasoning, which="verifier",
                                   broken_contingency=f"{name}-verifier-BROKEN-not-verified",
                                   author=author_of(run.turn, read.step),
                                   prefer=run.gc.backend_for("advocate"))
            report.grounding = verdict.status.value
            report.grounding_verifier, report.grounding_score = verdict.verifier, verdict.score
            report.grounding_reasons = list(verdict.reasons)[:10]
            if verdict.status is not VerdictStatus.PASS:
                run.warn("validation_failed", f"grounding {verdict.status.value} ({verdict.verifier}): "
                         + "; ".join(verdict.reasons)[:300], role="validation", step=name)
    return report


def direction_check(items: list[EvidenceItem],
                    truth: float) -> tuple[Literal["consistent", "inconsistent", "undetermined"], str]:
    """The truth percentage against the directions of the items the verdict cites."""
    supports = sum(1 for i in items if i.direction == "supports")
    contradicts = sum(1 for i in items if i.direction == "contradicts")
    if supports + contradicts == 0:
        return "undetermined", "no cited item carries a direction"
    tally = f"cited: {supports} supporting, {contradicts} contradicting"
    if truth >= 58 and contradicts > supports:
        return "inconsistent", f"truth {truth:g} leans true but the {tally}"
    if truth < 43 and supports > contradicts:
        return "inconsistent", f"truth {truth:g} leans false but the {tally}"
    return "consistent", f"truth {truth:g}; {tally}"


def verdict_step(run: ClaimRun, *, truth: float, raw_confidence: float, confidence: float, read: RoleReading,
                 **parts: Any) -> ClaimVerdict:
    fc = run.fc
    name = f"{run.prefix}-verdict"
    validation: ValidationReport = parts["validation"]
    cited = run.subset(read.cited_evidence_ids)
    with run.turn.step(name, kind="deterministic") as step:
        step.health.kind = "deterministic"
        validation.direction, validation.direction_detail = direction_check(cited, truth)
        if validation.direction == "inconsistent":
            step.contingency(f"{name}-direction-inconsistent", validation.direction_detail, severity="degraded")
            run.warn("validation_failed", f"direction check: {validation.direction_detail}", step=name)
        band = verdict_band(truth, confidence, fc.unverified_below_confidence)
        consistency: SelfConsistency = parts["self_consistency"]
        step.output.update(truth=truth, confidence_before_spread=raw_confidence, spread_pp=consistency.spread_pp,
                           spread_factor=consistency.factor, spread_status=consistency.status, confidence=confidence,
                           verdict=band, weight=round(confidence / 100, 4), cited=read.cited_evidence_ids,
                           verdict_from=read.role, direction=validation.direction,
                           direction_detail=validation.direction_detail,
                           warnings=[w.model_dump(mode="json") for w in run.warnings])
    return _claim(run, status="verdict", truth_pct=truth, confidence=confidence, verdict=band, reasoning=read.reasoning,
                  cited_evidence_ids=list(read.cited_evidence_ids), weight=round(confidence / 100, 4),
                  counts_in_aggregates=True, **parts)


def broken(run: ClaimRun, reason: str, **parts: Any) -> ClaimVerdict:
    name = f"{run.prefix}-verdict"
    with run.turn.step(name, kind="deterministic") as step:
        step.health.kind = "deterministic"
        step.contingency(f"{run.prefix}-broken-no-truth", f"{reason}: no truth percentage (BROKEN), no later debate "
                         "role ran", severity="degraded")
        step.output.update(status="broken", reason=reason, warnings=[w.model_dump(mode="json") for w in run.warnings])
    return _claim(run, status="broken", broken_reason=reason, weight=0.0, counts_in_aggregates=False, **parts)


def _claim(run: ClaimRun, **fields: Any) -> ClaimVerdict:
    warnings = list(run.warnings)
    return ClaimVerdict(index=run.index, claim=run.claim, evidence=list(run.items),
                        evidence_counts=count_evidence(run.items), sources=sorted({i.source for i in run.items}),
                        warnings=warnings, llm_calls=len(run.turn.calls) - run.calls_before,
                        refusals=sum(w.occurrences for w in warnings if w.type == "refusal"),
                        degradations=sum(w.occurrences for w in warnings if w.type in FACT_CHECK_DEGRADATION_TYPES),
                        **fields)


# --- the article ------------------------------------------------------------------------------------------


def article_step(gc: GearContext, claims: list[ClaimVerdict]) -> FactCheckResult:
    fc = gc.runtime.config.fact_check
    with gc.turn.step(STEP_ARTICLE, kind="deterministic", claims=len(claims)) as step:
        step.health.kind = "deterministic"
        article = article_value(claims)
        band = (verdict_band(article.truth, article.confidence or 0.0, fc.unverified_below_confidence)
                if article.truth is not None else None)
        if article.status == "non_informative":
            band = "UNVERIFIED"
        payload = FactCheckResult(
            claim_verdicts=claims, article_truth_pct=article.truth, article_confidence=article.confidence,
            article_verdict=band, article_status=article.status, article_reason=article.reason,
            llm_calls=len(gc.turn.calls), refusals=sum(c.refusals for c in claims),
            degradations=sum(c.degradations for c in claims), settings=fc.model_dump(mode="json"))
        if article.status == "broken":
            step.contingency("factcheck-article-no-value", article.reason, severity="degraded")
        # the whole payload, so a calibration run can read its numbers back from the trace on disk
        step.output.update(claims=[{"index": c.index, "status": c.status, "truth_pct": c.truth_pct,
                                    "confidence": c.confidence, "verdict": c.verdict, "weight": c.weight}
                                   for c in claims], fact_check=payload.model_dump(mode="json"))
    return payload


def render_answer(payload: FactCheckResult) -> str:
    """The human-readable report (the turn's answer): one block per claim, then the article value."""
    lines = [f"FACT-CHECK ({len(payload.claim_verdicts)} claim{'s' if len(payload.claim_verdicts) != 1 else ''})"]
    for c in payload.claim_verdicts:
        lines += ["", f"Claim {c.index}: {c.claim}"]
        if c.status == "broken":
            lines.append(f"Verdict: none — BROKEN: {c.broken_reason}")
        elif c.status == "insufficient_evidence":
            lines.append(f"Verdict: UNVERIFIED — insufficient evidence ({c.insufficient_reason}); truth 50 %, "
                         "confidence 0 %, not counted")
        else:
            sc = c.self_consistency
            if sc is not None and sc.spread_pp is not None:
                how = f" (self-consistency spread {sc.spread_pp:g} pp, confidence x{sc.factor:g})"
            elif sc is not None:
                how = f" (self-consistency {sc.status}, confidence x{sc.factor:g})"
            else:
                how = ""
            lines.append(f"Verdict: {c.verdict} — truth {c.truth_pct:g} %, confidence {c.confidence:g} %{how}")
            lines.append(f"Reasoning: {c.reasoning or '(none given)'}")
            cited = [i for i in c.evidence if i.id in set(c.cited_evidence_ids)]
            lines.append("Evidence cited: " + ("; ".join(f"{i.id} ({i.source})" for i in cited) or "none"))
        counts = c.evidence_counts
        lines.append(f"Evidence: {counts.total} item(s), {counts.distinct_source_types} source type(s), "
                     f"{counts.supports} supporting / {counts.contradicts} contradicting / {counts.neutral} neutral")
        shown = [w for w in c.warnings if w.type not in ("insufficient_evidence",)]
        if shown:
            lines.append("Warnings: " + "; ".join(f"{w.type}: {w.message}"
                                                  + (f" (x{w.occurrences})" if w.occurrences > 1 else "")
                                                  for w in shown))
    lines.append("")
    if payload.article_truth_pct is None:
        lines.append(f"Overall: no value — {payload.article_reason}")
    else:
        lines.append(f"Overall: {payload.article_verdict} — truth {payload.article_truth_pct:g} % "
                     f"({payload.article_reason})")
    return "\n".join(lines)
