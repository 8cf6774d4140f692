"""``ora calibrate``: mirrored claim pairs through the fact-check debate, measured (seed 002).

    ora calibrate run [--quick | --full | --targeted domain:X|language:X|pair:X ...] [--intent gate|smoke]
                      [--profile NAME] [--profiles FILE] [--fixture DIR] [--out DIR] [--concurrency N]
                      [--max-tokens N] [--max-cost USD] [--baseline-runtime S] [--resume] [--store DIR] [--json]
    ora calibrate compare A.json B.json [--approved-by NAME] [--note TEXT] [--runs-dir DIR] [--out DIR]
                      [--seed N] [--resamples N] [--json]
    ora calibrate list [--profiles FILE] [--fixture DIR]

``run`` runs both sides of every selected pair through the full fact-check on the configuration in
force under a profile, offline on the run's own Chroma store; progress on stderr (a bar on a
terminal, one line per pair elsewhere); the report (JSON, and HTML once its renderer is installed)
under ``--out`` (default ``<user data dir>/calibration``) as ``<intent>-<mode>-<UTC time>.json``, a
checkpoint ``<intent>-<mode>-latest.partial.json`` after each pair (``--resume`` continues it). Exit
status: 0 when the run finished (intent ``smoke``) or, for intent ``gate``, when it is decision-grade
and its gates pass; 1 when a gate fails or the run cannot start (configuration, ingestion); 2 for
usage errors; 130 when interrupted (the checkpoint stays).

``compare`` prints the A/B decision sheet (B the candidate) and seed 002 D4's promotion gates, and
writes it as ``compare-<UTC time>.json`` beside B (or under ``--out``). Exit status: 0 every gate
passes, 1 a gate fails, 2 the runs are not decision-grade (or a usage error).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from ora_core.cli.state import EXIT_ERROR, EXIT_USAGE, echo, echo_err, fail, get_host, state

EXIT_INTERRUPTED = 130


#: ``ora calibrate``: its commands below (the root app adds it: ``ora_core/cli/app.py``).
group = typer.Typer(help="Calibration: mirrored claim pairs through the fact-check debate, measured for skew.",
                    no_args_is_help=True)


@group.command("run")
def calibrate_run(
    quick: bool = typer.Option(False, "--quick", help="At most 3 English pairs plus 1 strict-inverse pair "
                                                      "(the default)."),
    full: bool = typer.Option(False, "--full", help="Every pair of the fixture."),
    targeted: list[str] = typer.Option([], "--targeted", help="domain:<name>, language:<code> or pair:<id> "
                                                              "(repeatable; their union)."),
    intent: str = typer.Option("smoke", "--intent", help="gate (decides: exit 1 unless decision-grade and "
                                                         "passing) or smoke (checks the machinery)."),
    profile: str = typer.Option("baseline", "--profile", help="The role -> backend map (ora calibrate list)."),
    profiles_file: Optional[Path] = typer.Option(None, "--profiles", help="A TOML file of extra profiles."),
    fixture_dir: Optional[Path] = typer.Option(None, "--fixture", help="A fixture directory (default: bundled)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where reports and checkpoints go."),
    concurrency: int = typer.Option(1, "--concurrency", help="Pairs run at once (1 for a local model)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Stop starting pairs past this many "
                                                                        "tokens (role ledger)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Stop starting pairs past this cost in "
                                                                      "USD (the profile's prices)."),
    baseline_runtime: Optional[float] = typer.Option(
        None, "--baseline-runtime", help="Seconds per turn of the canonical baseline run: the contrarian "
                                         "pass's runtime ceiling (fact_check.baseline_runtime_s)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the checkpoint of this intent and mode."),
    store: Optional[Path] = typer.Option(None, "--store", help="A Chroma directory for the fixture's "
                                                               "collections (default: in the run directory)."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Configuration file to run on."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
) -> None:
    """Run the fixture's pairs (both sides, full fact-check) and write the report."""
    from ora_core.engine.calibration.fixture import load_fixture
    from ora_core.engine.calibration.profiles import get_profile
    from ora_core.engine.calibration.report import write_reports
    from ora_core.engine.calibration.runner import CalibrationRun, RunOptions
    from ora_core.kernel.config import load_config
    from ora_core.kernel.errors import OraError, UsageError

    chosen = [name for name, on in (("quick", quick), ("full", full), ("targeted", bool(targeted))) if on]
    if len(chosen) > 1:
        raise fail(f"choose one of --quick, --full, --targeted (got {', '.join(chosen)})", EXIT_USAGE)
    if intent not in ("gate", "smoke"):
        raise fail(f"--intent must be gate or smoke, not {intent!r}", EXIT_USAGE)
    mode = chosen[0] if chosen else "quick"
    try:
        base = load_config(config or state.config_path)
        fixture = load_fixture(fixture_dir)
        run = CalibrationRun(host=get_host(), base=base, fixture=fixture,
                             profile=get_profile(profile, profiles_file),
                             options=RunOptions(mode=mode, intent=intent, targeted=list(targeted),  # type: ignore[arg-type]  # mode and intent checked against their literals above
                                                out_dir=out, concurrency=concurrency, max_tokens=max_tokens,
                                                max_cost_usd=max_cost, baseline_runtime_s=baseline_runtime,
                                                resume=resume, store_dir=store))
    except UsageError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    except OraError as exc:
        raise fail(str(exc)) from None
    for warning in run.options_warnings:
        echo_err(f"ora: {warning.severity}: {warning.line()}")
    echo_err(f"ora calibrate: {len(run.pairs)} pair(s) ({mode}), profile {profile}, fixture {fixture.name} "
             f"{fixture.version} ({fixture.content_hash}), run configuration {run.run_config.hash}; "
             f"out {run.out_dir}")
    if run.report.fixture_version_check:
        echo_err(f"ora calibrate: warning: fixture: {run.report.fixture_version_check}")
    progress = PairProgress(len(run.pairs))
    run.on_event = progress.event
    try:
        with progress:
            report = run.run()
    except KeyboardInterrupt:
        echo_err(f"ora calibrate: interrupted; the checkpoint {run.checkpoint} keeps every finished pair: "
                 f"continue with `ora calibrate run --{mode} --intent {intent} --profile {profile} --resume`")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except OraError as exc:
        raise fail(f"calibration run {run.run_id} stopped: {exc} (checkpoint: {run.checkpoint})") from None
    written = write_reports(report, run.out_dir)
    run.finish()
    if as_json:
        typer.echo(report.model_dump_json(by_alias=True, indent=2))
    else:
        for line in report_lines(report):
            echo(line)
    for fmt, path in written.files.items():
        echo_err(f"ora calibrate: {fmt} report: {path}")
    for fmt, why in written.problems.items():
        echo_err(f"ora calibrate: {fmt} report not written: {why}")
    if report.stopped is not None:
        echo_err(f"ora calibrate: stopped ({report.stopped.reason}): {report.stopped.detail}; the checkpoint "
                 f"{run.checkpoint} continues it with --resume")
    if "json" not in written.files:
        raise typer.Exit(EXIT_ERROR)
    if intent == "gate" and not gate_passed(report):
        raise typer.Exit(EXIT_ERROR)


