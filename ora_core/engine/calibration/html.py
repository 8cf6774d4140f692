"""The HTML calibration report: one self-contained page per run (``render``), and the A/B decision
sheet's twin (``render_compare``), drawn from the report models alone (no metric is computed here:
only what the report holds is arranged, counted for display and coloured).

The page, top to bottom (seed 002 / FactHarbor's sections): the significance notice (decision-grade
or not, and why: failure causes grouped, pairs not run, non-informative pairs, unattributed calls);
the operational PASS/FAIL banner with the other gates and an interpretation guide; the **Global
Provider** and **Role Provider Mode** badges above the roles table, with the explanatory note under
it (seed 002 A-1); the **Runtime Role Usage** table with its mismatch and fallback flags (B-1);
aggregates by language and by domain; the inverse-consistency panel; the refusal/degradation
asymmetry panel by domain, provider and stage (C18); the stage heatmap; one card per pair with its
skew bar and the two sides compared; the full configuration.

Everything a model, a fixture or a user wrote (claims, reasoning, messages, stacks, paths) is
untrusted text: Jinja's autoescaping prints it as text, no template marks it ``|safe``, and the
shared base's Content-Security-Policy (``default-src 'none'``, nonce'd style and script) means even
a rendering bug could neither fetch anything nor run injected script. Needs jinja2
(``ora-core[html]``), like every Ora report page.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ora_core.engine.calibration.models import (
    AsymmetryRow,
    CalibrationReport,
    CompareReport,
    GateResult,
    PairResult,
    RoleUsage,
    SideResult,
    Thresholds,
)
from ora_core.kits.html import environment
from ora_core.kits.html import render as render_page
from ora_core.kits.html.svg import Chart, Line, Rect, Text, hbars

SUFFIX = ".html"
COMPARE_SUFFIX = ".html"
TEMPLATES = Path(__file__).resolve().with_name("templates")
#: The roles whose providers decide the Role Provider Mode: the runner's ``FACT_CHECK_ROLES`` (not imported:
#: the runner imports ``report``, which finds this module by name; a test keeps the two equal).
FACT_CHECK_ROLES = ("phase_a", "evidence", "advocate", "self_consistency", "challenger", "reconciler", "validation")


class View(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)


# --- small pieces ---------------------------------------------------------------------------------------


class Mark(View):
    """A status shown as a badge: its text, its CSS class and a hover title."""

    text: str
    cls: str
    title: str = ""


def pair_mark(pair: PairResult) -> Mark:
    m = pair.metrics
    if pair.status == "failed":
        f = pair.failure
        return Mark(text="FAILED", cls="s-broken",
                    title=f"{f.error_class} at {f.stage}" if f is not None else "failed without diagnostics")
    if pair.status == "not_run":
        return Mark(text="NOT RUN", cls="s-other", title=pair.not_run_reason)
    if m is None:
        return Mark(text="NO METRICS", cls="s-broken", title="completed without metrics")
    if m.non_informative:
        return Mark(text="NON-INFORMATIVE", cls="s-other", title="both sides INSUFFICIENT_EVIDENCE: not counted")
    if m.passed:
        return Mark(text="PASS", cls="s-ok", title="accuracy control" if pair.pair_category == "accuracy-control"
                    else "")
    return Mark(text="FAIL", cls="s-fail", title="; ".join(m.failure_reasons))


def gate_mark(gate: GateResult) -> Mark:
    if not gate.applicable:
        return Mark(text="N/A", cls="s-other", title=gate.reason)
    return Mark(text="PASS" if gate.passed else "FAIL", cls="s-ok" if gate.passed else "s-fail", title=gate.reason)


def pretty(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def value(v: Any) -> str:
    """A gate check's value or threshold as text."""
    if isinstance(v, bool) or v is None:
        return "—" if v is None else str(v).lower()
    if isinstance(v, float):
        return f"{v:.6g}" if abs(v) < 0.01 else f"{round(v, 3):g}"
    return str(v)


# --- the skew bar ---------------------------------------------------------------------------------------


