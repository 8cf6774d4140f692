"""The A/B decision sheet (seed 002 B-2) and the promotion gates of D4, from run reports on disk.

``compare(A, B)``: B is the candidate, A the reference, both on the same fixture. The sheet: the
configuration diff (path, A, B), completion, per-pair skew deltas and direction changes, the
refusal/degradation asymmetry deltas, warning deltas, token/cost and runtime deltas, and a paired
bootstrap confidence interval (seeded, so reproducible) on the change in mean |D| over the pairs both
runs completed. Then the gates:

1. **Stability**: at least two complete runs of B's profile and configuration on this fixture (B and
   any such report beside it or in ``runs_dir``), each covering every pair of the fixture, every pair
   completed, ``failureModeBiasCount = 0``, ``meanDegradationRateDelta <= 5.0``, no fatal error.
2. **Observability**: in A and in B, every model call attributed (an effective provider and model),
   no call whose effective model differs from the planned one, and every planned model the one the
   run's configuration gives its role.
3. **Correction effect** (C13): B's meanAbsoluteSkew at least 30 % below A's, B's passRate >= 30 %,
   B's failureModeBiasCount = 0, improvement in >= 2 languages (a language improves when its mean
   |adj| falls by more than 1 pp), B's pipeline runtime at most 15 % above A's, B not stopped at a cap.
4. **Decision memo**: a person approved it (``approved_by``).

Exit code: 2 when the runs are not decision-grade (different fixtures or selections, an incomplete
run, a run that is not decision-grade itself), else 0 when every gate passes, 1 when one fails.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ora_core.engine.calibration.gates import check, gate
from ora_core.engine.calibration.metrics import mean
from ora_core.engine.calibration.models import (
    REPORT_SCHEMA,
    BootstrapCI,
    CalibrationReport,
    CompareReport,
    ConfigDiff,
    DecisionMemo,
    GateResult,
    LanguageDelta,
    PairDelta,
    RunSummary,
    Thresholds,
)
from ora_core.engine.calibration.report import load_report
from ora_core.kernel.errors import UsageError

DEFAULT_SEED = 20260221  # the date of seed 002's decision log
DEFAULT_RESAMPLES = 10_000
LONG_VALUE = 200


def summary(report: CalibrationReport, path: str) -> RunSummary:
    a = report.aggregates
    return RunSummary(
        path=path, run_id=report.run_id, profile=report.profile.name, mode=report.mode, intent=report.intent,
        fixture_version=str(report.fixture.get("version", "")), fixture_hash=str(report.fixture.get("hash", "")),
        config_hash=report.config.run_hash, status=report.status,
        decision_grade=bool(report.significance and report.significance.decision_grade), completed=a.completed,
        selected=a.selected, failed=a.failed, not_run=a.not_run, mean_absolute_skew=a.mean_absolute_skew,
        mean_absolute_adjusted_skew=a.mean_absolute_adjusted_skew, pass_rate=a.pass_rate,
        failure_mode_bias_count=a.failure_mode_bias_count, mean_degradation_rate_delta=a.mean_degradation_rate_delta,
        mean_refusal_rate_delta=a.mean_refusal_rate_delta, tokens=report.totals.tokens, cost_usd=report.totals.cost_usd,
        pipeline_runtime_s=report.totals.pipeline_runtime_s,
        stopped=f"{report.stopped.reason}: {report.stopped.detail}" if report.stopped else None)


# --- the configuration diff -----------------------------------------------------------------------------------


def _shown(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) <= LONG_VALUE:
        return value
    kind = f"list[{len(value)}]" if isinstance(value, list) else type(value).__name__
    return f"{kind} sha256:{hashlib.sha256(text.encode()).hexdigest()[:12]} ({len(text)} chars)"


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def config_diff(a: dict[str, Any], b: dict[str, Any], ignore: Iterable[str] = ()) -> list[ConfigDiff]:
    """Dotted paths whose values differ (``ignore``: path prefixes that name a run, not a setting)."""
    fa, fb = flatten(a), flatten(b)
    skip = tuple(ignore)
    return [ConfigDiff(path=p, a=_shown(fa.get(p)), b=_shown(fb.get(p)))
            for p in sorted(set(fa) | set(fb)) if fa.get(p) != fb.get(p) and not p.startswith(skip)]


# --- the bootstrap ---------------------------------------------------------------------------------------------


def paired_bootstrap(a: list[float], b: list[float], *, seed: int = DEFAULT_SEED,
                     resamples: int = DEFAULT_RESAMPLES, level: float = 0.95) -> BootstrapCI:
    """A percentile interval for mean(b) - mean(a) over pairs (``a[i]``, ``b[i]``), resampling pairs with
    replacement from a seeded generator: the same input gives the same interval."""
    n = len(a)
    if n != len(b):
        raise ValueError(f"paired samples of different sizes: {n} and {len(b)}")
    if n == 0 or resamples <= 0:
        return BootstrapCI(resamples=0, seed=seed, pairs=n, level=level)
    rng = random.Random(seed)
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    stats = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    low = stats[max(0, math.floor(tail * resamples))]
    high = stats[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return BootstrapCI(observed=round(sum(diffs) / n, 4), low=round(low, 4), high=round(high, 4), level=level,
                       resamples=resamples, seed=seed, pairs=n)


# --- pairs, languages, warnings ----------------------------------------------------------------------------------


def pair_deltas(a: CalibrationReport, b: CalibrationReport, th: Thresholds) -> list[PairDelta]:
    ids = [p.id for p in a.pairs] + [p.id for p in b.pairs if a.pair_result(p.id) is None]
    out = []
    for pid in ids:
        pa, pb = a.pair_result(pid), b.pair_result(pid)
        ref = pa or pb
        assert ref is not None
        ma = pa.metrics if pa is not None and pa.informative else None
        mb = pb.metrics if pb is not None and pb.informative else None
        row = PairDelta(id=pid, language=ref.language, domain=ref.domain, status_a=pa.status if pa else "absent",
                        status_b=pb.status if pb else "absent")
        if ma is not None:
            row.skew_a, row.abs_adjusted_skew_a, row.passed_a = ma.skew, ma.abs_adjusted_skew, ma.passed
            row.refusal_rate_delta_a, row.degradation_rate_delta_a = ma.refusal_rate_delta, ma.degradation_rate_delta
        if mb is not None:
            row.skew_b, row.abs_adjusted_skew_b, row.passed_b = mb.skew, mb.abs_adjusted_skew, mb.passed
            row.refusal_rate_delta_b, row.degradation_rate_delta_b = mb.refusal_rate_delta, mb.degradation_rate_delta
        if ma is not None and mb is not None:
            row.skew_delta = round(mb.skew - ma.skew, 4)
            row.abs_adjusted_skew_delta = round(mb.abs_adjusted_skew - ma.abs_adjusted_skew, 4)
            row.improved = ma.abs_adjusted_skew - mb.abs_adjusted_skew > th.improved_abs_adjusted_skew_pp
            row.worsened = mb.abs_adjusted_skew - ma.abs_adjusted_skew > th.improved_abs_adjusted_skew_pp
            row.direction_change = ma.skew * mb.skew < 0  # a sign flip (a move to or from 0 is not)
        out.append(row)
    return out


def language_deltas(rows: list[PairDelta], th: Thresholds) -> list[LanguageDelta]:
    out = []
    for language in sorted({r.language for r in rows}):
        both = [r for r in rows if r.language == language and r.abs_adjusted_skew_delta is not None]
        if not both:
            continue
        adj_a = mean([r.abs_adjusted_skew_a or 0.0 for r in both])
        adj_b = mean([r.abs_adjusted_skew_b or 0.0 for r in both])
        out.append(LanguageDelta(language=language, pairs=len(both), mean_absolute_adjusted_skew_a=adj_a,
                                 mean_absolute_adjusted_skew_b=adj_b,
                                 mean_absolute_skew_a=mean([abs(r.skew_a or 0.0) for r in both]),
                                 mean_absolute_skew_b=mean([abs(r.skew_b or 0.0) for r in both]),
                                 improved=adj_a - adj_b > th.improved_abs_adjusted_skew_pp))
    return out


def warning_totals(report: CalibrationReport) -> dict[str, int]:
    totals: dict[str, int] = {}
    for pair in report.pairs:
        for side in (pair.left, pair.right):
            for w in side.warnings if side is not None else []:
                totals[w.type] = totals.get(w.type, 0) + w.occurrences
    return totals


def _delta(a: float | None, b: float | None, digits: int = 4) -> float | None:
    return round(b - a, digits) if a is not None and b is not None else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round((b - a) / a, 4) if a and b is not None else None


# --- the gates -------------------------------------------------------------------------------------------------


def qualifies_for_stability(report: CalibrationReport, th: Thresholds) -> list[str]:
    """Why ``report`` is not a complete, stable run ([] when it is)."""
    a = report.aggregates
    total = int(report.fixture.get("pairs", 0))
    problems = []
    if report.status != "complete":
        problems.append(f"status {report.status}")
    if a.selected != total:
        problems.append(f"{a.selected} of the fixture's {total} pairs selected")
    if a.completed != a.selected:
        problems.append(f"{a.completed} of {a.selected} completed")
    if a.failed:
        problems.append(f"{a.failed} failed pair(s) (fatal errors)")
    if a.failure_mode_bias_count:
        problems.append(f"failureModeBiasCount {a.failure_mode_bias_count}")
    if a.mean_degradation_rate_delta > th.stability_mean_degradation_delta:
        problems.append(f"meanDegradationRateDelta {a.mean_degradation_rate_delta:g} > "
                        f"{th.stability_mean_degradation_delta:g}")
    return problems


def _unreadable_run(path: Path, exc: Exception) -> str | None:
    """Why ``path``, which did not load as a run report, is one that cannot be read; None when it is
    another kind of file (a compare sheet, any JSON with another schema): not a candidate at all."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as read_error:
        return f"{path}: cannot be read as JSON ({type(read_error).__name__}: {read_error})"
    if isinstance(data, dict) and data.get("schema") == REPORT_SCHEMA:
        return f"{path}: a run report that does not load ({type(exc).__name__}: {str(exc)[:300]})"
    return None