@group.command("compare")
def calibrate_compare(
    a: Path = typer.Argument(..., help="Run A (the reference), a run report .json."),
    b: Path = typer.Argument(..., help="Run B (the candidate), a run report .json."),
    approved_by: Optional[str] = typer.Option(None, "--approved-by", help="Who approves the decision memo."),
    note: str = typer.Option("", "--note", help="A note for the memo."),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Also look here for B's repeat runs "
                                                                    "(stability)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where the decision sheet goes (default: beside B)."),
    seed: int = typer.Option(20260221, "--seed", help="The bootstrap's seed."),
    resamples: int = typer.Option(10_000, "--resamples", help="The bootstrap's resamples."),
    as_json: bool = typer.Option(False, "--json", help="Print the sheet as JSON on stdout."),
) -> None:
    """The A/B decision sheet and the promotion gates (exit 0 pass, 1 a gate fails, 2 not decision-grade)."""
    from datetime import datetime, timezone

    from ora_core.engine.calibration.compare import compare
    from ora_core.engine.calibration.report import write_compare
    from ora_core.engine.calibration.runner import utc_stamp
    from ora_core.kernel.errors import UsageError

    try:
        sheet = compare(a, b, approved_by=approved_by, note=note, runs_dir=runs_dir, seed=seed,
                        resamples=resamples)
    except UsageError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    target = (out.expanduser() if out is not None else b.expanduser().resolve().parent)
    written = write_compare(sheet, target, f"compare-{utc_stamp(datetime.now(timezone.utc))}")
    path = written.files["json"]
    if as_json:
        typer.echo(sheet.model_dump_json(by_alias=True, indent=2))
    else:
        for line in compare_lines(sheet):
            echo(line)
    echo_err(f"ora calibrate: decision sheet: {path}")
    for fmt, where in written.files.items():
        if fmt != "json":
            echo_err(f"ora calibrate: decision sheet ({fmt}): {where}")
    for fmt, why in written.problems.items():
        echo_err(f"ora calibrate: the {fmt} decision sheet was not written: {why}")
    if sheet.exit_code:
        raise typer.Exit(sheet.exit_code)