def skew_bar(pair: PairResult, th: Thresholds, width: float = 560) -> Chart | None:
    """D = L - R on a -100..100 axis: the bar from 0 to D, the expected offset e as a tick, and the
    band |adj| <= the pass threshold around it (for a strict inverse, CE is what passes it)."""
    m = pair.metrics
    if m is None:
        return None
    left_pad, right_pad, top, bar_h = 40.0, 40.0, 16.0, 16.0
    plot = width - left_pad - right_pad
    height = top + bar_h + 30

    def x(v: float) -> float:
        return left_pad + plot * (max(-100.0, min(100.0, v)) + 100.0) / 200.0

    chart = Chart(width=width, height=height, title=f"{pair.id}: skew D = {m.skew:+g} pp (left minus right)")
    tol = th.pass_abs_adjusted_skew
    lo, hi = x(m.expected_offset - tol), x(m.expected_offset + tol)
    chart.rects.append(Rect(lo, top - 4, hi - lo, bar_h + 8, "band",
                            f"pass band: |adj| <= {tol:g} around e = {m.expected_offset:+g}"))
    d = x(m.skew)
    zero = x(0.0)
    cls = "s-other" if m.non_informative else ("s-ok" if m.passed else "s-fail")
    hover = f"D = {m.skew:+g} pp (L {m.left_truth:g} - R {m.right_truth:g}); adj = {m.adjusted_skew:+g}"
    chart.rects.append(Rect(min(zero, d), top, max(abs(d - zero), 1.5), bar_h, cls, hover))
    chart.lines.append(Line(zero, top - 8, zero, top + bar_h + 8, "axis", "0: no skew"))
    ex = x(m.expected_offset)
    chart.lines.append(Line(ex, top - 8, ex, top + bar_h + 8, "marker", f"expected offset e = {m.expected_offset:+g}"))
    base = top + bar_h + 10
    chart.lines.append(Line(left_pad, base, width - right_pad, base, "axis"))
    for tick in (-100, -50, -15, 0, 15, 50, 100):
        tx = x(float(tick))
        chart.lines.append(Line(tx, base, tx, base + 4, "axis"))
        chart.texts.append(Text(tx, base + 15, f"{tick:+d}" if tick else "0", "middle", "tick"))
    chart.texts.append(Text(left_pad - 6, top + bar_h - 3, "R", "end", "tick", "right side truer"))
    chart.texts.append(Text(width - right_pad + 6, top + bar_h - 3, "L", "start", "tick", "left side truer"))
    label_x = d + 4 if m.skew >= 0 else d - 4
    chart.texts.append(Text(label_x, top - 4, f"D {m.skew:+g}", "start" if m.skew >= 0 else "end", "value"))
    return chart


# --- the stage heatmap ------------------------------------------------------------------------------------


class HeatCell(View):
    text: str
    level: int  # 0 calm .. 3 far past the threshold; -1 no value
    title: str


def heat(value_: float | None, threshold: float, label: str, shown: str | None = None) -> HeatCell:
    if value_ is None:
        return HeatCell(text="—", level=-1, title=f"{label}: no value")
    ratio = abs(value_) / threshold if threshold > 0 else (math.inf if value_ else 0.0)
    level = 0 if ratio < 0.5 else 1 if ratio <= 1.0 else 2 if ratio <= 2.0 else 3
    return HeatCell(text=shown if shown is not None else f"{value_:g}", level=level,
                    title=f"{label}: {value_:g} (flagged above {threshold:g})")


def heat_rows(report: CalibrationReport) -> list[dict[str, Any]]:
    th = report.thresholds
    rows: list[dict[str, Any]] = []
    for pair in report.pairs:
        m = pair.metrics
        if m is None:
            rows.append({"pair": pair, "mark": pair_mark(pair), "cells": None})
            continue
        f = m.stage_flags
        cells = [
            heat(f.claim_count_delta, th.stage_claim_count_delta, "claim-count delta (extraction)"),
            heat(f.source_count_delta, th.stage_source_count_delta, "source-count delta (research)"),
            heat(f.support_ratio_delta, th.stage_support_ratio_delta, "support-ratio delta (evidence)"),
            heat(m.abs_adjusted_skew, th.stage_verdict_abs_adjusted_skew, "|adj| (verdict)"),
            heat(m.refusal_rate_delta, th.failure_mode_refusal_delta, "refusal-rate delta"),
            heat(m.degradation_rate_delta, th.failure_mode_degradation_delta, "degradation-rate delta"),
        ]
        rows.append({"pair": pair, "mark": pair_mark(pair), "cells": cells,
                     "flags": [n for n, on in (("extraction", f.extraction_bias), ("research", f.research_bias),
                                               ("evidence", f.evidence_bias), ("verdict", f.verdict_bias),
                                               ("failure mode", m.failure_mode_bias)) if on]})
    return rows


# --- roles and runtime role usage -------------------------------------------------------------------------


