"""``ora health --html``: the dashboard over many turns, drawn from the index beside the traces.

Status mix over time, FAIL vs BROKEN rates per step, contingency frequencies with their
populations, supplement and coverage-gap rates, non-compliance, role mismatches, latency per
step (median, p95), and a listing whose rows link each turn's view (``<turn dir>/view.html``).
What the index read had to rebuild or leave out is said at the top of the page.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ora_core.api.html import svg

from ..health import HealthAggregate
from ..index import IndexScan, scan
from ..reading import open_turn_status
from . import render
from .turn import verdict_class

VIEW_NAME = "view.html"
STATUS_ORDER = ("ok", "degraded", "needs_clarification", "halted", "running", "interrupted", "incomplete")
STATUS_CLASS = {"ok": "s-ok", "degraded": "s-degraded", "needs_clarification": "s-info", "halted": "s-fail",
                "running": "s-info", "interrupted": "s-broken", "incomplete": "s-other"}


def view_href(turn_dir: str) -> str:
    """The link from the dashboard (at the trace root) to a turn's view: a relative path, every
    character outside ``[A-Za-z0-9_.-/]`` percent-encoded (a directory name cannot become a
    ``javascript:`` link)."""
    return quote(f"{turn_dir}/{VIEW_NAME}", safe="/")


def collect(root: Path, *, since: datetime | None = None, rebuild: bool = False) -> tuple[HealthAggregate, IndexScan]:
    aggregate = HealthAggregate()
    found = scan(root, aggregate.add, since=since, rebuild=rebuild, liveness=open_turn_status)
    for open_turn in found.open_turns:
        aggregate.add_open(open_turn)
    return aggregate, found


def build_dashboard(aggregate: HealthAggregate, found: IndexScan, *, root: Path, since: datetime | None,
                    limit: int, page_dir: Path) -> dict[str, Any]:
    report = aggregate.report(root=root, since=since, scan=found)
    statuses = [s for s in STATUS_ORDER if report["statuses"].get(s)] + sorted(
        s for s in report["statuses"] if s not in STATUS_ORDER)
    width_name, buckets = aggregate.status_buckets()
    fmt = "%Y-%m-%d" if width_name in ("day", "week") else "%m-%d %H:%M"
    status_chart = svg.columns(
        [(start.strftime(fmt), [(float(counts.get(s, 0)), STATUS_CLASS.get(s, "s-other"),
                                 f"{start.strftime('%Y-%m-%d %H:%M')}: {counts.get(s, 0)} {s}") for s in statuses])
         for start, counts in buckets],
        title=f"Turns per {width_name}, by status", series=[(STATUS_CLASS.get(s, "s-other"), s) for s in statuses],
    ) if buckets else None
    steps = report["steps"]
    ordered = sorted(steps.items(), key=lambda kv: -(kv[1]["fail"] + kv[1]["broken"]))
    verdict_rows = [(name, [(s["fail_pct"], "s-fail", f"{name}: FAIL on {s['fail_pct']:g} % of {s['runs']:,} runs"),
                            (s["broken_pct"], "s-broken",
                             f"{name}: BROKEN on {s['broken_pct']:g} % of {s['runs']:,} runs")])
                    for name, s in ordered if s["fail"] or s["broken"]]
    verdict_chart = svg.hbars(verdict_rows, title="FAIL and BROKEN rate per step", unit=" %",
                              series=[("s-fail", "FAIL"), ("s-broken", "BROKEN")]) if verdict_rows else None
    by_latency = sorted(steps.items(), key=lambda kv: -kv[1]["latency_p95_s"])[:25]
    latency_chart = svg.hbars(
        [(name, [(s["latency_median_s"], "s-lat", f"{name}: median {s['latency_median_s']:.3g} s")])
         for name, s in by_latency],
        markers=[[(s["latency_p95_s"], f"{name}: p95 {s['latency_p95_s']:.3g} s")] for name, s in by_latency],
        title="Latency per step: median (bar) and p95 (tick)", unit=" s",
        series=[("s-lat", "median")]) if by_latency else None
    top = report["contingencies"][:15]
    contingency_chart = svg.hbars(
        [(c["name"], [(c["pct_of_turns"], "s-cont", f"{c['name']}: {c['turns']:,} turns ({c['pct_of_turns']:g} %)")])
         for c in top], title="Most frequent contingencies (% of turns)", unit=" %", label_width=330,
        width=1000) if top else None
    rows = sorted(aggregate.rows, key=lambda r: (r.started_at, r.turn_id), reverse=True)
    listing = []
    for r in rows[:limit]:
        has_view = (root / r.dir / VIEW_NAME).is_file()
        listing.append({
            "started_at": r.started_at.strftime("%Y-%m-%d %H:%M:%S") if r.started_at.year > 1 else "?",
            "turn_id": r.turn_id, "conversation_id": r.conversation_id, "status": r.status,
            "status_cls": STATUS_CLASS.get(r.status, verdict_class(r.status)), "mode": r.mode or "—",
            "gear": r.gear, "total_s": r.total_s, "prompt": r.prompt if len(r.prompt) <= 90 else r.prompt[:89] + "…",
            "problems": r.problem_steps, "mismatch": r.mismatch, "contingencies": r.contingencies, "why": r.why,
            "href": view_link(root, page_dir, r.dir) if has_view else "", "dir": r.dir,
        })
    return {
        "root": str(root), "report": report, "statuses": statuses, "status_chart": status_chart,
        "status_width": width_name, "verdict_chart": verdict_chart, "latency_chart": latency_chart,
        "contingency_chart": contingency_chart, "listing": listing,
        "steps": dict(sorted(steps.items(), key=lambda kv: (kv[1]["place"], kv[0]))),  # pipeline order
        "listed": len(listing),
        "total_rows": len(rows), "notes": found.notes, "index": report.get("index", {}),
        "span": (rows[-1].started_at, rows[0].started_at) if rows else None,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "without_view": sum(1 for r in listing if not r["href"]),
        "status_class": STATUS_CLASS,
    }


def view_link(root: Path, page_dir: Path, turn_dir: str) -> str:
    """The link from a dashboard written in ``page_dir`` to a turn's view: relative when the page
    is inside the trace root, else a ``file://`` URL (``Path.as_uri`` percent-encodes it)."""
    try:
        depth = len(page_dir.resolve().relative_to(root.resolve()).parts)
    except ValueError:
        return (root.resolve() / turn_dir / VIEW_NAME).as_uri()
    return "../" * depth + view_href(turn_dir)


