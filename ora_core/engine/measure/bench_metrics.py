"""The reliability bench's metrics, read back from the trace files of its runs (seed 003's bench).

A bench run is a directory: ``bench-run.json`` (the plan: which document ran under which inject
mode, and the trace root of each scenario) and, per scenario, ``<document>/<inject>/`` holding the
turn's trace. The plan says which scenarios there should be; every figure comes from the trace
files (``turn.json``, ``step-health.json``, the step documents and their events, the JSONL logs),
never from the in-memory results of the run. A scenario whose trace is missing or unreadable is
named in ``problems`` and counts as a failed scenario.

The figures (``docs/probes.md`` has the long form):

- **judge catch rate**: fabrications caught / planted. A planted fabrication is a ``fault_injected``
  event at a ``model_output`` site whose added text holds a judge block (a verbatim quotation); it
  is caught when the same step's ``judge`` event for that attempt failed and lists it unsupported.
  Counted per planted quotation (a persistent fault plants one per attempt, a regeneration one per
  call); one whose attempt never reached the judge (the step degraded first) is not caught, and
  is counted apart as ``judge_unjudged``.
- **retry recovery rate**: probabilistic steps that needed a retry (two attempts or more) and whose
  last attempt was accepted / probabilistic steps that needed a retry.
- **average attempts at the probabilistic boundary**: the attempts of the turn's primary analyst
  step (the first analyst step: where the model-output faults land), over the scenarios that reached
  it; beside it, the mean over every probabilistic step.
- **deterministic zero-overhead**: every deterministic step ran one attempt, with no regeneration,
  no confidence, no judge score and no ``judge`` or ``retry`` event (true / false; none seen: null).
- **scenario success rate**: scenarios whose turn delivered an answer (status ``ok`` or
  ``degraded``) / planned scenarios.
- **BROKEN never PASS**: verification steps where a verifier fault was injected (sites ``verify``,
  ``verifier_output``): how many were recorded BROKEN, how many PASS (must be none).
- **per-inject outcome**: statuses per inject mode, and whether each scenario took the path the mode
  is designed to drive (``DESIGNED``), read from the same files.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ora_core.engine.measure.tracefiles import TraceFileError, TurnFiles, read_json, turn_dirs
from ora_core.engine.reliability import judge_blocks

MANIFEST = "bench-run.json"
SUCCESS_STATUSES = ("ok", "degraded")
_WORDS = re.compile(r"[a-z0-9]+")


class Ratio(BaseModel):
    model_config = ConfigDict(extra="forbid")

    num: int
    den: int

    @property
    def value(self) -> float | None:
        return round(self.num / self.den, 4) if self.den else None

    def text(self) -> str:
        return f"{100 * self.num / self.den:.1f}% ({self.num}/{self.den})" if self.den else f"n/a (0/{self.den})"


class Mean(BaseModel):
    model_config = ConfigDict(extra="forbid")

    total: int
    n: int

    @property
    def value(self) -> float | None:
        return round(self.total / self.n, 4) if self.n else None

    def text(self) -> str:
        return f"{self.total / self.n:.2f} ({self.total}/{self.n})" if self.n else "n/a (0 steps)"


class ZeroOverhead(BaseModel):
    model_config = ConfigDict(extra="forbid")

    holds: bool | None  # None: no deterministic step was seen
    steps: int
    violations: list[str] = Field(default_factory=list)


class BrokenNeverPass(BaseModel):
    model_config = ConfigDict(extra="forbid")

    faulted: int  # verification steps with an injected verifier fault
    broken: int
    passed: int  # must be 0
    other: int

    @property
    def holds(self) -> bool | None:
        return (self.passed == 0) if self.faulted else None


class InjectOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inject: str
    designed: str  # the path the mode is designed to drive
    scenarios: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)
    designed_held: int = 0
    deviations: list[str] = Field(default_factory=list)  # "<document>: what happened instead"
    planted: int = 0
    caught: int = 0
    unjudged: int = 0  # planted in an attempt the judge never scored (the step degraded or failed first)
    boundary_attempts: list[int] = Field(default_factory=list)


class BenchMetrics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scenarios: int
    judge_catch: Ratio
    judge_unjudged: int = 0  # planted fabrications whose attempt never reached the judge (not caught)
    retry_recovery: Ratio
    attempts_at_boundary: Mean
    attempts_all_probabilistic: Mean
    deterministic_zero_overhead: ZeroOverhead
    scenario_success: Ratio
    broken_never_pass: BrokenNeverPass
    per_inject: list[InjectOutcome]
    problems: list[str] = Field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        """The headline figures as plain numbers (for --save and --compare)."""
        return {
            "judge_catch_rate": self.judge_catch.value,
            "judge_unjudged": self.judge_unjudged,
            "retry_recovery_rate": self.retry_recovery.value,
            "avg_attempts_at_boundary": self.attempts_at_boundary.value,
            "avg_attempts_all_probabilistic": self.attempts_all_probabilistic.value,
            "deterministic_zero_overhead": self.deterministic_zero_overhead.holds,
            "scenario_success_rate": self.scenario_success.value,
            "broken_recorded_as_pass": self.broken_never_pass.passed,
            "scenarios": self.scenarios,
        }


# --- one scenario, as its files show it --------------------------------------------------------------

@dataclass
class ScenarioView:
    """What the metrics need of one scenario's trace, read once."""

    document: str
    inject: str
    path: Path
    turn: dict[str, Any]
    health: dict[str, Any]
    steps: list[tuple[Path, dict[str, Any]]]
    contingencies: list[dict[str, Any]]
    rag_failures: list[dict[str, Any]]
    oversight: list[dict[str, Any]]
    health_by_step: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, document: str, inject: str, path: Path) -> ScenarioView:
        files = TurnFiles(path)
        health = files.step_health()
        view = cls(document=document, inject=inject, path=path, turn=files.turn(), health=health,
                   steps=files.step_docs(), contingencies=files.jsonl("contingencies.jsonl"),
                   rag_failures=files.jsonl("rag-failures.jsonl"), oversight=files.jsonl("oversight-queue.jsonl"))
        view.health_by_step = {str(s.get("step")): s for s in health.get("steps") or [] if isinstance(s, dict)}
        return view

    @property
    def status(self) -> str:
        return str(self.turn.get("status"))

    @property
    def contingency_names(self) -> list[str]:
        return [str(c.get("name", "")) for c in self.contingencies]

    def kind(self, step: str) -> str:
        return str(self.health_by_step.get(step, {}).get("kind") or "")

    def primary(self) -> dict[str, Any] | None:
        """The turn's primary analyst step document: the first analyst step."""
        for _, doc in self.steps:
            if (doc.get("input") or {}).get("purpose") == "analyst":
                return doc
        return None

    def injected_mode(self) -> str | None:
        for c in self.contingencies:
            if str(c.get("name", "")).startswith("fault-injection-"):
                return str((c.get("data") or {}).get("mode") or c["name"].removeprefix("fault-injection-"))
        return None