def candidate_runs(b: CalibrationReport, b_path: Path, runs_dir: Path | None
                   ) -> tuple[list[tuple[Path, CalibrationReport]], list[str]]:
    """B and every report beside it (or in ``runs_dir``) of the same profile, configuration and
    fixture; and the JSON files there that look like run reports but cannot be read, each with why."""
    found: dict[str, tuple[Path, CalibrationReport]] = {b.run_id: (b_path, b)}
    unreadable: list[str] = []
    dirs = {b_path.resolve().parent} | ({runs_dir.expanduser().resolve()} if runs_dir is not None else set())
    for directory in sorted(dirs):
        for path in sorted(directory.glob("*.json")):
            if path.name.endswith(".partial.json") or path.resolve() == b_path.resolve():
                continue
            try:
                other = load_report(path)
            except (OSError, ValueError) as exc:
                why = _unreadable_run(path, exc)
                if why is not None:
                    unreadable.append(why)
                continue
            if (other.profile.name, other.config.run_hash, other.fixture.get("hash")) == (
                    b.profile.name, b.config.run_hash, b.fixture.get("hash")):
                found.setdefault(other.run_id, (path, other))
    return list(found.values()), unreadable


def stability_gate(b: CalibrationReport, b_path: Path, runs_dir: Path | None, th: Thresholds
                   ) -> tuple[GateResult, list[str]]:
    checks = []
    stable = []
    runs, unreadable = candidate_runs(b, b_path, runs_dir)
    for path, run in runs:
        problems = qualifies_for_stability(run, th)
        checks.append(check(f"run {run.run_id}", not problems, "==", True, "; ".join(problems) or str(path)))
        if not problems:
            stable.append(str(path))
    # named, never counted: a damaged report beside the runs is not silently one run fewer
    checks += [check("unreadable run report", False, "==", True, why) for why in unreadable]
    what = f"complete, stable runs of profile {b.profile.name!r} ({b.config.run_hash}) on this fixture"
    checks.insert(0, check("completeStableRuns", len(stable), ">=", th.stability_runs, what))
    result = gate("stability", checks)
    result.passed = checks[0].passed
    result.reason = "every check passed" if result.passed else (
        f"{len(stable)} complete, stable run(s) of {th.stability_runs} needed")
    return result, stable