@group.command("list")
def calibrate_list(
    profiles_file: Optional[Path] = typer.Option(None, "--profiles", help="A TOML file of extra profiles."),
    fixture_dir: Optional[Path] = typer.Option(None, "--fixture", help="A fixture directory (default: bundled)."),
) -> None:
    """The fixture's pairs and the profiles."""
    from ora_core.engine.calibration.fixture import check_version, load_fixture, select_pairs
    from ora_core.engine.calibration.profiles import load_profiles
    from ora_core.kernel.errors import OraError

    try:
        fixture = load_fixture(fixture_dir)
        profiles = load_profiles(profiles_file)
    except OraError as exc:
        raise fail(str(exc)) from None
    quick = {p.id for p in select_pairs(fixture, "quick")}
    echo(f"fixture {fixture.name} {fixture.version} ({fixture.content_hash}) at {fixture.path}"
         + (f"  WARNING: {check_version(fixture)}" if check_version(fixture) else ""))
    for p in fixture.pairs:
        classes = {c: sum(1 for n in p.notes if n.source_class == c) for c in ("institutional", "general")}
        echo(f"  {p.id:<28} {p.language} {p.domain:<14} {p.pair_category:<16} {p.expected_skew:<13} "
             f"a={p.expected_asymmetry:g}{' inverse' if p.is_strict_inverse else ''}"
             f"{' quick' if p.id in quick else ''}  notes {len(p.notes)} ({classes['institutional']} inst., "
             f"{classes['general']} gen.)")
    echo("profiles:")
    for name, prof in profiles.items():
        echo(f"  {name:<26} {prof.description}")


def gate_passed(report: Any) -> bool:
    """Intent gate: decision-grade, and the diagnostic, operational and (when it applies) inverse gates pass."""
    gates = report.gates
    sig = report.significance
    return bool(sig and sig.decision_grade and gates and gates.diagnostic.passed and gates.operational.passed
                and (gates.inverse.passed or not gates.inverse.applicable))


def _gate_line(g: Any) -> str:
    mark = "PASS" if g.passed else ("n/a " if not g.applicable else "FAIL")
    checks = "; ".join(f"{c.name} {c.value} {c.op} {c.threshold}{'' if c.passed else ' ✗'}" for c in g.checks)
    return f"  {mark} {g.name:<12} {g.reason}" + (f"  [{checks}]" if checks else "")