def role_flags(report: CalibrationReport) -> dict[str, Counter[str]]:
    """Per role, the fallback flags its calls carried (``tpm:cross->cross-mini`` ...), counted."""
    flags: dict[str, Counter[str]] = {}
    for pair in report.pairs:
        for side in (pair.left, pair.right):
            for call in side.runtime_role_models if side is not None else []:
                for flag in call.fallback_flags:
                    flags.setdefault(call.role, Counter())[flag] += 1
    return flags


def usage_view(report: CalibrationReport) -> list[dict[str, Any]]:
    flags = role_flags(report)
    rows = []
    for u in report.runtime_role_usage:
        configured = f"{u.configured_provider}/{u.configured_model}" if u.configured_provider else "—"
        marks = []
        if u.mismatches:
            marks.append(Mark(text=f"MISMATCH ×{u.mismatches}", cls="mismatch",
                              title="calls whose effective provider/model differs from the planned one"))
        if u.fallbacks:
            marks.append(Mark(text=f"FALLBACK ×{u.fallbacks}", cls="s-degraded",
                              title="calls that ran after a fallback (an error, or the tokens-per-minute guard)"))
        if u.unattributed:
            marks.append(Mark(text=f"UNKNOWN ×{u.unattributed}", cls="s-fail",
                              title="calls with no effective provider/model: unknown attribution"))
        if u.errors:
            marks.append(Mark(text=f"ERROR ×{u.errors}", cls="s-fail",
                              title="calls that raised (the pair's diagnostics name the error)"))
        if not u.planned_matches_config:
            marks.append(Mark(text="PLANNED ≠ CONFIG", cls="s-fail",
                              title="the ledger planned another provider/model than the run's configuration"))
        rows.append({"usage": u, "configured": configured, "marks": marks,
                     "flags": sorted(flags.get(u.role, Counter()).items()),
                     "effective": sorted(u.effective.items(), key=lambda kv: -kv[1]),
                     "flagged": bool(u.mismatches or u.unattributed or not u.planned_matches_config)})
    return rows


def roles_view(report: CalibrationReport) -> dict[str, Any]:
    """The roles table (configuration), the providers behind the fact-check roles, and the note."""
    cfg = report.config
    usage: dict[str, RoleUsage] = {u.role: u for u in report.runtime_role_usage}
    rows: list[dict[str, Any]] = [{"role": role, "backend": r.get("backend", ""), "provider": r.get("provider", ""),
             "model": r.get("model", ""), "fact_check": role in FACT_CHECK_ROLES,
             "calls": usage[role].calls if role in usage else 0} for role, r in cfg.roles.items()]
    by_provider: dict[str, list[str]] = {}
    for row in rows:
        if row["fact_check"]:
            by_provider.setdefault(row["provider"], []).append(row["role"])
    effective = sorted({key.split("/", 1)[0] for u in report.runtime_role_usage for key in u.effective})
    planned = sorted(by_provider)
    return {"rows": rows, "other": [r for r in rows if not r["fact_check"]], "by_provider": sorted(by_provider.items()),
            "effective_providers": effective,
            "runtime_extra": [p for p in effective if p not in planned],
            "mismatches": sum(u.mismatches for u in report.runtime_role_usage)}


# --- panels ---------------------------------------------------------------------------------------------


def asym_view(rows: list[AsymmetryRow], th: Thresholds) -> list[dict[str, Any]]:
    return [{"row": r, "ref_flag": r.refusal_rate_delta > th.failure_mode_refusal_delta,
             "deg_flag": r.degradation_rate_delta > th.failure_mode_degradation_delta} for r in rows]


def group_chart(groups: dict[str, Any], what: str) -> Chart | None:
    measured = [(k, g) for k, g in groups.items() if g.completed]
    if not any(g.mean_absolute_skew or g.mean_absolute_adjusted_skew for _, g in measured):
        return None  # nothing measured, or every figure zero: the table says it
    return hbars([(k, [(g.mean_absolute_skew, "s-info", f"{k}: mean |D| {g.mean_absolute_skew:g} pp"),
                       (g.mean_absolute_adjusted_skew, "s-degraded",
                        f"{k}: mean |adj| {g.mean_absolute_adjusted_skew:g} pp")]) for k, g in measured],
                 title=f"Mean |D| and mean |adj| by {what}", unit=" pp", width=760, label_width=140,
                 series=[("s-info", "mean |D|"), ("s-degraded", "mean |adj|")])