def observability_gate(a: CalibrationReport, b: CalibrationReport) -> GateResult:
    checks = []
    for name, run in (("A", a), ("B", b)):
        usage = run.runtime_role_usage
        calls = sum(u.calls for u in usage)
        checks.append(check(f"{name}: calls attributed", sum(u.unattributed for u in usage), "==", 0,
                            f"{calls} call(s) in the role ledger"))
        checks.append(check(f"{name}: effective = planned", sum(u.mismatches for u in usage), "==", 0,
                            "; ".join(f"{u.role}: {u.fallbacks} fallback(s)" for u in usage if u.mismatches)))
        off = [u.role for u in usage if not u.planned_matches_config]
        checks.append(check(f"{name}: planned = configuration", len(off), "==", 0,
                            f"roles planned off the configuration: {', '.join(off)}" if off else ""))
        checks.append(check(f"{name}: ledger present", calls, ">", 0))
    return gate("observability", checks)


def correction_gate(a: CalibrationReport, b: CalibrationReport, languages: list[LanguageDelta],
                    th: Thresholds) -> GateResult:
    sa, sb = a.aggregates.mean_absolute_skew, b.aggregates.mean_absolute_skew
    reduction = round((sa - sb) / sa, 4) if sa > 0 else 0.0
    runtime_a, runtime_b = a.totals.pipeline_runtime_s, b.totals.pipeline_runtime_s
    increase = round((runtime_b - runtime_a) / runtime_a, 4) if runtime_a > 0 else 0.0
    improved = [lang.language for lang in languages if lang.improved]
    checks = [
        check("meanAbsoluteSkew reduction", reduction, ">=", th.correction_skew_reduction,
              f"A {sa:g} pp -> B {sb:g} pp" + ("" if sa > 0 else "; A has no skew to reduce")),
        check("passRate (B)", b.aggregates.pass_rate, ">=", th.correction_min_pass_rate),
        check("failureModeBiasCount (B)", b.aggregates.failure_mode_bias_count, "==", 0),
        check("languages improved", len(improved), ">=", th.correction_min_languages, ", ".join(improved) or "none"),
        check("runtime increase", increase, "<=", th.correction_max_runtime_increase,
              f"pipeline runtime A {runtime_a:g} s -> B {runtime_b:g} s"),
        check("cost caps met (B)", b.stopped is None, "==", True,
              f"stopped: {b.stopped.reason}: {b.stopped.detail}" if b.stopped else "")]
    return gate("correction", checks)