def attempts_of(doc: dict[str, Any], health: dict[str, Any] | None = None) -> int:
    attempts = (doc.get("output") or {}).get("attempts")
    if isinstance(attempts, list) and attempts:
        return len(attempts)
    return int((health or {}).get("attempts") or (doc.get("health") or {}).get("attempts") or 1)


def _events(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in doc.get("events") or [] if isinstance(e, dict) and e.get("kind") == kind]


def _norm(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


def _overlaps(a: str, b: str) -> bool:
    na, nb = _norm(a), _norm(b)
    return bool(na) and bool(nb) and (na in nb or nb in na)


# --- the designed path of each inject mode ------------------------------------------------------------

def _recovered(doc: dict[str, Any] | None) -> bool:
    if doc is None:
        return False
    output = doc.get("output") or {}
    attempts = output.get("attempts") or []
    return len(attempts) >= 2 and attempts[-1].get("failure_reason") is None and "diagnostic" not in output


def _verify_steps(view: ScenarioView) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(step, fault events)`` of the verification steps that had a verifier fault injected."""
    found = []
    for _, doc in view.steps:
        faults = [e for e in _events(doc, "fault_injected")
                  if ((e.get("point") or {}).get("site")) in ("verify", "verifier_output")]
        if faults:
            found.append((str(doc.get("step")), faults))
    return found


def _check_none(v: ScenarioView) -> str | None:
    retried = [s for s, h in v.health_by_step.items() if int(h.get("attempts") or 1) > 1]
    if v.status != "ok":
        return f"status {v.status}"
    return f"retried: {', '.join(retried)}" if retried else None


def _check_lowconf(v: ScenarioView) -> str | None:
    doc = v.primary()
    if doc is None:
        return "no analyst step ran"
    first = ((doc.get("output") or {}).get("attempts") or [{}])[0]
    if first.get("band") != "low":
        return f"the first attempt's band was {first.get('band')!r}, not 'low'"
    return None if _recovered(doc) and v.status in SUCCESS_STATUSES else f"not recovered (status {v.status})"


def _check_hallucination(v: ScenarioView) -> str | None:
    doc = v.primary()
    if doc is None:
        return "no analyst step ran"
    judges = _events(doc, "judge")
    if not judges or judges[0].get("passed") is not False:
        return "the judge did not fail the first attempt"
    return None if _recovered(doc) and v.status in SUCCESS_STATUSES else f"not recovered (status {v.status})"


def _check_persistent(v: ScenarioView) -> str | None:
    doc = v.primary()
    if v.status != "halted":
        return f"status {v.status}, not halted"
    if doc is None:
        return "no analyst step ran"
    attempts = (doc.get("output") or {}).get("attempts") or []
    if len(attempts) < 2 or not all(str(a.get("failure_reason") or "").startswith("judge") for a in attempts):
        return "the attempts did not all fail the judge"
    return None if (v.turn.get("diagnostic") or {}).get("step") == doc.get("step") else "halted elsewhere"


def _check_coverage(v: ScenarioView) -> str | None:
    diagnostic = v.turn.get("diagnostic") or {}
    if v.status != "halted" or diagnostic.get("step") != "context-assertions":
        return f"status {v.status}, halted at {diagnostic.get('step')!r}"
    if diagnostic.get("retries") != 0:
        return f"retries {diagnostic.get('retries')!r}"
    ran = [s for s in v.health_by_step if v.kind(s) == "probabilistic"]
    return f"probabilistic steps ran after the halt: {', '.join(ran)}" if ran else None


def _check_verifier(v: ScenarioView) -> str | None:
    faulted = _verify_steps(v)
    if not faulted:
        return "no verification step had the fault injected"
    not_broken = [s for s, _ in faulted if v.health_by_step.get(s, {}).get("verdict") != "BROKEN"]
    if not_broken:
        return f"recorded other than BROKEN: {', '.join(not_broken)}"
    return None if v.status in SUCCESS_STATUSES else f"status {v.status}"


def _check_timeout(v: ScenarioView) -> str | None:
    if not any(n.endswith("-backend-timeout") for n in v.contingency_names):
        return "no backend-timeout contingency"
    return None if v.status in SUCCESS_STATUSES else f"status {v.status}: the turn did not continue on the other stream"


def _check_rate_limit(v: ScenarioView) -> str | None:
    if not any(n.endswith("-backend-rate_limited") for n in v.contingency_names):
        return "no rate-limit contingency"
    if not any("consolidation-degraded" in n for n in v.contingency_names):
        return "consolidation did not degrade"
    return None if v.status == "degraded" else f"status {v.status}"


def _check_rag_down(v: ScenarioView) -> str | None:
    if not v.rag_failures:
        return "rag-failures.jsonl is empty"
    return None if v.status in SUCCESS_STATUSES else f"status {v.status}"


#: inject mode -> (the path it is designed to drive, how to tell from the trace what happened instead).
DESIGNED: dict[str, tuple[str, Callable[[ScenarioView], str | None]]] = {
    "none": ("clean run: status ok, nothing retried", _check_none),
    "lowconf": ("confidence routing retries the primary analyst; the retry recovers", _check_lowconf),
    "hallucination": ("the judge catches the fabricated quotation; the retry recovers", _check_hallucination),
    "persistent": ("every attempt fails the judge; retries run out; the turn halts", _check_persistent),
    "coverage": ("the deterministic coverage assertion halts at once, no retry", _check_coverage),
    "verifier-exception": ("every faulted verification is BROKEN, never PASS; the answer ships unverified",
                           _check_verifier),
    "verifier-garbage": ("every faulted verification is BROKEN, never PASS; the answer ships unverified",
                         _check_verifier),
    "backend-timeout": ("the primary stream degrades (named); the turn continues on the other", _check_timeout),
    "rate-limit": ("consolidation is rate limited and degrades; the longer stream ships under a header",
                   _check_rate_limit),
    "rag-down": ("every retrieval fails by name (rag-failures.jsonl); the turn goes on without evidence",
                 _check_rag_down),
}


# --- the metrics -----------------------------------------------------------------------------------------

def read_manifest(run_dir: Path) -> dict[str, Any]:
    manifest = read_json(run_dir / MANIFEST)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("scenarios"), list):
        raise TraceFileError(run_dir / MANIFEST, "is not a bench plan (no 'scenarios' list)")
    return manifest


def compute_metrics(run_dir: Path | str) -> BenchMetrics:
    """Every figure of a bench run, from its plan and its trace files (module docstring)."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    problems: list[str] = []
    views: list[ScenarioView] = []
    planned = manifest["scenarios"]
    per_inject: dict[str, InjectOutcome] = {}
    for entry in planned:
        document, inject = str(entry.get("document")), str(entry.get("inject"))
        outcome = per_inject.setdefault(inject, InjectOutcome(
            inject=inject, designed=DESIGNED.get(inject, ("(no designed path known for this mode)", None))[0]))
        outcome.scenarios += 1
        root = run_dir / str(entry.get("trace_root", f"{document}/{inject}"))
        dirs = turn_dirs(root)
        if len(dirs) != 1:
            why = entry.get("error") or ("no traced turn" if not dirs else f"{len(dirs)} turns, expected one")
            problems.append(f"{document} × {inject}: {why} (under {root})")
            outcome.statuses["no trace"] = outcome.statuses.get("no trace", 0) + 1
            outcome.deviations.append(f"{document}: {why}")
            continue
        try:
            view = ScenarioView.read(document, inject, dirs[0])
        except TraceFileError as exc:
            problems.append(f"{document} × {inject}: {exc}")
            outcome.statuses["unreadable"] = outcome.statuses.get("unreadable", 0) + 1
            outcome.deviations.append(f"{document}: unreadable trace: {exc.problem}")
            continue
        injected = view.injected_mode()
        if injected != (None if inject == "none" else inject):
            problems.append(f"{document} × {inject}: the trace records fault injection {injected!r}")
        views.append(view)
        outcome.statuses[view.status] = outcome.statuses.get(view.status, 0) + 1
        check = DESIGNED.get(inject, ("", None))[1]
        deviation = check(view) if check is not None else "no designed path known for this mode"
        if deviation is None:
            outcome.designed_held += 1
        else:
            outcome.deviations.append(f"{document}: {deviation}")
    planted = caught = unjudged = 0
    retried = recovered = 0
    boundary = Mean(total=0, n=0)
    every = Mean(total=0, n=0)
    zero = ZeroOverhead(holds=None, steps=0)
    bnp = BrokenNeverPass(faulted=0, broken=0, passed=0, other=0)
    for view in views:
        outcome = per_inject[view.inject]
        for _, doc in view.steps:
            step = str(doc.get("step"))
            health = view.health_by_step.get(step, {})
            kind = view.kind(step)
            judges = _events(doc, "judge")
            for event in _events(doc, "fault_injected"):
                point = event.get("point") or {}
                if point.get("site") != "model_output" or event.get("effect") != "replaced":
                    continue
                blocks = judge_blocks(str(event.get("added") or ""))
                if not blocks:
                    continue
                planted += 1
                outcome.planted += 1
                scored = [j for j in judges if j.get("attempt") == point.get("attempt")]
                if not scored:
                    unjudged += 1
                    outcome.unjudged += 1
                hit = any(j.get("passed") is False
                          and any(_overlaps(b, str(u)) for b in blocks for u in j.get("unsupported") or [])
                          for j in scored)
                if hit:
                    caught += 1
                    outcome.caught += 1
            if kind == "probabilistic":
                n = attempts_of(doc, health)
                every.total += n
                every.n += 1
                if n >= 2:
                    retried += 1
                    recovered += _recovered(doc)
            elif kind == "deterministic":
                zero.steps += 1
                problems_here = []
                if int(health.get("attempts") or 1) != 1:
                    problems_here.append(f"{health.get('attempts')} attempts")
                if int(health.get("regenerations") or 0):
                    problems_here.append("regenerated")
                if health.get("judge_score") is not None or judges:
                    problems_here.append("judged")
                if health.get("confidence") is not None:
                    problems_here.append("confidence routed")
                if _events(doc, "retry"):
                    problems_here.append("retried")
                if problems_here:
                    zero.violations.append(f"{view.document} × {view.inject}: {step}: {', '.join(problems_here)}")
        primary = view.primary()
        if primary is not None:
            n = attempts_of(primary, view.health_by_step.get(str(primary.get("step"))))
            boundary.total += n
            boundary.n += 1
            outcome.boundary_attempts.append(n)
        for step, _ in _verify_steps(view):
            bnp.faulted += 1
            verdict = view.health_by_step.get(step, {}).get("verdict")
            if verdict == "BROKEN":
                bnp.broken += 1
            elif verdict == "PASS":
                bnp.passed += 1
            else:
                bnp.other += 1
    if zero.steps:
        zero.holds = not zero.violations
    success = sum(1 for v in views if v.status in SUCCESS_STATUSES)
    return BenchMetrics(
        scenarios=len(planned), judge_catch=Ratio(num=caught, den=planted), judge_unjudged=unjudged,
        retry_recovery=Ratio(num=recovered, den=retried), attempts_at_boundary=boundary,
        attempts_all_probabilistic=every, deterministic_zero_overhead=zero,
        scenario_success=Ratio(num=success, den=len(planned)), broken_never_pass=bnp,
        per_inject=list(per_inject.values()), problems=problems)