def report_lines(report: Any) -> list[str]:
    a = report.aggregates
    lines = [f"calibration {report.run_id}: {report.status}, profile {report.profile.name}, "
             f"{a.completed}/{a.selected} pair(s) completed, {a.failed} failed, {a.not_run} not run",
             f"  {report.significance.notice}" if report.significance else "",
             f"  meanAbsoluteSkew {a.mean_absolute_skew:g} pp (median {a.median_absolute_skew:g}, p95 "
             f"{a.p95_absolute_skew:g}, max {a.max_absolute_skew:g}, SD {a.skew_std_dev:g}); mean |adj| "
             f"{a.mean_absolute_adjusted_skew:g}; passRate {a.pass_rate:.0%} "
             f"({a.passed}/{a.completed - a.non_informative})",
             f"  failureModeBiasCount {a.failure_mode_bias_count}; meanRefusalRateDelta {a.mean_refusal_rate_delta:g}; "
             f"meanDegradationRateDelta {a.mean_degradation_rate_delta:g}"]
    if report.gates is not None:
        lines += ["gates:", *(_gate_line(g) for g in (report.gates.diagnostic, report.gates.operational,
                                                      report.gates.inverse))]
    lines.append("pairs:")
    for p in report.pairs:
        m = p.metrics
        if p.status == "completed" and m is not None:
            tail = (f"L {m.left_truth:g} R {m.right_truth:g} D {m.skew:+g} adj {m.adjusted_skew:+g}"
                    + (f" CE {m.inverse_error:g}" if m.inverse_error is not None else "")
                    + f" dDeg {m.degradation_rate_delta:g} "
                    + ("NON-INFORMATIVE (both sides insufficient: not counted)" if m.non_informative
                       else "PASS" if m.passed else "FAIL")
                    + (f" ({'; '.join(m.failure_reasons)})" if m.failure_reasons else ""))
        elif p.status == "failed" and p.failure is not None:
            f = p.failure
            tail = f"FAILED {f.error_class} at {f.stage} ({f.provider}/{f.model}) [{f.side}]: {f.message[:160]}"
        else:
            tail = f"not run ({p.not_run_reason})"
        lines.append(f"  {p.id:<28} {p.status:<9} {tail}")
    t = report.totals
    lines.append(f"totals: {t.llm_calls} model call(s), {t.tokens} token(s)"
                 + (f", USD {t.cost_usd:g}" if t.cost_usd is not None else "")
                 + f", pipeline {t.pipeline_runtime_s:g} s, wall {t.wall_s:g} s (ingest {t.ingest_s:g} s)")
    return [line for line in lines if line]


