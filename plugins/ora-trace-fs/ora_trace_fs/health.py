"""Health over many turns, folded one index line at a time (``index.scan``): what ``ora health``
prints and what its dashboard draws.

Per step: runs, PASS/FAIL/BROKEN/skipped, degraded share, latency (median, p95), contingencies,
the population it ran in (multi-stream turns, a gear); per turn: status over time, contingency
frequencies, supplement and coverage-gap rates, non-compliance, role mismatches. The headline
sentences name the share *and* the population ("step7-consolidation degraded on 12 % of
multi-stream turns (120 of 1,000)", seed 000 §5.1): a rate without its denominator misleads.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .index import IndexLine, IndexScan, OpenTurn

VERDICT_KEY = {"PASS": "pass", "OK": "pass", "FAIL": "fail", "BROKEN": "broken", "SKIPPED": "skipped",
               "DEGRADED": "pass"}
OPEN_STATUSES = ("running", "interrupted", "incomplete")


@dataclass
class StepStats:
    runs: int = 0
    passed: int = 0
    fail: int = 0
    broken: int = 0
    skipped: int = 0
    degraded: int = 0
    degraded_only: int = 0  # degraded without a FAIL or BROKEN verdict (those are named as such)
    multi_stream_runs: int = 0
    supplements: int = 0
    coverage_gaps: int = 0
    regenerations: int = 0
    position: int = 0  # the sum of its places in its turns: the dashboard lists steps in pipeline order
    latencies: array = field(default_factory=lambda: array("d"))
    contingencies: Counter[str] = field(default_factory=Counter)
    gears: Counter[int | None] = field(default_factory=Counter)


@dataclass(frozen=True)
class TurnRow:
    """One turn of the dashboard's listing."""

    started_at: datetime
    turn_id: str
    conversation_id: str
    dir: str
    status: str
    mode: str | None
    gear: int | None
    total_s: float | None
    prompt: str
    contingencies: int
    problem_steps: tuple[str, ...]  # FAIL, BROKEN or degraded
    mismatch: bool
    why: str = ""  # an open turn's status, explained