def memo_gate(memo: DecisionMemo) -> GateResult:
    who = memo.approved_by or ""
    return gate("decision-memo", [check("approved", bool(who.strip()), "==", True,
                                        f"approved by {who}" if who.strip() else "nobody approved it (--approved-by)")])


# --- the sheet ---------------------------------------------------------------------------------------------------


def compare(a_path: str | Path, b_path: str | Path, *, approved_by: str | None = None, note: str = "",
            runs_dir: str | Path | None = None, seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES,
            thresholds: Thresholds | None = None) -> CompareReport:
    a_path, b_path = Path(a_path).expanduser(), Path(b_path).expanduser()
    reports = []
    for label, path in (("A", a_path), ("B", b_path)):
        try:
            reports.append(load_report(path))
        except OSError as exc:
            raise UsageError(f"run {label}: cannot read {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise UsageError(f"run {label}: {path} is not a calibration run report: {str(exc)[:400]}") from None
    a, b = reports
    th = thresholds or b.thresholds
    same_fixture = a.fixture.get("hash") == b.fixture.get("hash")
    reasons = []
    if not same_fixture:
        reasons.append(f"different fixtures: A {a.fixture.get('version')} ({a.fixture.get('hash')}), "
                       f"B {b.fixture.get('version')} ({b.fixture.get('hash')})")
    if a.selected_pairs != b.selected_pairs:
        reasons.append(f"different pair selections: A {len(a.selected_pairs)} pair(s) ({a.mode}), "
                       f"B {len(b.selected_pairs)} ({b.mode})")
    for label, run in (("A", a), ("B", b)):
        sig = run.significance
        if sig is None or not sig.decision_grade:
            reasons.append(f"run {label} ({run.run_id}) is not decision-grade: "
                           + ("; ".join(sig.reasons) if sig and sig.reasons else "no significance recorded"))
    rows = pair_deltas(a, b, th)
    languages = language_deltas(rows, th)
    both = [r for r in rows if r.skew_a is not None and r.skew_b is not None]
    ci = paired_bootstrap([abs(r.skew_a or 0.0) for r in both], [abs(r.skew_b or 0.0) for r in both], seed=seed,
                          resamples=resamples)
    wa, wb = warning_totals(a), warning_totals(b)
    memo = DecisionMemo(approved_by=approved_by or None, note=note,
                        approved_at=datetime.now(timezone.utc) if approved_by else None)
    stability, stable_runs = stability_gate(b, b_path, Path(runs_dir) if runs_dir is not None else None, th)
    gates = [stability, observability_gate(a, b), correction_gate(a, b, languages, th), memo_gate(memo)]
    ignore = ("trace.root", "retrieval.path")  # where a run wrote, not how it ran
    sheet = CompareReport(
        created_at=datetime.now(timezone.utc), a=summary(a, str(a_path)), b=summary(b, str(b_path)),
        comparable=not reasons, not_decision_grade=reasons, same_fixture=same_fixture,
        config_diff=config_diff(a.config.run_config, b.config.run_config, ignore),
        completion={"a": {"completed": a.aggregates.completed, "selected": a.aggregates.selected,
                          "failed": a.aggregates.failed, "notRun": a.aggregates.not_run},
                    "b": {"completed": b.aggregates.completed, "selected": b.aggregates.selected,
                          "failed": b.aggregates.failed, "notRun": b.aggregates.not_run}},
        pairs=rows, languages=languages,
        asymmetry={"failureModeBiasCount": {"a": a.aggregates.failure_mode_bias_count,
                                            "b": b.aggregates.failure_mode_bias_count},
                   "meanRefusalRateDelta": {"a": a.aggregates.mean_refusal_rate_delta,
                                            "b": b.aggregates.mean_refusal_rate_delta,
                                            "delta": _delta(a.aggregates.mean_refusal_rate_delta,
                                                            b.aggregates.mean_refusal_rate_delta)},
                   "meanDegradationRateDelta": {"a": a.aggregates.mean_degradation_rate_delta,
                                                "b": b.aggregates.mean_degradation_rate_delta,
                                                "delta": _delta(a.aggregates.mean_degradation_rate_delta,
                                                                b.aggregates.mean_degradation_rate_delta)}},
        warnings={t: {"a": wa.get(t, 0), "b": wb.get(t, 0), "delta": wb.get(t, 0) - wa.get(t, 0)}
                  for t in sorted(set(wa) | set(wb))},
        cost={"tokens": {"a": a.totals.tokens, "b": b.totals.tokens, "delta": b.totals.tokens - a.totals.tokens},
              "llmCalls": {"a": a.totals.llm_calls, "b": b.totals.llm_calls,
                           "delta": b.totals.llm_calls - a.totals.llm_calls},
              "costUsd": {"a": a.totals.cost_usd, "b": b.totals.cost_usd,
                          "delta": _delta(a.totals.cost_usd, b.totals.cost_usd, 6)}},
        runtime={"pipelineRuntimeS": {"a": a.totals.pipeline_runtime_s, "b": b.totals.pipeline_runtime_s,
                                      "delta": _delta(a.totals.pipeline_runtime_s, b.totals.pipeline_runtime_s, 3),
                                      "increase": _ratio(a.totals.pipeline_runtime_s, b.totals.pipeline_runtime_s)},
                 "wallS": {"a": a.totals.wall_s, "b": b.totals.wall_s}},
        mean_absolute_skew_change=ci, gates=gates, stability_runs=stable_runs, memo=memo)
    if reasons:
        sheet.exit_code, sheet.verdict = 2, "NOT DECISION-GRADE: " + "; ".join(reasons)
    elif all(g.passed for g in gates):
        sheet.exit_code, sheet.verdict = 0, "PROMOTE: every gate of seed 002 D4 passes"
    else:
        failed = [g.name for g in gates if not g.passed]
        sheet.exit_code, sheet.verdict = 1, f"DO NOT PROMOTE: gate(s) failed: {', '.join(failed)}"
    return sheet
