"""``ora probe list`` and ``ora probe run``: probe prompts whose expected trace facts are checked.

    ora probe list [--dir DIR]... [--json]
    ora probe run [IDS]... [--config PATH] [--dir DIR]... [--out DIR] [--json] [--junit PATH]

Probes come from the registered probe packs (``ora_register_probes``; the bundled one is
``probes-default``) and from ``--dir`` directories. ``run`` runs each selected probe as a turn on the
configuration in force (``--config`` here or before the command, else the usual lookup) with the
probe's overrides on top, each probe's trace under ``--out/<probe id>/`` (default
``<user data dir>/probe-runs/<UTC time>/``), and checks its facts against the files on disk. Every
probe ends PASS, FAIL (the report names the fact, what was expected, what the trace shows and the
file) or BROKEN (the error named). Progress goes to stderr; ``--json`` prints the report on stdout;
``--junit`` also writes JUnit XML. Exit status: 0 when every probe passed, 1 on any FAIL or BROKEN
(or a configuration that does not load), 2 for usage errors (an unknown probe id).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from ora_core.cli.state import EXIT_ERROR, EXIT_USAGE, fail, get_host, state

#: ``ora probe``: its commands below (the root app adds it: ``ora_core/cli/app.py``).
group = typer.Typer(help="Probes: prompts whose expected trace facts are checked against the trace on disk.",
                    no_args_is_help=True)


@group.command("list")
def probe_list(
    dirs: list[Path] = typer.Option([], "--dir", help="Also read the probe files of this directory."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every probe of every pack and directory, with what it checks (invalid files named)."""
    from ora_core.engine.measure.probes import discover

    sources = discover(get_host(), dirs)
    if as_json:
        typer.echo(json.dumps([_listing(s) for s in sources], indent=2))
    else:
        for source in sources:
            row = _listing(source)
            if source.error:
                typer.echo(f"{row['id']:<36} INVALID  {source.error}")
                continue
            flags = " [model-dependent]" if row["model_dependent"] else ""
            overrides = ", ".join(f"{k}={v}" for k, v in row["overrides"].items())
            typer.echo(f"{row['id']:<36} {row['facts']:>2} fact(s){flags}  {row['title']}"
                       + (f"\n{'':<36} overrides: {overrides}" if overrides else ""))
    if any(s.error for s in sources):
        raise typer.Exit(EXIT_ERROR)


@group.command("run")
def probe_run(
    ids: list[str] = typer.Argument(None, help="Probe ids to run (default: all)."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Configuration file to run on."),
    dirs: list[Path] = typer.Option([], "--dir", help="Also read the probe files of this directory."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where the probes' traces go."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write the report as JUnit XML here."),
) -> None:
    """Run probes; each ends PASS, FAIL (the fact named) or BROKEN (the error named)."""
    from ora_core import __version__
    from ora_core.engine.measure.probes import (
        ProbeFileError,
        ProbeRun,
        counts_line,
        default_out_dir,
        discover,
        junit_xml,
        run_all,
        select,
    )
    from ora_core.kernel.config import load_config
    from ora_core.kernel.errors import OraError

    config_path = config or state.config_path
    try:
        base = load_config(config_path)
    except OraError as exc:
        raise fail(f"the configuration does not load: {exc}") from None
    host = get_host()
    try:
        sources = select(discover(host, dirs), ids or [])
    except ProbeFileError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    if not sources:
        raise fail("no probe to run: no probe pack is registered and no --dir was given "
                   "(is the probes-default plugin disabled?)")
    run = ProbeRun(host=host, config_path=config_path, out_dir=Path("."))
    run.out_dir = (out.expanduser() if out is not None else default_out_dir(run.stamp))
    typer.echo(f"ora probe: {len(sources)} probe(s) on configuration {base.hash} "
               f"({'; '.join(base.sources)}); traces under {run.out_dir}", err=True)
    with StepProgress(len(sources), "probes") as progress:
        report = run_all(sources, run, on_start=lambda source, n: progress.start(source.id, n),
                         on_event=progress.event,
                         on_done=lambda r: progress.done(f"{r.outcome:<7} {r.id} ({r.duration_s:.1f} s)"),
                         version=__version__, config_hash=base.hash, config_sources=base.sources)
    if junit is not None:
        try:
            junit.expanduser().write_text(junit_xml(report), encoding="utf-8")
        except OSError as exc:
            raise fail(f"--junit {str(junit)!r} cannot be written: {exc}") from None
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        _print_report(report)
    typer.echo(f"ora probe: {counts_line(report.counts)} in {report.duration_s:.1f} s", err=True)
    if not report.ok:
        raise typer.Exit(EXIT_ERROR)


def _listing(source: Any) -> dict[str, Any]:
    probe = source.probe
    return {"id": source.id, "path": source.path, "pack": source.pack, "error": source.error,
            "title": probe.title if probe else "", "source": probe.source if probe else "",
            "catalogue": probe.catalogue if probe else None,
            "model_dependent": probe.model_dependent if probe else False,
            "counterpart": probe.counterpart if probe else "",
            "overrides": probe.overrides.model_dump(mode="json", exclude_defaults=True) if probe else {},
            "facts": len(probe.facts) if probe else 0,
            "prompt": probe.prompt if probe else ""}


def _print_report(report: Any) -> None:
    from ora_core.engine.measure.probes import fact_lines

    for result in report.results:
        flags = "  [model-dependent]" if result.model_dependent else ""
        status = f"  turn {result.turn_status}" if result.turn_status else ""
        typer.echo(f"{result.outcome:<7} {result.id:<36} {result.duration_s:7.1f} s{status}{flags}")
        if result.outcome == "BROKEN":
            typer.echo(f"    error:    {result.error}")
        for fact in result.failed_facts:
            for line in fact_lines(fact):
                typer.echo(line)
            for alt in fact.alternatives:
                for line in fact_lines(alt, "      - "):
                    typer.echo(line)
        if result.outcome != "PASS" and result.trace_path:
            typer.echo(f"    turn dir: {result.trace_path}")
        if result.counterpart:
            counterpart = " ".join(result.counterpart.split())
            typer.echo(f"    note:     no counterpart in Ora; probed instead: {counterpart[:160]}…")


class StepProgress:
    """Progress on stderr for a series of turns: a rich progress bar on a terminal (the current
    turn's step as it runs), one line per turn elsewhere. ``start(label, number)`` when a turn
    begins, ``event(e)`` for its typed events, ``done(line)`` when it has ended."""

    def __init__(self, total: int, what: str = "turns") -> None:
        self.total = total
        self.what = what
        self.tty = sys.stderr.isatty()
        self.bar: Any = None
        self.task: Any = None
        self.current = ""

    def __enter__(self) -> StepProgress:
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task(self.what, total=self.total)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def start(self, label: str, number: int) -> None:
        self.current = label
        if self.bar is not None:
            self.bar.update(self.task, description=f"{label}: starting")
        else:
            typer.echo(f"[{number}/{self.total}] {label} ...", err=True)

    def event(self, event: Any) -> None:
        if self.bar is not None and getattr(event, "type", "") == "step_started":
            self.bar.update(self.task, description=f"{self.current}: {event.step}")

    def done(self, line: str) -> None:
        if self.bar is not None:
            self.bar.console.print(line)
            self.bar.advance(self.task)
        else:
            typer.echo(f"    {line}", err=True)