def quantile(values: list[float], q: float) -> float:
    """The nearest-rank quantile of sorted ``values``."""
    if not values:
        return 0.0
    rank = max(0, min(len(values) - 1, int(-(-q * len(values) // 1)) - 1))
    return values[rank]


def percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


class HealthAggregate:
    """Fold index lines (``add``) and open turns (``add_open``); ``report()`` is the result."""

    def __init__(self) -> None:
        self.turns = 0
        self.statuses: Counter[str] = Counter()
        self.steps: dict[str, StepStats] = {}
        self.contingency_turns: Counter[str] = Counter()  # turns on which each fired
        self.contingency_step: dict[str, str] = {}
        self.multi_stream_turns = 0
        self.gears: Counter[int | None] = Counter()
        self.supplement_turns = 0
        self.supplements = 0
        self.supplements_resolved = 0
        self.coverage_gap_turns = 0
        self.noncompliance: Counter[str] = Counter()
        self.noncompliance_turns: Counter[str] = Counter()
        self.mismatch_turns = 0
        self.mismatch_roles: Counter[str] = Counter()
        self.trace_error_turns = 0
        self.rows: list[TurnRow] = []
        self.rebuilt = 0

    def add(self, line: IndexLine) -> None:
        self.turns += 1
        self.statuses[line.status] += 1
        self.gears[line.gear] += 1
        multi = line.multi_stream
        self.multi_stream_turns += multi
        if line.source == "rebuilt":
            self.rebuilt += 1
        problems = []
        steps = self.steps
        for place, s in enumerate(line.steps):
            stats = steps.get(s.step)
            if stats is None:
                stats = steps[s.step] = StepStats()
            stats.runs += 1
            stats.position += place
            key = VERDICT_KEY.get(s.verdict, "pass")
            if key == "pass":
                stats.passed += 1
            elif key == "fail":
                stats.fail += 1
            elif key == "broken":
                stats.broken += 1
            else:
                stats.skipped += 1
            degraded = s.degraded or s.verdict == "DEGRADED"
            if degraded:
                stats.degraded += 1
                if key not in ("fail", "broken"):
                    stats.degraded_only += 1
            if degraded or key in ("fail", "broken"):
                problems.append(s.step)
            stats.multi_stream_runs += multi
            stats.gears[line.gear] += 1
            stats.latencies.append(s.latency_s)
            stats.supplements += s.supplements
            stats.coverage_gaps += s.coverage_gap
            stats.regenerations += s.regenerations
            if s.contingencies:
                stats.contingencies.update(s.contingencies)
                for name in s.contingencies:
                    self.contingency_step.setdefault(name, s.step)
        self.contingency_turns.update(set(line.contingencies))
        if line.noncompliance:  # the turn's sum over its steps
            self.noncompliance.update(line.noncompliance)
            self.noncompliance_turns.update(line.noncompliance.keys())
        if line.supplements:
            self.supplement_turns += 1
            self.supplements += line.supplements
            self.supplements_resolved += line.supplements_resolved
        if line.coverage_gaps:
            self.coverage_gap_turns += 1
        if line.mismatched_roles:
            self.mismatch_turns += 1
            self.mismatch_roles.update(line.mismatched_roles)
        if line.trace_errors:
            self.trace_error_turns += 1
        self.rows.append(TurnRow(
            started_at=line.started_at, turn_id=line.turn_id, conversation_id=line.conversation_id, dir=line.dir,
            status=line.status, mode=line.mode, gear=line.gear, total_s=line.total_s, prompt=line.prompt,
            contingencies=len(line.contingencies), problem_steps=tuple(problems),
            mismatch=bool(line.mismatched_roles)))

    def add_open(self, turn: OpenTurn) -> None:
        """A turn without a closing ``turn.json``: counted apart, never among the closed ones."""
        status = turn.status if turn.status in OPEN_STATUSES else "incomplete"
        self.statuses[status] += 1
        doc = turn.turn
        try:
            started = datetime.fromisoformat(doc["started_at"])
        except (KeyError, TypeError, ValueError):
            started = datetime.min.replace(tzinfo=timezone.utc)  # listed last, outside the time chart
        if started.tzinfo is None:
            started = started.replace(tzinfo=timezone.utc)
        self.rows.append(TurnRow(
            started_at=started, turn_id=str(doc.get("turn_id") or turn.path.name),
            conversation_id=str(doc.get("conversation_id") or turn.path.parent.name), dir=turn.dir,
            status=status, mode=None, gear=None, total_s=None, prompt=str(doc.get("prompt") or "")[:200],
            contingencies=0, problem_steps=(), mismatch=False, why=turn.why))

    # --- the report -------------------------------------------------------------------------------

    def population(self, stats: StepStats) -> str:
        """The turns a step ran on, named: multi-stream turns, gear-N turns, or turns that ran it."""
        if stats.runs and stats.multi_stream_runs == stats.runs and self.multi_stream_turns != self.turns:
            return "multi-stream turns"
        gears = [g for g in stats.gears if g is not None]
        if len(stats.gears) == 1 and gears and len(self.gears) > 1:
            return f"gear-{gears[0]} turns"
        return "turns" if stats.runs == self.turns else "turns that ran it"

    def headlines(self, limit: int = 10) -> list[dict[str, Any]]:
        """Sentences for the steps that most often went wrong: degraded, FAIL, BROKEN."""
        found = []
        for name, st in self.steps.items():
            who = self.population(st)
            for what, count in (("degraded", st.degraded_only), ("FAIL", st.fail), ("BROKEN", st.broken)):
                if count:
                    pct = percent(count, st.runs)
                    found.append({"step": name, "what": what, "count": count, "runs": st.runs, "pct": pct,
                                  "population": who,
                                  "text": f"{name} {what} on {pct:g} % of {who} ({count:,} of {st.runs:,})"})
        rank = {"BROKEN": 0, "FAIL": 1, "degraded": 2}  # at equal weight, a verdict before a flag
        found.sort(key=lambda h: (-h["pct"] * min(h["runs"], 50), rank[h["what"]], h["step"]))
        return found[:limit]

    def report(self, *, root: Path, since: datetime | None, scan: IndexScan | None = None) -> dict[str, Any]:
        """``ora health --json``: the per-step table and top contingencies of earlier versions,
        plus latency, the headlines, supplements, non-compliance, mismatches and open turns."""
        steps: dict[str, Any] = {}
        for name, st in sorted(self.steps.items()):
            lat = sorted(st.latencies)
            steps[name] = {
                "runs": st.runs, "pass": st.passed, "fail": st.fail, "broken": st.broken, "skipped": st.skipped,
                "degraded": st.degraded, "degraded_pct": percent(st.degraded, st.runs),
                "fail_pct": percent(st.fail, st.runs), "broken_pct": percent(st.broken, st.runs),
                "latency_median_s": round(quantile(lat, 0.5), 6), "latency_p95_s": round(quantile(lat, 0.95), 6),
                "multi_stream_runs": st.multi_stream_runs, "population": self.population(st),
                "supplements": st.supplements, "coverage_gaps": st.coverage_gaps,
                "regenerations": st.regenerations, "place": round(st.position / st.runs, 2) if st.runs else 0.0,
                "top_contingencies": [{"name": n, "count": c} for n, c in st.contingencies.most_common(5)],
            }
        contingencies = []
        for name, count in self.contingency_turns.most_common():
            step = self.contingency_step.get(name)
            ran = self.steps[step].runs if step in self.steps else self.turns
            contingencies.append({"name": name, "turns": count, "pct_of_turns": percent(count, self.turns),
                                  "step": step, "pct_of_step_runs": percent(count, ran)})
        open_counts = {s: self.statuses.get(s, 0) for s in OPEN_STATUSES}
        report: dict[str, Any] = {
            "root": str(root),
            "since": since.isoformat() if since else None,
            "turns": self.turns,
            "statuses": dict(self.statuses),
            "open_turns": open_counts,
            "steps": steps,
            "top_contingencies": [{"name": n, "count": c} for n, c in self.contingency_turns.most_common(10)],
            "contingencies": contingencies,
            "headlines": self.headlines(),
            "multi_stream_turns": self.multi_stream_turns,
            "supplements": {
                "turns_with": self.supplement_turns, "turns_with_pct": percent(self.supplement_turns, self.turns),
                "requests": self.supplements, "resolved": self.supplements_resolved,
                "resolved_pct": percent(self.supplements_resolved, self.supplements),
                "coverage_gap_turns": self.coverage_gap_turns,
                "coverage_gap_pct": percent(self.coverage_gap_turns, self.turns),
            },
            "noncompliance": {n: {"count": c, "turns": self.noncompliance_turns.get(n, 0)}
                              for n, c in self.noncompliance.most_common()},
            "mismatches": {"turns": self.mismatch_turns, "pct": percent(self.mismatch_turns, self.turns),
                           "roles": dict(self.mismatch_roles.most_common())},
            "trace_error_turns": self.trace_error_turns,
            "unreadable": list(scan.unreadable) if scan else [],
        }
        if scan is not None:
            report["index"] = {"path": str(scan.index_path), "from_index": scan.from_index, "rebuilt": scan.rebuilt,
                               "seconds": round(scan.seconds, 3), "notes": list(scan.notes)}
        return report

    def status_buckets(self, max_buckets: int = 40) -> tuple[str, list[tuple[datetime, Counter[str]]]]:
        """Turns per status over time: (bucket width's name, [(bucket start, counts)])."""
        times = [r.started_at for r in self.rows if r.started_at.year > 1]
        if not times:
            return "day", []
        first, last = min(times), max(times)
        span = (last - first).total_seconds()
        width_name, width = "week", timedelta(weeks=1)
        for name, candidate in (("minute", timedelta(minutes=1)), ("5 minutes", timedelta(minutes=5)),
                                ("15 minutes", timedelta(minutes=15)), ("hour", timedelta(hours=1)),
                                ("6 hours", timedelta(hours=6)), ("day", timedelta(days=1))):
            if span / candidate.total_seconds() < max_buckets:
                width_name, width = name, candidate
                break
        origin = first.replace(second=0, microsecond=0, minute=0 if width >= timedelta(hours=1) else first.minute)
        if width >= timedelta(days=1):
            origin = origin.replace(hour=0)
        n = int((last - origin) / width) + 1
        buckets = [(origin + i * width, Counter[str]()) for i in range(n)]
        for r in self.rows:
            if r.started_at.year > 1:
                buckets[int((r.started_at - origin) / width)][1][r.status] += 1
        return width_name, buckets