def compare_lines(sheet: Any) -> list[str]:
    a, b = sheet.a, sheet.b
    lines = [f"A/B decision sheet: {sheet.verdict}",
             f"  A {a.run_id} ({a.profile}, {a.completed}/{a.selected} completed, decision-grade {a.decision_grade})",
             f"  B {b.run_id} ({b.profile}, {b.completed}/{b.selected} completed, decision-grade {b.decision_grade})",
             f"  meanAbsoluteSkew A {a.mean_absolute_skew:g} -> B {b.mean_absolute_skew:g} pp; passRate "
             f"{a.pass_rate:.0%} -> {b.pass_rate:.0%}; failureModeBiasCount {a.failure_mode_bias_count} -> "
             f"{b.failure_mode_bias_count}",
             f"  change in mean |D| (B - A): {sheet.mean_absolute_skew_change.observed:+g} pp, "
             f"{sheet.mean_absolute_skew_change.level:.0%} CI [{sheet.mean_absolute_skew_change.low:+g}, "
             f"{sheet.mean_absolute_skew_change.high:+g}] (paired bootstrap, {sheet.mean_absolute_skew_change.pairs} "
             f"pair(s), {sheet.mean_absolute_skew_change.resamples} resamples, seed "
             f"{sheet.mean_absolute_skew_change.seed})"]
    lines.append("configuration diff (path: A -> B):")
    lines += [f"  {d.path}: {json.dumps(d.a, default=str)} -> {json.dumps(d.b, default=str)}"
              for d in sheet.config_diff] or ["  (none)"]
    lines.append("pairs (D A -> B, |adj| A -> B):")
    for r in sheet.pairs:
        if r.skew_delta is None:
            lines.append(f"  {r.id:<28} A {r.status_a}, B {r.status_b}")
            continue
        flag = " improved" if r.improved else " worsened" if r.worsened else ""
        flag += " DIRECTION CHANGE" if r.direction_change else ""
        lines.append(f"  {r.id:<28} D {r.skew_a:+g} -> {r.skew_b:+g} ({r.skew_delta:+g}); |adj| "
                     f"{r.abs_adjusted_skew_a:g} -> {r.abs_adjusted_skew_b:g}{flag}")
    lines.append("languages (mean |adj| A -> B): " + ", ".join(
        f"{lang.language} {lang.mean_absolute_adjusted_skew_a:g} -> {lang.mean_absolute_adjusted_skew_b:g}"
        f"{' improved' if lang.improved else ''}" for lang in sheet.languages))
    asym = sheet.asymmetry
    lines.append(f"asymmetry: meanDegradationRateDelta {asym['meanDegradationRateDelta']['a']:g} -> "
                 f"{asym['meanDegradationRateDelta']['b']:g}; meanRefusalRateDelta "
                 f"{asym['meanRefusalRateDelta']['a']:g} -> {asym['meanRefusalRateDelta']['b']:g}")
    if sheet.warnings:
        lines.append("warnings (A -> B): " + ", ".join(f"{t} {v['a']} -> {v['b']}" for t, v in sheet.warnings.items()))
    cost, runtime = sheet.cost, sheet.runtime["pipelineRuntimeS"]
    lines.append(f"cost: tokens {cost['tokens']['a']} -> {cost['tokens']['b']} ({cost['tokens']['delta']:+d}); USD "
                 f"{cost['costUsd']['a']} -> {cost['costUsd']['b']}; runtime {runtime['a']:g} s -> {runtime['b']:g} s"
                 + (f" ({runtime['increase']:+.1%})" if runtime["increase"] is not None else ""))
    lines.append("gates (seed 002 D4):")
    lines += [_gate_line(g) for g in sheet.gates]
    if sheet.not_decision_grade:
        lines += ["not decision-grade:", *(f"  - {r}" for r in sheet.not_decision_grade)]
    return lines


class PairProgress:
    """Progress on stderr: a rich bar on a terminal (pairs done, the pairs and sides under way), one line
    per finished pair elsewhere."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.tty = sys.stderr.isatty()
        self.bar: Any = None
        self.task: Any = None
        self.active: dict[str, str] = {}

    def __enter__(self) -> PairProgress:
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task("pairs", total=self.total)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def _say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.console.print(line)
        else:
            echo_err(line)

    def _describe(self) -> None:
        if self.bar is not None:
            shown = ", ".join(f"{p} ({s})" for p, s in self.active.items()) or "pairs"
            self.bar.update(self.task, description=shown[:80])

    def event(self, kind: str, **data: Any) -> None:
        if kind == "ingest_started":
            self._say(f"  ingesting the notes of {data['pairs']} pair(s) into {data['store']}")
        elif kind == "pairs_started":
            if self.bar is not None:
                self.bar.update(self.task, completed=data["done"])
            if data["done"]:
                self._say(f"  resuming: {data['done']} pair(s) done, {data['todo']} to run")
        elif kind == "side_started":
            self.active[data["pair"]] = data["side"]
            self._describe()
        elif kind == "pair_done":
            self.active.pop(data["pair"], None)
            result = data["result"]
            m = result.metrics
            verdict = "NON-INFORMATIVE" if m is not None and m.non_informative else "PASS" if m and m.passed else "FAIL"
            what = (f"D {m.skew:+g} adj {m.adjusted_skew:+g} {verdict}" if m is not None
                    else f"{result.failure.error_class}: {result.failure.message[:100]}" if result.failure else "")
            self._say(f"  {result.status:<9} {result.id:<28} {result.duration_s:7.1f} s  {what}")
            if self.bar is not None:
                self.bar.advance(self.task)
            self._describe()
        elif kind == "stopped":
            self._say(f"  stopped ({data['reason']}): {data['detail']}")