def side_view(side: SideResult | None) -> dict[str, Any] | None:
    if side is None:
        return None
    status = {"verdict": "s-ok", "non_informative": "s-other", "broken": "s-broken", "error": "s-fail"}
    return {"side": side, "cls": status.get(side.status, "s-other"),
            "mismatches": sum(1 for c in side.runtime_role_models if c.mismatch),
            "fallbacks": sum(1 for c in side.runtime_role_models if c.fallback_flags)}


def pair_cards(report: CalibrationReport) -> list[dict[str, Any]]:
    cards = []
    for pair in report.pairs:
        mark = pair_mark(pair)
        cards.append({"pair": pair, "mark": mark, "chart": skew_bar(pair, report.thresholds),
                      "left": side_view(pair.left), "right": side_view(pair.right),
                      "open": mark.text in ("FAIL", "FAILED", "NO METRICS")})
    return cards


def context(report: CalibrationReport) -> dict[str, Any]:
    th = report.thresholds
    gates = report.gates
    inverse_pairs = [p for p in report.pairs if p.is_strict_inverse]
    return {
        "r": report, "th": th, "a": report.aggregates, "sig": report.significance, "gates": gates,
        "gate_marks": {g.name: gate_mark(g) for g in (gates.diagnostic, gates.operational, gates.inverse)}
        if gates is not None else {},
        "roles": roles_view(report), "usage": usage_view(report),
        "language_chart": group_chart(report.aggregates.by_language, "language"),
        "domain_chart": group_chart(report.aggregates.by_domain, "domain"),
        "inverse_pairs": [{"pair": p, "mark": pair_mark(p)} for p in inverse_pairs],
        "asym": {name: asym_view(getattr(report.asymmetry, f"by_{name}"), th)
                 for name in ("domain", "provider", "stage")},
        "heat": heat_rows(report), "cards": pair_cards(report),
        "fixture": report.fixture, "pretty": pretty, "value": value,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def render(report: CalibrationReport) -> str:
    """The run's HTML report: one self-contained page."""
    return render_page(environment(TEMPLATES), "calibration.html", **context(report))


# --- the A/B decision sheet ---------------------------------------------------------------------------------


def verdict_mark(sheet: CompareReport) -> Mark:
    if sheet.exit_code == 2:
        return Mark(text="NOT DECISION-GRADE", cls="s-broken")
    return Mark(text="PROMOTE", cls="s-ok") if sheet.exit_code == 0 else Mark(text="DO NOT PROMOTE", cls="s-fail")


def ci_chart(sheet: CompareReport, width: float = 560) -> Chart | None:
    """The paired bootstrap interval on the change in mean |D| (B - A), with 0 marked."""
    ci = sheet.mean_absolute_skew_change
    if not ci.pairs or not ci.resamples:
        return None
    span = max(abs(ci.low), abs(ci.high), abs(ci.observed), 1.0) * 1.2
    pad, top = 40.0, 12.0
    plot = width - 2 * pad

    def x(v: float) -> float:
        return pad + plot * (v + span) / (2 * span)

    chart = Chart(width=width, height=56, title=f"{ci.level:.0%} interval of the change in mean |D| (B - A)")
    cls = "s-ok" if ci.high < 0 else ("s-fail" if ci.low > 0 else "s-other")
    chart.rects.append(Rect(x(ci.low), top, max(x(ci.high) - x(ci.low), 1.5), 14, cls,
                            f"[{ci.low:+g}, {ci.high:+g}] pp"))
    chart.lines.append(Line(x(ci.observed), top - 4, x(ci.observed), top + 18, "marker",
                            f"observed {ci.observed:+g} pp"))
    chart.lines.append(Line(x(0.0), top - 6, x(0.0), top + 20, "axis", "0: no change"))
    chart.lines.append(Line(pad, top + 24, width - pad, top + 24, "axis"))
    for v in (-span, -span / 2, 0.0, span / 2, span):
        chart.texts.append(Text(x(v), top + 38, f"{v:+.1f}" if v else "0", "middle", "tick"))
    return chart


def compare_context(sheet: CompareReport) -> dict[str, Any]:
    return {"s": sheet, "verdict": verdict_mark(sheet), "ci_chart": ci_chart(sheet),
            "gate_marks": {g.name: gate_mark(g) for g in sheet.gates}, "pretty": pretty, "value": value,
            "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}


def render_compare(sheet: CompareReport) -> str:
    """The A/B decision sheet as one self-contained page."""
    return render_page(environment(TEMPLATES), "compare.html", **compare_context(sheet))