def render_missing_views(root: Path, aggregate: HealthAggregate, limit: int) -> tuple[int, list[str]]:
    """Write ``view.html`` for each of the ``limit`` newest turns that has none: how many were
    written, and the turns that could not be rendered (named, the others still written)."""
    from jinja2 import TemplateError

    from ..reading import TraceReadError
    from . import write_page
    from .turn import render_turn_view

    written, errors = 0, []
    for r in sorted(aggregate.rows, key=lambda r: (r.started_at, r.turn_id), reverse=True)[:limit]:
        target = root / r.dir / VIEW_NAME
        if target.is_file():
            continue
        try:
            write_page(target, render_turn_view(root / r.dir))
        except (TraceReadError, OSError, TemplateError, ValueError, TypeError, KeyError) as exc:
            errors.append(f"{r.dir}: {type(exc).__name__}: {exc}")  # named on stderr; the others are written
            continue
        written += 1
    return written, errors


def render_dashboard(root: Path, *, since: datetime | None = None, limit: int = 500, rebuild: bool = False,
                     page_dir: Path | None = None, views: bool = False) -> tuple[str, dict[str, Any]]:
    """The dashboard page, and what it was built from (the report, the index read, timings).
    ``views``: first render the view of each listed turn that has none."""
    began = time.perf_counter()
    aggregate, found = collect(root, since=since, rebuild=rebuild)
    views_written, view_errors = render_missing_views(root, aggregate, limit) if views else (0, [])
    context = build_dashboard(aggregate, found, root=root, since=since, limit=limit, page_dir=page_dir or root)
    html = render("dashboard.html", **context)
    context.update(seconds=time.perf_counter() - began, views_written=views_written, view_errors=view_errors)
    return html, context
